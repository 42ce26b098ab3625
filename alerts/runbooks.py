"""Runbook links a person can open: each alert's section of ``docs/runbooks/``, under a deployment's address.

The rule files name each alert's runbook inside the project (``docs/runbooks/replication.md#kafka...``);
:func:`url` turns that into a link from a template with the placeholders ``{alert}`` (the alert's name),
``{file}`` (``replication.md``) and ``{anchor}`` (``kafkaofflinepartitions``). The default opens the app's
Runbooks page; docs hosted elsewhere take e.g. ``https://git.example.com/kobs/blob/main/docs/runbooks/{file}#{anchor}``.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from alerts.check import rule_files
from common.config import ConfigError

DEFAULT_TEMPLATE = "http://localhost:8501/runbooks?alert={alert}"
RUNBOOK_URL_ENV = "KOBS_RUNBOOK_URL"  # the template, where a deployment sets it (docker-compose.yml)
PLACEHOLDERS = ("alert", "file", "anchor")
RELATIVE = re.compile(r"docs/runbooks/(?P<file>[\w-]+\.md)#(?P<anchor>[\w-]+)")
ALERT_LINE = re.compile(r"^\s*- alert: (?P<alert>\w+)\s*$")
RUNBOOK_LINE = re.compile(r"^(?P<indent>\s*)runbook_url: (?P<relative>\S+)\s*$")


def check_template(template: str) -> str:
    """The template, or :class:`ConfigError` naming what is wrong with it."""
    if not re.match(r"https?://\S+$", template):
        raise ConfigError(f"--runbook-url {template!r}: give an http:// or https:// URL template")
    try:
        used = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:  # a lone brace
        raise ConfigError(
            f"--runbook-url {template!r}: {exc}; write a literal brace as {{{{ or }}}}"
        ) from None
    if unknown := used - set(PLACEHOLDERS):
        first = sorted(unknown)[0]
        raise ConfigError(
            f"--runbook-url: unknown placeholder {{{first}}}; use {{alert}}, {{file}} or {{anchor}}"
        )
    if not used & {"alert", "anchor"}:
        raise ConfigError("--runbook-url: the template must name the alert: add {alert} or {anchor}")
    return template


def url(template: str, alert: str, relative: str) -> str:
    """The link to ``alert``'s runbook named ``relative`` in its rule file."""
    match = RELATIVE.fullmatch(relative)
    if not match:
        raise ValueError(f"{alert}: runbook_url {relative!r} is not docs/runbooks/<file>.md#<anchor>")
    return template.format(alert=alert, file=match["file"], anchor=match["anchor"])


def render(text: str, template: str) -> str:
    """A rule file's text with every ``runbook_url`` made a link by ``template`` (comments kept)."""
    lines, alert = [], None
    for line in text.splitlines(keepends=True):
        if found := ALERT_LINE.match(line):
            alert = found["alert"]
        elif (found := RUNBOOK_LINE.match(line)) and alert:
            line = f"{found['indent']}runbook_url: {url(template, alert, found['relative'])}\n"
        lines.append(line)
    return "".join(lines)


def write_rules(out_dir: Path, template: str = DEFAULT_TEMPLATE) -> list[Path]:
    """Write every shipped rule file into ``out_dir`` with its runbook links made by ``template``."""
    check_template(template)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for source in rule_files():
        path = out_dir / source.name
        path.write_text(render(source.read_text(), template))
        paths.append(path)
    return paths

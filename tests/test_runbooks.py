"""Runbooks: every alert links to its section of docs/runbooks/, and every link in the docs lands; the rules
as generated for a deployment, and the runbooks as the app serves them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from alerts import check
from app import runbooks
from kobs.cli import main

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "docs" / "runbooks"
# Markdown files whose relative links are checked: the docs, the runbooks and the README.
LINKING = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}


def sections(path: Path) -> dict[str, str]:
    """``## Heading`` -> its text, for the level-2 sections of a runbook."""
    parts = re.split(r"^## (\S+)\n", path.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def resolve(source: Path, link: str) -> tuple[Path, str]:
    target, _, anchor = link.partition("#")
    return (source.parent / target).resolve() if target else source, anchor


@pytest.mark.parametrize("rule", check.alert_rules(), ids=lambda r: r["alert"])
def test_every_alert_links_to_its_own_runbook_section(rule):
    url = rule["annotations"]["runbook_url"]
    assert re.fullmatch(r"docs/runbooks/\w+\.md#\w+", url), f"{rule['alert']}: runbook_url {url!r}"
    path, anchor = resolve(ROOT / "x", url)
    assert path.is_file(), f"{rule['alert']}: {url} names a missing file"
    assert anchor == slug(rule["alert"]) and anchor in anchors(path), f"{rule['alert']}: no section {url}"


def test_runbook_sections_are_the_alerts_and_say_page_or_ticket():
    severity = {r["alert"]: r["labels"]["severity"] for r in check.alert_rules()}
    found = {}
    for path in RUNBOOKS.glob("*.md"):
        if path.name != "README.md":
            found |= sections(path)
    assert set(found) == set(severity), "runbook sections and alert rules differ"
    for alert, text in found.items():
        assert text.startswith(f"**{severity[alert].capitalize()}.**"), f"{alert}: starts with {text[:20]!r}"


def broken_links(source: Path) -> list[str]:
    """Relative links of ``source`` whose file is missing or whose file has no heading for the anchor."""
    broken = []
    for link in LINK.findall(source.read_text()):
        if re.match(r"\w+://", link):
            continue
        path, anchor = resolve(source, link)
        if not path.exists() or (anchor and (path.suffix != ".md" or anchor not in anchors(path))):
            broken.append(link)
    return broken


@pytest.mark.parametrize("source", LINKING, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_to_files_and_headings(source):
    assert not broken_links(source)


def test_the_link_check_reports_missing_files_and_headings(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Runbooks: brokers\n## KafkaBrokerDown\nSee [up](#kafkabrokerdown), "
        "[top](page.md#runbooks-brokers), [gone](#kafkabrokerup), [lost](other.md), "
        "[web](https://example.com/x.md#y).\n"
    )
    assert broken_links(page) == ["#kafkabrokerup", "other.md"]


def test_generated_rules_link_every_alert_through_the_template_and_change_nothing_else(tmp_path, capsys):
    template = "https://wiki.example.com/kafka/{file}?alert={alert}#{anchor}"
    assert main(["alerts", "generate", "--out", str(tmp_path), "--runbook-url", template]) == 0
    generated = sorted(tmp_path.glob("*.rules.yml"))
    assert [p.name for p in generated] == [p.name for p in check.rule_files()]
    for rule in check.alert_rules(generated):
        file, anchor = (
            rule["annotations"]["runbook_url"]
            .removeprefix("https://wiki.example.com/kafka/")
            .split(f"?alert={rule['alert']}#")
        )
        assert (RUNBOOKS / file).is_file() and anchor == slug(rule["alert"])
    for shipped, written in zip(check.rule_files(), generated, strict=True):
        unlinked = [re.sub(r"runbook_url: .*", "", t.read_text()) for t in (shipped, written)]
        assert unlinked[0] == unlinked[1], written.name  # comments, expressions and thresholds as shipped
    result = subprocess.run(
        ["promtool", "check", "rules", *map(str, generated)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("runbooks/{alert}", "give an http:// or https:// URL template"),
        ("https://x/{alert}/{page}", "unknown placeholder {page}"),
        ("https://x/{file}", "add {alert} or {anchor}"),
        ("https://x/{alert", "write a literal brace"),
    ],
)
def test_a_bad_runbook_template_is_one_line_naming_the_option(template, says, tmp_path, capsys):
    assert main(["alerts", "generate", "--out", str(tmp_path), "--runbook-url", template]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--runbook-url" in err and says in err
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_the_app_finds_every_alerts_section_and_links_runbooks_to_its_own_pages():
    books = runbooks.load(RUNBOOKS)
    sections = {name for book in books.values() for name in book.sections}
    assert sections == {r["alert"] for r in check.alert_rules()}
    book, text = runbooks.find(books, "kafkaofflinepartitions")  # as the anchors spell it
    assert book.file == "replication.md" and text.startswith("**Page.**")
    assert runbooks.find(books, "KafkaNoSuchAlert") is None
    linked = runbooks.app_links(
        "See [replication.md](replication.md), [down](brokers.md#kafkabrokerdown), "
        "[here](#kafkaisrflapping), [metrics](../metrics.md#x), [web](https://example.com/a.md).",
        books,
    )
    assert linked == (
        "See [replication.md](?file=replication.md), [down](?alert=KafkaBrokerDown), "
        "[here](?alert=KafkaIsrFlapping), metrics, [web](https://example.com/a.md)."
    )

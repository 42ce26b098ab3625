"""``kobs alerts check|test|generate``: validate the alert rules (promtool) and the Alertmanager routing
(amtool), or write the rules for a deployment.

``check`` validates syntax only (``promtool check rules``, ``amtool check-config``); ``test`` adds the
promtool unit tests of every rule and one ``amtool config routes test`` per alert; ``generate`` writes the
rule files with runbook links under the deployment's address (``alerts.runbooks``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

from alerts.check import Result, run_all, run_checks
from alerts.runbooks import DEFAULT_TEMPLATE, PLACEHOLDERS, RUNBOOK_URL_ENV


def add_parser(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser(
        "alerts",
        help="check and test the Prometheus alert rules and Alertmanager routing",
        description="Validate alerts/*.rules.yml with promtool and alerts/alertmanager.yml with amtool; "
        "exit 1 if anything fails.",
    )
    verbs = sub.add_subparsers(title="verbs", metavar="<verb>", required=True)
    for name, run, help_ in (
        ("check", run_checks, "promtool check rules and amtool check-config (syntax only, fast)"),
        ("test", run_all, "check, then every rule's promtool unit tests and every alert's routing"),
    ):
        verb = verbs.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".")
        verb.add_argument("--quiet", action="store_true", help="print only failures and the summary line")
        verb.set_defaults(run=partial(_report, f"kobs alerts {name}", run))
    generate = verbs.add_parser(
        "generate",
        help="write the rule files for Prometheus, with runbook links a person can open",
        description="Write alerts/*.rules.yml into DIR for Prometheus's rule_files, each runbook_url made a "
        "link by --runbook-url.",
    )
    generate.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory to write into")
    add_runbook_url(generate)
    generate.set_defaults(run=_generate)


def add_runbook_url(parser: argparse.ArgumentParser) -> None:
    """The ``--runbook-url`` option of the commands that write runbook links."""
    names = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
    parser.add_argument(
        "--runbook-url",
        default=os.environ.get(RUNBOOK_URL_ENV) or DEFAULT_TEMPLATE,
        metavar="TEMPLATE",
        help=f"each alert's runbook link, with {names} filled in (default: ${RUNBOOK_URL_ENV}, else the "
        f"app's Runbooks page {DEFAULT_TEMPLATE}); for docs hosted elsewhere e.g. "
        "https://git.example.com/kobs/blob/main/docs/runbooks/{file}#{anchor}",
    )


def _generate(args: argparse.Namespace) -> int:
    from alerts.runbooks import write_rules

    for path in write_rules(args.out, args.runbook_url):
        print(path)
    return 0


def _report(title: str, run: Callable[[], list[Result]], args: argparse.Namespace) -> int:
    results = run()
    for result in results:
        if result.ok and args.quiet:
            continue
        print(f"{'ok  ' if result.ok else 'FAIL'} {result.name}")
        if not result.ok or "routes test" not in result.name:
            print("\n".join(f"     {line}" for line in result.output.splitlines()))
    failed = sum(not r.ok for r in results)
    print(f"{title}: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0

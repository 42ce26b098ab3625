"""``kobs alerts check|test``: validate the alert rules (promtool) and the Alertmanager routing (amtool).

``check`` validates syntax only (``promtool check rules``, ``amtool check-config``); ``test`` adds the
promtool unit tests of every rule and one ``amtool config routes test`` per alert.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial

from alerts.check import Result, run_all, run_checks


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

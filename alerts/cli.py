"""``kobs alerts``: check and unit-test the alert rules (promtool) and the Alertmanager routing (amtool)."""

from __future__ import annotations

import argparse

from alerts.check import run_all


def add_parser(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser(
        "alerts",
        help="check and test the Prometheus alert rules and Alertmanager routing",
        description="Run promtool check/test over alerts/*.rules.yml and amtool check-config and route tests "
        "over alerts/alertmanager.yml; exit 1 if anything fails.",
    )
    sub.add_argument("--quiet", action="store_true", help="print only failures and the summary line")
    sub.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    results = run_all()
    for result in results:
        if result.ok and args.quiet:
            continue
        print(f"{'ok  ' if result.ok else 'FAIL'} {result.name}")
        if not result.ok or "routes test" not in result.name:
            print("\n".join(f"     {line}" for line in result.output.splitlines()))
    failed = sum(not r.ok for r in results)
    print(f"kobs alerts: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0

"""``kobs dashboards generate --out DIR``: write the Grafana dashboards (JSON) built by grafanalib."""

from __future__ import annotations

import argparse
from pathlib import Path

from alerts.cli import add_runbook_url


def add_parser(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser(
        "dashboards",
        help="generate the Grafana dashboards (JSON) from their grafanalib sources",
        description="Generate the Grafana dashboards of dashboards/spec.py.",
    )
    verbs = sub.add_subparsers(title="verbs", metavar="<verb>", required=True)
    generate = verbs.add_parser(
        "generate",
        help="write one dashboard JSON file per dashboard into DIR",
        description="Write one Grafana dashboard JSON file per dashboard (named after its stable uid) into "
        "DIR, ready for the file provider in dashboards/provisioning/.",
    )
    generate.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="directory to write the JSON into"
    )
    add_runbook_url(generate)
    generate.set_defaults(run=_generate)


def _generate(args: argparse.Namespace) -> int:
    from dashboards.build import generate  # grafanalib only when needed

    for path in generate(args.out, args.runbook_url):
        print(path)
    return 0

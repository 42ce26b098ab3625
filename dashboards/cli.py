"""``kobs dashboards --out DIR``: write the Grafana dashboards (JSON) generated from grafanalib sources."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser(
        "dashboards",
        help="generate the Grafana dashboards (JSON) from their grafanalib sources",
        description="Write one Grafana dashboard JSON file per dashboard (named after its stable uid) into "
        "DIR, ready for the file provider in dashboards/provisioning/.",
    )
    sub.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="directory to write the JSON into"
    )
    sub.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from dashboards.build import generate  # grafanalib only when needed

    for path in generate(args.out):
        print(path)
    return 0

"""``kobs``: the one entry point, with a subcommand for every runnable part of Kafka Observatory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from alerts import cli as alerts_cli
from app import serve as app_cli
from app.capacity import cli as whatif_cli
from bench import cli as bench_cli
from common.config import ConfigError, load_config
from common.jars import MissingJars
from common.logs import configure_logging
from dashboards import cli as dashboards_cli
from simulator import cli as simulator_cli
from spark_jobs import cli as stream_cli

# Modules that register their own subcommand with ``add_parser(commands)``.
SUBCOMMAND_MODULES = (simulator_cli, stream_cli, whatif_cli, app_cli, dashboards_cli, alerts_cli, bench_cli)

CONFIG_HELP = (
    "YAML configuration file (default: the embedded demo's settings; see docs/reference-config.yaml)"
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    try:
        return args.run(args)
    except (ConfigError, MissingJars) as exc:
        print(f"kobs: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kobs",
        description="Kafka Observatory: observability and capacity analytics for Apache Kafka.",
        epilog="Run 'kobs <command> --help' for a command's options.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    commands = parser.add_subparsers(title="commands", metavar="<command>", required=True)

    demo = commands.add_parser(
        "demo",
        help="run a real 3-broker Kafka cluster with Kafka Observatory watching it, and play incidents",
        description="Start on 127.0.0.1 a real Apache Kafka cluster (3 KRaft brokers) with real traffic, a "
        "simulated fleet beside it, Prometheus, Alertmanager and Kafka Observatory (collect, stream, app); "
        "print what runs where; play the incidents on the real cluster (a broker of a replication-factor-1 "
        "topic dies and a producer blocks; a follower hangs and partitions are under-replicated), each "
        "step and page printed as it happens; run until Ctrl-C, then stop everything.",
    )
    demo.add_argument(
        "--run-dir",
        type=Path,
        help="a new or empty directory for its logs and data (default: var/demo-<time>)",
    )
    demo.add_argument(
        "--duration", type=float, help="stop after this many seconds instead of waiting for Ctrl-C"
    )
    demo.add_argument(
        "--incidents",
        choices=("on", "off"),
        default="on",
        help="play the incidents (default), or leave the cluster quiet to explore or break yourself",
    )
    demo.add_argument(
        "--fleet",
        choices=("on", "off"),
        default="on",
        help="the simulated 30-broker fleet beside the real cluster (default on; off saves CPU)",
    )
    demo.set_defaults(run=_demo)

    collect = commands.add_parser(
        "collect",
        help="scrape the configured clusters into the metrics topic",
        description="Run every configured source (JMX, exporters, ZooKeeper, Admin API, producers) on its "
        "interval and publish batches to the metrics topic.",
    )
    collect.add_argument("--config", type=Path, help=CONFIG_HELP)
    collect.add_argument("--once", action="store_true", help="run one cycle, print a summary and exit")
    collect.set_defaults(run=_collect)
    for module in SUBCOMMAND_MODULES:
        module.add_parser(commands)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from kobs.demo import run_demo

    return run_demo(
        run_dir=args.run_dir,
        duration_s=args.duration,
        incidents=args.incidents == "on",
        fleet=args.fleet == "on",
    )


def _collect(args: argparse.Namespace) -> int:
    from collectors.cli import run_collect

    return run_collect(load_config(args.config), once=args.once)


if __name__ == "__main__":
    sys.exit(main())

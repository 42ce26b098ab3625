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
        "print what runs where; play planned work and incidents on the real cluster (a rolling restart, "
        "which pages nothing for replication risk; a broker of a replication-factor-1 topic dies and a "
        "producer blocks; a follower hangs), each step and page printed as it happens; run until Ctrl-C, "
        "then stop everything.",
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
        type=_incident_names,
        default="all",
        metavar="NAMES",
        help="what to play, in this order: all (default), none (leave the cluster quiet to explore or break "
        "yourself), or a comma-separated list of rolling-restart, broker-crash, follower-hang",
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
    collect.add_argument(
        "--strict-access",
        action="store_true",
        help="exit 2 when a watched cluster refuses the login or the certificates at start (default: say so "
        "in one line and watch the others; its sources keep asking, less often, and name the refusal)",
    )
    collect.set_defaults(run=_collect)
    _add_maintenance(commands)
    for module in SUBCOMMAND_MODULES:
        module.add_parser(commands)
    return parser


def _add_maintenance(commands: argparse._SubParsersAction) -> None:
    maintenance = commands.add_parser(
        "maintenance",
        help="check what planned work on a broker would break, before doing it",
        description="Planned maintenance of a cluster's brokers, checked against the live cluster.",
    )
    verbs = maintenance.add_subparsers(title="verbs", metavar="<verb>", required=True)
    check = verbs.add_parser(
        "check",
        help="what a restart of broker ID would break on the live cluster",
        description="Before a planned restart of broker ID, read the live cluster through the Admin API and "
        "list what the restart would break while the broker is away, most severe first: partitions that go "
        "offline (every in-sync replica on that broker: replication factor 1, or an ISR already shrunk to "
        "it), the configured producers writing them (clusters[].producers[].topics), which block; "
        "partitions that go under their topic's min.insync.replicas, which fail acks=all producers, and the "
        "producers writing them; partitions left at min ISR, one more lost replica from failing; how many "
        "partitions the broker leads (a controlled shutdown moves them first). A verdict line ends it. "
        "Kafka's internal topics (__consumer_offsets, ...) are not checked.",
        epilog="Exit status: 0 when no partition goes offline or under min ISR, 1 when some would, 2 when "
        "the check cannot tell (unknown --cluster or --broker, a cluster without bootstrap_servers, Kafka "
        "unreachable).",
    )
    check.add_argument("--config", type=Path, help=CONFIG_HELP)
    check.add_argument("--cluster", required=True, metavar="NAME", help="the cluster: its clusters[].name")
    check.add_argument("--broker", required=True, type=int, metavar="ID", help="the broker's id (node.id)")
    check.add_argument("--json", action="store_true", help="print the findings as one JSON document")
    check.set_defaults(run=_maintenance_check)


def _incident_names(value: str) -> tuple[str, ...]:
    """``all``, ``none`` or known incident names, comma-separated; ArgumentTypeError names the known ones."""
    from kobs.incidents import NAMES

    if value in ("all", "none"):
        return NAMES if value == "all" else ()
    names = tuple(name.strip() for name in value.split(","))
    unknown = [name for name in names if name not in NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"no incident {unknown[0]!r}: give all, none or of {', '.join(NAMES)}"
        )
    return names


def _demo(args: argparse.Namespace) -> int:
    from kobs.demo import run_demo

    incidents = _incident_names(args.incidents) if isinstance(args.incidents, str) else args.incidents
    return run_demo(
        run_dir=args.run_dir, duration_s=args.duration, incidents=incidents, fleet=args.fleet == "on"
    )


def _collect(args: argparse.Namespace) -> int:
    from collectors.cli import run_collect

    return run_collect(load_config(args.config), once=args.once, strict_access=args.strict_access)


def _maintenance_check(args: argparse.Namespace) -> int:
    from kobs.maintenance_check import run_check

    return run_check(load_config(args.config), args.cluster, args.broker, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())

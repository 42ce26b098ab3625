"""``kobs stream``: run the Spark Structured Streaming analytics over the metrics topic."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from common.config import RECORDS_PER_BATCH, load_config
from spark_jobs.backlog import REPORT_EVERY_S


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "stream",
        help="run the Spark Structured Streaming analytics over the metrics topic",
        description="Read the metrics topic with Spark and derive, per watched cluster: consumer lag "
        "(messages, seconds, Burrow status, catch-up ETA, lost messages), under-replicated, under-min-ISR "
        "and offline partitions, flapping ISRs, throughput against stored data, blocked producers and "
        "broker resources. Serves the derived metrics and Burrow's HTTP API on sinks.exporter_address, "
        "writes Parquet history under sinks.history_dir and dead letters under sinks.dead_letter_dir. "
        "Checkpoints under sinks.checkpoint_dir make a restart resume where it stopped.",
        epilog="Metric names and labels: docs/metrics.md. Runs until Ctrl-C or SIGTERM unless "
        "--available-now; a stop lets the batch under way finish (up to 5 s), then exits 0 (130 for "
        "Ctrl-C). The query starts once the metrics topic can be read (looked for every 5 s, with a "
        "warning naming what is missing); a failed query starts again from its checkpoint after a wait of "
        "5 s, doubled up to a minute while it keeps failing. A backlog (after a stop, or a new checkpoint "
        "on a topic holding days of records) is read in batches of at most "
        f"metrics_topic.max_records_per_batch records (default {RECORDS_PER_BATCH}), with a log line on how "
        f"far behind it is, every {REPORT_EVERY_S:g} s, until it has caught up.",
    )
    parser.add_argument(
        "--config", type=Path, help="YAML configuration file (default: the embedded demo's settings)"
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark master URL, e.g. local[*] or spark://host:7077 (default: %(default)s); a cluster "
        "master reads the config's spark section: the address executors reach the driver at, and the "
        "secret of Spark's RPC authentication",
    )
    parser.add_argument(
        "--trigger-seconds",
        type=_positive,
        help="start a micro-batch every this many seconds (default: as soon as the previous one ends)",
    )
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what is on the topic now, in as many micro-batches as needed, then exit",
    )
    parser.add_argument(
        "--spark-ui-port",
        type=int,
        metavar="PORT",
        help="serve Spark's web UI (no authentication) on this port, on the driver's address: 127.0.0.1 "
        "with a local master (default: no UI)",
    )
    parser.add_argument(
        "--reset-state",
        action="store_true",
        help="first set the query's checkpoint (sinks.checkpoint_dir/stream) aside, renamed beside it, and "
        "start over from the metrics topic's earliest record: for a checkpoint kobs stream refuses as "
        "unreadable. The analyses' state (lag windows, ISR and rate histories) is rebuilt from what the "
        "topic still holds; the history under sinks.history_dir is kept",
    )
    parser.set_defaults(run=run)
    return parser


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def run(args: argparse.Namespace) -> int:
    from common.kafka_clients import check_access, metrics_topic_settings  # loaded when the command runs

    config = load_config(args.config)
    # a refused login or certificate: one line, before Spark starts
    check_access(metrics_topic_settings(config), "metrics_topic")
    from spark_jobs.stream import QUERY, run_stream  # pyspark loads only when the command runs

    if args.reset_state:
        _reset(config.sinks.checkpoint_dir / QUERY)

    # SIGTERM (a service manager's stop) and Ctrl-C only ask the query to stop; kobs stops it between two
    # calls into Spark, so nothing is torn mid-call. Exit code 0 for SIGTERM, 130 for Ctrl-C.
    stop, received = threading.Event(), []

    def request_stop(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, request_stop)
    code = run_stream(config, args.master, args.trigger_seconds, args.available_now, args.spark_ui_port, stop)
    return 130 if signal.SIGINT in received else code


def _reset(checkpoint: Path) -> None:
    from spark_jobs.checkpoint import set_aside

    aside = set_aside(checkpoint)
    if aside is None:
        print(f"kobs stream: no checkpoint at {checkpoint} to reset", flush=True)
    else:
        print(
            f"kobs stream: set the checkpoint aside as {aside} (delete it when no longer wanted): the "
            "analyses start over from the metrics topic's earliest record",
            flush=True,
        )

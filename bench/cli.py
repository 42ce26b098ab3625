"""``kobs bench <name>``: the benchmarks. Each prints its figures, its named baseline and the machine.

A benchmark is a module with ``add_arguments(parser)`` and ``run(args) -> int``; register it, with its
one-line help, in ``BENCHMARKS``. A module loads only when its benchmark is parsed, so the Spark and pandas
imports of one benchmark never slow every other ``kobs`` command.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from bench.machine import describe

# name -> (module, one-line help)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "capacity": (
        "bench.capacity",
        "the capacity model's records/s against kafka-producer/consumer-perf-test on a local 3-node Kafka",
    ),
    "collect": (
        "bench.collect",
        "one collector cycle (30 exporter endpoints, offsets of 100k partitions x 1k groups) and "
        "publish rate",
    ),
    "freshness": (
        "bench.freshness",
        "p95 freshness in the demo, or a running deployment (--config): collector sample time -> derived "
        "metric visible on kobs stream's exporter",
    ),
    "scrapers": (
        "bench.scrapers",
        "exporter latency under a crowd of scrapers (50 at once, 2,000 requests) against prometheus_client's "
        "own server (target: p99 < 100 ms)",
    ),
    "simulate": (
        "bench.simulate",
        "simulated seconds per wall second of a 30-broker, 10,000-partition cluster (target: 10x real time)",
    ),
    "stream": (
        "bench.stream",
        "samples/s of the streaming analyses on Spark against the same work in one Python process",
    ),
}


class _Benchmark(argparse.ArgumentParser):
    """A benchmark's parser: its module's arguments are added the first time it parses."""

    def __init__(self, *args, module_name: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.module_name = module_name  # "" once loaded

    def parse_known_args(self, args=None, namespace=None):
        if self.module_name:
            module, self.module_name = importlib.import_module(self.module_name), ""
            module.add_arguments(self)
            self.set_defaults(run=_runner(module))
        return super().parse_known_args(args, namespace)


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "bench",
        help="run a benchmark and print its figures against a named baseline",
        description="Run a benchmark. Each prints its figures, the baseline it compares against in the "
        "same run, and the machine it ran on. Benchmarks are never part of the test suite.",
    )
    benchmarks = parser.add_subparsers(
        title="benchmarks", metavar="<benchmark>", required=True, parser_class=_Benchmark
    )
    for name, (module_name, help_) in BENCHMARKS.items():
        benchmarks.add_parser(name, help=help_, description=help_, module_name=module_name)
    return parser


def at_least_one(text: str) -> int:
    """An argparse type: a whole number of at least 1, else the option's error names what was given."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def whole_number(text: str) -> int:
    """An argparse type: a whole number (0 or more), else the option's error names what was given."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}")
    return int(text)


def _runner(module):
    def run(args: argparse.Namespace) -> int:
        # `kill PID` unwinds like Ctrl-C: the clusters, tools and Spark a benchmark started are stopped
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        print(describe(), flush=True)
        return module.run(args)

    return run

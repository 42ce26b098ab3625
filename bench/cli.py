"""``kobs bench <name>``: the benchmarks. Each prints its figures, its named baseline and the machine.

A benchmark is a module with ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``;
register it in ``BENCHMARKS``. Modules load only when their benchmark runs.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from bench.machine import describe

# name -> module
BENCHMARKS: dict[str, str] = {
    "capacity": "bench.capacity",
    "collect": "bench.collect",
    "freshness": "bench.freshness",
    "simulate": "bench.simulate",
    "stream": "bench.stream",
}


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "bench",
        help="run a benchmark and print its figures against a named baseline",
        description="Run a benchmark. Each prints its figures, the baseline it compares against in the "
        "same run, and the machine it ran on. Benchmarks are never part of the test suite.",
    )
    benchmarks = parser.add_subparsers(title="benchmarks", metavar="<benchmark>", required=True)
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        sub = benchmarks.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=_runner(module))
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

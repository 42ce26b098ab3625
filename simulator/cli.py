"""``kobs simulate``: run a scenario behind real wire formats until its duration ends or Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys

from simulator.scenarios import builtin_names


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "simulate",
        help="run the Kafka fleet simulator (multi-broker behaviour behind real wire formats)",
        description="Run a simulated Kafka cluster: a JMX-exporter /metrics endpoint per broker and producer "
        "on 127.0.0.1 and, with --zookeeper, Kafka's znodes in that ZooKeeper; prints where they listen.",
        epilog=f"Built-in scenarios: {', '.join(builtin_names())}. File format: docs/simulator.md.",
    )
    parser.add_argument(
        "--scenario", default="rf1-incident", help="built-in name or YAML file (default: %(default)s)"
    )
    parser.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per wall second (default: 1)"
    )
    parser.add_argument("--seed", type=int, help="random seed (default: the scenario's)")
    parser.add_argument("--brokers", type=int, help="number of brokers (default: the scenario's)")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="publish znodes to this ZooKeeper")
    parser.add_argument("--duration", type=float, help="simulated seconds to run (default: the scenario's)")
    parser.set_defaults(run=run)
    return parser


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from simulator.scenario import ScenarioError, Simulation, load_scenario  # numpy: loaded when run

    if args.speed <= 0:
        print("kobs simulate: --speed must be positive", file=sys.stderr)
        return 2
    try:
        scenario = load_scenario(args.scenario).replace(seed=args.seed, brokers=args.brokers)
        sim = Simulation(scenario)
    except (ScenarioError, ValueError) as exc:
        print(f"kobs simulate: {exc}", file=sys.stderr)
        return 2
    duration = args.duration if args.duration is not None else scenario.duration_s
    from simulator.runtime import Runtime  # its servers and Kafka client load only when the command runs

    signal.signal(signal.SIGTERM, _raise_interrupt)
    runtime = Runtime(sim, zookeeper=args.zookeeper)
    try:
        runtime.start()
        print(
            f"simulating {scenario.name!r} ({scenario.brokers} brokers, seed {scenario.seed}) "
            f"at {args.speed:g}x for {duration:g} simulated seconds",
            flush=True,
        )
        for name, url in runtime.endpoints():
            print(f"  {name:<28} {url}", flush=True)
        if args.zookeeper:
            print(f"  {'znodes':<28} {args.zookeeper}", flush=True)
        runtime.run(args.speed, duration)
    except KeyboardInterrupt:
        print("stopping ...", flush=True)
    finally:
        runtime.stop()
    print(f"simulation stopped at t={sim.now:g} s", flush=True)
    return 0

"""``kobs bench simulate``: how much faster than real time the fleet simulator runs a large cluster.

The cluster of issue 3: 30 brokers and 10,000 partitions (10 topics, replication factor 3, 1 kB messages),
100,000 messages/s from 10 producers (half acks=all with min.insync.replicas 2, half acks=1) read by 10
consumer groups of 10 members, at the scenarios' 0.1 s fetch round. One broker dies a third of the way in
and returns at two thirds, so leader elections, ISR changes and catch-up are part of the figure. The model
alone runs, in one thread (one core). The figure is simulated seconds per wall-clock second, best of
``--repeat`` runs (other load on a shared machine only slows a run down), against real time (1x, the named
baseline) and the 10x target; the same ratio by CPU time shows what an otherwise idle core gives.
"""

from __future__ import annotations

import argparse
import sys
import time

from simulator.consumer import GroupSpec
from simulator.model import ClusterSettings, TopicSpec
from simulator.producer import ProducerSpec
from simulator.scenario import Event, Scenario, Simulation

TARGET = 10.0
TOPICS = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=30, help="brokers (default: %(default)s)")
    parser.add_argument(
        "--partitions", type=int, default=10_000, help="partitions over 10 topics (default: %(default)s)"
    )
    parser.add_argument(
        "--messages-per-s", type=float, default=100_000, help="all producers together (default: %(default)g)"
    )
    parser.add_argument("--seconds", type=float, default=60, help="simulated seconds (default: %(default)g)")
    parser.add_argument(
        "--tick", type=float, default=0.1, help="fetch round in seconds (default: %(default)g)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best counts (default: %(default)s)")


def scenario(brokers: int, partitions: int, messages_per_s: float, seconds: float, tick: float) -> Scenario:
    if brokers < 3 or partitions < TOPICS or seconds <= 0 or tick <= 0:
        raise ValueError(
            f"--brokers must be at least 3, --partitions at least {TOPICS}, --seconds and --tick above 0"
        )
    names = [f"topic-{i}" for i in range(TOPICS)]
    sizes = [partitions // TOPICS + (i < partitions % TOPICS) for i in range(TOPICS)]
    return Scenario(
        "bench-simulate",
        [TopicSpec(name, size, 3, message_bytes=1000) for name, size in zip(names, sizes, strict=True)],
        tick_s=tick,
        duration_s=seconds,
        brokers=brokers,
        cluster=ClusterSettings(min_insync_replicas=2),
        producers=[
            ProducerSpec(f"producer-{i}", name, messages_per_s / TOPICS, acks="all" if i % 2 else "1")
            for i, name in enumerate(names)
        ],
        groups=[GroupSpec(f"group-{i}", name, members=10) for i, name in enumerate(names)],
        events=[
            Event(seconds / 3, "kill_broker", {"broker": brokers // 2}),
            Event(2 * seconds / 3, "start_broker", {"broker": brokers // 2}),
        ],
    )


def run(args: argparse.Namespace) -> int:
    try:
        spec = scenario(args.brokers, args.partitions, args.messages_per_s, args.seconds, args.tick)
        if args.repeat < 1:
            raise ValueError("--repeat must be at least 1")
    except ValueError as exc:
        print(f"kobs bench simulate: {exc}", file=sys.stderr)
        return 2
    print(
        f"cluster: {args.brokers} brokers, {args.partitions} partitions in {TOPICS} topics (RF 3), "
        f"{args.messages_per_s:g} msg/s, tick {args.tick:g} s, {args.seconds:g} simulated s, one thread",
        flush=True,
    )
    walls, cpus = [], []
    for attempt in range(1, args.repeat + 1):
        sim = Simulation(spec)
        wall, cpu = time.perf_counter(), time.process_time()
        sim.advance(args.seconds)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        cluster = sim.cluster
        acked = sum(p.sent_total for p in sim.producers.values())
        elections = sum(c.leader_elections for c in cluster.counters.values())
        print(
            f"run {attempt}: {walls[-1]:.2f} s wall, {cpus[-1]:.2f} s CPU "
            f"({acked} messages acknowledged, {elections} leader elections)",
            flush=True,
        )
    wall_speed, cpu_speed = args.seconds / min(walls), args.seconds / min(cpus)
    print(f"baseline: real time = 1x; target: >= {TARGET:g}x")
    print(f"speed: {wall_speed:.1f}x real time by the wall clock (best run): {_verdict(wall_speed)}")
    print(f"       {cpu_speed:.1f}x by CPU time (what an otherwise idle core gives): {_verdict(cpu_speed)}")
    return 0 if wall_speed >= TARGET else 1


def _verdict(speed: float) -> str:
    return "meets the target" if speed >= TARGET else "BELOW the target"

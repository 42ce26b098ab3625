"""The lag tracker's array rules against Burrow's rules stated one partition at a time (``lag_status``).

The tracker evaluates every partition's windows at once with numpy; the oracle here keeps each series as a
plain dict of time -> offset (the newest ``window`` times; a time seen again takes the later offset) and
applies ``lag_status``'s functions partition by partition, as the tracker did before its arrays. Random
workloads cover what a scrape loop produces and what it should never produce but might: repeated and
out-of-order scrapes, offsets that go backwards (a recreated topic, a reset group), commits older than every
end offset, stalled and stopped groups, batches split anywhere, and the state pickled between batches.
"""

from __future__ import annotations

import pickle
import random
from collections import defaultdict

import numpy as np
import pytest

from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET, PARTITION_START_OFFSET
from spark_jobs.lag_status import (
    catch_up_eta_s,
    group_status,
    lag_seconds,
    lost_messages,
    partition_status,
    rate_per_s,
)
from spark_jobs.lag_tracker import GroupLag, LagTracker, PartitionLag
from spark_jobs.lag_windows import Windows

WINDOW = 4


def windowed(points: list[tuple[float, int]], size: int = WINDOW) -> list[tuple[float, int]]:
    """The window a series ends with: its newest ``size`` times, each with the offset read last for it."""
    latest: dict[float, int] = {}
    for t_s, offset in points:
        latest[t_s] = int(offset)
    return sorted(latest.items())[-size:]


def oracle(
    read: list[tuple[str, tuple, float, float]], allowed: dict[str, int] | None = None
) -> tuple[list[PartitionLag], list[GroupLag]]:
    """The answers for samples ``read`` (name, key, time, offset), partition by partition, with each group's
    ``allowed`` lag (none: 0)."""
    allowed = allowed or {}
    series: dict[str, dict[tuple, list]] = {name: defaultdict(list) for name in (
        GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET, PARTITION_START_OFFSET)}  # fmt: skip
    now: dict[str, float] = {}
    for name, key, t_s, offset in read:
        series[name][key].append((t_s, offset))
        now[key[0]] = max(now.get(key[0], -np.inf), t_s)
    ends = {key: windowed(points) for key, points in series[PARTITION_END_OFFSET].items()}
    starts = {key: windowed(points) for key, points in series[PARTITION_START_OFFSET].items()}
    partitions = []
    for key, points in sorted(series[GROUP_COMMITTED_OFFSET].items()):
        cluster, group, topic, partition = key
        end_window = ends.get((cluster, topic, partition))
        if end_window is None:
            continue
        commits = windowed(points)
        committed, end = commits[-1][1], end_window[-1][1]
        lag = max(0, end - committed)
        history = [(offset, round(t_s * 1000), lag_then(end_window, t_s, offset)) for t_s, offset in commits]
        start_window = starts.get((cluster, topic, partition))
        partitions.append(PartitionLag(
            cluster, group, topic, partition, now[cluster], committed, end, lag,
            lag_seconds(committed, end_window, now[cluster]),
            lost_messages(committed, start_window[-1][1]) if start_window else 0,
            partition_status(history, [e for _, e in end_window], lag, now[cluster], allowed.get(group, 0)),
            rate_per_s(commits), rate_per_s(end_window), history[0], history[-1], len(history) / WINDOW,
        ))  # fmt: skip
    groups = []
    for cluster, group in sorted({(p.cluster, p.group) for p in partitions}):
        parts = [p for p in partitions if (p.cluster, p.group) == (cluster, group)]
        consume, produce = [p.consume_per_s for p in parts], [p.produce_per_s for p in parts]
        eta = catch_up_eta_s(
            sum(p.lag_messages for p in parts),
            None if None in consume else sum(consume),
            None if None in produce else sum(produce),
        )
        groups.append(GroupLag(cluster, group, group_status(p.status for p in parts), eta))
    return partitions, groups


def lag_then(end_window: list[tuple[float, int]], t_s: float, offset: int) -> int | None:
    """A commit's lag against the end offset seen last at or before it; None if none was."""
    seen = [end for t, end in end_window if t <= t_s]
    return max(0, seen[-1] - offset) if seen else None


def offsets(rng: random.Random, times: list[float]) -> list[int]:
    """A series of offsets: mostly growing, sometimes still, now and then back to near zero or -1."""
    offset, values = rng.randrange(0, 50), []
    for _ in times:
        move = rng.random()
        if move < 0.08:
            offset = rng.randrange(-1, 5)  # a recreated topic or a reset group (-1: no offset yet)
        elif move > 0.25:
            offset += rng.randrange(0, 40)
        values.append(offset)
    return values


def workload(rng: random.Random) -> list[tuple[str, tuple, float, float]]:
    """Samples of a few clusters, groups and partitions, in a shuffled-ish read order."""
    read = []
    for cluster in ("a", "b")[: rng.randint(1, 2)]:
        for topic, partition in (("t", "0"), ("t", "1"), ("u", "0")):
            times = sorted(rng.sample(range(0, 200, 5), rng.randint(1, 9)))
            read += [(PARTITION_END_OFFSET, (cluster, topic, partition), t * 1.5, v)
                     for t, v in zip(times, offsets(rng, times), strict=True)]  # fmt: skip
            if rng.random() < 0.6:
                read += [(PARTITION_START_OFFSET, (cluster, topic, partition), t * 1.5, v // 3)
                         for t, v in zip(times, offsets(rng, times), strict=True)]  # fmt: skip
            for group in ("g", "h"):
                if rng.random() < 0.8:
                    commit_times = sorted(rng.sample(range(0, 200, 5), rng.randint(1, 9)))
                    read += [
                        (GROUP_COMMITTED_OFFSET, (cluster, group, topic, partition), t * 1.5, v)
                        for t, v in zip(commit_times, offsets(rng, commit_times), strict=True)
                    ]
    read.sort(key=lambda sample: sample[2] + rng.choice((0, 0, 0, 12)))  # some scrapes arrive late
    if rng.random() < 0.3:
        read += rng.sample(read, len(read) // 3)  # some samples read twice
    return read


def tracked(read: list, rng: random.Random) -> LagTracker:
    """A tracker fed ``read`` in batches split at random, its state pickled between batches."""
    tracker = LagTracker(WINDOW)
    cuts = sorted(rng.sample(range(len(read) + 1), min(3, len(read) + 1)))
    for start, stop in zip([0, *cuts], [*cuts, len(read)], strict=True):
        by_name: dict[str, tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
        for name, key, t_s, offset in read[start:stop]:
            keys, times, values = by_name[name]
            keys.append(key)
            times.append(t_s)
            values.append(offset)
        for name, columns in by_name.items():
            tracker.add(name, *columns)
        tracker = pickle.loads(pickle.dumps(tracker))
    return tracker


@pytest.mark.parametrize("seed", range(300))
def test_the_array_rules_give_burrows_answers_partition_by_partition(seed):
    rng = random.Random(seed)
    read = workload(rng)
    allowed = {group: rng.choice((0, 0, 5, 50)) for group in ("g", "h")}  # Burrow's allowed lag per group
    partitions, groups = oracle(read, allowed)
    report = tracked(read, rng).evaluate(allowed.__getitem__)
    assert list(report.partitions) == partitions
    assert list(report.groups) == groups


def test_the_random_workloads_reach_every_status():
    statuses = set()
    for seed in range(300):
        rng = random.Random(seed)
        statuses |= {p.status for p in oracle(workload(rng))[0]}
    assert statuses == {"OK", "WARN", "STOP", "STALL", "REWIND"}


def test_a_windows_observations_are_the_newest_times_each_with_the_offset_read_last():
    windows = Windows(3)
    windows.add([("k",)] * 4, [10.0, 20.0, 30.0, 40.0], [1, 2, 3, 4])
    windows.add([("k",), ("k",), ("j",)], [20.0, 35.0, 5.0], [9, 7, 8])  # 20 s falls out; 35 s goes in
    windows.add([("k",), ("k",)], [40.0, 40.0], [5, 6])  # the same scrape read twice: the later counts
    assert windows.keys == [("j",), ("k",)]  # rows in key order
    assert windows.times[1].tolist() == [30.0, 35.0, 40.0] and windows.values[1].tolist() == [3, 7, 6]
    assert np.isnan(windows.times[0, :-1]).all() and windows.values[0, -1] == 8  # j: one observation
    restored = pickle.loads(pickle.dumps(windows))
    assert restored.times[0, -1] == 5.0 and restored.rows == {("j",): 0, ("k",): 1}

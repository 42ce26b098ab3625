"""Consumer-lag state per partition: bounded windows of offset observations in, lag answers out.

Pure (no Spark): the lag analysis (``spark_jobs.lag``) feeds it the offsets collector's samples and the
rules come from ``spark_jobs.lag_status``. Every observation of a group's committed offset counts as one
commit, as in Burrow with a polling offsets module: a group that reports the same offset while lag exists
is STALL, and STOP means its offsets stopped being reported while the partition's end offset still is.
"Now" is the newest observation time of the cluster, not the wall clock, so a replay gives the same answer.

Statuses follow Burrow (codes in ``docs/metrics.md``): a partition is OK, WARN, STOP, STALL or REWIND, a
group its worst partition with STOP, STALL and REWIND reported as ERR. Messages lost to retention (committed
offset below the log start offset) are their own signal, ``lost_messages``, not a status.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from common import names
from spark_jobs.lag_status import (
    Commit,
    catch_up_eta_s,
    group_status,
    lag_seconds,
    lost_messages,
    partition_status,
    rate_per_s,
)

INPUT_NAMES = (names.GROUP_COMMITTED_OFFSET, names.PARTITION_END_OFFSET, names.PARTITION_START_OFFSET)


class OffsetSample(NamedTuple):
    """One input sample; ``group`` is None for end and start offsets."""

    name: str
    cluster: str
    group: str | None
    topic: str
    partition: str
    t_s: float
    value: float


@dataclass(frozen=True)
class PartitionLag:
    cluster: str
    group: str
    topic: str
    partition: str
    at_s: float  # evaluation time: the cluster's newest observation
    committed: int
    end_offset: int
    lag_messages: int
    lag_seconds: float
    lost_messages: int
    status: str  # Burrow partition status: OK, WARN, STOP, STALL or REWIND
    consume_per_s: float | None  # committed-offset and end-offset rates over the window; None: unknown
    produce_per_s: float | None
    # Burrow's view of the window (its HTTP API; not in the Parquet history): the oldest and newest commit
    # in it, and how full it is (commits in it / the window's size).
    start: Commit
    end: Commit
    complete: float


@dataclass(frozen=True)
class GroupLag:
    cluster: str
    group: str
    status: str  # OK, WARN or ERR (a partition is STOP, STALL or REWIND)
    catchup_eta_s: float | None  # inf: never; None: unknown


@dataclass(frozen=True)
class LagReport:
    partitions: tuple[PartitionLag, ...] = ()
    groups: tuple[GroupLag, ...] = ()


class Window(list):
    """The last observations of one series, oldest first, one per time (a repeated time replaces its value),
    as ``[times, values]``. A list of two lists, so that the lag analysis's state (tens of thousands of
    windows, stored and restored every micro-batch) pickles and loads without a Python call per window."""

    __slots__ = ()

    def __init__(self):
        super().__init__(([], []))

    def __setstate__(self, state: dict) -> None:
        """A window stored before the two lists: ``{"size", "points": [(time, value)]}``."""
        points = state["points"]
        self[:] = [t for t, _ in points], [v for _, v in points]

    def add(self, t_s: float, value: int, size: int) -> None:
        """Take an observation, keeping the last ``size``."""
        times, values = self
        if not times or t_s > times[-1]:  # the usual case: a newer scrape
            times.append(t_s)
            values.append(value)
        else:
            i = bisect_left(times, t_s)
            if times[i] == t_s:
                values[i] = value
            else:
                times.insert(i, t_s)
                values.insert(i, value)
        if len(times) > size:
            del times[:-size], values[:-size]

    @property
    def times(self) -> list[float]:
        return self[0]

    @property
    def values(self) -> list[int]:
        return self[1]

    @property
    def points(self) -> list[tuple[float, int]]:
        """(time, value) of each observation, oldest first."""
        return list(zip(*self, strict=True))

    @property
    def last(self) -> int:
        return self[1][-1]

    def at(self, t_s: float) -> int | None:
        """The value observed last at or before ``t_s``; None if the window starts after it."""
        times, values = self
        i = bisect_right(times, t_s)
        return values[i - 1] if i else None


class LagTracker:
    """Windows of the last ``window`` committed, end and start offsets of every partition (and group)."""

    def __init__(self, window: int = 10):
        self.window = window
        self._commits: dict[tuple[str, str, str, str], Window] = {}  # (cluster, group, topic, partition)
        self._ends: dict[tuple[str, str, str], Window] = {}  # (cluster, topic, partition)
        self._starts: dict[tuple[str, str, str], Window] = {}
        self._now: dict[str, float] = {}

    def observe(self, sample: OffsetSample) -> None:
        """Take one sample whose name is one of ``INPUT_NAMES``."""
        topic_partition = (sample.cluster, sample.topic, sample.partition)
        if sample.name == names.GROUP_COMMITTED_OFFSET:
            windows, key = self._commits, (sample.cluster, sample.group, sample.topic, sample.partition)
        elif sample.name == names.PARTITION_END_OFFSET:
            windows, key = self._ends, topic_partition
        else:
            windows, key = self._starts, topic_partition
        window = windows.get(key)
        if window is None:
            window = windows[key] = Window()
        window.add(sample.t_s, int(sample.value), self.window)
        if sample.t_s > self._now.get(sample.cluster, -math.inf):
            self._now[sample.cluster] = sample.t_s

    def evaluate(self) -> LagReport:
        """Lag of every group partition whose end offset has been seen, and the status of every group."""
        partitions = tuple(
            self._partition(key, commits, self._ends[key[0], key[2], key[3]])
            for key, commits in sorted(self._commits.items())
            if (key[0], key[2], key[3]) in self._ends
        )
        return LagReport(partitions, _groups(partitions))

    def partition_offsets(self) -> list[tuple[str, str, str, int | None, int]]:
        """(cluster, topic, partition, log start offset or None, end offset) of every partition in its
        cluster's newest end-offsets scrape (a deleted partition leaves with the scrape after it)."""
        newest: dict[str, float] = {}
        for (cluster, _, _), ends in self._ends.items():
            newest[cluster] = max(newest.get(cluster, -math.inf), ends.times[-1])
        return [
            (*key, starts.last if (starts := self._starts.get(key)) else None, ends.last)
            for key, ends in sorted(self._ends.items())
            if ends.times[-1] == newest[key[0]]
        ]

    def _partition(self, key: tuple[str, str, str, str], commits: Window, ends: Window) -> PartitionLag:
        cluster, group, topic, partition = key
        now_s = self._now[cluster]
        committed, end = commits.last, ends.last
        lag = max(0, end - committed)
        history = [
            (offset, round(t_s * 1000), _lag_at(ends, t_s, offset))
            for t_s, offset in zip(*commits, strict=True)
        ]
        starts = self._starts.get((cluster, topic, partition))
        lost = lost_messages(committed, starts.last) if starts else 0
        status = partition_status(history, ends.values, lag, now_s)
        end_points = ends.points
        return PartitionLag(
            cluster, group, topic, partition, now_s, committed, end, lag,
            lag_seconds(committed, end_points, now_s), lost, status,
            rate_per_s(commits.points), rate_per_s(end_points), history[0], history[-1],
            len(history) / self.window,
        )  # fmt: skip


def _lag_at(ends: Window, t_s: float, committed: int) -> int | None:
    """Lag of a commit against the end offset seen at its time; None when no end offset was seen yet."""
    end = ends.at(t_s)
    return None if end is None else max(0, end - committed)


def _groups(partitions: tuple[PartitionLag, ...]) -> tuple[GroupLag, ...]:
    members: dict[tuple[str, str], list[PartitionLag]] = defaultdict(list)
    for p in partitions:
        members[p.cluster, p.group].append(p)
    groups = []
    for (cluster, group), parts in sorted(members.items()):
        status = group_status(p.status for p in parts)
        consume = [p.consume_per_s for p in parts]
        produce = [p.produce_per_s for p in parts]
        eta = catch_up_eta_s(
            sum(p.lag_messages for p in parts),
            None if None in consume else sum(consume),
            None if None in produce else sum(produce),
        )
        groups.append(GroupLag(cluster, group, status, eta))
    return tuple(groups)

"""Consumer-lag state per partition: bounded windows of offset observations in, lag answers out.

Pure (numpy, no Spark): the lag analysis (``spark_jobs.lag``) feeds it the offsets collector's samples. Every
observation of a group's committed offset counts as one commit, as in Burrow with a polling offsets module:
a group that reports the same offset while lag exists is STALL, and STOP means its offsets stopped being
reported while the partition's end offset still is. "Now" is the newest observation time of the cluster,
not the wall clock, so a replay gives the same answer.

The rules are those of ``spark_jobs.lag_status``, stated there one partition at a time; here they run over
the windows of every partition at once (numpy arrays, ``spark_jobs.lag_windows``), and the tests hold the
two to the same answers. Statuses follow Burrow (codes in ``docs/metrics.md``): a partition is OK, WARN,
STOP, STALL or REWIND, a group its worst partition with STOP, STALL and REWIND reported as ERR. Messages lost
to retention (committed offset below the log start offset) are their own signal, ``lost_messages``, not a
status.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby, repeat
from typing import NamedTuple

import numpy as np

from common import names
from spark_jobs.lag_status import PARTITION_STATUSES, Commit, catch_up_eta_s, group_status
from spark_jobs.lag_windows import Windows

INPUT_NAMES = (names.GROUP_COMMITTED_OFFSET, names.PARTITION_END_OFFSET, names.PARTITION_START_OFFSET)
OK, WARN, STOP, STALL, REWIND = range(len(PARTITION_STATUSES))


class PartitionLag(NamedTuple):
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
    """One series' window as the version before :class:`Windows` stored it, ``[times, values]`` (and the
    one before that, ``{"size", "points"}``): read back only, into :class:`Windows`."""

    __slots__ = ()

    def __setstate__(self, state: dict) -> None:
        points = state["points"]
        self[:] = [t for t, _ in points], [v for _, v in points]


class LagTracker:
    """Windows of the last ``window`` committed, end and start offsets of every partition (and group)."""

    def __init__(self, window: int = 10):
        self.window = window
        self._commits = Windows(window)  # (cluster, group, topic, partition)
        self._ends = Windows(window)  # (cluster, topic, partition)
        self._starts = Windows(window)

    def __setstate__(self, state: dict) -> None:
        if isinstance(state["_commits"], dict):  # stored before Windows: a Window per series, and "now"
            for name in ("_commits", "_ends", "_starts"):
                state[name] = Windows.of(state["window"], {key: tuple(w) for key, w in state[name].items()})
            del state["_now"]
        self.__dict__.update(state)

    def add(
        self,
        name: str,
        keys: Sequence[tuple],
        times: Sequence[float],
        values: Sequence[float],
        spacing_s: float = 0.0,
    ) -> None:
        """Take observations of one of ``INPUT_NAMES`` (in the order they were read): offsets (whole numbers)
        of the series ``keys``, (cluster, group, topic, partition) for commits, else (cluster, topic,
        partition); about one per ``spacing_s`` kept (:meth:`Windows.add`)."""
        kinds = dict(zip(INPUT_NAMES, (self._commits, self._ends, self._starts), strict=True))
        kinds[name].add(keys, times, values, spacing_s)

    def forget_groups(self, gone: set[tuple[str, str]]) -> None:
        """Forget the committed offsets of the (cluster, group)s in ``gone``: deleted groups."""
        self._commits.drop(lambda key: key[:2] in gone)

    def evaluate(self, allowed_lag: Callable[[str], int] = lambda _group: 0) -> LagReport:
        """Lag of every group partition whose end offset has been seen, and the status of every group;
        ``allowed_lag`` gives a group's (Burrow's allowed-lag: a lag up to it is caught up)."""
        commits, ends, starts = self._commits, self._ends, self._starts
        end_rows = _rows_of(ends, commits.keys)
        reported = np.flatnonzero(end_rows >= 0)
        if not len(reported):
            return LagReport()
        keys = [commits.keys[i] for i in reported]
        newest = self._newest()
        now = np.array([newest[key[0]] for key in keys])
        start_rows = _rows_of(starts, keys)
        committed = commits.values[reported, -1]
        lost = np.where(start_rows >= 0, np.maximum(0, _newest_values(starts, start_rows) - committed), 0)
        of_group = {group: allowed_lag(group) for group in {key[1] for key in keys}}
        allowed = np.fromiter((of_group[key[1]] for key in keys), np.int64, len(keys))
        columns = _partitions(
            commits.times[reported], commits.values[reported], ends.times[end_rows[reported]],
            ends.values[end_rows[reported]], lost, now, allowed,
        )  # fmt: skip
        rows = zip(*zip(*keys, strict=True), *columns, strict=True)
        partitions = tuple(map(tuple.__new__, repeat(PartitionLag), rows))
        return LagReport(partitions, _groups(partitions))

    def partition_offsets(self) -> tuple[list[tuple[str, str, str]], list[int | None], list[int]]:
        """The (cluster, topic, partition) of every partition in its cluster's newest end-offsets scrape (a
        deleted partition leaves with the scrape after it), with its log start offset (None: not seen) and
        end offset."""
        ends, starts = self._ends, self._starts
        newest = _newest_of({}, ends)
        last = ends.times[:, -1].tolist()
        current = [i for i, key in enumerate(ends.keys) if last[i] == newest[key[0]]]
        partitions = [ends.keys[i] for i in current]
        start_rows = _rows_of(starts, partitions)
        log_starts = _newest_values(starts, start_rows).tolist()
        return (
            partitions,
            [None if row < 0 else start for row, start in zip(start_rows.tolist(), log_starts, strict=True)],
            ends.values[current, -1].tolist(),
        )

    def _newest(self) -> dict[str, float]:
        """Each cluster's newest observation time."""
        newest: dict[str, float] = {}
        for windows in (self._commits, self._ends, self._starts):
            _newest_of(newest, windows)
        return newest


def _newest_of(newest: dict[str, float], windows: Windows) -> dict[str, float]:
    """``newest`` updated with the newest time of each cluster in ``windows`` (keys start with the cluster;
    rows are sorted, so each cluster's rows are one run)."""
    last = windows.times[:, -1].tolist()
    i = 0
    for cluster, rows in groupby(key[0] for key in windows.keys):
        n = sum(1 for _ in rows)
        newest[cluster] = max(newest.get(cluster, -np.inf), max(last[i : i + n]))
        i += n
    return newest


def _newest_values(windows: Windows, rows: np.ndarray) -> np.ndarray:
    """The newest value of each of ``rows`` (0 for a row < 0, none)."""
    if not windows.keys:
        return np.zeros(len(rows), np.int64)
    return np.where(rows >= 0, windows.values[rows, -1], 0)


def _rows_of(windows: Windows, keys: list[tuple]) -> np.ndarray:
    """The rows of ``windows`` holding each key's partition (its cluster, topic and partition); -1: none."""
    get = windows.rows.get
    return np.fromiter((get((k[0], k[-2], k[-1]), -1) for k in keys), np.int64, len(keys))


def _partitions(
    commit_t: np.ndarray, commit_v: np.ndarray, end_t: np.ndarray, end_v: np.ndarray,
    lost: np.ndarray, now: np.ndarray, allowed: np.ndarray,
) -> list[list]:  # fmt: skip
    """The columns of :class:`PartitionLag` after the key, one row per group partition: its commits' and its
    end offsets' windows, the messages it lost to retention, now and its group's allowed lag."""
    size = commit_t.shape[1]
    rows = np.arange(len(commit_t))
    first = np.isnan(commit_t).sum(axis=1)  # the column of the oldest commit
    committed, end = commit_v[:, -1], end_v[:, -1]
    lag = np.maximum(0, end - committed)
    commit_lags, known = _lags_at(end_t, end_v, commit_t, commit_v)
    first_ms, last_ms = (np.rint(commit_t[rows, first] * 1000).astype(np.int64),
                         np.rint(commit_t[:, -1] * 1000).astype(np.int64))  # fmt: skip
    status = _status(commit_v, ~np.isnan(commit_t), commit_lags, known, end_v, ~np.isnan(end_t), lag,
                     now * 1000 - last_ms > last_ms - first_ms, allowed)  # fmt: skip
    lags = np.where(known, commit_lags, -1).tolist()
    start_lag = [None if (x := row[f]) < 0 else x for row, f in zip(lags, first.tolist(), strict=True)]
    end_lag = [None if row[-1] < 0 else row[-1] for row in lags]
    return [
        now.tolist(), committed.tolist(), end.tolist(), lag.tolist(),
        _lag_seconds(committed, end_t, end_v, now).tolist(),
        lost.tolist(),
        np.array(PARTITION_STATUSES)[status].tolist(),
        _none_for_nan(_rate_per_s(commit_t, commit_v)), _none_for_nan(_rate_per_s(end_t, end_v)),
        list(zip(commit_v[rows, first].tolist(), first_ms.tolist(), start_lag, strict=True)),
        list(zip(committed.tolist(), last_ms.tolist(), end_lag, strict=True)),
        ((size - first) / size).tolist(),
    ]  # fmt: skip


def _lags_at(end_t, end_v, commit_t, commit_v) -> tuple[np.ndarray, np.ndarray]:
    """Each commit's lag against the end offset observed last at or before its time, and whether one was
    (a commit older than every end offset in the window has no known lag)."""
    seen = (end_t[:, None, :] <= commit_t[:, :, None]).sum(axis=2)  # end offsets at or before each commit
    column = np.isnan(end_t).sum(axis=1)[:, None] + seen - 1
    end_then = np.take_along_axis(end_v, np.maximum(column, 0), axis=1)
    return np.maximum(0, end_then - commit_v), seen > 0


def _status(commit_v, held, commit_lags, known, end_v, end_held, lag, stopped, allowed) -> np.ndarray:
    """Burrow's partition status (``lag_status.partition_status``), as indexes of PARTITION_STATUSES, with
    each row's allowed lag. The known lags are the newest commits' (end offsets and commits are both in time
    order), so successive known lags are adjacent columns."""
    committed = commit_v[:, -1]
    rows, columns = np.arange(len(commit_v)), np.arange(commit_v.shape[1])
    caught_up_recently = (end_held & (end_v <= committed[:, None])).any(axis=1)
    went_back = held[:, :-1] & (commit_v[:, 1:] < commit_v[:, :-1])  # column k: a rewind at k + 1
    rewind = went_back.argmax(axis=1) + 1  # the first one
    since = np.where(columns >= rewind[:, None], commit_v, np.iinfo(np.int64).min).max(axis=1)
    unrecovered = went_back.any(axis=1) & (since < commit_v[rows, rewind - 1])
    within = (known & (commit_lags <= allowed[:, None])).any(axis=1)
    stall = (~held | (commit_v == committed[:, None])).all(axis=1)
    lag_fell = (known[:, :-1] & (commit_lags[:, 1:] < commit_lags[:, :-1])).any(axis=1)
    return np.select(
        [lag <= allowed, stopped & ~caught_up_recently, unrecovered, within, stall, ~lag_fell],
        [OK, STOP, REWIND, OK, STALL, WARN],
        OK,
    )


def _since_last_reset(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row, the column of the oldest observation after the value last went backwards
    (``lag_status.since_last_reset``)."""
    went_back = values[:, 1:] < values[:, :-1]  # from an empty column's 0: to the oldest observation anyway
    after = np.where(went_back, np.arange(1, times.shape[1]), 0).max(axis=1)
    return np.maximum(np.isnan(times).sum(axis=1), after)


def _rate_per_s(times: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``lag_status.rate_per_s`` of each row; NaN where unknown."""
    rows, size = np.arange(len(times)), times.shape[1]
    oldest = _since_last_reset(times, values)
    t0, v0, t1, v1 = times[rows, oldest], values[rows, oldest], times[:, -1], values[:, -1]
    known = (oldest <= size - 2) & (t1 > t0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(known, (v1 - v0) / (t1 - t0), np.nan)


def _lag_seconds(committed, end_t, end_v, now) -> np.ndarray:
    """``lag_status.lag_seconds`` of each row: the age of the first unconsumed message, its write time
    interpolated between the two end offsets that bracket it (the last such pair in the window)."""
    rows, size = np.arange(len(end_t)), end_t.shape[1]
    oldest = _since_last_reset(end_t, end_v)
    target = (committed + 1)[:, None]
    pairs = np.arange(size - 1)
    bracket = (pairs >= oldest[:, None]) & (end_v[:, :-1] < target) & (target <= end_v[:, 1:])
    pair = np.where(bracket, pairs, -1).max(axis=1)
    p = np.maximum(pair, 0)
    t0, t1, e0, e1 = end_t[rows, p], end_t[rows, p + 1], end_v[rows, p], end_v[rows, p + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = t0 + (committed + 1 - e0) * (t1 - t0) / (e1 - e0)
    written = np.where(pair >= 0, between, end_t[rows, oldest])
    return np.where(committed >= end_v[:, -1], 0.0, np.maximum(0.0, now - written))


def _none_for_nan(values: np.ndarray) -> list[float | None]:
    return [None if x != x else x for x in values.tolist()]


def _groups(partitions: tuple[PartitionLag, ...]) -> tuple[GroupLag, ...]:
    """Each group's status and catch-up ETA from its partitions (sorted: a group's partitions are one run)."""
    groups = []
    for (cluster, group), members in groupby(partitions, key=lambda p: (p.cluster, p.group)):
        parts = list(members)
        consume = [p.consume_per_s for p in parts]
        produce = [p.produce_per_s for p in parts]
        eta = catch_up_eta_s(
            sum(p.lag_messages for p in parts),
            None if None in consume else sum(consume),
            None if None in produce else sum(produce),
        )
        groups.append(GroupLag(cluster, group, group_status(p.status for p in parts), eta))
    return tuple(groups)

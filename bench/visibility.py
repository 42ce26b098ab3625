"""When a scrape becomes readable and visible: the bookkeeping of ``kobs bench freshness`` (pure, no I/O).

A scrape is one collector source's report at one sample time, ``(cluster, source, t_s)``; it may span
several metrics-topic records (``common.contract.Batch.chunks``), readable when the last of them is. It is
*visible* once the derived exporter's ``kobs_source_last_seen_timestamp_seconds{cluster, source}`` shows
``t_s`` or later: that gauge is the newest time the pipeline has processed for the source, and one source's
records stay in order in one partition. Polling the exporter gives, per series, the first poll time each
new value was seen; the poll interval is the resolution (a value is seen at most one interval after it was
served). The lag an offsets scrape states (:func:`lag_of`) checks the handle against an analysis
(:func:`agreement`).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET
from spark_jobs.records import newest_ms

Source = tuple[str, str]  # (cluster, source)


def newest_s(doc: Mapping[str, Any]) -> float:
    """A contract record's newest time in Unix seconds: its batch time or a later event's, the time the
    pipeline keeps as the source's last seen (``spark_jobs.records``)."""
    return newest_ms(doc) / 1000


class Appearances:
    """Each series' values in the order they appeared, with the poll time each was first seen."""

    def __init__(self) -> None:
        self._times: dict[Hashable, list[float]] = {}
        self._values: dict[Hashable, list[Any]] = {}

    def observe(self, at_s: float, values: Mapping[Hashable, Any]) -> None:
        """One poll at ``at_s``: record every series whose value differs from the last one seen."""
        for key, value in values.items():
            seen = self._values.setdefault(key, [])
            if not seen or seen[-1] != value:
                seen.append(value)
                self._times.setdefault(key, []).append(at_s)

    def first_reaching(self, key: Hashable, value: float) -> float | None:
        """The first poll time the series showed ``value`` or more (for a series that only grows); None if
        it never did."""
        i = bisect.bisect_left(self._values.get(key, ()), value)
        times = self._times.get(key, ())
        return times[i] if i < len(times) else None


class Scrape(NamedTuple):
    source: Source
    t_s: float  # sample time
    produced_s: float  # the record's Kafka timestamp (the publisher's create time)
    readable_s: float  # when a consumer of the metrics topic had read it


class Arrivals:
    """The scrapes a consumer read from the metrics topic, each at its last record."""

    def __init__(self) -> None:
        self._scrapes: dict[tuple[Source, float], Scrape] = {}

    def add(self, source: Source, t_s: float, produced_s: float, readable_s: float) -> None:
        old = self._scrapes.get((source, t_s))
        if old is not None:  # another record of the same scrape
            produced_s, readable_s = max(produced_s, old.produced_s), max(readable_s, old.readable_s)
        self._scrapes[source, t_s] = Scrape(source, t_s, produced_s, readable_s)

    def newest_read_by(self, at_s: float) -> dict[Source, float]:
        """The newest sample time of each source among the scrapes readable at ``at_s``."""
        newest: dict[Source, float] = {}
        for s in self._scrapes.values():
            if s.readable_s <= at_s and s.t_s > newest.get(s.source, -math.inf):
                newest[s.source] = s.t_s
        return newest

    def between(self, first_s: float, last_s: float) -> list[Scrape]:
        """The scrapes with sample times in ``[first_s, last_s]``, oldest first."""
        return sorted((s for s in self._scrapes.values() if first_s <= s.t_s <= last_s), key=lambda s: s.t_s)


class Batch(NamedTuple):
    """The micro-batch a poll showed as the last one completed."""

    completed_s: float
    pipeline_s: float  # from foreachBatch's start to the metrics: it starts at completed_s - pipeline_s


class Freshness(NamedTuple):
    """Seconds per scrape that became visible: sample time → produced, → readable, → visible; readable →
    visible (what the stream adds), split into readable → the start of the pipeline of the micro-batch
    that showed it (``waited``) and that pipeline's own time (``pipeline``). ``unseen``: scrapes read but
    never visible."""

    produced: list[float]
    readable: list[float]
    visible: list[float]
    added: list[float]
    waited: list[float]
    pipeline: list[float]
    unseen: int


def freshness(scrapes: list[Scrape], handle: Appearances, batches: Mapping[float, Batch]) -> Freshness:
    """Freshness of each scrape; ``handle`` holds the last-seen gauge per :data:`Source`, ``batches`` the
    last micro-batch each poll showed, by poll time."""
    rows, unseen = [], 0
    for s in scrapes:
        visible_s = handle.first_reaching(s.source, s.t_s)
        if visible_s is None:
            unseen += 1
            continue
        batch = batches[visible_s]
        rows.append(
            (
                s.produced_s - s.t_s,
                s.readable_s - s.t_s,
                visible_s - s.t_s,
                visible_s - s.readable_s,
                batch.completed_s - batch.pipeline_s - s.readable_s,
                batch.pipeline_s,
            )
        )
    columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in range(6)]
    return Freshness(*columns, unseen)


def handed_over(scrapes: Iterable[Scrape]) -> dict[str, list[float]]:
    """Sample time → handed to the Kafka producer of each scrape, by kind of source: its name with a
    trailing number as ``N``, so a fleet's brokers are one kind (``exporter/broker-N``)."""
    kinds: dict[str, list[float]] = {}
    for s in scrapes:
        kinds.setdefault(re.sub(r"\d+$", "N", s.source[1]), []).append(s.produced_s - s.t_s)
    return kinds


class Summary(NamedTuple):
    p50: float
    p95: float
    max: float

    def __str__(self) -> str:
        return f"p50 {self.p50:.2f} s, p95 {self.p95:.2f} s, max {self.max:.2f} s"


def summarize(seconds: list[float]) -> Summary:
    """Nearest-rank percentiles (each one a measured value); ``seconds`` must not be empty."""
    p50, p95, top = np.percentile(seconds, [50, 95, 100], method="inverted_cdf")
    return Summary(float(p50), float(p95), float(top))


def lag_of(samples: Iterable[list]) -> dict[tuple[str, str, str], float]:
    """Lag in messages per (group, topic, partition) stated by an offsets scrape's contract samples
    (``[name, labels, value]``): the partition's end offset minus the group's committed offset, never below
    0 (as Burrow stores it: end and committed offsets are read at slightly different times, and a group
    that keeps up may have committed past the end offset read a moment before)."""
    ends = {(lb["topic"], lb["partition"]): v for name, lb, v in samples if name == PARTITION_END_OFFSET}
    return {
        (lb["group"], lb["topic"], lb["partition"]): max(0.0, ends[lb["topic"], lb["partition"]] - v)
        for name, lb, v in samples
        if name == GROUP_COMMITTED_OFFSET and (lb["topic"], lb["partition"]) in ends
    }


def agreement(shown: Mapping[float, Mapping], expected: Mapping[float, Mapping]) -> tuple[int, int]:
    """Of the scrapes (by sample time) for which a derived metric was ``shown`` at the first poll with the
    handle at their time and whose ``expected`` values are known, how many showed every expected value."""
    known = [t for t in shown if t in expected]
    held = sum(all(shown[t].get(key) == value for key, value in expected[t].items()) for t in known)
    return held, len(known)


def misses(shown: Mapping[float, Mapping], expected: Mapping[float, Mapping]) -> list[tuple]:
    """(scrape time, series key, expected value, shown value or None) of every value :func:`agreement`
    found not shown, by time."""
    return [
        (t, key, value, shown[t].get(key))
        for t in sorted(t for t in shown if t in expected)
        for key, value in sorted(expected[t].items())
        if shown[t].get(key) != value
    ]

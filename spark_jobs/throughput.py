"""Throughput versus stored data: bytes in/out per topic, stored bytes, disk runway, and whether throughput
falls as stored data grows.

Pure (no Spark). Reads the brokers' ``BrokerTopicMetrics`` counters (``kafka_broker_bytes_{in,out}_total``
and ``kafka_broker_messages_in_total`` with ``broker`` and ``topic``; the broker-wide series without
``topic`` is skipped, it would count twice)
and the per-replica log sizes (``kafka_log_size_bytes`` with ``broker``, ``topic``, ``partition``). Rates
come from :mod:`spark_jobs.rates` (1-minute window, counter resets handled). A broker's stored bytes are the
log sizes of its latest scrape, so a partition moved away stops counting at once. Per topic it also sums
the counters' increases over its brokers since it first saw them (a broker restart's reset counted as
Prometheus counts it), served as ``_total`` counters that PromQL's ``rate()`` reads over any window; a topic
no broker reported for ``stale_s`` is dropped.

Per broker it keeps two thinned histories: (time, stored bytes) every 15 minutes over a day for the growth
rate and the disk runway, and (time, stored bytes, bytes-in rate) every minute over 6 hours for the
correlation. The cluster's correlation is the *within-broker* Pearson correlation: each broker's points are
centred on its own means before pooling, so a big broker with much traffic and much data does not make a
positive correlation out of differences between brokers. A broker counts once it has ``min_points`` points
in the window (10 by default: 10 minutes at one point a minute).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter

import pyarrow as pa

from common.names import BYTES_IN, BYTES_OUT, LOG_SIZE_BYTES, MESSAGES_IN
from spark_jobs.analysis import Derived, Evaluation, Observation, Samples, gathered
from spark_jobs.rates import CounterRates, increase

log = logging.getLogger(__name__)
DAY_S = 86_400.0

HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("broker", pa.string()),
        ("topic", pa.string()),  # null on the broker's own row (its totals, growth, runway, correlation)
        ("at_s", pa.float64()),
        ("bytes_in_per_s", pa.float64()),
        ("bytes_out_per_s", pa.float64()),
        ("stored_bytes", pa.int64()),
        ("growth_bytes_per_day", pa.float64()),
        ("disk_runway_days", pa.float64()),
        ("throughput_stored_correlation", pa.float64()),
    ]
)
TOPIC_GAUGES = {
    "in": "kobs_topic_bytes_in_per_second",
    "out": "kobs_topic_bytes_out_per_second",
    "stored": "kobs_topic_stored_bytes",
}
# Per topic, the increases of the brokers' counters summed since first seen: counters for PromQL's rate().
TOPIC_COUNTERS = {
    BYTES_IN: "kobs_topic_bytes_in_total",
    BYTES_OUT: "kobs_topic_bytes_out_total",
    MESSAGES_IN: "kobs_topic_messages_in_total",
}


def within_correlation(groups: Iterable[Sequence[tuple[float, float]]], min_points: int) -> float | None:
    """Pearson correlation of (x, y) pooled over groups after centring each group on its own means.

    Groups with fewer than ``min_points`` points are left out; None when none is left; 0 when x or y does
    not vary (no linear dependence to speak of).
    """
    sxx = syy = sxy = 0.0
    used = False
    for points in groups:
        if len(points) < min_points:
            continue
        used = True
        mx = math.fsum(x for x, _ in points) / len(points)
        my = math.fsum(y for _, y in points) / len(points)
        sxx += math.fsum((x - mx) ** 2 for x, _ in points)
        syy += math.fsum((y - my) ** 2 for _, y in points)
        sxy += math.fsum((x - mx) * (y - my) for x, y in points)
    if not used:
        return None
    if sxx == 0 or syy == 0:
        return 0.0
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def growth_per_day(oldest: tuple[float, float], newest: tuple[float, float]) -> float | None:
    """Bytes per day between two (time, stored bytes) points; None when they are at the same time."""
    (t0, b0), (t1, b1) = oldest, newest
    return (b1 - b0) / (t1 - t0) * DAY_S if t1 > t0 else None


def runway_days(capacity_bytes: float, stored_bytes: float, growth_bytes_per_day: float) -> float:
    """Days until ``capacity_bytes`` is reached; +Inf when not growing, 0 when already full."""
    if growth_bytes_per_day <= 0:
        return math.inf
    return max(0.0, capacity_bytes - stored_bytes) / growth_bytes_per_day


def _thin_append(points: deque, point: tuple, step_s: float) -> None:
    if not points or point[0] - points[-1][0] >= step_s:
        points.append(point)


def _prune(points: deque, since_s: float) -> None:
    while points and points[0][0] < since_s:
        points.popleft()


@dataclass
class Broker:
    """One broker's counters, the log sizes of its latest scrape and its thinned histories."""

    rates: CounterRates  # (topic, counter name) -> bytes/s
    t_s: float = -math.inf
    sizes: dict[tuple[str, str], float] = field(default_factory=dict)  # (topic, partition) -> bytes
    stored: deque = field(default_factory=deque)  # (t, stored bytes), for growth
    points: deque = field(default_factory=deque)  # (t, stored bytes, bytes-in rate), for correlation


class ThroughputAnalysis:
    """Topic rates and stored bytes, broker disk runway, cluster throughput/stored-data correlation."""

    table = "throughput"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset({BYTES_IN, BYTES_OUT, MESSAGES_IN, LOG_SIZE_BYTES})
    settings = ("disk_bytes",)
    chunked = frozenset({LOG_SIZE_BYTES})  # 3,000 a broker's scrape on the benchmark's cluster

    def __init__(
        self,
        disk_bytes: Mapping[str, int] | None = None,
        stale_s: float = 300.0,
        growth_window_s: float = DAY_S,
        growth_step_s: float = 900.0,
        correlation_window_s: float = 6 * 3600.0,
        correlation_step_s: float = 60.0,
        min_points: int = 10,
    ):
        self.disk_bytes = dict(disk_bytes or {})  # cluster -> capacity of each broker's log directories
        self.stale_s = stale_s
        self.growth_window_s, self.growth_step_s = growth_window_s, growth_step_s
        self.correlation_window_s, self.correlation_step_s = correlation_window_s, correlation_step_s
        self.min_points = min_points
        self.brokers: dict[tuple[str, str], Broker] = {}
        self.counted: dict[tuple[str, str, str, str], tuple[float, float]] = {}  # last (t, value) of a series
        self.totals: dict[tuple[str, str, str], list[float]] = {}  # (cluster, topic, name) -> [sum, seen at]
        self.now_s = -math.inf
        self.skipped = 0

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"counted": {}, "totals": {}} | state)  # stored before the totals were kept

    def observe(self, observations: Iterable[Observation | Samples]) -> None:
        """Scrapes in time order (a batch holds several per broker); history points after each."""
        skipped = 0
        for t_s, group in groupby(sorted(observations, key=attrgetter("t_s")), key=attrgetter("t_s")):
            scraped: dict[tuple[str, str], Broker] = {}
            for o in gathered(group, self.chunked):
                if type(o) is Samples:
                    skipped += self._take_sizes(o, scraped)
                    continue
                broker, topic = o.labels.get("broker"), o.labels.get("topic")
                if broker is None or o.value is None or not math.isfinite(o.value):
                    skipped += 1
                    continue
                state = self._state(o.cluster, broker)
                if topic is not None:  # without: the broker-wide bean, the sum of the per-topic ones
                    self._count(o.cluster, broker, topic, o.name, t_s, o.value)
                    if o.name != MESSAGES_IN:
                        state.rates.add((topic, o.name), t_s, o.value)
            for state in scraped.values():
                self._record(state)
            self.now_s = max(self.now_s, t_s)
        if skipped:
            self.skipped += skipped
            log.warning(
                "throughput: skipped %d samples without broker/topic/partition or not finite", skipped
            )
        self._forget_stale()

    def _take_sizes(self, run: Samples, scraped: dict[tuple[str, str], Broker]) -> int:
        """A scrape's log sizes into their brokers' (a newer scrape replaces a broker's partitions), each
        broker added to ``scraped``; how many were skipped (a label missing, not finite)."""
        cluster, t_s = run.cluster, run.t_s
        complete = run.complete("broker", "topic", "partition")
        for broker, topic, partition, value in complete:
            state = scraped.get((cluster, broker))
            if state is None:
                state = scraped[cluster, broker] = self._state(cluster, broker)
                if t_s > state.t_s:
                    state.t_s, state.sizes = t_s, {}
            state.sizes[topic, partition] = value
        return len(run.values) - len(complete)

    def _count(self, cluster: str, broker: str, topic: str, name: str, t_s: float, value: float) -> None:
        """Add the series' increase since its previous point to its topic's total (a drop: a reset)."""
        last = self.counted.get((cluster, broker, topic, name))
        if last is not None and t_s <= last[0]:
            return  # a replayed or out-of-order scrape adds nothing
        self.counted[cluster, broker, topic, name] = (t_s, value)
        total = self.totals.setdefault((cluster, topic, name), [0.0, t_s])
        if last is not None:
            total[0] += increase([last[1], value])
        total[1] = t_s

    def _state(self, cluster: str, broker: str) -> Broker:
        state = self.brokers.get((cluster, broker))
        if state is None:
            state = self.brokers[cluster, broker] = Broker(CounterRates(window_s=60.0, stale_s=self.stale_s))
        return state

    def _record(self, state: Broker) -> None:
        stored = math.fsum(state.sizes.values())
        _thin_append(state.stored, (state.t_s, stored), self.growth_step_s)
        bytes_in = [rate for (_, counter), rate in state.rates.rates() if counter == BYTES_IN]
        if bytes_in:
            _thin_append(state.points, (state.t_s, stored, math.fsum(bytes_in)), self.correlation_step_s)

    def _forget_stale(self) -> None:
        since = self.now_s - self.stale_s
        self.counted = {k: last for k, last in self.counted.items() if last[0] >= since}
        self.totals = {k: total for k, total in self.totals.items() if total[1] >= since}
        for key, state in list(self.brokers.items()):
            state.rates.forget_stale(self.now_s)
            if state.t_s < self.now_s - self.stale_s:
                state.sizes = {}
            _prune(state.stored, self.now_s - self.growth_window_s)
            _prune(state.points, self.now_s - self.correlation_window_s)
            if not (state.sizes or state.stored or state.rates.points):
                del self.brokers[key]

    def evaluate(self) -> Evaluation:
        history: list[dict] = []
        metrics: list[Derived] = []
        topics: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for (cluster, broker), by_topic in sorted(self._cells().items()):
            for topic, cell in sorted(by_topic.items()):
                history.append(self._row(cluster, broker, topic, cell))
                for kind, value in cell.items():
                    topics[cluster, topic][kind] += value
            logs = self.brokers.get((cluster, broker))
            if logs is not None and logs.sizes:  # else stale or never scraped: its state is unknown
                row, broker_metrics = self._broker_figures(cluster, broker, logs, by_topic.values())
                history.append(row)
                metrics += broker_metrics
        for (cluster, topic), totals in sorted(topics.items()):
            metrics += [Derived(TOPIC_GAUGES[kind], (cluster, topic), v) for kind, v in totals.items()]
        for (cluster, topic, name), (total, _) in sorted(self.totals.items()):
            metrics.append(Derived(TOPIC_COUNTERS[name], (cluster, topic), total))
        clusters: dict[str, list] = defaultdict(list)
        for (cluster, _), logs in self.brokers.items():
            clusters[cluster].append([(stored, rate) for _, stored, rate in logs.points])
        for cluster, groups in sorted(clusters.items()):
            correlation = within_correlation(groups, self.min_points)
            if correlation is not None:
                metrics.append(Derived("kobs_cluster_throughput_stored_correlation", (cluster,), correlation))
        return Evaluation(history, metrics)

    def _cells(self) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
        """(cluster, broker) -> topic -> known values of ``in``, ``out`` (bytes/s) and ``stored`` (bytes)."""
        cells: dict = defaultdict(lambda: defaultdict(dict))
        for key, state in self.brokers.items():
            for (topic, counter), rate in state.rates.rates():
                cells[key][topic]["in" if counter == BYTES_IN else "out"] = rate
            for (topic, _), size in state.sizes.items():
                cell = cells[key][topic]
                cell["stored"] = cell.get("stored", 0.0) + size
        return cells

    def _broker_figures(self, cluster: str, broker: str, logs: Broker, cells: Iterable[dict]) -> tuple:
        """The broker's history row (totals, growth, runway, own correlation) and its metrics."""
        stored = math.fsum(logs.sizes.values())
        totals: dict[str, float] = defaultdict(float)
        for cell in cells:
            for kind in ("in", "out"):
                if kind in cell:
                    totals[kind] += cell[kind]
        row = self._row(cluster, broker, None, {**totals, "stored": stored})
        row["growth_bytes_per_day"] = growth = growth_per_day(logs.stored[0], (logs.t_s, stored))
        points = [(s, r) for _, s, r in logs.points]
        row["throughput_stored_correlation"] = within_correlation([points], self.min_points)
        metrics = [Derived("kobs_broker_stored_bytes", (cluster, broker), stored)]
        if growth is not None and cluster in self.disk_bytes:
            row["disk_runway_days"] = runway = runway_days(self.disk_bytes[cluster], stored, growth)
            metrics.append(Derived("kobs_broker_disk_runway_days", (cluster, broker), runway))
        return row, metrics

    def _row(self, cluster: str, broker: str, topic: str | None, cell: Mapping[str, float]) -> dict:
        stored = cell.get("stored")
        return {
            "cluster": cluster,
            "broker": broker,
            "topic": topic,
            "at_s": self.now_s,
            "bytes_in_per_s": cell.get("in"),
            "bytes_out_per_s": cell.get("out"),
            "stored_bytes": None if stored is None else round(stored),
        }

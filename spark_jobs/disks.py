"""Log directories' disk space: free share, free bytes, how fast it fills and the days until it is full.

Pure (no Spark). Reads each log directory's total and usable bytes (``kafka_log_dir_{total,usable}_bytes``
with ``broker`` and ``log_dir``, from the Admin API's DescribeLogDirs: the filesystem's, so everything on
the disk counts, not only Kafka's logs). The fill rate is the drop of usable bytes between the oldest point
of a thinned history (a point every ``step_s`` over ``window_s``, a day by default) and now; the runway is
usable bytes over that rate, +Inf while the disk is not filling. A rate needs ``min_span_s`` of history
(an hour by default): minutes of history would extrapolate one burst into a false alarm. Retention deletes
segments in steps, so the rate over a day is the rate that matters for running out. A directory not heard
from for ``stale_s`` is forgotten (a failed one stops answering space at all).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

import pyarrow as pa

from common import names
from spark_jobs.analysis import Derived, Evaluation, Observation

DAY_S = 86_400.0
HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("broker", pa.string()),
        ("log_dir", pa.string()),
        ("at_s", pa.float64()),
        ("total_bytes", pa.float64()),
        ("usable_bytes", pa.float64()),
        ("fill_bytes_per_s", pa.float64()),
        ("runway_days", pa.float64()),
    ]
)


class LogDir:
    """One directory's latest total and usable bytes and its thinned (time, usable bytes) history."""

    def __init__(self) -> None:
        self.t_s, self.total, self.usable = -math.inf, math.nan, math.nan
        self.points: deque[tuple[float, float]] = deque()

    def fill_rate(self, min_span_s: float) -> float | None:
        """Bytes per second the usable space shrinks, from the oldest point to the latest reading; None
        before ``min_span_s`` of history."""
        if not self.points or self.t_s - self.points[0][0] < min_span_s:
            return None
        t0, usable0 = self.points[0]
        return (usable0 - self.usable) / (self.t_s - t0)


class DiskAnalysis:
    """Per log directory: free share and bytes, fill rate and runway."""

    table = "disks"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset({names.LOG_DIR_TOTAL_BYTES, names.LOG_DIR_USABLE_BYTES})
    settings = ("stale_s",)
    chunked: frozenset[str] = frozenset()

    def __init__(
        self,
        stale_s: float = 900.0,
        window_s: float = DAY_S,
        step_s: float = 900.0,
        min_span_s: float = 3600.0,
    ):
        self.stale_s = stale_s
        self.window_s, self.step_s, self.min_span_s = window_s, step_s, min_span_s
        self.dirs: dict[tuple[str, str, str], LogDir] = {}  # (cluster, broker, log_dir) ->
        self.now_s = -math.inf

    def observe(self, observations: Iterable[Observation]) -> None:
        for o in sorted(observations, key=lambda o: o.t_s):
            broker, path = o.labels.get("broker"), o.labels.get("log_dir")
            if broker is None or path is None or o.value is None or not math.isfinite(o.value):
                continue
            log_dir = self.dirs.setdefault((o.cluster, broker, path), LogDir())
            if o.t_s < log_dir.t_s:
                continue  # a replayed older scrape
            log_dir.t_s = o.t_s
            if o.name == names.LOG_DIR_TOTAL_BYTES:
                log_dir.total = o.value
            else:
                log_dir.usable = o.value
                points = log_dir.points
                if not points or o.t_s - points[-1][0] >= self.step_s:
                    points.append((o.t_s, o.value))
                while points and points[0][0] < o.t_s - self.window_s:
                    points.popleft()
            self.now_s = max(self.now_s, o.t_s)
        since = self.now_s - self.stale_s
        self.dirs = {key: d for key, d in self.dirs.items() if d.t_s >= since}

    def evaluate(self) -> Evaluation:
        history, metrics = [], []
        for (cluster, broker, path), log_dir in sorted(self.dirs.items()):
            labels = (cluster, broker, path)
            total, usable = log_dir.total, log_dir.usable
            rate = log_dir.fill_rate(self.min_span_s)
            runway = None if rate is None else (usable / rate / DAY_S if rate > 0 else math.inf)
            figures = {
                "kobs_log_dir_free_bytes": usable,
                "kobs_log_dir_free_ratio": usable / total if total > 0 else math.nan,
                "kobs_log_dir_fill_bytes_per_second": rate,
                "kobs_log_dir_runway_days": runway,
            }
            metrics += [
                Derived(name, labels, value)
                for name, value in figures.items()
                if value is not None and not math.isnan(value)
            ]
            history.append(
                {
                    "cluster": cluster,
                    "broker": broker,
                    "log_dir": path,
                    "at_s": log_dir.t_s,
                    "total_bytes": total,
                    "usable_bytes": usable,
                    "fill_bytes_per_s": rate,
                    "runway_days": runway,
                }
            )
        return Evaluation(history, metrics)

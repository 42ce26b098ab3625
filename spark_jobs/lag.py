"""Consumer lag on Spark: offset samples of each micro-batch → ``LagTracker`` → exporter and Parquet history.

Thin plumbing around the pure tracker (``spark_jobs.lag_tracker``). Each micro-batch keeps only the three
offset metrics and collects them to the driver, where the tracker holds its bounded windows. That is one
row per partition (end and start offsets) and per group partition (committed offset) per scrape of the
offsets collector: thousands of small rows per batch for large clusters, fine to collect. The tracker
lives in the driver's memory: after a restart its windows refill from the batches that follow.

Sinks: a Prometheus collector (names, labels and help from ``common.metrics``, the code twin of
``docs/metrics.md``) and Parquet history under ``<history_dir>/lag/batch_id=<id>/``, overwritten per batch
id so a batch replayed after a crash leaves its rows once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from common.metrics import DERIVED_METRICS, GROUP_STATUS
from spark_jobs.lag_tracker import INPUT_NAMES, GroupLag, LagReport, LagTracker, OffsetSample, PartitionLag

HISTORY_COLUMNS = (
    "cluster string, group string, topic string, partition string, at_s double, committed long, "
    "end_offset long, lag_messages long, lag_seconds double, lost_messages long, status string, "
    "consume_per_s double, produce_per_s double"
)
PARTITION_GAUGES: dict[str, Callable[[PartitionLag], float]] = {
    "kobs_consumergroup_lag_messages": lambda p: p.lag_messages,
    "kobs_consumergroup_lag_seconds": lambda p: p.lag_seconds,
    "kobs_consumergroup_partition_status": lambda p: GROUP_STATUS[p.status],
}
GROUP_GAUGES: dict[str, Callable[[GroupLag], float | None]] = {
    "kobs_consumergroup_status": lambda g: GROUP_STATUS[g.status],
    "kobs_consumergroup_catchup_eta_seconds": lambda g: g.catchup_eta_s,  # None (unknown): no sample
}
METRICS = {m.name: m for m in DERIVED_METRICS}


class LagJob:
    """The lag analysis of one streaming query: call :meth:`process` from ``foreachBatch``."""

    def __init__(self, history_dir: str | Path, window: int = 10):
        self.tracker = LagTracker(window)
        self.report = LagReport()
        self.history_dir = Path(history_dir) / "lag"

    def process(self, samples: DataFrame, batch_id: int) -> None:
        """Update the tracker with the batch's offset samples (``samples`` rows of the Kafka source)."""
        offsets = samples.where(F.col("name").isin(*INPUT_NAMES)).select(
            "name",
            "cluster",
            *(F.col("labels")[label].alias(label) for label in ("group", "topic", "partition")),
            (F.unix_micros("ts") / 1e6).alias("t_s"),
            "value",
        )
        rows = offsets.collect()
        if not rows:
            return
        for row in rows:
            self.tracker.observe(OffsetSample(*row))
        self.report = self.tracker.evaluate()
        history = [asdict(p) for p in self.report.partitions]
        path = str(self.history_dir / f"batch_id={batch_id}")
        samples.sparkSession.createDataFrame(history, HISTORY_COLUMNS).write.mode("overwrite").parquet(path)


class LagCollector(Collector):
    """The latest report of a :class:`LagJob` as Prometheus gauges."""

    def __init__(self, job: LagJob):
        self.job = job

    def collect(self) -> Iterator[GaugeMetricFamily]:
        report = self.job.report
        yield from _gauges(PARTITION_GAUGES, report.partitions)
        yield from _gauges(GROUP_GAUGES, report.groups)


def _gauges(gauges: dict[str, Callable], items: tuple) -> Iterator[GaugeMetricFamily]:
    for name, value_of in gauges.items():
        metric = METRICS[name]
        family = GaugeMetricFamily(name, metric.help, labels=metric.labels)
        for item in items:
            value = value_of(item)
            if value is not None:
                family.add_metric([getattr(item, label) for label in metric.labels], value)
        yield family

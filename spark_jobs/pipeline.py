"""The Spark side of the analyses: each micro-batch's rows → every analysis → history, snapshot, exporter.

``Pipeline.process`` runs in ``foreachBatch``. It keeps only the rows some analysis reads (by ``name``) and
the dead letters, collects them to the driver in one pass over the source as one Arrow table, and feeds each
analysis the observations it asked for. The analyses hold bounded per-partition or per-broker state, so the
driver holds thousands to a few hundred thousand small rows per batch; the decoding and filtering before that
run on the executors, and nothing is cached: each batch reads its Kafka records once.

After each batch the pipeline writes every analysis's history rows as Parquet under
``<history_dir>/<table>/batch_id=<id>/`` (replaced as a whole, so a replayed batch leaves its rows once)
and snapshots all analyses (``spark_jobs.snapshots``): after a crash and restart the replayed batch starts
from exactly the state the first attempt started from, so derived numbers are identical.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from common.metrics import DERIVED_METRICS
from spark_jobs.analysis import Analysis, Evaluation, Observation
from spark_jobs.snapshots import Snapshots

log = logging.getLogger(__name__)
METRICS = {m.name: m for m in DERIVED_METRICS}
OBSERVATION_COLUMNS = Observation._fields
DEAD_LETTER_COLUMNS = ["dead_letter", "topic", "partition", "offset", "raw"]


class Pipeline:
    """The analyses of one streaming query and their sinks: call :meth:`process` from ``foreachBatch``."""

    def __init__(self, make_analyses: Callable[[], list[Analysis]], history_dir: Path, state_dir: Path):
        self.make_analyses = make_analyses
        self.analyses = make_analyses()
        self.history_dir = Path(history_dir)
        self.snapshots = Snapshots(state_dir)
        self.evaluations: dict[str, Evaluation] = {}
        self.last_batch_id: int | None = None

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset().union(*(analysis.inputs for analysis in self.analyses))

    def process(self, rows: DataFrame, batch_id: int) -> pa.Table:
        """Feed one micro-batch (rows of the Kafka source, samples and events) to every analysis.

        Returns the batch's dead letters, collected in the same single pass over the source.
        """
        table = collect(rows, self.inputs)
        dead = pc.is_valid(table["dead_letter"])
        self.feed(observations(table.filter(pc.invert(dead))), batch_id)
        return table.filter(dead).select(DEAD_LETTER_COLUMNS)

    def feed(self, batch: Iterable[Observation], batch_id: int) -> None:
        """Feed one micro-batch's observations to the analyses that read them; write history, snapshot."""
        self._resume(batch_id)
        by_name: dict[str, list[Observation]] = defaultdict(list)
        for observation in batch:
            by_name[observation.name].append(observation)
        for analysis in self.analyses:
            batch = [o for name in analysis.inputs for o in by_name.get(name, ())]
            if not batch:
                continue
            analysis.observe(batch)
            evaluation = analysis.evaluate()
            write_history(self.history_dir / analysis.table, batch_id, evaluation.history, analysis)
            self.evaluations[analysis.table] = evaluation
        self.snapshots.save(batch_id, (self.analyses, self.evaluations))
        self.last_batch_id = batch_id

    def _resume(self, batch_id: int) -> None:
        """Make the state the one after ``batch_id - 1``, from a snapshot unless it already is."""
        if self.last_batch_id == batch_id - 1:
            return
        snapshot = self.snapshots.before(batch_id)
        if snapshot is None:
            if batch_id > 0:
                log.warning("no state snapshot before batch %d: the analyses start empty", batch_id)
            self.analyses, self.evaluations = self.make_analyses(), {}
            return
        taken_after, (self.analyses, self.evaluations) = snapshot
        if taken_after != batch_id - 1:
            log.warning("resuming batch %d from the state after batch %d", batch_id, taken_after)


def collect(rows: DataFrame, names: frozenset[str]) -> pa.Table:
    """The rows named in ``names`` and the dead letters, filtered on the executors, as one Arrow table."""
    wanted = F.col("dead_letter").isNotNull() | F.col("name").isin(*sorted(names))
    observed = (
        "name",
        "cluster",
        "source",
        "labels",
        (F.unix_micros("ts") / 1e6).alias("t_s"),
        "value",
        "event",
    )
    return rows.where(wanted).select(*observed, *DEAD_LETTER_COLUMNS).toArrow()


def observations(table: pa.Table) -> Iterator[Observation]:
    """The samples and events of a :func:`collect` table (without its dead letters)."""
    columns = [table.column(name).to_pylist() for name in OBSERVATION_COLUMNS]
    for name, cluster, source, labels, t_s, value, event in zip(*columns, strict=True):
        yield Observation(name, cluster, source, dict(labels or ()), t_s, value, event and json.loads(event))


def write_history(table_dir: Path, batch_id: int, rows: list[dict], analysis: Analysis) -> None:
    """Replace ``batch_id=<id>`` of the table with ``rows`` (nothing written when there are none)."""
    if not rows:
        return
    final = table_dir / f"batch_id={batch_id}"
    staging = table_dir / f".batch_id={batch_id}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=analysis.history_schema), staging / "part-0.parquet")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)


class DerivedCollector(Collector):
    """The latest evaluation of every analysis of a :class:`Pipeline` as Prometheus metric families."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for evaluation in list(self.pipeline.evaluations.values()):
            for name, labels, value in evaluation.metrics:
                if name not in families:
                    metric = METRICS[name]
                    kind = CounterMetricFamily if metric.type == "counter" else GaugeMetricFamily
                    families[name] = kind(name, metric.help, labels=metric.labels)
                families[name].add_metric(labels, value)
        yield from families.values()

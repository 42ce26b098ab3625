"""The Spark side of the analyses: each micro-batch's rows → every analysis → history, snapshot, exporter.

``Pipeline.process`` runs in ``foreachBatch``. It keeps only the rows some analysis reads (by ``name``), the
records' own rows and the dead letters, collects them to the driver in one pass over the source as one
Arrow table, counts records, dead letters and each source's newest time from it (the query's own health),
and feeds each analysis the observations it asked for. The analyses hold bounded per-partition or
per-broker state, so the driver holds thousands to a few hundred thousand small rows per batch; the decoding
and filtering before that run on the executors, and nothing is cached: each batch reads its Kafka records
once.

After each batch the pipeline writes every analysis's history rows as Parquet under
``<history_dir>/<table>/batch_id=<id>/`` (replaced as a whole, so a replayed batch leaves its rows once)
and snapshots all analyses with the query's own counters (``spark_jobs.snapshots``): after a crash and
restart the replayed batch starts from exactly the state the first attempt started from, so derived numbers
and counts are identical. An analysis no batch fed since the last snapshot goes into the next one as the
bytes already pickled: small batches that feed few analyses do not pay for walking the others' state. A
new process starts from the newest snapshot, so the exporter serves the last known state from the start
instead of nothing until the first batch.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from operator import sub
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from common.metrics import DERIVED_METRICS
from spark_jobs.analysis import Analysis, Derived, Observation, reconfigure
from spark_jobs.exposition import ExpositionPolicy, expose
from spark_jobs.pipeline_health import BatchStats, PipelineHealth
from spark_jobs.records import RECORD
from spark_jobs.snapshots import STATE_MODULES, Pickled, Snapshots

log = logging.getLogger(__name__)
METRICS = {m.name: m for m in DERIVED_METRICS}
DEAD_LETTER_COLUMNS = ["dead_letter", "topic", "partition", "offset", "raw"]


class Pipeline:
    """The analyses of one streaming query and their sinks: call :meth:`process` from ``foreachBatch``."""

    def __init__(
        self,
        make_analyses: Callable[[], list[Analysis]],
        history_dir: Path,
        state_dir: Path,
        query: str = "stream",
    ):
        self.make_analyses = make_analyses
        self.query = query
        self.history_dir = Path(history_dir)
        modules = STATE_MODULES | {type(analysis).__module__ for analysis in make_analyses()}
        self.snapshots = Snapshots(state_dir, modules=modules)
        self.last_batch_id: int | None = None
        self._restore(self.snapshots.latest())

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset().union(*(analysis.inputs for analysis in self.analyses))

    def process(self, rows: DataFrame, batch_id: int) -> pa.Table:
        """Feed one micro-batch (rows of the Kafka source) to every analysis.

        Returns the batch's dead letters, collected in the same single pass over the source.
        """
        started_s = time.time()
        table = collect(rows, self.inputs)
        samples_and_events = table.filter(pc.not_equal(table["name"], RECORD))  # null name: a dead letter
        self.feed(observations(samples_and_events), batch_stats(table), batch_id, started_s)
        return table.filter(pc.is_valid(table["dead_letter"])).select(DEAD_LETTER_COLUMNS)

    def feed(self, batch: Iterable[Observation], stats: BatchStats, batch_id: int, started_s: float) -> None:
        """Feed one micro-batch's observations to the analyses that read them; write history, count the
        batch (``stats``; it started at ``started_s``, wall clock), snapshot."""
        self._resume(batch_id)
        by_name: dict[str, list[Observation]] = defaultdict(list)
        for observation in batch:
            by_name[observation.name].append(observation)
        for analysis in self.analyses:
            batch = [o for name in analysis.inputs for o in by_name.get(name, ())]
            if not batch:
                continue
            self._pickled.pop(analysis.table, None)
            analysis.observe(batch)
            evaluation = analysis.evaluate()
            write_history(self.history_dir / analysis.table, batch_id, evaluation.history, analysis)
            self.evaluations[analysis.table] = evaluation
        self.health.record(stats, started_s, time.time())
        self.snapshots.save(batch_id, self._state())
        self.last_batch_id = batch_id

    def _state(self) -> tuple[list, dict, PipelineHealth]:
        """What a snapshot holds; analyses no batch fed since the last one go as their earlier pickles."""
        for analysis in self.analyses:
            if analysis.table not in self._pickled:
                evaluation = self.evaluations.get(analysis.table)
                self._pickled[analysis.table] = (Pickled(analysis), evaluation and Pickled(evaluation))
        pickled = [self._pickled[analysis.table] for analysis in self.analyses]
        evaluations = {a.table: e for a, (_, e) in zip(self.analyses, pickled, strict=True) if e is not None}
        return [a for a, _ in pickled], evaluations, self.health

    def _resume(self, batch_id: int) -> None:
        """Make the state the one after ``batch_id - 1``, from a snapshot unless it already is."""
        if self.last_batch_id == batch_id - 1:
            return
        snapshot = self.snapshots.before(batch_id)
        if snapshot is None and batch_id > 0:
            log.warning("no state snapshot before batch %d: the analyses start empty", batch_id)
        elif snapshot is not None and snapshot[0] != batch_id - 1:
            log.warning("resuming batch %d from the state after batch %d", batch_id, snapshot[0])
        self._restore(snapshot)

    def _restore(self, snapshot: tuple[int, tuple] | None) -> None:
        """Take the state of ``snapshot`` (``Snapshots.before``/``latest``), or start empty for None.

        Analyses are matched by table: one the snapshot lacks (added since) starts empty, one the query no
        longer runs is dropped with its metrics. A restored analysis takes its settings from the fresh one
        (the current configuration wins); if they changed, its metrics are evaluated again under them.
        """
        self.analyses, self.evaluations = self.make_analyses(), {}
        self._pickled: dict[str, tuple[Pickled, Pickled | None]] = {}  # table -> analysis, evaluation
        self.health, self.last_batch_id = PipelineHealth(self.query), None
        if snapshot is not None:
            self.last_batch_id, (analyses, evaluations, self.health) = snapshot
            tables = {analysis.table for analysis in self.analyses}
            self.evaluations = {table: e for table, e in evaluations.items() if table in tables}
            saved = {analysis.table: analysis for analysis in analyses}
            self.analyses = [self._reconfigured(saved.get(fresh.table), fresh) for fresh in self.analyses]

    def _reconfigured(self, restored: Analysis | None, fresh: Analysis) -> Analysis:
        if restored is None:
            return fresh
        if reconfigure(restored, fresh) and restored.table in self.evaluations:
            self.evaluations[restored.table] = restored.evaluate()
        return restored


def batch_stats(table: pa.Table) -> BatchStats:
    """Records, dead letters and the newest time of each collector source in a :func:`collect` table."""
    dead_letters = pc.sum(pc.is_valid(table["dead_letter"])).as_py() or 0
    own = table.filter(pc.equal(table["name"], RECORD))  # one row per valid record, at its newest time
    newest = own.group_by(["cluster", "source"]).aggregate([("t_s", "max")])
    columns = (newest.column(name).to_pylist() for name in ("cluster", "source", "t_s_max"))
    return BatchStats(
        own.num_rows + dead_letters,
        dead_letters,
        {(cluster, source): t_s for cluster, source, t_s in zip(*columns, strict=True)},
    )


def collect(rows: DataFrame, names: frozenset[str]) -> pa.Table:
    """The rows named in ``names``, the records' own rows and the dead letters, filtered on the executors,
    as one Arrow table."""
    wanted = F.col("dead_letter").isNotNull() | F.col("name").isin(RECORD, *sorted(names))
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
    """The samples and events of a :func:`collect` table (without its dead letters).

    The labels maps are built from the flat keys and values of the map column (a third of the cost of
    converting it row by row)."""
    labels = table.column("labels").combine_chunks()
    offsets = labels.offsets.to_pylist()
    pairs = zip(labels.keys.to_pylist(), labels.items.to_pylist(), strict=True)
    pairs = islice(pairs, offsets[0], None)  # a sliced array's offsets start into its children
    sizes = list(map(sub, offsets[1:], offsets))
    names = ("name", "cluster", "source", "t_s", "value", "event")
    rows = zip(*(table.column(name).to_pylist() for name in names), strict=True)
    for (name, cluster, source, t_s, value, event), size, valid in zip(
        rows, sizes, labels.is_valid().to_pylist(), strict=True
    ):
        row_labels = dict(islice(pairs, size))  # taken even for a null map, to stay aligned
        yield Observation(
            name, cluster, source, row_labels if valid else {}, t_s, value, event and json.loads(event)
        )


def write_history(table_dir: Path, batch_id: int, rows: list[dict], analysis: Analysis) -> None:
    """Replace ``batch_id=<id>`` of the table with ``rows`` (nothing written when there are none)."""
    if not rows:
        return
    final = table_dir / f"batch_id={batch_id}"
    staging = table_dir / f".batch_id={batch_id}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=analysis.history_schema), staging / "part-0.parquet")
    (staging / "_SUCCESS").touch()  # Spark's committed-write marker, which app.history waits for
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)


class DerivedCollector(Collector):
    """What a :class:`Pipeline` serves: its analyses' latest evaluations, marked and bounded by ``policy``
    (``spark_jobs.exposition``), then its own health, which the bounds never cut."""

    def __init__(self, pipeline: Pipeline, policy: ExpositionPolicy | None = None):
        self.pipeline = pipeline
        self.policy = policy or ExpositionPolicy()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        pipeline = self.pipeline
        derived = [d for evaluation in list(pipeline.evaluations.values()) for d in evaluation.metrics]
        shown, dropped = expose(derived, self.policy)
        yield from metric_families([*shown, *pipeline.health.metrics(dropped)])


def metric_families(derived: list[Derived]) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Derived values grouped into Prometheus families with their type, help and labels from the catalogue."""
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
    for name, labels, value in derived:
        if name not in families:
            metric = METRICS[name]
            kind = CounterMetricFamily if metric.type == "counter" else GaugeMetricFamily
            families[name] = kind(name, metric.help, labels=metric.labels)
        families[name].add_metric(labels, value)
    yield from families.values()

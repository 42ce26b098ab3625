"""The driver's side of the analyses: each micro-batch's evaluations → history, exporter, snapshot.

The analyses run per ``(table, cluster)`` key (``spark_jobs.keyed``). In the streaming query each key is
advanced on the executors with its state in Spark's state store (``spark_jobs.stateful``) and
:meth:`Pipeline.record` takes the evaluations the driver collected; the one-process reference (the
benchmark's baseline and the tests' oracle) advances the same keys in this process with :meth:`Pipeline.feed`.

After each batch the pipeline writes every table's history rows as Parquet under
``<history_dir>/<table>/batch_id=<id>/`` (replaced as a whole, so a replayed batch leaves its rows once),
keeps each key's latest evaluation for the exporter, and snapshots them with the query's own counters
(``spark_jobs.snapshots``), and with the keys' states when this process holds them: after a crash and
restart the replayed batch starts from exactly what the first attempt started from, so derived numbers and
counts are identical, and the exporter serves the last known state from the start instead of nothing
until the first batch. A key no batch fed since the last snapshot goes into the next one as the bytes
already pickled.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from common.metrics import DERIVED_METRICS
from spark_jobs.analysis import Analysis, Derived, Evaluation, Observation
from spark_jobs.exposition import ExpositionPolicy, expose
from spark_jobs.keyed import Key, advance, by_key, fresh_analysis, state_modules, tables_by_name
from spark_jobs.pipeline_health import BatchStats, PipelineHealth
from spark_jobs.snapshots import Pickled, Snapshots

log = logging.getLogger(__name__)
METRICS = {m.name: m for m in DERIVED_METRICS}


class Pipeline:
    """The analyses' results of one streaming query and their sinks."""

    def __init__(
        self,
        make_analyses: Callable[[], list[Analysis]],
        history_dir: Path,
        state_dir: Path,
        query: str = "stream",
        history_base: int = 0,
    ):
        self.make_analyses = make_analyses
        self.query = query
        self.history_dir = Path(history_dir)
        self.history_base = history_base  # the history's batch number of Spark's batch 0 (a new checkpoint's)
        fresh = make_analyses()
        self.tables = tables_by_name(fresh)
        self.schemas = {analysis.table: analysis.history_schema for analysis in fresh}
        self.modules = state_modules(make_analyses)
        self.snapshots = Snapshots(state_dir, modules=self.modules)
        self.changes = 0  # batches recorded and states restored: what the exporter serves changed
        self._restore(self.snapshots.latest())

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.tables)

    def latest_history(self, table: str) -> dict[str | None, list[dict]]:
        """Cluster -> the history rows of ``table``'s latest evaluation (what the Burrow API answers from)."""
        return {key[1]: e.history for key, e in list(self.evaluations.items()) if key[0] == table}

    def feed(self, batch: Iterable[Observation], stats: BatchStats, batch_id: int, started_s: float) -> None:
        """The one-process path: advance every key ``batch`` feeds in this process, then :meth:`record`."""
        self._resume(batch_id)
        results = []
        for key, observations in by_key(batch, self.tables).items():
            fresh = fresh_analysis(self.make_analyses, key[0])
            self.states[key], evaluation = advance(fresh, self.states.get(key), observations, self.modules)
            results.append((key, evaluation))
        self._record(results, stats, batch_id, started_s)

    def record(
        self,
        results: list[tuple[Key, Evaluation]],
        stats: BatchStats,
        batch_id: int,
        started_s: float,
        pickles: Mapping[Key, Pickled] | None = None,
    ) -> None:
        """Take one micro-batch's evaluations (one per key it fed), and those already pickled (the snapshot
        takes them as they are): write history, serve them, count the batch (``stats``; it started at
        ``started_s``, wall clock), snapshot."""
        self._resume(batch_id)
        self._record(results, stats, batch_id, started_s, pickles)

    def _record(
        self,
        results: list[tuple[Key, Evaluation]],
        stats: BatchStats,
        batch_id: int,
        started_s: float,
        pickles: Mapping[Key, Pickled] | None = None,
    ) -> None:
        history: dict[str, list[dict]] = defaultdict(list)
        for key, evaluation in sorted(results, key=lambda result: str(result[0])):
            self.evaluations[key] = evaluation
            self._pickled.pop(key, None)
            history[key[0]] += evaluation.history
        self._pickled.update(pickles or {})
        for table, rows in history.items():
            write_history(self.history_dir / table, self.history_base + batch_id, rows, self.schemas[table])
        self.health.record(stats, started_s, time.time())
        self.snapshots.save(batch_id, self._state())
        self.last_batch_id = batch_id
        self.changes += 1

    def _state(self) -> tuple[dict, dict, PipelineHealth]:
        """What a snapshot holds; evaluations no batch changed since the last one go as their pickles."""
        for key, evaluation in self.evaluations.items():
            if key not in self._pickled:
                self._pickled[key] = Pickled.of(evaluation)
        return self.states, dict(self._pickled), self.health

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

        Keys are matched by table: one of an analysis the query no longer runs is dropped with its metrics.
        A restored key takes its settings from the current configuration when a batch next feeds it.
        """
        self.states: dict[Key, bytes] = {}  # filled by the one-process path only: Spark keeps its own
        self.evaluations: dict[Key, Evaluation] = {}
        self._pickled: dict[Key, Pickled] = {}
        self.health, self.last_batch_id = PipelineHealth(self.query), None
        self.changes += 1
        if snapshot is not None:
            self.last_batch_id, (states, evaluations, self.health) = snapshot
            self.states = {key: state for key, state in states.items() if key[0] in self.schemas}
            self.evaluations = {key: e for key, e in evaluations.items() if key[0] in self.schemas}


def write_history(table_dir: Path, batch_id: int, rows: list[dict], schema: pa.Schema) -> None:
    """Replace ``batch_id=<id>`` of the table with ``rows`` (nothing written when there are none)."""
    if not rows:
        return
    final = table_dir / f"batch_id={batch_id}"
    staging = table_dir / f".batch_id={batch_id}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), staging / "part-0.parquet")
    (staging / "_SUCCESS").touch()  # Spark's committed-write marker, which app.history waits for
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)


class DerivedCollector(Collector):
    """What a :class:`Pipeline` serves: its analyses' latest evaluations, marked and bounded by ``policy``
    (``spark_jobs.exposition``), then its own health, which the bounds never cut."""

    def __init__(self, pipeline: Pipeline, policy: ExpositionPolicy | None = None):
        self.pipeline = pipeline
        self.policy = policy or ExpositionPolicy()

    def version(self) -> tuple[int, int]:
        """Changes whenever what :meth:`collect` yields may: a batch recorded or state restored, a restart."""
        return self.pipeline.changes, self.pipeline.health.query_restarts

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        pipeline = self.pipeline
        latest = sorted(list(pipeline.evaluations.items()), key=lambda item: str(item[0]))
        derived = [d for _, evaluation in latest for d in evaluation.metrics]
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

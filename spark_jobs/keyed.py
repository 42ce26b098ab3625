"""The analyses' unit of state and of parallel work: one analysis of one cluster, keyed ``(table, cluster)``.

Pure (no Spark). Every analysis keeps its state per cluster and computes every metric within one cluster, so
an analysis fed one cluster's observations gives exactly that cluster's part of the answers of an analysis
fed them all: ``(table, cluster)`` is the finest key that is exact for all six analyses. The streaming
query advances each key on the executors, holding its state in Spark's state store
(``spark_jobs.stateful``); the one-process reference (``Pipeline.feed``) advances the same keys with the
same function, so the two paths give the same answers.

State travels as compressed pickles and is read back with the snapshots' restricted unpickler: a state store
or snapshot file can only ever build the analyses' own classes.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable

from spark_jobs.analysis import Analysis, Evaluation, Observation, reconfigure
from spark_jobs.snapshots import STATE_MODULES, dump_state, load_state

Key = tuple[str, str | None]  # (analysis table, cluster)
PIPELINE = "_pipeline"  # the key table of the records' own rows and the dead letters: the query's health


def tables_by_name(analyses: Iterable[Analysis]) -> dict[str, tuple[str, ...]]:
    """Sample or event name -> the tables of the analyses that read it."""
    tables: dict[str, list[str]] = defaultdict(list)
    for analysis in analyses:
        for name in analysis.inputs:
            tables[name].append(analysis.table)
    return {name: tuple(found) for name, found in tables.items()}


def by_key(observations: Iterable[Observation], tables: dict[str, tuple[str, ...]]) -> dict[Key, list]:
    """Observations grouped by the keys that read them, each key's in the order given."""
    keyed: dict[Key, list[Observation]] = defaultdict(list)
    for observation in observations:
        for table in tables.get(observation.name, ()):
            keyed[table, observation.cluster].append(observation)
    return keyed


def advance(
    fresh: Analysis,
    state: bytes | None,
    observations: Collection[Observation],
    modules: Collection[str] = STATE_MODULES,
) -> tuple[bytes, Evaluation]:
    """Feed one key's observations of a micro-batch to its analysis, restored from ``state`` (None: new) with
    the settings of ``fresh`` (the current configuration); returns the new state and the evaluation."""
    analysis = fresh
    if state is not None:
        analysis = load_state(state, modules)
        reconfigure(analysis, fresh)
    analysis.observe(observations)
    return dump_state(analysis), analysis.evaluate()


def fresh_analysis(make_analyses: Callable[[], list[Analysis]], table: str) -> Analysis:
    """A new analysis of ``table``, with the current configuration's settings."""
    (fresh,) = (analysis for analysis in make_analyses() if analysis.table == table)
    return fresh


def state_modules(make_analyses: Callable[[], list[Analysis]]) -> frozenset[str]:
    """The modules whose classes the state of ``make_analyses``'s analyses may hold."""
    return STATE_MODULES | {type(analysis).__module__ for analysis in make_analyses()}


GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Run Python's cyclic collector less often in this process (once per process; the executors' Python
    workers call it before their first step): every batch allocates hundreds of thousands of short-lived
    observations, and each full collection walks the analyses' whole long-lived state (measured: 17% of
    the driver's CPU with the default thresholds when the analyses ran there)."""
    if gc.get_threshold() != GC_THRESHOLDS:
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)

"""The analyses on the executors: record parts → one stateful step per ``(table, cluster)`` key.

The decoded rows (``kafka_source.SCHEMA``) are already keyed: each is one record's part for one analysis
table, or a record's own row or dead letter for the query's health key (``keyed.PIPELINE``). Spark shuffles
them by key (with a ``slot`` that chooses the key's state partition: ``spark_jobs.state_placement``) and
calls :func:`stepper`'s function once per key and micro-batch in the executors' Python workers
(``applyInPandasWithState``): it restores the key's analysis from Spark's state store (RocksDB, in
the query's checkpoint), feeds it the key's observations in the order they were read, stores the new state
and returns the evaluation. The driver collects one small row per key that had data (:func:`outcomes`):
history rows, derived metric values, batch counts and dead letters.

A replayed micro-batch (after a crash) starts from the state store's version before it, as any Spark
stateful query does, so its answers are those of the first attempt.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Collection, Iterator

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.analysis import Analysis, Evaluation, Observation, Samples
from spark_jobs.keyed import PIPELINE, Key, advance, fresh_analysis, state_modules, tune_gc
from spark_jobs.pipeline_health import BatchStats
from spark_jobs.records import observations as part_observations
from spark_jobs.snapshots import Pickled, decompressed, dump_state
from spark_jobs.state_placement import SLOT

OUTPUT = "table string, cluster string, payload binary"  # an Evaluation or health's part, pickled, compressed
STATE = "analysis binary"  # the key's analysis (keyed.advance: pickled and compressed)
ORDER = ["partition", "offset"]  # the order the records were read in (the shuffle does not keep it)
DEAD_LETTER_COLUMNS = ["dead_letter", "topic", "partition", "offset", "raw"]


def analyzed(
    decoded: DataFrame, make_analyses: Callable[[], list[Analysis]], slot: Column | None = None
) -> DataFrame:
    """The outcome rows (:data:`OUTPUT`) of each key with data in a micro-batch of ``decoded`` rows. The
    state is keyed ``(table, cluster, slot)`` with a ``slot`` column (``spark_jobs.state_placement``),
    else ``(table, cluster)``."""
    placed = [] if slot is None else [slot]
    rows = decoded.select(
        "table", "cluster", *placed, "source", (F.unix_micros("ts") / 1e6).alias("t_s"), *ORDER, "observed",
        "dead_letter", "topic", "raw",
    )  # fmt: skip
    keys = ["table", "cluster"] + ([SLOT] if placed else [])
    return rows.groupBy(*keys).applyInPandasWithState(
        stepper(make_analyses), OUTPUT, STATE, "append", "NoTimeout"
    )


def stepper(make_analyses: Callable[[], list[Analysis]]) -> Callable:
    """The function ``applyInPandasWithState`` calls per key: advance its analysis, or count its records."""
    modules = state_modules(make_analyses)

    def step(key: tuple, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        tune_gc()
        table, cluster = key[:2]
        rows = pd.concat(list(frames), ignore_index=True).sort_values(ORDER, kind="stable")
        if table == PIPELINE:
            payload = (health_part(rows), dead_letters(rows))
        else:
            stored = bytes(state.get[0]) if state.exists else None
            fresh = fresh_analysis(make_analyses, table)
            new_state, payload = advance(fresh, stored, list(observations(rows, fresh.chunked)), modules)
            state.update((new_state,))
        yield pd.DataFrame({"table": [table], "cluster": [cluster], "payload": [dump_state(payload)]})

    return step


def observations(rows: pd.DataFrame, chunked: Collection[str] = ()) -> Iterator[Observation | Samples]:
    """The samples and events of a key's record parts, in row order; those named in ``chunked`` as
    :class:`Samples`."""
    for cluster, source, observed in zip(rows["cluster"], rows["source"], rows["observed"], strict=True):
        yield from part_observations(cluster, source, observed, chunked)


def health_part(rows: pd.DataFrame) -> BatchStats:
    """The records, dead letters and each source's newest time among one cluster's own rows."""
    newest = rows[rows["dead_letter"].isna()].groupby(["cluster", "source"])["t_s"].max()
    return BatchStats(len(rows), int(rows["dead_letter"].notna().sum()), newest.to_dict())


def dead_letters(rows: pd.DataFrame) -> pa.Table | None:
    dead = rows[rows["dead_letter"].notna()]
    return pa.Table.from_pandas(dead[DEAD_LETTER_COLUMNS], preserve_index=False) if len(dead) else None


def outcomes(
    rows: pa.Table,
) -> tuple[list[tuple[Key, Evaluation]], dict[Key, Pickled], BatchStats, pa.Table | None]:
    """A micro-batch's outcome rows, collected as Arrow (``DataFrame.toArrow``) → each key's evaluation and
    its bytes as they came (for the driver's snapshot), the batch's counts (all clusters together) and its
    dead letters (None: none)."""
    results, pickles, parts, dead = [], {}, [], []
    columns = (rows.column(name).to_pylist() for name in ("table", "cluster", "payload"))
    for table, cluster, pickled in zip(*columns, strict=True):
        payload = pickle.loads(decompressed(pickled))
        if table == PIPELINE:
            parts.append(payload[0])
            if payload[1] is not None:
                dead.append(payload[1])
        else:
            results.append(((table, cluster), payload))
            pickles[table, cluster] = Pickled(pickled)
    newest: dict[tuple[str, str], float] = {}
    for part in parts:
        newest |= part.newest_s
    stats = BatchStats(sum(p.records for p in parts), sum(p.dead_letters for p in parts), newest)
    return results, pickles, stats, pa.concat_tables(dead) if dead else None

"""Where Spark keeps each key's state: the analyses spread over the state partitions by cost
(``spark_jobs.state_placement``), checked in Spark's own stateful step and checkpoints (local Spark)."""

from __future__ import annotations

import itertools
import zlib

import pandas as pd
import pytest
from pyspark import TaskContext

from spark_jobs.state_placement import LAYOUT, TABLE_WEIGHTS, Layout, deal, layout, slot

TABLES = list(TABLE_WEIGHTS)
CLUSTERS = ["bench", "prod-eu", "kafka-0", "c"]  # configured
UNLISTED = "not-configured"  # a cluster a record names that no configuration does
KEY_SCHEMA = "table string, cluster string"


@pytest.mark.parametrize("partitions", [2, 3, 4])
def test_the_heaviest_partition_carries_no_more_than_the_best_split_of_the_tables(partitions):
    dealt = deal(TABLES, partitions)
    loads = [sum(TABLE_WEIGHTS[t] for t in TABLES if dealt[t] == p) for p in range(partitions)]
    best = min(
        max(
            sum(TABLE_WEIGHTS[t] for t, p in zip(TABLES, split, strict=True) if p == part)
            for part in range(partitions)
        )
        for split in itertools.product(range(partitions), repeat=len(TABLES))
    )
    assert sorted(dealt) == sorted(TABLES)
    assert max(loads) == best


def test_with_a_partition_for_each_table_every_table_has_its_own():
    assert sorted(deal(TABLES, len(TABLES)).values()) == list(range(len(TABLES)))


def where_spark_kept(spark, tmp_path, partitions: int, slotted: bool) -> dict:
    """(table, cluster) -> the state partition Spark's stateful step ran it in (checkpoint: ``tmp_path /
    "checkpoint"``)."""
    source, checkpoint = tmp_path / "keys", tmp_path / "checkpoint"
    source.mkdir()
    pd.DataFrame([(t, c) for c in [*CLUSTERS, UNLISTED] for t in TABLES]).to_csv(
        source / "keys.csv", index=False, header=False
    )
    keys = spark.readStream.schema(KEY_SCHEMA).csv(str(source))
    placed = [slot(layout(checkpoint, TABLES, CLUSTERS, partitions))] if slotted else []
    grouping = ["table", "cluster"] + (["slot"] if slotted else [])
    name = "placed_" + "".join(ch for ch in tmp_path.name if ch.isalnum())

    def step(key, frames, state):
        state.update((1,))
        yield pd.DataFrame(
            {"table": [key[0]], "cluster": [key[1]], "partition": [TaskContext.get().partitionId()]}
        )

    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        query = (
            keys.select("table", "cluster", *placed)
            .groupBy(*grouping)
            .applyInPandasWithState(
                step, "table string, cluster string, partition int", "n int", "append", "NoTimeout"
            )
            .writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        rows = spark.table(name).collect()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    return {(r.table, r.cluster): r.partition for r in rows}


def test_configured_clusters_take_the_offsets_in_turn_and_keep_them_when_one_is_added():
    first = Layout(3, deal(TABLES, 3), {}).with_clusters(CLUSTERS)
    assert first.clusters == {"bench": 0, "prod-eu": 1, "kafka-0": 2, "c": 0}
    assert first.with_clusters(["new", *CLUSTERS]).clusters == first.clusters | {"new": 1}


@pytest.mark.parametrize("partitions", [2, 3])
def test_spark_keeps_each_keys_state_in_the_partition_dealt_turned_by_its_clusters_offset(
    spark, tmp_path, partitions
):
    kept = where_spark_kept(spark, tmp_path, partitions, slotted=True)
    dealt = deal(TABLES, partitions)
    offsets = {c: i % partitions for i, c in enumerate(CLUSTERS)} | {UNLISTED: zlib.crc32(UNLISTED.encode())}
    assert kept == {
        (t, c): (dealt[t] + offsets[c]) % partitions for c in [*CLUSTERS, UNLISTED] for t in TABLES
    }
    for table in TABLES:  # two clusters' keys of one table never share a partition when they need not
        assert kept[table, "bench"] != kept[table, "prod-eu"]


def test_a_checkpoint_keeps_the_layout_of_its_first_start_and_adds_clusters(spark, tmp_path):
    where_spark_kept(spark, tmp_path, 3, slotted=True)
    assert (tmp_path / "checkpoint" / LAYOUT).exists()
    found = layout(tmp_path / "checkpoint", ["lag", "a_later_table"], ["new", *CLUSTERS], 2)
    assert found == Layout(3, deal(TABLES, 3), {"bench": 0, "prod-eu": 1, "kafka-0": 2, "c": 0, "new": 1})
    assert layout(tmp_path / "checkpoint", TABLES, CLUSTERS, 2) == found


def test_a_checkpoint_keyed_without_slots_keeps_the_hash_and_a_new_one_is_dealt(spark, tmp_path):
    kept = where_spark_kept(spark, tmp_path, 3, slotted=False)
    assert len(kept) == len(TABLES) * (len(CLUSTERS) + 1)
    assert layout(tmp_path / "checkpoint", TABLES, CLUSTERS, 3) is None
    assert layout(tmp_path / "new", TABLES, ["a", "b"], 4) == Layout(4, deal(TABLES, 4), {"a": 0, "b": 1})

"""Which state partition holds each ``(table, cluster)`` key: spread by the analyses' cost, not by a hash.

Spark places a stateful step's keys by its hash of the grouping key (Murmur3, modulo the state partitions)
and takes no partitioner. One cluster has seven keys (six analyses and the query's health) of very unequal
cost, and the hash put the costly ones together: with two state partitions, lag, throughput, producers and
brokers in one (1.50-1.57 s a micro-batch on a backlog) and the rest in the other (0.72-0.80 s); dealt
as below, 1.17-1.24 and 1.06-1.17 s. So each key also carries a ``slot``, the first small integer for
which Spark's hash of ``(table, cluster, slot)`` lands on the partition chosen here: the tables are dealt
to the partitions by :data:`TABLE_WEIGHTS`, heaviest first, each to the lightest partition so far, and
each cluster turns that deal by its own offset (CRC-32 of its name), so the keys of a fleet's clusters
fill every partition.

A key's partition depends on its table, its cluster and the number of state partitions alone, so adding a
cluster or restarting moves no state. The deal is written into the checkpoint at its first start
(:data:`LAYOUT`) and read back at every later one: weights changed in a later version do not move the state
of a running checkpoint, whose keys would start their analyses over under new slots.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Column
from pyspark.sql import functions as F

# Each table's share of the state stage, in percent: its step's time in Spark's Python workers on the
# benchmark's default workload (`kobs bench stream`, local[2], 2026-11-27), the mean of one round a batch
# (replication 29, lag 23, throughput 22, producers 18) and catching up (29, 19, 27, 20). A table not
# listed weighs 1.
TABLE_WEIGHTS = {
    "replication": 29,
    "throughput": 25,
    "lag": 21,
    "producers": 19,
    "isr_flapping": 4,
    "brokers": 1,
    "_pipeline": 1,
}
SEARCH = 8  # slots tried per partition: a key finds its partition unless 8N tries miss (e^-8, 0.03 %)
SLOT = "slot"
LAYOUT = "state_placement.json"  # in the checkpoint: its partitions and deal


def deal(tables: Iterable[str], partitions: int) -> dict[str, int]:
    """Table -> partition, for a cluster whose offset is 0: heaviest first, each to the lightest."""
    loads = [0] * partitions
    dealt = {}
    for table in sorted(tables, key=lambda t: (-TABLE_WEIGHTS.get(t, 1), t)):
        lightest = loads.index(min(loads))
        dealt[table] = lightest
        loads[lightest] += TABLE_WEIGHTS.get(table, 1)
    return dealt


def slot(partitions: int, dealt: dict[str, int]) -> Column:
    """The ``slot`` of each row's ``(table, cluster)``: the first of ``0 .. SEARCH * partitions - 1`` that
    Spark's hash of ``(table, cluster, slot)`` sends to the key's partition, its table's in ``dealt``
    (partition 0 for a table not dealt) turned by its cluster's offset (-1: no slot did, the hash places
    it). Computed in the plan, with Spark's own hash, for any cluster."""
    n = F.lit(partitions)
    offset = F.pmod(F.crc32(F.coalesce(F.col("cluster"), F.lit("")).cast("binary")), n)
    table_partition = F.create_map(*(F.lit(v) for item in dealt.items() for v in item))[F.col("table")]
    wanted = F.pmod(F.coalesce(table_partition, F.lit(0)) + offset, n)
    tries = F.sequence(F.lit(0), F.lit(SEARCH * partitions - 1))
    found = F.transform(tries, lambda s: F.pmod(F.hash(F.col("table"), F.col("cluster"), s), n) == wanted)
    return (F.array_position(found, True) - 1).cast("int").alias(SLOT)


def layout(checkpoint: Path, tables: Iterable[str], session_partitions: int) -> tuple[int, dict] | None:
    """The state partitions and the deal (table -> partition) of the query checkpointed at ``checkpoint``:
    those it stored at its first start, else dealt now for its partitions (Spark keeps the number a
    checkpoint started with, whatever the session says) and stored. None for a checkpoint whose state was
    keyed before slots (a state store, no deal): its keys stay where Spark's hash put them."""
    partitions = planned_partitions(checkpoint) or session_partitions
    stored = checkpoint / LAYOUT
    if stored.exists():
        kept = json.loads(stored.read_text())
        if kept["partitions"] == partitions:
            return partitions, kept["tables"]
    elif any((checkpoint / "state").glob("*/*/_metadata/schema")):
        return None
    dealt = deal(tables, partitions)
    checkpoint.mkdir(parents=True, exist_ok=True)
    written = stored.with_suffix(".tmp")
    written.write_text(json.dumps({"partitions": partitions, "tables": dealt}, indent=1))
    written.replace(stored)
    return partitions, dealt


def planned_partitions(checkpoint: Path) -> int | None:
    """The state partitions of the checkpoint's latest planned micro-batch (None: none planned yet)."""
    offsets = [p for p in (checkpoint / "offsets").glob("[0-9]*") if p.name.isdigit()]
    if not offsets:
        return None
    latest = max(offsets, key=lambda p: int(p.name))
    return int(json.loads(latest.read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"])

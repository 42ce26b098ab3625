"""Which state partition holds each ``(table, cluster)`` key: spread by the analyses' cost, not by a hash.

Spark places a stateful step's keys by its hash of the grouping key (Murmur3, modulo the state partitions)
and takes no partitioner. One cluster has seven keys (six analyses and the query's health) of very unequal
cost, and the hash put the costly ones together: with two state partitions, lag, throughput, producers and
brokers in one (1.50-1.57 s a micro-batch on a backlog) and the rest in the other (0.72-0.80 s); dealt
as below, 1.17-1.24 and 1.06-1.17 s. So each key also carries a ``slot``, the first small integer for
which Spark's hash of ``(table, cluster, slot)`` lands on the partition chosen here: the tables are dealt
to the partitions by :data:`TABLE_WEIGHTS`, heaviest first, each to the lightest partition so far, and
each cluster turns that deal by its own offset, so the keys of a fleet's clusters fill every partition: the
configured clusters take the offsets in turn (the one fewest clusters have, in the order first
configured), a cluster no configuration named turns by the CRC-32 of its name.

A key's partition depends on its table, its cluster's offset and the number of state partitions alone.
The deal and the offsets are written into the checkpoint at its first start (:data:`LAYOUT`), a cluster
configured later is added to them, and every start reads them back: adding a cluster, restarting or
weights changed in a later version move no key's state (a key under a new slot would start its analysis
over).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_jobs.checkpoint import planned_partitions

# Each table's share of the state stage, in percent: its step's CPU time in Spark's Python workers on the
# benchmark's default workload (`kobs bench stream`, local[2], 2026-11-27, with the analyses' chunked
# samples), the mean of one round a batch (replication 27, lag 25, producers 20, throughput 20, flapping 5)
# and catching up (28, 20, 20, 26, 6). A table not listed weighs 1.
TABLE_WEIGHTS = {
    "replication": 28,
    "throughput": 23,
    "lag": 22,
    "producers": 20,
    "isr_flapping": 5,
    "brokers": 1,
    "_pipeline": 1,
}
SEARCH = 8  # slots tried per partition: a key finds its partition unless 8N tries miss (e^-8, 0.03 %)
SLOT = "slot"
LAYOUT = "state_placement.json"  # in the checkpoint: its partitions, deal and clusters' offsets


@dataclass(frozen=True)
class Layout:
    """Where a checkpoint's keys live: ``partitions`` state partitions, table -> partition for a cluster
    whose offset is 0 (``tables``), cluster -> offset (``clusters``)."""

    partitions: int
    tables: dict[str, int]
    clusters: dict[str, int]

    def with_clusters(self, clusters: Iterable[str]) -> Layout:
        """This layout with an offset for each of ``clusters`` it has none for: the offset fewest
        clusters have so far (the lowest of those)."""
        offsets = dict(self.clusters)
        for cluster in clusters:
            if cluster not in offsets:
                used = Counter(offsets.values())
                offsets[cluster] = min(range(self.partitions), key=lambda offset: used[offset])
        return replace(self, clusters=offsets)


def deal(tables: Iterable[str], partitions: int) -> dict[str, int]:
    """Table -> partition, for a cluster whose offset is 0: heaviest first, each to the lightest."""
    loads = [0] * partitions
    dealt = {}
    for table in sorted(tables, key=lambda t: (-TABLE_WEIGHTS.get(t, 1), t)):
        lightest = loads.index(min(loads))
        dealt[table] = lightest
        loads[lightest] += TABLE_WEIGHTS.get(table, 1)
    return dealt


def slot(layout: Layout) -> Column:
    """The ``slot`` of each row's ``(table, cluster)``: the first of ``0 .. SEARCH * partitions - 1`` that
    Spark's hash of ``(table, cluster, slot)`` sends to the key's partition, its table's (partition 0 for a
    table not dealt) turned by its cluster's offset (-1: no slot did, the hash places it). Computed in the
    plan, with Spark's own hash, for any cluster."""
    n = F.lit(layout.partitions)
    cluster = F.coalesce(F.col("cluster"), F.lit(""))
    offset = F.coalesce(literal_map(layout.clusters)[cluster], F.pmod(F.crc32(cluster.cast("binary")), n))
    wanted = F.pmod(F.coalesce(literal_map(layout.tables)[F.col("table")], F.lit(0)) + offset, n)
    tries = F.sequence(F.lit(0), F.lit(SEARCH * layout.partitions - 1))
    found = F.transform(tries, lambda s: F.pmod(F.hash(F.col("table"), F.col("cluster"), s), n) == wanted)
    return (F.array_position(found, True) - 1).cast("int").alias(SLOT)


def literal_map(mapping: dict[str, int]) -> Column:
    """``mapping`` as a Spark map column (``map<string,int>``, also when empty)."""
    return F.create_map(*(F.lit(v) for item in mapping.items() for v in item)).cast("map<string,int>")


def layout(
    checkpoint: Path, tables: Iterable[str], clusters: Iterable[str], session_partitions: int
) -> Layout | None:
    """The layout of the query checkpointed at ``checkpoint``, with an offset for each of ``clusters``:
    the one it stored (clusters new to it added and stored), else one dealt now for its partitions (Spark
    keeps the number a checkpoint started with, whatever the session says) and stored. None for a
    checkpoint whose state was keyed before slots (a state store, no layout): its keys stay where Spark's
    hash put them."""
    partitions = planned_partitions(checkpoint) or session_partitions
    stored = checkpoint / LAYOUT
    kept = Layout(**json.loads(stored.read_text())) if stored.exists() else None
    if kept is None and any((checkpoint / "state").glob("*/*/_metadata/schema")):
        return None
    if kept is not None and kept.partitions == partitions:
        found = kept.with_clusters(clusters)
    else:  # none yet, or none planned a batch with the one stored
        found = Layout(partitions, deal(tables, partitions), {}).with_clusters(clusters)
    if found != kept:
        checkpoint.mkdir(parents=True, exist_ok=True)
        written = stored.with_suffix(".tmp")
        written.write_text(json.dumps(asdict(found), indent=1))
        written.replace(stored)
    return found

"""Kafka's replica assignment without racks (``AdminUtils.assignReplicasToBrokers``)."""

from __future__ import annotations

import random
from collections.abc import Sequence


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    replica_shift: int | None = None,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for partitions ``first_partition .. first_partition + partitions - 1``.

    ``start_index`` and ``replica_shift`` are drawn from ``rng`` in ``[0, len(brokers))`` when not given,
    as Kafka does; fixing both reproduces a placement exactly.
    """
    ids = sorted(brokers)
    n = len(ids)
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} must be between 1 and {n} (live brokers)")
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index
    shift = rng.randrange(n) if replica_shift is None else replica_shift
    assignment: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(1, replication_factor):
            replicas.append(ids[(first + 1 + (shift + j - 1) % (n - 1)) % n])
        assignment[p] = replicas
    return assignment

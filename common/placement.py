"""Where Kafka puts things: replica placement, range assignment of partitions to consumers, the group
coordinator. Each follows Kafka's own algorithm as ``docs/kafka-behaviour.md`` describes it."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from common.errors import InputError

Assignment = dict[int, list[int]]  # partition -> replicas, the first being the preferred leader


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    replica_shift: int | None = None,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> Assignment:
    """Kafka's rack-unaware assignment; ``start_index``/``replica_shift`` are random when not given.

    ``first_partition`` is the topic's current partition count when partitions are being added.
    """
    ids = sorted(set(brokers))
    n = len(ids)
    if n == 0:
        raise InputError("brokers", "no brokers given — list at least one broker id, e.g. 0,1,2")
    if not 1 <= replication_factor <= n:
        raise InputError(
            "replication_factor",
            f"{replication_factor} is outside 1..{n} (the number of brokers) — use 1..{n}",
        )
    if partitions < 1:
        raise InputError("partitions", f"must be at least 1, got {partitions}")
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index
    shift = rng.randrange(n) if replica_shift is None else replica_shift
    assignment: Assignment = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(1, replication_factor):
            replicas.append(ids[(first + 1 + (shift + j - 1) % (n - 1)) % n])
        assignment[p] = replicas
    return assignment


def range_assign(partitions: Iterable[int], members: Sequence[str]) -> dict[str, list[int]]:
    """The range assignor for one topic: sorted members get ``floor(P/C)`` consecutive partitions of the
    sorted partition ids, the first ``P mod C`` one more; members beyond the partition count get none."""
    ordered, names = sorted(partitions), sorted(members)
    if not names:
        return {}
    each, extra = divmod(len(ordered), len(names))
    result: dict[str, list[int]] = {}
    start = 0
    for i, member in enumerate(names):
        count = each + (1 if i < extra else 0)
        result[member] = ordered[start : start + count]
        start += count
    return result


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, signed int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def coordinator_partition(group_id: str, offsets_partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id`` (Kafka's ``Utils.abs``
    maps ``Integer.MIN_VALUE`` to 0)."""
    if offsets_partitions < 1:
        raise InputError("offsets_partitions", f"must be at least 1, got {offsets_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % offsets_partitions

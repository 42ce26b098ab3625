"""ISR change events → the transitions they really are, once each, whichever source reported them.

Pure (no Spark). A ZooKeeper-mode cluster watched by both the ZooKeeper and the metadata source reports
the same change twice, at different times and possibly in different micro-batches; a poller misses
intermediate states. The ledger keeps, per partition, the last ISR and leader the events said and the
brokers that left the ISR and have not rejoined since. An event applies only when it is not older than the
last applied one and changes that state; who left and who joined come from the known state, not from the
event's ``old_isr``, so a duplicate or a stale report changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from common.contract import ISR_CHANGE_KINDS

PartitionId = tuple[str, str, str]  # (cluster, topic, partition)


@dataclass(frozen=True)
class Transition:
    """One applied ISR change; ``rejoined``: brokers back in the ISR they had been seen leaving."""

    cluster: str
    topic: str
    partition: str
    t_s: float
    change: str  # shrink, expand, replace or leader_change (the event's own word)
    leader: int
    isr: frozenset[int]  # the new ISR
    left: frozenset[int]
    joined: frozenset[int]
    rejoined: frozenset[int]
    unclean: bool  # an unclean leader election the events prove (IsrLedger.apply)


@dataclass
class _Known:
    t_s: float
    isr: frozenset[int]
    leader: int
    out: set[int] = field(default_factory=set)  # left the ISR, not back yet
    members: frozenset[int] = frozenset()  # the last ISR that had members (Kafka 4 may empty it)


class IsrLedger:
    def __init__(self) -> None:
        self._partitions: dict[PartitionId, _Known] = {}

    def apply(self, cluster: str, t_s: float, event: dict[str, Any]) -> Transition | None:
        """The transition an ``isr_change`` event makes, or None (duplicate, stale or malformed).

        It proves an unclean election when the new leader is alone in the new ISR (an unclean election
        makes the elected replica the whole ISR) and was not in the last ISR that had members: the ISR
        before, or, when Kafka 4 had emptied it (eligible leader replicas, KIP-966), the one before that.
        A clean election half seen between two scrapes (a restarted broker rejoined and was elected)
        leaves other members in the ISR."""
        try:
            key = (cluster, str(event["topic"]), str(event["partition"]))
            new_isr = frozenset(int(b) for b in event["new_isr"])
            old_isr = frozenset(int(b) for b in event["old_isr"])
            leader, change = int(event["leader"]), str(event["change"])
        except (KeyError, TypeError, ValueError):
            return None
        if change not in ISR_CHANGE_KINDS:
            return None
        known = self._partitions.get(key)
        if known is None:
            known = self._partitions[key] = _Known(t_s, old_isr, leader, members=old_isr)
        elif t_s < known.t_s or (new_isr, leader) == (known.isr, known.leader):
            return None
        before = known.isr
        left, joined = before - new_isr, new_isr - before
        rejoined = frozenset(joined & known.out)
        unclean = leader >= 0 and new_isr == {leader} and bool(known.members) and leader not in known.members
        known.out = (known.out | left) - new_isr
        known.t_s, known.isr, known.leader = t_s, new_isr, leader
        if new_isr:
            known.members = new_isr
        return Transition(*key, t_s, change, leader, new_isr, left, joined, rejoined, unclean)

    def out_of_isr(self) -> Iterator[tuple[str, int, str, str]]:
        """(cluster, broker, topic, partition) for every broker outside an ISR it was seen leaving."""
        for (cluster, topic, partition), known in self._partitions.items():
            for broker in known.out:
                yield cluster, broker, topic, partition

    def culprit(self, cluster: str, topic: str, partition: str, offline: bool) -> int | None:
        """The broker whose absence explains the partition's trouble, or None when the events do not say:
        the smallest id of the brokers that left its ISR and have not rejoined, and, when it has no leader,
        of the ISR members it kept (an offline partition keeps its last ISR member in ZooKeeper mode and in
        KRaft without eligible leader replicas; with them its ISR empties, and that member left)."""
        known = self._partitions.get((cluster, topic, partition))
        if known is None:
            return None
        suspects = known.out | known.isr if offline else known.out
        return min(suspects, default=None)

    def forget(self, cluster: str, topic: str, partition: str) -> None:
        """A deleted partition: its brokers out of its ISR are out of nothing any more."""
        self._partitions.pop((cluster, topic, partition), None)

    def fully_replicated(self, cluster: str, topic: str, partition: str) -> None:
        """Metadata says the ISR is the whole replica set: nobody is out (a missed expand, a reassignment)."""
        known = self._partitions.get((cluster, topic, partition))
        if known is not None:
            known.out.clear()

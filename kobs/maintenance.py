"""What a restart of one broker would break, worked out from partition states alone (no I/O): the rules of
``kobs maintenance check`` (:mod:`kobs.maintenance_check` reads the cluster and prints the findings).

While a broker is away each of its partitions keeps the rest of its ISR. A partition left with no in-sync
replica goes offline: no leader, every producer and consumer of it fails. One left with fewer in-sync
replicas than its topic's ``min.insync.replicas`` refuses acks=all writes (NOT_ENOUGH_REPLICAS). One left
with exactly that many still takes them, one lost replica away from refusing them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collectors.isr import PartitionKey, PartitionState

KAFKA_DEFAULT_MIN_ISR = 1  # for a topic whose config does not say
OFFLINE, UNDER_MIN_ISR, AT_MIN_ISR = "offline", "under min ISR", "at min ISR"


@dataclass(frozen=True)
class TopicFinding:
    """Partitions of one topic (and replication factor) that the restart leaves in the same state."""

    topic: str
    partitions: tuple[int, ...]
    replication_factor: int
    min_insync_replicas: int


@dataclass(frozen=True)
class ProducerFinding:
    """A configured producer and the topics it writes that the restart leaves offline or under min ISR."""

    client_id: str
    topics: tuple[str, ...]


@dataclass(frozen=True)
class RestartImpact:
    """What a restart of ``broker`` would break while it is away, and how much it leads now."""

    broker: int
    leads: int  # partitions it leads now: a controlled shutdown hands their leadership to followers first
    offline: tuple[TopicFinding, ...]
    under_min_isr: tuple[TopicFinding, ...]
    at_min_isr: tuple[TopicFinding, ...]
    producers_blocked: tuple[ProducerFinding, ...]  # write a topic with an offline partition
    producers_blocked_if_acks_all: tuple[ProducerFinding, ...]  # write a topic with one under min ISR

    @property
    def safe(self) -> bool:
        """No partition goes offline or under min ISR."""
        return not (self.offline or self.under_min_isr)

    @property
    def verdict(self) -> str:
        """One line: safe, or what the restart takes offline, puts under min ISR and blocks."""
        restart = f"restart of broker {self.broker}"
        if self.safe:
            return f"{restart} is safe: no partition goes offline or under min ISR"
        harm = [f"takes {_count(self.offline)} offline"] if self.offline else []
        harm += [f"puts {_count(self.under_min_isr)} under min ISR"] if self.under_min_isr else []
        blocked = ", ".join(p.client_id for p in self.producers_blocked)
        return f"{restart} {' and '.join(harm)}" + (f"; blocks producers {blocked}" if blocked else "")


def restart_impact(
    broker: int,
    partitions: Mapping[PartitionKey, PartitionState],
    min_isr: Mapping[str, int],
    producers: Mapping[str, Iterable[str]],
) -> RestartImpact:
    """The findings of restarting ``broker``, given every partition's state, each topic's
    ``min.insync.replicas`` and the topics each producer (by client id) writes."""
    found: dict[str, dict[tuple[str, int], list[int]]] = {OFFLINE: {}, UNDER_MIN_ISR: {}, AT_MIN_ISR: {}}
    for (topic, partition), state in sorted(partitions.items()):
        fate = partition_fate(broker, state.isr, min_isr.get(topic, KAFKA_DEFAULT_MIN_ISR))
        if fate is not None:
            found[fate].setdefault((topic, len(state.replicas)), []).append(partition)
    offline, under, at = (_by_topic(found[fate], min_isr) for fate in (OFFLINE, UNDER_MIN_ISR, AT_MIN_ISR))
    return RestartImpact(
        broker,
        sum(state.leader == broker for state in partitions.values()),
        offline,
        under,
        at,
        _writers(producers, offline),
        _writers(producers, under),
    )


def partition_fate(broker: int, isr: Iterable[int], min_isr: int) -> str | None:
    """OFFLINE, UNDER_MIN_ISR or AT_MIN_ISR while ``broker`` is away; None when that changes nothing the
    partition's clients feel (the broker is not in its ISR, or enough in-sync replicas remain)."""
    isr = set(isr)
    if broker not in isr:
        return None
    left = len(isr) - 1
    if left == 0:
        return OFFLINE
    if left < min_isr:
        return UNDER_MIN_ISR
    return AT_MIN_ISR if left == min_isr else None


def _writers(
    producers: Mapping[str, Iterable[str]], findings: Iterable[TopicFinding]
) -> tuple[ProducerFinding, ...]:
    """The producers that write any topic of ``findings``, each with those topics."""
    hit = {finding.topic for finding in findings}
    written = (
        (client, tuple(sorted(hit.intersection(topics)))) for client, topics in sorted(producers.items())
    )
    return tuple(ProducerFinding(client, topics) for client, topics in written if topics)


def _by_topic(
    partitions: Mapping[tuple[str, int], list[int]], min_isr: Mapping[str, int]
) -> tuple[TopicFinding, ...]:
    """One finding per (topic, replication factor) of the partition ids found."""
    return tuple(
        TopicFinding(topic, tuple(ids), rf, min_isr.get(topic, KAFKA_DEFAULT_MIN_ISR))
        for (topic, rf), ids in partitions.items()
    )


def _count(findings: tuple[TopicFinding, ...]) -> str:
    """``6 partitions of orders``, or ``8 partitions of 3 topics``."""
    partitions = sum(len(f.partitions) for f in findings)
    topics = sorted({f.topic for f in findings})
    of = topics[0] if len(topics) == 1 else f"{len(topics)} topics"
    return f"{partitions} partition{'s' if partitions != 1 else ''} of {of}"

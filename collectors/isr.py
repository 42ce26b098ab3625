"""Partition state shared by the ZooKeeper and KRaft (metadata) sources: one state, one diff, one sampling.

Both sources observe partition states over time; :func:`diff_states` turns two observations into the
contract's ``isr_change`` events and :func:`partition_samples` turns one observation into the
per-partition samples, so the two modes emit exactly the same events and samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common import names
from common.contract import Event, Sample

UNKNOWN_EPOCH = -1  # the Admin API does not report leader epochs; ZooKeeper does


@dataclass(frozen=True)
class PartitionState:
    leader: int  # -1 when the partition has no leader
    isr: tuple[int, ...]
    leader_epoch: int = UNKNOWN_EPOCH
    replicas: tuple[int, ...] = ()  # empty when not known (a partition always has at least one replica)


def classify(old: PartitionState, new: PartitionState) -> str | None:
    """``shrink``/``expand``/``replace`` when the ISR set changed, else ``leader_change`` or None."""
    if old.isr == new.isr:  # nearly every partition of every scrape: no sets to build
        return "leader_change" if old.leader != new.leader else None
    left, joined = set(old.isr) - set(new.isr), set(new.isr) - set(old.isr)
    if left and joined:
        return "replace"
    if left:
        return "shrink"
    if joined:
        return "expand"
    if old.leader != new.leader:
        return "leader_change"
    return None


def isr_event(
    topic: str, partition: int, old: PartitionState, new: PartitionState, ts_ms: int
) -> Event | None:
    """The ``isr_change`` event between two states of one partition, or None when nothing changed."""
    change = classify(old, new)
    if change is None:
        return None
    fields = {
        "topic": topic,
        "partition": partition,
        "old_isr": list(old.isr),
        "new_isr": list(new.isr),
        "leader": new.leader,
        "leader_epoch": new.leader_epoch,
        "change": change,
    }
    return Event("isr_change", ts_ms, fields)


PartitionKey = tuple[str, int]


def diff_states(
    old: Mapping[PartitionKey, PartitionState], new: Mapping[PartitionKey, PartitionState], ts_ms: int
) -> list[Event]:
    """Events for partitions seen in both observations (new and deleted partitions are not changes)."""
    events = []
    for key in sorted(old.keys() & new.keys()):
        event = isr_event(key[0], key[1], old[key], new[key], ts_ms)
        if event is not None:
            events.append(event)
    return events


def partition_samples(states: Mapping[PartitionKey, PartitionState]) -> list[Sample]:
    """Replica count (when known), ISR count and leader (-1 when offline) of every partition."""
    samples = []
    for (topic, partition), state in sorted(states.items()):
        labels = {"topic": topic, "partition": str(partition)}
        if state.replicas:
            samples.append(Sample(names.PARTITION_REPLICAS, labels, len(state.replicas)))
            samples.append(Sample(names.PARTITION_PREFERRED_LEADER, labels, state.replicas[0]))
        samples += [
            Sample(names.PARTITION_ISR, labels, len(state.isr)),
            Sample(names.PARTITION_LEADER, labels, state.leader),
        ]
    return samples

"""Partition leadership and ISR via the Admin API (``describe_topics``): the KRaft way to see ISR changes.

Each scrape emits per-partition replica/ISR counts and leader, and diffs the partition states against the
previous scrape into ``isr_change`` events (:mod:`collectors.isr`). The Admin API does not report leader
epochs, so these events carry ``leader_epoch`` -1. The first scrape only sets the baseline.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, TopicDescription

from collectors.admin import admin_client, partitions, wait_all
from collectors.isr import PartitionKey, PartitionState, diff_states
from collectors.source import Scrape, now_ms
from common import names
from common.config import Cluster
from common.contract import Batch, Sample

SOURCE = "admin/metadata"


def partition_states(descriptions: Iterable[TopicDescription]) -> dict[PartitionKey, PartitionState]:
    return {
        (d.name, p.id): PartitionState(
            leader=p.leader.id if p.leader is not None else -1,
            isr=tuple(n.id for n in p.isr),
            replicas=tuple(n.id for n in p.replicas),
        )
        for d in descriptions
        for p in d.partitions
    }


def metadata_samples(states: Mapping[PartitionKey, PartitionState]) -> list[Sample]:
    samples = []
    for (topic, partition), state in sorted(states.items()):
        labels = {"topic": topic, "partition": str(partition)}
        samples += [
            Sample(names.PARTITION_REPLICAS, labels, len(state.replicas)),
            Sample(names.PARTITION_ISR, labels, len(state.isr)),
            Sample(names.PARTITION_LEADER, labels, state.leader),
        ]
    return samples


class MetadataSource:
    """``describe_topics`` of one cluster, diffed scrape to scrape; never raises for a cluster fault."""

    def __init__(self, cluster: Cluster, timeout_s: float = 10.0, admin: AdminClient | None = None):
        self.cluster = cluster
        self.name = SOURCE
        self.timeout_s = timeout_s
        self._admin = admin or admin_client(cluster)
        self._last: dict[PartitionKey, PartitionState] | None = None

    def collect(self) -> Scrape:
        ts, errors = now_ms(), []
        deadline = time.monotonic() + self.timeout_s
        try:
            topics = list(partitions(self._admin, self.timeout_s))
        except Exception as exc:
            return Scrape(Batch(self.cluster.name, SOURCE, ts), [f"list_topics: {exc}"])
        futures = self._admin.describe_topics(TopicCollection(topics), request_timeout=self.timeout_s)
        described = wait_all(futures, deadline, "describe_topics", errors)
        states = partition_states(described.values())
        events = [] if self._last is None else diff_states(self._last, states, ts)
        # keep the baseline of topics that failed to describe, so that their next change is still seen
        failed = {k: v for k, v in (self._last or {}).items() if k[0] in futures and k[0] not in described}
        self._last = states | failed
        samples = metadata_samples(states)
        return Scrape(Batch(self.cluster.name, SOURCE, ts, tuple(samples), tuple(events)), errors)

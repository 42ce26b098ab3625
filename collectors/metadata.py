"""Partition leadership and ISR from cluster metadata: the KRaft way to see ISR changes.

One metadata request (``list_topics``) returns leader, replicas and ISR of every partition; it is several
times cheaper than ``describe_topics`` on large clusters and reports the same state. Each scrape emits
per-partition replica/ISR counts and leader, and diffs the partition states against the previous scrape
into ``isr_change`` events (:mod:`collectors.isr`). Metadata carries no leader epochs, so these events carry
``leader_epoch`` -1. The first scrape only sets the baseline. Each topic's ``min.insync.replicas`` (its own
or the broker default, from ``describe_configs`` in batches of ``CONFIGS_CHUNK`` topics) is a sample too; a
topic whose config does not list it gets none. Each broker the metadata lists (registered and, in KRaft,
not fenced) is a ``kafka_broker_registered`` sample: the cluster's own word on which brokers are up. When
ZooKeeper is the authority for partition state (``partition_state=False``;
:mod:`collectors.zookeeper_isr`), the partition samples and events are left to it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future

from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ResourceType, TopicMetadata

from collectors.admin import admin_client, cluster_view, listing_error
from collectors.futures import wait_all
from collectors.isr import PartitionKey, PartitionState, diff_states, partition_samples
from collectors.source import Scrape, now_ms
from common import names
from common.config import Cluster
from common.contract import Batch, Sample

SOURCE = "admin/metadata"
MIN_ISR = "min.insync.replicas"
CONFIGS_CHUNK = 1_000  # topics per describe_configs request


def partition_states(metadata: Mapping[str, TopicMetadata]) -> dict[PartitionKey, PartitionState]:
    """Leader (-1 when offline), ISR and replicas of every partition of the given topics."""
    return {
        (name, p.id): PartitionState(leader=p.leader, isr=tuple(p.isrs), replicas=tuple(p.replicas))
        for name, topic in metadata.items()
        for p in topic.partitions.values()
    }


def request_topic_configs(
    admin: AdminClient, topics: list[str], timeout_s: float
) -> dict[ConfigResource, Future]:
    """``describe_configs`` of ``topics``, one request per ``CONFIGS_CHUNK`` of them, all sent at once."""
    futures = {}
    for start in range(0, len(topics), CONFIGS_CHUNK):
        chunk = [ConfigResource(ResourceType.TOPIC, t) for t in topics[start : start + CONFIGS_CHUNK]]
        futures.update(admin.describe_configs(chunk, request_timeout=timeout_s))
    return futures


def min_isr(configs: Mapping[str, Mapping[str, ConfigEntry]]) -> dict[str, int]:
    """``min.insync.replicas`` per topic (its own or the broker default), from ``describe_configs`` results
    keyed by topic name; a topic whose config does not list it is left out."""
    return {
        topic: int(config[MIN_ISR].value)
        for topic, config in sorted(configs.items())
        if MIN_ISR in config and config[MIN_ISR].value is not None
    }


def min_isr_samples(configs: Mapping[str, Mapping[str, ConfigEntry]]) -> list[Sample]:
    """:func:`min_isr` as samples."""
    return [Sample(names.TOPIC_MIN_ISR, {"topic": topic}, value) for topic, value in min_isr(configs).items()]


class MetadataSource:
    """Partition states of one cluster, diffed scrape to scrape; never raises for a cluster fault."""

    def __init__(
        self,
        cluster: Cluster,
        timeout_s: float = 10.0,
        admin: AdminClient | None = None,
        partition_state: bool = True,
    ):
        """``partition_state=False``: min ISR only, when the ZooKeeper source reports partition state."""
        self.cluster = cluster
        self.partition_state = partition_state
        self.name = SOURCE
        self.timeout_s = timeout_s
        self._admin = admin if admin is not None else admin_client(cluster)  # len(admin) 0 is falsy
        self._last: dict[PartitionKey, PartitionState] | None = None

    def collect(self) -> Scrape:
        ts, errors = now_ms(), []
        deadline = time.monotonic() + self.timeout_s
        try:
            metadata, brokers = cluster_view(self._admin, self.timeout_s)
        except Exception as exc:
            return Scrape(Batch(self.cluster.name, SOURCE, ts), [listing_error(exc)])
        configs = request_topic_configs(self._admin, sorted(metadata), self.timeout_s)  # answered meanwhile
        failed = {name for name, t in metadata.items() if t.error is not None}
        errors += [f"metadata: topic {name}: {metadata[name].error}" for name in sorted(failed)]
        samples = [Sample(names.BROKER_REGISTERED, {"broker": str(b)}, 1) for b in sorted(brokers)]
        events = []
        if self.partition_state:
            states = partition_states({name: t for name, t in metadata.items() if name not in failed})
            events = [] if self._last is None else diff_states(self._last, states, ts)
            # keep the baseline of topics whose metadata failed, so that their next change is still seen
            self._last = states | {k: v for k, v in (self._last or {}).items() if k[0] in failed}
            samples += partition_samples(states)
        described = wait_all(configs, deadline, "describe_configs", errors)
        samples += min_isr_samples({resource.name: config for resource, config in described.items()})
        return Scrape(Batch(self.cluster.name, SOURCE, ts, tuple(samples), tuple(events)), errors)

"""Consumer-group and log offsets via the Admin API: what lag is computed from downstream.

Per scrape: list topics, log start and end offsets of every partition (``list_offsets`` earliest/latest, a
few large requests that librdkafka splits per leader), list groups, describe them (state, members) and read
each group's committed offsets. Lag itself (end - committed) is left to the jobs, which also see history.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from collectors.admin import admin_client, partitions, wait_all
from collectors.source import Scrape, now_ms
from common import names
from common.config import Cluster
from common.contract import Batch, Sample

SOURCE = "admin/offsets"
LIST_OFFSETS_CHUNK = 10_000  # partitions per list_offsets call


@dataclass(frozen=True)
class GroupInfo:
    group: str
    state: str  # lower case Kafka state: stable, empty, preparing_rebalance, ...
    members: int | None  # None when the broker did not describe the group


Offsets = Mapping[tuple[str, int], int]


def offset_samples(
    starts: Offsets, ends: Offsets, committed: Mapping[str, Offsets], groups: Iterable[GroupInfo]
) -> list[Sample]:
    """Samples for log start/end offsets, committed offsets (a group's -1 "no commit" is left out), groups."""

    def tp(key: tuple[str, int]) -> dict[str, str]:
        return {"topic": key[0], "partition": str(key[1])}

    samples = [Sample(names.PARTITION_START_OFFSET, tp(k), v) for k, v in sorted(starts.items())]
    samples += [Sample(names.PARTITION_END_OFFSET, tp(k), v) for k, v in sorted(ends.items())]
    for group, offsets in sorted(committed.items()):
        samples += [
            Sample(names.GROUP_COMMITTED_OFFSET, {"group": group, **tp(k)}, v)
            for k, v in sorted(offsets.items())
            if v >= 0
        ]
    for info in sorted(groups, key=lambda g: g.group):
        samples.append(Sample(names.GROUP_INFO, {"group": info.group, "state": info.state}, 1))
        if info.members is not None:
            samples.append(Sample(names.GROUP_MEMBERS, {"group": info.group}, info.members))
    return samples


class OffsetsSource:
    """Admin API offsets of one cluster; ``collect()`` never raises for a fault of the cluster."""

    def __init__(self, cluster: Cluster, timeout_s: float = 10.0, admin: AdminClient | None = None):
        self.cluster = cluster
        self.name = SOURCE
        self.timeout_s = timeout_s
        self._admin = admin or admin_client(cluster)

    def collect(self) -> Scrape:
        ts, errors = now_ms(), []
        deadline = time.monotonic() + self.timeout_s
        try:
            tps = [(t, p) for t, ids in partitions(self._admin, self.timeout_s).items() for p in ids]
        except Exception as exc:
            return Scrape(Batch(self.cluster.name, SOURCE, ts), [f"list_topics: {exc}"])
        starts = self._log_offsets(tps, OffsetSpec.earliest(), deadline, errors)
        ends = self._log_offsets(tps, OffsetSpec.latest(), deadline, errors)
        groups, committed = self._groups(deadline, errors)
        samples = offset_samples(starts, ends, committed, groups)
        return Scrape(Batch(self.cluster.name, SOURCE, ts, tuple(samples)), errors)

    def _log_offsets(
        self, tps: list[tuple[str, int]], spec: OffsetSpec, deadline: float, errors: list[str]
    ) -> dict[tuple[str, int], int]:
        futures = {}
        for start in range(0, len(tps), LIST_OFFSETS_CHUNK):
            request = {TopicPartition(t, p): spec for t, p in tps[start : start + LIST_OFFSETS_CHUNK]}
            futures.update(self._admin.list_offsets(request, request_timeout=self.timeout_s))
        results = wait_all(futures, deadline, "list_offsets", errors)
        return {(tp.topic, tp.partition): info.offset for tp, info in results.items()}

    def _groups(self, deadline: float, errors: list[str]) -> tuple[list[GroupInfo], dict[str, Offsets]]:
        listed = wait_all(
            {"groups": self._admin.list_consumer_groups(request_timeout=self.timeout_s)},
            deadline,
            "list_consumer_groups",
            errors,
        )
        if not listed:
            return [], {}
        errors.extend(f"list_consumer_groups: {e}" for e in listed["groups"].errors)
        ids = [g.group_id for g in listed["groups"].valid]
        if not ids:
            return [], {}
        described = wait_all(
            self._admin.describe_consumer_groups(ids, request_timeout=self.timeout_s),
            deadline,
            "describe_consumer_groups",
            errors,
        )
        states = {g.group_id: g.state.name.lower() for g in listed["groups"].valid}
        groups = [GroupInfo(g, states[g], len(described[g].members) if g in described else None) for g in ids]
        futures = {}
        for group in ids:  # the API takes one group per request
            request = [ConsumerGroupTopicPartitions(group)]
            futures.update(self._admin.list_consumer_group_offsets(request, request_timeout=self.timeout_s))
        results = wait_all(futures, deadline, "list_consumer_group_offsets", errors)
        committed = {
            group: {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.error is None}
            for group, result in results.items()
        }
        return groups, committed

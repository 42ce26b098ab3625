"""Consumer-group and log offsets via the Admin API: what lag is computed from downstream.

Per scrape: list topics; the log start and end offsets of every partition (ListOffsets earliest and latest
through consumers' ``offsets_for_times``, ``LOG_OFFSETS_CHUNK`` partitions a call, ``PARALLEL_CALLS`` at a
time on a consumer each: the Admin API's ``list_offsets`` makes a future per partition, hundreds of MB at
100,000 partitions); meanwhile list groups, describe them (state, members) and read each group's committed
offsets, with the member each assigned partition has. Lag itself (end - committed) is left to the jobs,
which also see history. The topic listing goes
out alone: it is the first step of the longest chain, and the broker answers it sooner without the group
requests.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from collectors.admin import admin_client, partitions, wait_all
from collectors.source import Scrape, now_ms
from common import names
from common.config import Cluster
from common.contract import Batch, Sample
from common.kafka_clients import cluster_settings

SOURCE = "admin/offsets"
LOG_OFFSETS_CHUNK = 200  # partitions per offsets_for_times call: its CPU cost grows faster than linearly
PARALLEL_CALLS = 3  # offsets_for_times calls in flight, each on its own consumer (plus the group requests)
RETRY_PAUSE_S = 0.2  # before asking again for partitions whose leader moved
# Per-partition errors of a leader that moved since the client's metadata: asked again once.
MOVED = frozenset(
    (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
     KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT)
)  # fmt: skip
# Errors that outlive a retry because the consumer's own metadata is stale: after a broker restarts, a
# consumer answered FENCED_LEADER_EPOCH or _UNKNOWN_PARTITION for the same partitions (per partition, or for
# its whole call) scrape after scrape for minutes. Such a consumer is replaced after the scrape.
STALE = frozenset(
    (KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError._UNKNOWN_PARTITION)
)
# librdkafka (2.16) frees a request bound for a group's coordinator (DescribeConsumerGroups,
# ListConsumerGroupOffsets) that timed out while it still waited for the coordinator to answer its
# connection, and aborts the process on a failed assertion once a coordinator does (its issue 4605): a
# coordinator killed for longer than the request's timeout took the collector down, twice in one demo run.
# These requests get librdkafka's longest timeout, so a coordinator's failover ends first; a scrape waits
# for them until its own deadline only, and a group's request still out is not asked again.
COORDINATOR_REQUEST_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class GroupInfo:
    group: str
    state: str  # lower case Kafka state: stable, empty, preparing_rebalance, ...
    members: int | None  # None when the broker did not describe the group
    assigned: tuple[tuple[str, int, str, str], ...] = ()  # (topic, partition, member client id, member host)


Offsets = Mapping[tuple[str, int], int]


def group_samples(committed: Mapping[str, Offsets], groups: Iterable[GroupInfo]) -> list[Sample]:
    """Committed offsets (a group's -1 "no commit" is left out), state, members and the member each assigned
    partition has, of every group."""
    samples = [
        Sample(names.GROUP_COMMITTED_OFFSET, {"group": group, "topic": topic, "partition": str(p)}, v)
        for group, offsets in sorted(committed.items())
        for (topic, p), v in sorted(offsets.items())
        if v >= 0
    ]
    for info in sorted(groups, key=lambda g: g.group):
        samples.append(Sample(names.GROUP_INFO, {"group": info.group, "state": info.state}, 1))
        if info.members is not None:
            samples.append(Sample(names.GROUP_MEMBERS, {"group": info.group}, info.members))
        samples += [
            Sample(
                names.GROUP_PARTITION_MEMBER,
                {"group": info.group, "topic": t, "partition": str(p), "client_id": client, "host": host},
                1,
            )
            for t, p, client, host in sorted(info.assigned)
        ]
    return samples


def _assigned(members: Iterable) -> tuple[tuple[str, int, str, str], ...]:
    """(topic, partition, client id, host) of every partition assigned to one of ``members`` (the Admin
    API's ``MemberDescription``; the host as the coordinator saw it, ``/127.0.0.1``)."""
    return tuple(
        (tp.topic, tp.partition, m.client_id, m.host)
        for m in members
        for tp in (m.assignment.topic_partitions if m.assignment else ())
    )


class OffsetsSource:
    """Admin API offsets of one cluster; ``collect()`` never raises for a fault of the cluster."""

    def __init__(self, cluster: Cluster, timeout_s: float = 10.0, admin: AdminClient | None = None):
        self.cluster = cluster
        self.name = SOURCE
        self.timeout_s = timeout_s
        self._admin = admin if admin is not None else admin_client(cluster)  # len(admin) 0 is falsy
        # log offsets via consumers' offsets_for_times: one result list per call, no future per partition;
        # one consumer per call in flight, as confluent-kafka runs the calls on one client one at a time
        self._settings = cluster_settings(cluster) | {"group.id": f"kobs-{cluster.name}-offsets"}
        self._consumers = [Consumer(self._settings) for _ in range(PARALLEL_CALLS)]
        self._stale: set[int] = set()  # consumers to replace after the scrape
        self._out: dict[tuple[str, str], Future] = {}  # (call, group) -> its coordinator request not done yet

    def collect(self) -> Scrape:
        ts, errors, group_errors = now_ms(), [], []
        deadline = time.monotonic() + self.timeout_s
        try:
            listed = partitions(self._admin, self.timeout_s)
        except Exception as exc:
            return Scrape(Batch(self.cluster.name, SOURCE, ts), [f"list_topics: {exc}"])
        tps = [(t, p) for t in sorted(listed) for p in listed[t]]
        with ThreadPoolExecutor(PARALLEL_CALLS + 1, thread_name_prefix="kobs-offsets") as pool:
            groups = pool.submit(self._group_samples, deadline, group_errors)  # meanwhile, on its own thread
            samples = self._log_offset_samples(pool, tps, deadline, errors) + groups.result()
        for i in self._stale:
            self._consumers[i].close()
            self._consumers[i] = Consumer(self._settings)
        self._stale.clear()
        return Scrape(Batch(self.cluster.name, SOURCE, ts, tuple(samples)), errors + group_errors)

    def _log_offset_samples(
        self, pool: ThreadPoolExecutor, tps: list[tuple[str, int]], deadline: float, errors: list[str]
    ) -> list[Sample]:
        """Earliest and latest offset of each partition; the blocking calls run on ``pool``, and the samples
        of each call are made while the later ones are out."""

        def fetch(i: int, spec: int, chunk: list[tuple[str, int]]) -> list[TopicPartition]:
            """One call, and once more for the partitions whose leader moved since the client's metadata
            (right after a topic is created, or a broker went away: :data:`MOVED`), time allowing."""
            consumer = self._consumers[i % PARALLEL_CALLS]
            pending = [TopicPartition(t, p, spec) for t, p in chunk]
            answers: dict[tuple[str, int], TopicPartition] = {}
            for attempt in range(2):
                if attempt:
                    if not pending or deadline - time.monotonic() < RETRY_PAUSE_S:
                        break
                    time.sleep(RETRY_PAUSE_S)
                try:
                    found = consumer.offsets_for_times(pending, timeout=max(0.0, deadline - time.monotonic()))
                except KafkaException as exc:  # the whole call: every partition is still pending
                    if exc.args[0].code() in STALE:
                        self._stale.add(i % PARALLEL_CALLS)
                    if attempt or exc.args[0].code() not in MOVED or deadline - time.monotonic() < 1:
                        raise
                    continue
                answers.update({(tp.topic, tp.partition): tp for tp in found})
                pending = [
                    TopicPartition(tp.topic, tp.partition, spec)
                    for tp in found
                    if tp.error is not None and tp.error.code() in MOVED
                ]
            if any(tp.error is not None and tp.error.code() in STALE for tp in answers.values()):
                self._stale.add(i % PARALLEL_CALLS)
            return list(answers.values())

        labels = {(t, p): {"topic": t, "partition": str(p)} for t, p in tps}  # one per partition: memory
        chunks = [tps[i : i + LOG_OFFSETS_CHUNK] for i in range(0, len(tps), LOG_OFFSETS_CHUNK)]
        specs = ((names.PARTITION_START_OFFSET, OFFSET_BEGINNING), (names.PARTITION_END_OFFSET, OFFSET_END))
        work = [(name, spec, c) for name, spec in specs for c in chunks]
        calls = [(name, len(c), pool.submit(fetch, i, spec, c)) for i, (name, spec, c) in enumerate(work)]
        samples: list[Sample] = []
        failures: Counter[str] = Counter()
        for name, size, call in calls:
            try:
                result = call.result()
            except KafkaException as exc:
                failures[str(exc.args[0])] += size
                continue
            for tp in result:
                if tp.error is None:
                    samples.append(Sample(name, labels[tp.topic, tp.partition], tp.offset))
                else:
                    failures[str(tp.error)] += 1
        errors.extend(f"list_offsets: {n} partitions failed with {reason}" for reason, n in failures.items())
        return samples

    def _group_samples(self, deadline: float, errors: list[str]) -> list[Sample]:
        groups, committed = self._groups(deadline, errors)
        return group_samples(committed, groups)

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
        described = self._coordinator_answers(
            "describe_consumer_groups", self._admin.describe_consumer_groups, ids, deadline, errors
        )
        states = {g.group_id: g.state.name.lower() for g in listed["groups"].valid}
        groups = [GroupInfo(g, states[g], None) for g in ids if g not in described]
        groups += [
            GroupInfo(g, states[g], len(d.members), _assigned(d.members)) for g, d in described.items()
        ]
        results = self._coordinator_answers(
            "list_consumer_group_offsets", self._committed, ids, deadline, errors
        )
        committed = {
            group: {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.error is None}
            for group, result in results.items()
        }
        return groups, committed

    def _coordinator_answers(
        self,
        name: str,
        call: Callable[..., dict[str, Future]],
        groups: list[str],
        deadline: float,
        errors: list[str],
    ) -> dict[str, Any]:
        """Group -> the answer by ``deadline`` to its ``call`` (a request to its coordinator): the request
        still out from an earlier scrape, else a new one."""
        self._out = {key: future for key, future in self._out.items() if not future.done()}
        new = [g for g in groups if (name, g) not in self._out]
        if new:
            asked = call(new, request_timeout=COORDINATOR_REQUEST_TIMEOUT_S)
            self._out |= {(name, g): future for g, future in asked.items()}
        return wait_all({g: self._out[name, g] for g in groups}, deadline, name, errors)

    def _committed(self, groups: list[str], request_timeout: float) -> dict[str, Future]:
        """``list_consumer_group_offsets`` of each group, one request each (the API takes one group)."""
        futures: dict[str, Future] = {}
        for group in groups:
            request = [ConsumerGroupTopicPartitions(group)]
            futures |= self._admin.list_consumer_group_offsets(request, request_timeout=request_timeout)
        return futures

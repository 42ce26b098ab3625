"""A recorded workload for ``kobs bench stream``: what the collectors of one cluster write, scrape by scrape.

Pure and deterministic: :class:`Workload` lays out a cluster (brokers, topics of ``PARTITIONS_PER_TOPIC``
partitions placed with Kafka's own algorithm, replication factor 3, consumer groups, producer clients) and
``round(r)`` returns the contract batches every source of ``common/contract.py`` would publish at scrape
``r``: each broker's JMX-exporter page, Admin API metadata and offsets, the producers' metrics and
ZooKeeper's ISR and controller events. The cluster carries a realistic mix of troubles: a follower broker
whose ISR membership flaps every scrape, lagging, stalled and caught-up groups, one controller failover.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from common import names
from common.contract import Batch, Event, Sample
from common.placement import assign_replicas

PARTITIONS_PER_TOPIC = 50
REPLICATION_FACTOR = 3
MESSAGE_BYTES = 1000
DISK_BYTES = 10**12  # each broker's log directory
REQUESTS = ("Produce", "FetchConsumer", "FetchFollower")
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class Shape:
    brokers: int = 6
    partitions: int = 6000
    groups: int = 40
    rounds: int = 30
    producers: int = 4
    interval_s: int = 15
    cluster: str = "bench"


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    rate: int  # messages per second

    @property
    def labels(self) -> dict[str, str]:
        return {"topic": self.topic, "partition": str(self.partition)}

    def end(self, t_s: float) -> int:
        return int(self.rate * t_s)


class Workload:
    def __init__(self, shape: Shape):
        self.shape = shape
        self.rf = min(REPLICATION_FACTOR, shape.brokers)
        self.flapping_broker = 1 % shape.brokers  # follower that drops out of and rejoins the ISR

    @cached_property
    def partitions(self) -> list[TopicPartition]:
        parts, brokers = [], range(self.shape.brokers)
        for t, first in enumerate(range(0, self.shape.partitions, PARTITIONS_PER_TOPIC)):
            count = min(PARTITIONS_PER_TOPIC, self.shape.partitions - first)
            placement = assign_replicas(
                brokers, count, self.rf, start_index=t % len(brokers), replica_shift=0
            )
            parts += [
                TopicPartition(f"topic-{t:04d}", p, tuple(placement[p]), 20 + (7 * t + 13 * p) % 200)
                for p in range(count)
            ]
        return parts

    @cached_property
    def flapping(self) -> list[TopicPartition]:
        """Partitions of the first topic that have the flapping broker as a follower."""
        first = self.partitions[0].topic
        return [tp for tp in self.partitions if tp.topic == first and self.flapping_broker in tp.replicas[1:]]

    def round(self, r: int) -> list[Batch]:
        """Every source's batch at scrape ``r`` (split into records of at most 5,000 items)."""
        ts_ms = START_MS + r * self.shape.interval_s * 1000
        batches = [
            *(self._broker(b, r, ts_ms) for b in range(self.shape.brokers)),
            self._metadata(r, ts_ms),
            self._offsets(r, ts_ms),
            *(self._producer(c, r, ts_ms) for c in range(self.shape.producers)),
        ]
        if r == self.shape.rounds // 2:  # controller failover halfway
            batches.append(self._controller_change(ts_ms))
        return [chunk for batch in batches for chunk in batch.chunks()]

    def _t(self, r: int) -> float:
        return (r + 1) * self.shape.interval_s  # seconds since the topics were created

    def _isr(self, tp: TopicPartition, r: int) -> tuple[int, ...]:
        shrunk = r % 2 == 1 and tp in self._flapping_set
        return tuple(b for b in tp.replicas if not (shrunk and b == self.flapping_broker))

    @cached_property
    def _flapping_set(self) -> frozenset[TopicPartition]:
        return frozenset(self.flapping)

    def _broker(self, broker: int, r: int, ts_ms: int) -> Batch:
        t, brokers = self._t(r), {"broker": str(broker)}
        hosted = [tp for tp in self.partitions if broker in tp.replicas]
        led = [tp for tp in hosted if tp.replicas[0] == broker]
        flaps = sum(1 for tp in self.flapping if tp.replicas[0] == broker)
        under = flaps if r % 2 == 1 else 0
        gauges = {
            names.UNDER_REPLICATED_PARTITIONS: under,
            names.UNDER_MIN_ISR_PARTITIONS: 0,
            names.PARTITION_COUNT: len(hosted),
            names.LEADER_COUNT: len(led),
            names.ISR_SHRINKS: flaps * ((r + 1) // 2),
            names.ISR_EXPANDS: flaps * (r // 2),
            names.ACTIVE_CONTROLLER: int(broker == self._controller(r)),
            names.OFFLINE_PARTITIONS: 0,
            names.UNCLEAN_ELECTIONS: 0,
            names.LEADER_ELECTIONS: len(led) + int(r >= self.shape.rounds // 2),
            names.OFFLINE_LOG_DIRS: 0,
            # every node a voter of the quorum, whose leader is the active controller (one election midway)
            names.RAFT_LEADER: self._controller(r),
            names.RAFT_EPOCH: 1 + int(r >= self.shape.rounds // 2),
            names.RAFT_VOTERS: self.shape.brokers,
        }
        samples = [Sample(name, brokers, value) for name, value in gauges.items()]
        produce_p99 = {**brokers, "request": "Produce", "quantile": "0.99"}
        samples.append(Sample(names.REQUEST_TOTAL_MS, produce_p99, 2.0 + broker + r % 3))
        log_dir = {**brokers, "log_dir": "/var/lib/kafka"}  # its disk fills with what it stores
        stored = sum(tp.end(t) for tp in hosted) * MESSAGE_BYTES
        samples += [
            Sample(names.LOG_DIR_TOTAL_BYTES, log_dir, DISK_BYTES),
            Sample(names.LOG_DIR_USABLE_BYTES, log_dir, DISK_BYTES - stored),
        ]
        by_topic: dict[str, int] = {}
        for tp in led:
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + tp.end(t)
        for topic, messages in sorted(by_topic.items()):
            labels = {**brokers, "topic": topic}
            samples += [
                Sample(names.MESSAGES_IN, labels, messages),
                Sample(names.BYTES_IN, labels, messages * MESSAGE_BYTES),
                Sample(names.BYTES_OUT, labels, messages * MESSAGE_BYTES * 2),
                Sample(names.FAILED_PRODUCE_REQUESTS, labels, 0),
            ]
        for i, request in enumerate(REQUESTS):
            labels = {**brokers, "request": request}
            samples += [
                Sample(names.REQUESTS, labels, int(t * (50 + 10 * i))),
                Sample(names.REQUEST_TIME_MS, labels, 1.5 + i + broker * 0.1),
            ]
        samples += [
            Sample(names.LOG_SIZE_BYTES, {**brokers, **tp.labels}, tp.end(t) * MESSAGE_BYTES) for tp in hosted
        ]
        return Batch(self.shape.cluster, f"exporter/broker-{broker}", ts_ms, tuple(samples))

    def _metadata(self, r: int, ts_ms: int) -> Batch:
        samples, events = [], []
        for tp in self.partitions:
            isr = self._isr(tp, r)
            samples += [
                Sample(names.PARTITION_REPLICAS, tp.labels, len(tp.replicas)),
                Sample(names.PARTITION_ISR, tp.labels, len(isr)),
                Sample(names.PARTITION_LEADER, tp.labels, tp.replicas[0]),
            ]
            if r > 0 and tp in self._flapping_set:
                change = "shrink" if r % 2 == 1 else "expand"
                old = list(self._isr(tp, r - 1))
                fields = {"topic": tp.topic, "partition": tp.partition, "old_isr": old, "new_isr": list(isr),
                          "leader": tp.replicas[0], "leader_epoch": -1, "change": change}  # fmt: skip
                events.append(Event("isr_change", ts_ms - 2000, fields))
        return Batch(self.shape.cluster, "admin/metadata", ts_ms, tuple(samples), tuple(events))

    def _offsets(self, r: int, ts_ms: int) -> Batch:
        t = self._t(r)
        samples = [Sample(names.PARTITION_START_OFFSET, tp.labels, 0) for tp in self.partitions]
        samples += [Sample(names.PARTITION_END_OFFSET, tp.labels, tp.end(t)) for tp in self.partitions]
        topics = sorted({tp.topic for tp in self.partitions})
        for g in range(self.shape.groups):
            group, topic = f"group-{g:03d}", topics[g % len(topics)]
            for tp in self.partitions:
                if tp.topic == topic:
                    samples.append(Sample(names.GROUP_COMMITTED_OFFSET, {"group": group, **tp.labels},
                                          _committed(g % 4, tp, t)))  # fmt: skip
            samples += [
                Sample(names.GROUP_INFO, {"group": group, "state": "stable"}, 1),
                Sample(names.GROUP_MEMBERS, {"group": group}, 1 + g % 5),
            ]
        return Batch(self.shape.cluster, "admin/offsets", ts_ms, tuple(samples))

    def _producer(self, client: int, r: int, ts_ms: int) -> Batch:
        labels, blocked = {"client_id": f"producer-{client}"}, client == 0 and r % 2 == 1
        total = 32 * 2**20
        values = {
            names.PRODUCER_BUFFER_TOTAL_BYTES: total,
            names.PRODUCER_BUFFER_AVAILABLE_BYTES: 0 if blocked else total // 2,
            names.PRODUCER_BUFFERPOOL_WAIT_RATIO: 0.4 if blocked else 0.0,
            names.PRODUCER_BUFFERPOOL_WAIT_NS: 10**9 * (r // 2) if client == 0 else 0,
            names.PRODUCER_WAITING_THREADS: 3 if blocked else 0,
            names.PRODUCER_RECORD_SEND_RATE: 1000.0 + client,
            names.PRODUCER_RECORD_ERROR_RATE: 0.0,
            names.PRODUCER_RECORD_ERRORS: 0,
            names.PRODUCER_REQUEST_LATENCY_MS: 4.0 + client,
        }
        samples = tuple(Sample(name, labels, value) for name, value in values.items())
        return Batch(self.shape.cluster, f"producer/producer-{client}", ts_ms, samples)

    def _controller(self, r: int) -> int:
        return 0 if r < self.shape.rounds // 2 else (1 % self.shape.brokers)

    def _controller_change(self, ts_ms: int) -> Batch:
        fields = {"controller_id": self._controller(self.shape.rounds // 2), "controller_epoch": 2}
        return Batch(
            self.shape.cluster, "zookeeper/isr", ts_ms, (), (Event("controller_change", ts_ms, fields),)
        )


def _committed(kind: int, tp: TopicPartition, t: float) -> int:
    """A group's committed offset: caught up, falling behind, stalled at 60 s, or a steady 30 s behind."""
    if kind == 0:
        return tp.end(t)
    if kind == 1:
        return int(tp.end(t) * 0.8)
    if kind == 2:
        return tp.end(min(t, 60))
    return tp.end(max(0.0, t - 30))

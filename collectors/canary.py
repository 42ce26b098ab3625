"""End-to-end canary: does Kafka work for its clients, broker by broker?

As kminion's end-to-end monitoring and LinkedIn's Xinfra Monitor do, a producer writes a message to every
partition of a canary topic that has a partition led by each broker, with ``acks=all``, and a consumer
reads them back. Per partition, labelled with the broker meant to lead it (its preferred leader), the canary
counts messages sent, acknowledged, received and lost (not read back within ``timeout_s``), and observes the
produce latency (send to acknowledgement) and the end-to-end latency (send to read back) in histograms.
Availability is received / (received + lost) over a window, in PromQL (``alerts/kafka_canary.rules.yml``).

It serves these on ``kobs collect``'s self-metrics, not through the metrics topic: a canary must still
report when the cluster does not work, and that cluster may hold the metrics topic.

The topic (``clusters[].canary``) is created with partition *i* led by the *i*-th broker and its replicas on
the next ones (replication factor 3, or fewer brokers); every minute a broker without a partition of its own
gets a new one, and partitions led by another replica get a preferred leader election (what Kafka's
``auto.leader.rebalance.enable`` does, sooner). Moving the replicas of existing partitions needs the Admin
API's AlterPartitionReassignments, which confluent-kafka does not offer: a partition whose preferred broker
left the cluster stays, led by another replica.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collectors.admin import LISTING_TIMEOUT_S, admin_client, list_topics
from collectors.scheduler import reason_of
from common.config import Cluster
from common.kafka_clients import HUNG_BROKER_TIMEOUT_MS, cluster_settings

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
TOPIC_CHECK_S = 60.0  # how often the topic's partitions and leaders are checked
ADMIN_TIMEOUT_S = 5.0
RETRY_S = 5.0  # wait after a failed setup before trying again
POLL_S = 0.05  # the loop's longest wait for messages
ERROR_REASONS = ("session", "topic", "consume")  # the first word of each error line (_error)


def assignment(brokers: Iterable[int], replication_factor: int) -> list[list[int]]:
    """Replicas of one partition per broker: partition *i* led by the *i*-th broker, followed by the next."""
    ring = sorted(brokers)
    return [[ring[(i + k) % len(ring)] for k in range(replication_factor)] for i in range(len(ring))]


def without_partition(preferred: Iterable[int], brokers: Iterable[int]) -> list[int]:
    """Brokers that are no partition's preferred leader, in id order."""
    return sorted(set(brokers) - set(preferred))


class InFlight:
    """Messages sent and not yet read back or lost: sequence number -> (partition, monotonic send time)."""

    def __init__(self) -> None:
        self.messages: dict[int, tuple[int, float]] = {}

    def sent(self, seq: int, partition: int, at_s: float) -> None:
        self.messages[seq] = (partition, at_s)

    def received(self, seq: int, at_s: float) -> tuple[int, float] | None:
        """(partition, end-to-end seconds) of a message read back; None if already lost (or unknown)."""
        found = self.messages.pop(seq, None)
        return None if found is None else (found[0], at_s - found[1])

    def expire(self, now_s: float, timeout_s: float) -> list[int]:
        """The partitions of the messages sent more than ``timeout_s`` ago, now lost (one entry each)."""
        lost = [seq for seq, (_, at_s) in self.messages.items() if now_s - at_s > timeout_s]
        return [self.messages.pop(seq)[0] for seq in lost]


class CanaryMetrics:
    """The canaries' series on the collector's self-metrics registry (documented in docs/metrics.md)."""

    def __init__(self, registry: CollectorRegistry):
        labels = ["cluster", "partition", "broker"]

        def counter(name: str, help_: str) -> Counter:
            return Counter(name, help_, labels, registry=registry)

        self.sent = counter("kobs_canary_messages_sent", "Canary messages produced (acks=all).")
        self.acked = counter("kobs_canary_messages_acked", "Canary messages the leader acknowledged.")
        self.received = counter("kobs_canary_messages_received", "Canary messages read back in time.")
        self.lost = counter("kobs_canary_messages_lost", "Canary messages not read back within timeout_s.")
        self.produce_latency = Histogram(
            "kobs_canary_produce_latency_seconds",
            "From produce to the acknowledgement of all in-sync replicas (acks=all).",
            labels,
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.end_to_end_latency = Histogram(
            "kobs_canary_end_to_end_latency_seconds",
            "From produce to the message read back by the canary's consumer.",
            labels,
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.errors = Counter(
            "kobs_canary_errors",
            "Canary problems by reason (topic setup, client errors); its messages are counted apart.",
            ["cluster", "reason"],
            registry=registry,
        )

        self.availability_slo = Gauge(
            "kobs_canary_availability_slo_ratio",
            "The cluster's canary availability SLO (clusters[].canary.availability_slo), for the rules.",
            ["cluster"],
            registry=registry,
        )
        self.latency_slo = Gauge(
            "kobs_canary_latency_slo_seconds",
            "The cluster's canary latency SLO (clusters[].canary.latency_slo_s), for the rules.",
            ["cluster"],
            registry=registry,
        )

    def start(self, cluster: Cluster) -> None:
        """The cluster's SLOs, and a series at 0 for every error reason of its canary (the first counts)."""
        self.availability_slo.labels(cluster.name).set(cluster.canary.availability_slo)
        self.latency_slo.labels(cluster.name).set(cluster.canary.latency_slo_s)
        for reason in ERROR_REASONS:
            self.errors.labels(cluster.name, reason)

    def follow(self, labels: tuple[str, str, str]) -> None:
        """Every message counter of a partition the canary starts following, at 0: Prometheus's
        ``increase()`` counts a series' first loss only if the series was there before it."""
        for counter in (self.sent, self.acked, self.received, self.lost):
            counter.labels(*labels)


class Canary:
    """The canary of one cluster, in a thread of its own until ``stop`` is set."""

    def __init__(self, cluster: Cluster, metrics: CanaryMetrics, stop: threading.Event):
        self.cluster, self.settings, self.metrics, self.stop = cluster, cluster.canary, metrics, stop
        self.run_id = uuid.uuid4().hex[:12].encode()  # its messages only: another canary may share the topic
        self.partitions: dict[int, str] = {}  # partition -> preferred leader (the label); replaced whole
        self.in_flight = InFlight()
        self.seq = 0
        self.thread = threading.Thread(target=self.run, name=f"canary-{cluster.name}", daemon=True)

    def start(self) -> Canary:
        self.metrics.start(self.cluster)
        self.thread.start()
        return self

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self._session()
            except Exception as exc:  # KafkaException and the like: a broken cluster never ends the canary
                self._error(f"session: {exc}")
                self.stop.wait(RETRY_S)

    def _session(self) -> None:
        """One producer, consumer and topic checker until ``stop`` (or an error) ends it."""
        settings = cluster_settings(self.cluster)
        timeout_ms = int(self.settings.timeout_s * 1000)
        producer = Producer(
            {
                "client.id": f"kobs-canary-{self.cluster.name}",
                "linger.ms": 0,
                "socket.timeout.ms": HUNG_BROKER_TIMEOUT_MS,
            }
            | settings
            | {"acks": "all", "message.timeout.ms": timeout_ms}
        )
        consumer = Consumer(
            {"client.id": f"kobs-canary-{self.cluster.name}", "fetch.wait.max.ms": 100}
            | settings
            | {"group.id": f"kobs-canary-{self.run_id.decode()}", "enable.auto.commit": False}
        )  # assigned, never subscribed: the group never joins nor commits
        checker = threading.Thread(target=self._check_topic_often, args=(admin_client(self.cluster),))
        checker.daemon = True
        checker.start()
        ready: dict[int, str] = {}  # partitions the consumer reads from a known offset -> their label
        next_send = time.monotonic()
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                if now >= next_send:
                    self._follow(consumer, self.partitions, ready)
                    self._send(producer, ready, now)
                    next_send = max(next_send + self.settings.interval_s, now)
                producer.poll(0)
                for message in consumer.consume(100, timeout=POLL_S):
                    self._read(message, ready)
                for partition in self.in_flight.expire(time.monotonic(), self.settings.timeout_s):
                    self.metrics.lost.labels(*self._labels(partition, ready)).inc()
        finally:
            consumer.close()
            producer.flush(0)

    def _follow(self, consumer: Consumer, wanted: Mapping[int, str], ready: dict[int, str]) -> None:
        """Read the partitions of ``wanted`` from their end offset now, so that every message sent from
        here on is read back; partitions whose end offset cannot be had now (their leader is away) wait."""
        topic = self.settings.topic
        gone = [p for p in ready if p not in wanted]
        if gone:
            consumer.incremental_unassign([TopicPartition(topic, p) for p in gone])
        for partition in gone:
            del ready[partition]
        for partition, broker in wanted.items():
            if partition in ready:
                ready[partition] = broker
                continue
            try:
                _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=1.0)
            except Exception:  # KafkaException: no leader to ask now; the next send tries again
                continue
            consumer.incremental_assign([TopicPartition(topic, partition, end)])
            ready[partition] = broker
            self.metrics.follow(self._labels(partition, ready))

    def _send(self, producer: Producer, partitions: Mapping[int, str], now: float) -> None:
        """One message to each partition the consumer follows."""
        for partition in partitions:
            self.seq += 1
            labels = self._labels(partition, partitions)
            producer.produce(
                self.settings.topic,
                self.run_id + b":" + str(self.seq).encode(),
                partition=partition,
                on_delivery=lambda error, message, labels=labels: self._acked(error, message, labels),
            )
            self.in_flight.sent(self.seq, partition, now)
            self.metrics.sent.labels(*labels).inc()

    def _acked(self, error: KafkaError | None, message: Message, labels: tuple[str, str, str]) -> None:
        if error is None:
            self.metrics.acked.labels(*labels).inc()
            self.metrics.produce_latency.labels(*labels).observe(message.latency())

    def _read(self, message: Message, partitions: Mapping[int, str]) -> None:
        if message.error() is not None:
            if message.error().code() != KafkaError._PARTITION_EOF:
                self._error(f"consume: {message.error()}")
            return
        run_id, _, seq = (message.value() or b"").partition(b":")
        if run_id != self.run_id or not seq.isdigit():
            return  # another canary's, or not a canary message
        outcome = self.in_flight.received(int(seq), time.monotonic())
        if outcome is not None:
            labels = self._labels(outcome[0], partitions)
            self.metrics.received.labels(*labels).inc()
            self.metrics.end_to_end_latency.labels(*labels).observe(outcome[1])

    def _labels(self, partition: int, partitions: Mapping[int, str]) -> tuple[str, str, str]:
        return self.cluster.name, str(partition), partitions.get(partition, "unknown")

    def _check_topic_often(self, admin: AdminClient) -> None:
        while not self.stop.is_set():
            try:
                self.partitions = self.check_topic(admin)
            except Exception as exc:  # the cluster's fault: try again at the next check
                self._error(f"topic: {exc}")
            self.stop.wait(TOPIC_CHECK_S if self.partitions else RETRY_S)

    def check_topic(self, admin: AdminClient) -> dict[int, str]:
        """Create the topic or add the partitions it lacks, elect preferred leaders where another replica
        leads; returns partition -> preferred leader (none from the check that creates the topic)."""
        topic, timeout = self.settings.topic, ADMIN_TIMEOUT_S
        metadata = list_topics(admin, LISTING_TIMEOUT_S)  # asked again of another broker if one hangs
        brokers = list(metadata.brokers)
        found = metadata.topics.get(topic)
        error = found.error.code() if found is not None and found.error is not None else None
        if found is None or error == KafkaError.UNKNOWN_TOPIC_OR_PART:
            factor = min(self.settings.replication_factor or 3, len(brokers))
            replicas = assignment(brokers, factor)
            new = NewTopic(topic, len(replicas), replica_assignment=replicas)  # the count is required too
            try:
                admin.create_topics([new], request_timeout=timeout)[topic].result(timeout)
                log.info(
                    "canary: created %s with %d partitions on %s", topic, len(replicas), self.cluster.name
                )
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise  # (already there: a broker whose metadata lags had not heard of it yet)
            return {}  # its leaders at the next check
        if error == KafkaError.LEADER_NOT_AVAILABLE:
            return {}  # just created: its leaders are being elected
        if error is not None:  # TOPIC_AUTHORIZATION_FAILED and the like
            raise KafkaException(found.error)
        partitions = found.partitions
        preferred = {p: m.replicas[0] for p, m in partitions.items() if m.replicas}
        missing = without_partition(preferred.values(), brokers)
        if missing:
            factor = min(max(len(m.replicas) for m in partitions.values()), len(brokers))
            ring = sorted(brokers)
            extra = [[ring[(ring.index(b) + k) % len(ring)] for k in range(factor)] for b in missing]
            grow = NewPartitions(topic, len(partitions) + len(missing), replica_assignment=extra)
            admin.create_partitions([grow], request_timeout=timeout)[topic].result(timeout)
            return self.check_topic(admin)
        moved = [
            TopicPartition(topic, p)
            for p, m in partitions.items()
            if m.replicas and m.leader != m.replicas[0] and m.replicas[0] in m.isrs
        ]
        if moved:
            # (no request_timeout: confluent-kafka 2.16 raises SystemError on it)
            admin.elect_leaders(ElectionType.PREFERRED, moved).result(timeout)
        return {p: str(b) for p, b in sorted(preferred.items())}

    def _error(self, line: str) -> None:
        self.metrics.errors.labels(self.cluster.name, reason_of(line)).inc()
        log.warning("canary %s: %s", self.cluster.name, line)


def start_canaries(clusters: Sequence[Cluster], registry: CollectorRegistry, stop: threading.Event) -> list:
    """A running canary for every cluster with Admin API access and its canary enabled."""
    metrics = CanaryMetrics(registry)
    return [Canary(c, metrics, stop).start() for c in clusters if c.bootstrap_servers and c.canary.enabled]

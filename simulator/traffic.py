"""Real traffic on a Kafka cluster: a producer and consumer groups with real commits.

A producer thread writes ``messages_per_s`` round-robin over the topic's partitions; each group is a real
consumer (one thread) reading at most its ``messages_per_s`` (``None``: as fast as it can) and committing
what it consumed every ``commit_interval_s``. The default mix has a healthy group and one that reads a
fifth of the traffic, so its lag grows by 40 messages a second. A commit refused while the cluster moves
(a broker killed, its group coordinator moving) is tried again at the next interval: the groups ride out
the demo's incidents as a real service would, quietly: librdkafka's own log lines (a failed connection, a
timed-out request: the incidents' doing, and the demo narrates them) are kept to critical ones.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from common.kafka_clients import LIBRDKAFKA_LOG_LEVEL

log = logging.getLogger(__name__)
POLL_S = 0.1
UNLIMITED_BATCH = 500  # messages an unlimited group takes per poll


@dataclass(frozen=True)
class GroupTraffic:
    group: str
    messages_per_s: float | None = None  # None: as fast as it can


@dataclass(frozen=True)
class TrafficSpec:
    topic: str = "demo-orders"
    partitions: int = 4
    messages_per_s: float = 50.0
    groups: tuple[GroupTraffic, ...] = field(
        default=(GroupTraffic("demo-billing"), GroupTraffic("demo-analytics", messages_per_s=10.0))
    )
    commit_interval_s: float = 1.0


class Traffic:
    """Runs the spec's producer and groups against ``bootstrap`` until ``stop()``; the topic must exist."""

    def __init__(self, bootstrap: str, spec: TrafficSpec | None = None):
        self.bootstrap, self.spec = bootstrap, spec or TrafficSpec()
        self.produced = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Traffic:
        runs = [(f"traffic-producer-{self.spec.topic}", self._produce)]
        runs += [(f"traffic-{g.group}", lambda g=g: self._consume(g)) for g in self.spec.groups]
        for name, run in runs:
            thread = threading.Thread(target=run, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()

    def __enter__(self) -> Traffic:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": 20,
                "client.id": "traffic",
                "log_level": LIBRDKAFKA_LOG_LEVEL,
            }
        )
        started = time.monotonic()
        while not self._stop.wait(POLL_S):
            due = int((time.monotonic() - started) * self.spec.messages_per_s)
            while self.produced < due:
                partition = self.produced % self.spec.partitions
                producer.produce(self.spec.topic, f"order-{self.produced}".encode(), partition=partition)
                self.produced += 1
            producer.poll(0)
        producer.flush(10)

    def _consume(self, spec: GroupTraffic) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": spec.group,
                "client.id": spec.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "log_level": LIBRDKAFKA_LOG_LEVEL,
            }
        )
        consumer.subscribe([self.spec.topic])
        allowance, last = 0.0, time.monotonic()  # messages the rate allows now (at most a second's worth)
        last_commit, uncommitted = last, False
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if spec.messages_per_s is None:
                    allowance = UNLIMITED_BATCH
                else:
                    allowance = min(allowance + (now - last) * spec.messages_per_s, spec.messages_per_s)
                last = now
                if allowance < 1:
                    self._stop.wait(POLL_S)
                    continue
                messages = [m for m in consumer.consume(int(allowance), timeout=POLL_S) if m.error() is None]
                allowance -= len(messages)
                uncommitted |= bool(messages)
                if uncommitted and now - last_commit >= self.spec.commit_interval_s:
                    last_commit = now
                    try:
                        consumer.commit(asynchronous=False)
                        uncommitted = False
                    except KafkaException as exc:
                        # _NO_OFFSET: a rebalance took the partitions read since the last commit
                        uncommitted = exc.args[0].code() != KafkaError._NO_OFFSET
                        log.debug("traffic group %s: commit refused (%s)", spec.group, exc)
        finally:
            consumer.close()

"""Publish batches to the metrics topic without ever making a scrape wait on Kafka.

``submit()`` encodes a batch (``Batch.chunks`` → ``encode``, key ``cluster|source``) and puts the records on a
bounded in-memory queue; it never blocks, and a full queue drops the batch (counted). One sender thread owns
the confluent-kafka producer and the on-disk :class:`~collectors.spool.Spool`:

- given ``create``, ``start()`` creates the topic if missing (:mod:`collectors.topic`), waiting at most
  ``CREATE_TIMEOUT_S``; a refusal raises :class:`~collectors.topic.TopicError`, no answer does not;
- healthy and spool empty: records go straight to Kafka;
- when a delivery fails or librdkafka reports all brokers down, outstanding records are purged from the
  producer and written to the spool in the order they were sent (librdkafka reports purged records
  queued ones first, in-flight ones after), followed by everything queued after them;
- while the spool holds anything, new records are appended behind it, so per-key order is kept;
- every ``probe_interval_s`` a metadata request checks the topic (created if missing, given ``create``);
  once it has leaders again the spool is replayed oldest segment first, and a segment is only deleted (or
  rewritten with its undelivered rest) after the delivery reports came back, so nothing is replayed twice.

A record purged while in flight may already have been written by a broker that then died; those few are
delivered at least once (the contract asks readers to be idempotent on key and ``ts``). Counters count
samples plus events: ``sent`` (delivered directly), ``spooled``, ``replayed`` (delivered from the spool) and
``dropped`` (queue full, spool at ``spool_max_bytes`` or its disk full).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from collectors.spool import Record, Spool
from collectors.topic import TopicError, ensure_topic
from common.config import Config
from common.contract import Batch, encode
from common.kafka_clients import client_settings, metrics_producer_settings

log = logging.getLogger(__name__)

CREATE_TIMEOUT_S = 5.0


@dataclass
class PublisherStats:
    sent: int = 0
    spooled: int = 0
    replayed: int = 0
    dropped: int = 0


class Publisher:
    """Bounded queue → Kafka, spilling to a spool while the topic is unreachable. Start, submit, close."""

    def __init__(
        self,
        producer_settings: dict[str, Any],
        topic: str,
        spool: Spool,
        max_queue: int = 10_000,
        max_in_flight: int = 1_000,
        probe_interval_s: float = 1.0,
        create: tuple[dict[str, Any], int, int] | None = None,
    ):
        """``create``: (admin settings, partitions, replication factor) to create the topic if missing."""
        self.topic = topic
        self._create = create
        self._admin: AdminClient | None = None
        self._refusal = ""  # the last TopicError logged by the probe
        self.stats = PublisherStats()
        self._settings = producer_settings | {"error_cb": self._on_error}
        self._spool = spool
        self._queue: queue.Queue[Record] = queue.Queue(max_queue)
        self._max_in_flight = max_in_flight
        self._probe_interval_s = probe_interval_s
        self._producer = Producer(self._settings)
        self._lock = threading.Lock()  # guards stats.dropped and _pending, written from both sides
        self._pending = spool.items  # items submitted (or left spooled) and neither delivered nor dropped yet
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kobs-publisher", daemon=True)
        # Sender-thread state.
        self._healthy = True
        self._down = False  # set by callbacks: fail over at the next turn of the loop
        self._failed: list[tuple[int, Record]] = []  # (send ordinal, record) of failed direct deliveries
        self._sent_ordinal = itertools.count()  # the order direct records went to the producer
        self._replay: list[Record] = []  # the spool segment being replayed
        self._replay_done: set[int] = set()
        self._next_probe = 0.0
        self._disk_full = False  # logged once per change

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> Publisher:
        spool = Spool(config.sinks.spool_dir, config.sinks.spool_max_bytes)
        topic = config.metrics_topic
        admin = client_settings(config.metrics_bootstrap, topic.security, where="metrics_topic")
        create = (admin, topic.partitions, topic.replication_factor)
        return cls(metrics_producer_settings(config), topic.name, spool, create=create, **kwargs)

    # -- caller side ------------------------------------------------------------------------------------
    def start(self) -> Publisher:
        """Create the topic if missing (TopicError if refused), then start sending."""
        if self._create is not None and not self._ensure_topic(CREATE_TIMEOUT_S):
            log.warning("metrics topic %s: cluster unreachable, checked again once it answers", self.topic)
        self._thread.start()
        return self

    def _ensure_topic(self, timeout_s: float) -> bool:
        assert self._create is not None
        settings, partitions, replication_factor = self._create
        self._admin = self._admin or AdminClient(settings)
        return ensure_topic(self._admin, self.topic, partitions, replication_factor, timeout_s)

    def submit(self, batch: Batch) -> bool:
        """Queue a batch for publishing; never blocks. False when the queue was full and it was dropped."""
        records = [Record(c.key, encode(c), len(c.samples) + len(c.events)) for c in batch.chunks()]
        for i, record in enumerate(records):
            try:
                with self._lock:
                    self._queue.put_nowait(record)
                    self._pending += record.items
            except queue.Full:
                self._count(dropped=sum(r.items for r in records[i:]), pending=0)
                return False
        return True

    def _count(self, dropped: int, pending: int) -> None:
        with self._lock:
            self.stats.dropped += dropped
            self._pending -= pending

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    @property
    def spool_bytes(self) -> int:
        return self._spool.bytes

    @property
    def healthy(self) -> bool:
        return self._healthy

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything submitted is delivered and the spool let go of what it replayed; False if
        something is still queued or spooled."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._pending == 0 and self._spool.empty:
                return True
            time.sleep(0.02)
        return False

    def close(self, timeout_s: float = 10.0) -> bool:
        """Deliver what can be within ``timeout_s``, spool the rest (kept for the next start), stop."""
        delivered = self.flush(timeout_s)
        self._stop.set()
        self._thread.join()
        return delivered

    # -- sender thread ----------------------------------------------------------------------------------
    def _run(self) -> None:
        """The sender loop; an unexpected error is logged in one line and the loop goes on a second later: the
        thread never dies while the collector runs."""
        while not self._stop.is_set():
            try:
                self._turn()
            except Exception as exc:  # whatever it was, scrapes keep coming
                log.error("publisher: %s: %s; going on in 1 s", type(exc).__name__, exc)
                self._stop.wait(1.0)
        self._take_back()  # anything still outstanding is kept in the spool for the next start
        self._spool_queue()
        self._spool.close()

    def _turn(self) -> None:
        self._producer.poll(0.02)
        if self._down:
            self._fail_over()
        if not self._healthy:
            self._spool_queue()
            self._probe()
        elif not self._spool.empty or self._replay:
            self._spool_queue()
            self._step_replay()
        else:
            self._send_queue()

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN or err.fatal():
            self._down = True

    def _produce(self, record: Record, on_delivery: Callable[[KafkaError | None, Any], None]) -> bool:
        try:
            self._producer.produce(self.topic, record.value, record.key, on_delivery=on_delivery)
        except BufferError:
            return False
        except KafkaException as exc:
            log.warning("produce failed: %s", exc)
            self._down = True
            return False
        return True

    def _send_queue(self) -> None:
        while len(self._producer) < self._max_in_flight and not self._down:
            try:
                record = self._queue.get_nowait()
            except queue.Empty:
                return
            ordinal = next(self._sent_ordinal)
            if not self._produce(record, self._direct_report(ordinal, record)):
                self._failed.append((ordinal, record))
                self._down = True

    def _direct_report(self, ordinal: int, record: Record) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                self.stats.sent += record.items
                self._count(dropped=0, pending=record.items)
            else:
                self._failed.append((ordinal, record))
                self._down = True

        return report

    def _step_replay(self) -> None:
        if not self._replay:
            self._replay = self._spool.head()
            self._replay_done = set()
            for i, record in enumerate(self._replay):
                if not self._produce(record, self._replay_report(i)):
                    self._down = True
                    break
        elif len(self._producer) == 0:
            self._finish_replay()

    def _replay_report(self, index: int) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                self._replay_done.add(index)
                self.stats.replayed += self._replay[index].items
                self._count(dropped=0, pending=self._replay[index].items)
            else:
                self._down = True

        return report

    def _finish_replay(self) -> None:
        self._spool.commit_head([r for i, r in enumerate(self._replay) if i not in self._replay_done])
        self._replay = []

    def _take_back(self) -> None:
        """Purge everything outstanding from the producer and spool what was not delivered, oldest first."""
        self._producer.purge(in_queue=True, in_flight=True)
        while len(self._producer) > 0:
            self._producer.poll(0.05)
        if self._replay:
            self._finish_replay()
        failed, self._failed = self._failed, []
        for _ordinal, record in sorted(failed, key=lambda failure: failure[0]):
            self._spill(record)

    def _fail_over(self) -> None:
        self._take_back()
        self._down = False
        if self._healthy:
            log.warning("metrics topic %s unreachable: spooling to %s", self.topic, self._spool.directory)
            # A fresh producer gets a fresh idempotent producer id: a broker that lost its state (or a fatal
            # error) would otherwise reject the old one forever.
            self._producer = Producer(self._settings)
            self._healthy = False
            self._next_probe = time.monotonic() + self._probe_interval_s

    def _spill(self, record: Record) -> None:
        if self._spool.append(record):
            self.stats.spooled += record.items
        else:
            self._count(dropped=record.items, pending=record.items)
        if self._spool.full != self._disk_full:
            self._disk_full = self._spool.full
            if self._disk_full:
                log.error("spool %s: the disk is full: records are dropped (counted) until it has room",
                          self._spool.directory)  # fmt: skip
            else:
                log.info("spool %s: the disk has room again", self._spool.directory)

    def _spool_queue(self) -> None:
        while True:
            try:
                self._spill(self._queue.get_nowait())
            except queue.Empty:
                return

    def _probe(self) -> None:
        if time.monotonic() < self._next_probe:
            return
        self._next_probe = time.monotonic() + self._probe_interval_s
        if self._create is not None:
            try:
                self._ensure_topic(self._probe_interval_s)
            except TopicError as exc:
                if str(exc) != self._refusal:  # once, not every probe
                    self._refusal = str(exc)
                    log.error("%s", exc)
        try:
            topic = self._producer.list_topics(self.topic, timeout=self._probe_interval_s).topics.get(
                self.topic
            )
        except KafkaException:
            return
        if topic is not None and topic.error is None and topic.partitions:
            self._healthy = all(p.leader >= 0 for p in topic.partitions.values())
            if self._healthy:
                log.info(
                    "metrics topic %s reachable again: replaying %d spooled bytes",
                    self.topic,
                    self.spool_bytes,
                )

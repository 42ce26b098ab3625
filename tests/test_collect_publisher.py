"""Publisher and spool: the broker stopped mid-publish, scrapes never wait, the spool replays exactly once."""

from __future__ import annotations

import logging
import subprocess
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from waiting import wait_for

from collectors import publisher as publisher_module
from collectors.publisher import Publisher
from collectors.spool import Record, Spool, read_segment
from collectors.topic import TopicError
from common.config import Config
from common.contract import Batch, Sample, decode
from common.kafka_clients import metrics_producer_settings
from peers import kafka_tools
from peers.kafka import KafkaCluster
from peers.process import free_port
from peers.stack import create_topic

TOPIC = "kobs.metrics"
SOURCES = ("jmx/broker-1", "jmx/broker-2", "admin/offsets")


def test_spool_is_fifo_capped_and_survives_reopen(tmp_path):
    records = [Record(b"k%02d" % i, b"v" * 100, i) for i in range(1, 31)]
    spool = Spool(tmp_path, max_bytes=20 * records[0].size, segment_bytes=5 * records[0].size)
    accepted = [r for r in records if spool.append(r)]
    assert accepted == records[:20]  # the 21st would pass max_bytes: refused, nothing written
    assert spool.items == sum(range(1, 21))
    head = spool.head()
    assert head == records[:5]  # oldest segment first
    spool.commit_head(head[3:])  # first three delivered
    reopened = Spool(tmp_path, max_bytes=10**6)
    assert reopened.head() == records[3:5]
    assert reopened.items == sum(range(4, 21))
    reopened.commit_head([])
    assert reopened.head() == records[5:10]


def test_spool_ignores_a_frame_cut_short(tmp_path):
    spool = Spool(tmp_path, max_bytes=10**6)
    spool.append(Record(b"a", b"complete", 1))
    spool.append(Record(b"b", b"cut short by a crash", 1))
    spool.close()
    (segment,) = tmp_path.glob("*.spool")
    segment.write_bytes(segment.read_bytes()[:-5])
    assert Spool(tmp_path, max_bytes=10**6).head() == [Record(b"a", b"complete", 1)]


def _batch(source: str, seq: int) -> Batch:
    samples = tuple(
        Sample("kafka_broker_partitions", {"seq": str(seq), "i": str(i)}, float(i)) for i in range(3)
    )
    return Batch("test", source, 1_700_000_000_000 + seq, samples)


def _submit(publisher: Publisher, seqs: range) -> None:
    for seq in seqs:
        started = time.monotonic()
        assert publisher.submit(_batch(SOURCES[seq % len(SOURCES)], seq))
        assert time.monotonic() - started < 1.0, "submit must never wait on Kafka"


def _read_back(bootstrap: str, expected_samples: int) -> list[tuple[str, int]]:
    """(source, seq) of every sample on the topic, in per-partition order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    partitions = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in partitions])
    seen: list[tuple[str, int]] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < expected_samples and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            batch = decode(msg.value())
            assert msg.key() == batch.key
            seen += [(batch.source, int(s.labels["seq"])) for s in batch.samples]
        # a little longer, so that duplicates would be seen too
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                batch = decode(msg.value())
                seen += [(batch.source, int(s.labels["seq"])) for s in batch.samples]
    finally:
        consumer.close()
    return seen


def _assert_ordered_per_source(seen: list[tuple[str, int]]) -> None:
    by_source: dict[str, list[int]] = defaultdict(list)
    for source, seq in seen:
        if not by_source[source] or by_source[source][-1] != seq:
            by_source[source].append(seq)
    for source, seqs in by_source.items():
        assert seqs == sorted(seqs), f"{source} out of order: {seqs}"


def _partitions(bootstrap: str, topic: str) -> int | None:
    topics = (
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    )  # never auto-creates
    return len(topics[topic].partitions) if topic in topics else None


def _config(bootstrap: str, tmp_path, topic: str, partitions: int) -> Config:
    return Config.model_validate(
        {
            "clusters": [{"name": "test", "bootstrap_servers": [bootstrap]}],
            "metrics_topic": {"name": topic, "partitions": partitions},
            "sinks": {"run_dir": str(tmp_path)},
        }
    )


def test_start_creates_a_missing_topic_with_the_configured_partitions(kafka_cluster, tmp_path):
    topic = "publisher-created"
    assert _partitions(kafka_cluster.bootstrap, topic) is None
    publisher = Publisher.from_config(_config(kafka_cluster.bootstrap, tmp_path, topic, 3)).start()
    try:
        # Kafka answers CreateTopics once its controller has the topic; the broker a new client asks may
        # apply that a moment later (a two-worker run saw none there right after start)
        seen = wait_for(lambda: _partitions(kafka_cluster.bootstrap, topic), timeout_s=10)
        assert seen == 3  # tansu's auto-create would give 4
        assert publisher.submit(_batch("jmx/broker-1", 1)) and publisher.flush(20)
    finally:
        publisher.close(timeout_s=5)


def test_start_leaves_an_existing_topic_alone(kafka_cluster, tmp_path):
    topic = "publisher-existing"
    create_topic(kafka_cluster.bootstrap, topic, 2)
    publisher = Publisher.from_config(_config(kafka_cluster.bootstrap, tmp_path, topic, 5)).start()
    publisher.close(timeout_s=5)
    assert _partitions(kafka_cluster.bootstrap, topic) == 2


def test_start_against_an_unreachable_cluster_does_not_fail(tmp_path, monkeypatch):
    monkeypatch.setattr(publisher_module, "CREATE_TIMEOUT_S", 1.0)
    publisher = Publisher.from_config(_config(f"127.0.0.1:{free_port()}", tmp_path, "unreachable", 1))
    started = time.monotonic()
    publisher.start()
    try:
        assert time.monotonic() - started < 10  # generous bound over the 1 s wait
        assert publisher.submit(_batch("jmx/broker-1", 1))  # accepted: it goes to the spool
    finally:
        publisher.close(timeout_s=0)


def test_a_refused_creation_names_the_cause_and_the_setting_to_fix(kafka_cluster, tmp_path):
    # Three brokers cannot hold four replicas: Kafka refuses, and the publisher says why and what to change.
    config = _config(kafka_cluster.bootstrap, tmp_path, "publisher-refused", 6)
    config = config.model_copy(
        update={"metrics_topic": config.metrics_topic.model_copy(update={"replication_factor": 4})}
    )
    with pytest.raises(TopicError) as refused:
        Publisher.from_config(config).start()
    assert str(refused.value).startswith(
        "cannot create metrics topic 'publisher-refused' (6 partitions, replication factor 4): "
        "INVALID_REPLICATION_FACTOR: "
    )
    assert str(refused.value).endswith("— set metrics_topic.replication_factor to at most the broker count")
    assert _partitions(kafka_cluster.bootstrap, "publisher-refused") is None


def test_a_hung_leader_of_the_metrics_topic_holds_records_seconds_and_spools_nothing(kafka_cluster, tmp_path):
    """A node leading metrics-topic partitions hangs (SIGSTOP: its sockets stay open) while the collector
    publishes: the produce requests sent to it time out after 10 s and their retries reach the new leader
    (Kafka fences the node after 6 s here), so nothing is spooled and no record waits long. With
    librdkafka's defaults (30 s a request, 60 s a socket) the records failed, the spool took 904 of them
    and every source's records, on every partition, queued behind it: up to 63 s late (the demo's hung-node
    incident then paged only after 92 s on a loaded machine, and once not at all). The bound, 25 s, sits
    between the ~12 s measured now and the 30 s the old request timeout alone cost."""
    topic = f"publisher-hung-{free_port()}"
    create_topic(kafka_cluster.bootstrap, topic, 6, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    leaders = {p: m.leader for p, m in admin.list_topics(topic, timeout=10).topics[topic].partitions.items()}
    hung = leaders[0]
    publisher = Publisher.from_config(_config(kafka_cluster.bootstrap, tmp_path, topic, 6)).start()
    # The reader asks the new leader 5 s after its fetch from the hung node went unanswered: its own
    # socket timeout must not be what the test measures.
    reader = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap, "group.id": "reader", "socket.timeout.ms": 5000}
    )
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in leaders])
    sources = [f"source-{i}" for i in range(12)]  # keys spread over the six partitions
    submitted: dict[tuple[str, int], float] = {}
    read: dict[tuple[str, int], tuple[float, int]] = {}
    try:
        for seq in range(40):  # 20 s, one batch a source every half second
            if seq == 10:
                kafka_cluster.pause(hung)
            for source in sources:
                submitted[source, seq] = time.monotonic()
                assert publisher.submit(_batch(source, seq))
            _read(reader, read, until_s=time.monotonic() + 0.5)
        _read(reader, read, until_s=time.monotonic() + 30, expected=len(submitted))
    finally:
        kafka_cluster.resume(hung)
        publisher.close(timeout_s=5)
        reader.close()
        assert wait_for(lambda: _whole(admin, topic), timeout_s=60)  # the node back in every ISR
    on_hung = {source for (source, _), (_, partition) in read.items() if leaders[partition] == hung}
    assert on_hung  # some sources' partitions were led by the hung node
    assert publisher.stats.spooled == 0
    assert read.keys() == submitted.keys()
    late = max(read[key][0] - submitted[key] for key in submitted)
    assert late < 25, f"a record was readable {late:.0f} s after it was submitted"


class _Lines(logging.Handler):
    """librdkafka's log lines, with when each was delivered."""

    def __init__(self) -> None:
        super().__init__()
        self.start, self.lines = time.monotonic(), []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.monotonic() - self.start, record.getMessage()))


def test_a_hung_broker_holds_a_new_connection_5_s_not_the_request_timeout(kafka_cluster, tmp_path):
    """A SIGSTOPped node still accepts connections (its kernel does) and answers nothing, not even the
    ApiVersionRequest that opens each one: the metrics producer (every kobs client: the setting is
    common.kafka_clients') drops the connection after 5 s (socket.connection.setup.timeout.ms), and a
    request waiting for it tries elsewhere. Before, the connection waited for that request's 10 s
    timeout ("ApiVersionRequest failed: Local: Timed out"), and librdkafka's own default is 30 s."""
    node = max(kafka_cluster.nodes)
    config = _config(f"127.0.0.1:{kafka_cluster.nodes[node].port}", tmp_path, "unused", 1)
    seen = _Lines()
    logger = logging.getLogger("test-hung-connection")
    logger.addHandler(seen)
    kafka_cluster.pause(node)
    try:
        seen.start = time.monotonic()
        producer = Producer({**metrics_producer_settings(config), "log_level": 4, "logger": logger})
        while not seen.lines and time.monotonic() - seen.start < 15:
            producer.poll(0.1)
    finally:
        kafka_cluster.resume(node)
        logger.removeHandler(seen)
        healed = wait_for(  # the node back in every ISR (a pause of ~5 s may cost it some)
            lambda: not kafka_tools.describe_topics(kafka_cluster.bootstrap, "--under-replicated-partitions"),
            timeout_s=60,
        )
    assert seen.lines, "no connection was given up within 15 s"
    after_s, line = seen.lines[0]
    assert "Connection setup timed out in state APIVERSION_QUERY" in line, line
    assert 4.5 <= after_s < 8, f"given up after {after_s:.1f} s: {line}"
    assert healed, "the paused node did not rejoin every ISR within 60 s"


def _whole(admin: AdminClient, topic: str) -> bool:
    return all(
        len(p.isrs) == 3 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    )


def _read(reader: Consumer, read: dict, until_s: float, expected: int | None = None) -> None:
    """Each batch read: (source, seq) → (monotonic time read, partition)."""
    while time.monotonic() < until_s and (expected is None or len(read) < expected):
        msg = reader.poll(0.1)
        if msg is not None and not msg.error():
            batch = decode(msg.value())
            read.setdefault(
                (batch.source, int(batch.samples[0].labels["seq"])), (time.monotonic(), msg.partition())
            )


def test_broker_stopped_mid_publish_spools_and_replays_exactly_once(tmp_path):
    cluster = KafkaCluster(tmp_path / "kafka", nodes=1).start()  # its own: this test kills it
    config = Config.model_validate(
        {
            "clusters": [{"name": "test", "bootstrap_servers": [cluster.bootstrap]}],
            "sinks": {"run_dir": str(tmp_path)},
        }
    )
    publisher = Publisher.from_config(config, probe_interval_s=0.5).start()  # creates the topic
    try:
        # Phase 1: broker up. Everything arrives once.
        _submit(publisher, range(0, 30))
        assert publisher.flush(20)
        phase1 = _read_back(cluster.bootstrap, 90)
        assert Counter(phase1) == Counter((SOURCES[s % 3], s) for s in range(30) for _ in range(3))

        # Phase 2: the broker crashes (SIGKILL) right after a submit, while records are queued or in flight.
        _submit(publisher, range(30, 60))
        cluster.kill(1)
        # Phase 3: broker down. Submits still return at once; records pile up in the spool. librdkafka says
        # "all brokers down" at once, or, when a bootstrap connection it never used keeps it from counting
        # every broker down, the records in flight fail after message.timeout.ms (30 s).
        _submit(publisher, range(60, 120))
        deadline = time.monotonic() + 40
        while publisher.stats.spooled < 60 * 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert publisher.stats.spooled >= 60 * 3
        assert publisher.spool_bytes > 0
        assert not publisher.flush(0.5)

        # The broker comes back on the same ports with its data, as after a crash and a restart.
        cluster.restart(1)
        # Phase 4: after recovery, new records queue behind the spool.
        _submit(publisher, range(120, 150))
        assert publisher.flush(60)
        assert publisher.spool_bytes == 0
        assert publisher.stats.dropped == 0
        assert publisher.stats.replayed == publisher.stats.spooled

        seen = _read_back(cluster.bootstrap, 150 * 3)
        counts = Counter(seen)
        assert max(counts.values()) == 3, "a sample arrived more than once"  # 3 samples per (source, seq)
        for seq in range(150):  # nothing lost: neither what was acknowledged nor what was in flight
            assert counts[(SOURCES[seq % 3], seq)] == 3, seq
        _assert_ordered_per_source(seen)
        assert _partitions(cluster.bootstrap, TOPIC) == 6  # the configured count
    finally:
        publisher.close(timeout_s=5)
        cluster.stop()


@pytest.fixture
def small_disk(tmp_path):
    """A real 256 KiB file system (tmpfs, mounted as root) that a spool can fill."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def test_a_full_spool_disk_drops_counted_records_and_the_publisher_lives_on(small_disk, caplog):
    """The metrics topic unreachable and the spool's disk full ("No space left on device" once killed the
    publisher thread and left a torn frame): every record is spooled or counted dropped, each segment holds
    whole frames only, one line says the disk is full; once there is room the spool takes records again."""
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 160 * 1024)
    spool = Spool(small_disk / "spool", max_bytes=10**9, segment_bytes=16 * 1024)
    settings = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 2}  # no FAIL line a retry
    publisher = Publisher(settings, TOPIC, spool, probe_interval_s=0.5).start()
    caplog.set_level(logging.INFO, logger="collectors.publisher")
    submitted = 0
    try:
        for seq in range(3000):
            submitted += 3 * publisher.submit(_batch("jmx/broker-1", seq))
            time.sleep(0.001)
        assert wait_for(lambda: publisher.stats.dropped > 0 and publisher.queue_depth == 0, timeout_s=30)
        dropped = publisher.stats.dropped
        filler.unlink()  # room again
        for seq in range(3000, 3100):
            submitted += 3 * publisher.submit(_batch("jmx/broker-1", seq))
        assert wait_for(lambda: publisher.queue_depth == 0, timeout_s=30)
        assert publisher._thread.is_alive()
    finally:
        publisher.close(timeout_s=0)
    stats = publisher.stats
    assert stats.spooled + stats.dropped == submitted and stats.sent == 0
    assert stats.dropped == dropped  # nothing dropped once there was room
    segments = sorted((small_disk / "spool").glob("*.spool"))
    frames = [record for segment in segments for record in read_segment(segment)]
    assert sum(p.stat().st_size for p in segments) == sum(r.size for r in frames)  # no torn frame anywhere
    assert sum(r.items for r in frames) == stats.spooled
    full = [r.message for r in caplog.records if "the disk is full" in r.message]
    assert len(full) == 1 and str(spool.directory) in full[0]
    assert any("the disk has room again" in r.message for r in caplog.records)

"""Admin API sources against the real broker: log offsets, committed offsets of a real group, metadata."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ListConsumerGroupsResult, NewTopic
from gc_off import cyclic_collector_off
from waiting import asked_last, until

from collectors.admin import admin_settings, topics
from collectors.futures import wait_all
from collectors.groups import GroupInfo, GroupReader, GroupRequests
from collectors.isr import PartitionState, classify, diff_states
from collectors.metadata import MetadataSource
from collectors.offsets import OffsetsSource, group_samples, leader_chunks
from common import names
from common.config import Cluster
from common.contract import Event, Sample, decode, encode
from peers import kafka_tools
from peers.kafka import KafkaCluster
from peers.process import free_port
from peers.stack import create_topic
from spark_jobs.analysis import Observation
from spark_jobs.lag import LagAnalysis

ROOT = Path(__file__).resolve().parents[1]

PRODUCED = {0: 5, 1: 3, 2: 0}  # messages per partition
COMMITTED = {0: 2, 1: 3}  # offsets the group commits


def _values(samples, name):
    return {tuple(sorted(s.labels.items())): s.value for s in samples if s.name == name}


def _scrape_seeing(source: MetadataSource, *topics: str):
    """``source``'s scrape once it lists ``topics``: a created topic is the controller's at once, and reaches
    the metadata of the broker the Admin client asks a moment later (up to 15 s)."""
    deadline = time.monotonic() + 15
    while True:
        scrape = source.collect()
        listed = {s.labels.get("topic") for s in scrape.batch.samples if s.name == names.TOPIC_MIN_ISR}
        if listed >= set(topics) or time.monotonic() > deadline:
            return scrape
        time.sleep(0.2)


def test_group_samples_leave_out_missing_commits_and_undescribed_members():
    samples = group_samples(
        committed={"g": {("t", 0): 7, ("t", 1): -1}},
        groups=[GroupInfo("g", "stable", 2), GroupInfo("h", "dead", None)],
    )
    assert samples == [
        Sample(names.GROUP_COMMITTED_OFFSET, {"group": "g", "topic": "t", "partition": "0"}, 7),
        Sample(names.GROUP_INFO, {"group": "g", "state": "stable"}, 1),
        Sample(names.GROUP_MEMBERS, {"group": "g"}, 2),
        Sample(names.GROUP_INFO, {"group": "h", "state": "dead"}, 1),
    ]


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(topic, f"m{i}".encode(), partition=partition)
    assert producer.flush(10) == 0  # multi-message record batches: the end offset is past the last one


def _commit_as_group(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the group never assigned partitions"
    offsets = [TopicPartition(topic, p, o) for p, o in COMMITTED.items()]
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()


@pytest.fixture(scope="module")
def cluster(kafka_cluster):
    return Cluster(name="test", bootstrap_servers=[kafka_cluster.bootstrap])


def test_offsets_match_what_was_produced_and_committed(kafka_cluster, cluster):
    topic, group = "offsets-orders", "offsets-billing"
    create_topic(kafka_cluster.bootstrap, topic, len(PRODUCED))
    _produce(kafka_cluster.bootstrap, topic)
    _commit_as_group(kafka_cluster.bootstrap, topic, group)

    scrape = OffsetsSource(cluster).collect()
    assert scrape.errors == []
    samples = decode(encode(scrape.batch)).samples  # what the jobs will read
    ends = {
        int(dict(k)["partition"]): v
        for k, v in _values(samples, names.PARTITION_END_OFFSET).items()
        if dict(k)["topic"] == topic
    }
    starts = {
        int(dict(k)["partition"]): v
        for k, v in _values(samples, names.PARTITION_START_OFFSET).items()
        if dict(k)["topic"] == topic
    }
    committed = {
        int(dict(k)["partition"]): v
        for k, v in _values(samples, names.GROUP_COMMITTED_OFFSET).items()
        if dict(k)["group"] == group and dict(k)["topic"] == topic
    }
    assert ends == PRODUCED
    assert starts == dict.fromkeys(PRODUCED, 0)
    assert committed == COMMITTED
    assert {p: ends[p] - committed[p] for p in committed} == {0: 3, 1: 0}  # lag: produced - committed
    tool = {r.partition: r for r in kafka_tools.describe_group(kafka_cluster.bootstrap, group)}
    assert {p: (r.current_offset, r.log_end_offset, r.lag) for p, r in tool.items() if p in committed} == {
        p: (committed[p], ends[p], ends[p] - committed[p]) for p in committed
    }  # kafka-consumer-groups --describe says the same
    info = [s for s in samples if s.name == names.GROUP_INFO and s.labels["group"] == group]
    assert len(info) == 1 and info[0].value == 1


def test_offsets_source_reports_an_unreachable_cluster_without_raising():
    dead = Cluster(name="dead", bootstrap_servers=[f"127.0.0.1:{free_port()}"])
    started = time.monotonic()
    scrape = OffsetsSource(dead, timeout_s=1.0).collect()
    assert time.monotonic() - started < 10  # generous safety bound: the timeout is honoured
    assert scrape.batch.samples == ()
    assert len(scrape.errors) == 1 and scrape.errors[0].startswith("list_topics:")


def test_a_source_dropped_after_a_failed_scrape_ends_its_clients_at_once():
    """The failed metadata request's exception held the frame that held it (a reference cycle): a dropped
    source's Admin client lived on, connecting and logging, until Python's cyclic collector ran, at any
    moment and on any thread (on one of that client's own threads, librdkafka aborts the process)."""
    dead = Cluster(name="dead", bootstrap_servers=[f"127.0.0.1:{free_port()}"])
    source = OffsetsSource(dead, timeout_s=1.0)
    assert source.collect().errors
    admin = weakref.ref(source._admin)
    with cyclic_collector_off():
        del source
        assert admin() is None


class FailingCall:
    """Stands in for a consumer whose log-offsets calls fail as a whole (as they do while a broker is down:
    tests/test_collect_offsets.py's killed-broker test), so that the failure comes every time."""

    def offsets_for_times(self, partitions, timeout):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def close(self) -> None:
        pass


def test_a_source_dropped_after_failed_log_offset_calls_ends_its_clients_at_once(kafka_cluster):
    """A failed call's exception, kept by its future, held the reading frame through its traceback and the
    calling thread's frames with it (the source, and the test's own locals): a dropped source's clients,
    and a test's producer, lived on until Python's cyclic collector ran, logging into later tests."""
    create_topic(kafka_cluster.bootstrap, "offsets-failing-calls", 2, 1)
    source = OffsetsSource(Cluster(name="calls", bootstrap_servers=[kafka_cluster.bootstrap]))
    source._consumers = [FailingCall() for _ in source._consumers]
    scrape = source.collect()
    assert any("failed with" in e and "_TIMED_OUT" in e for e in scrape.errors), scrape.errors
    admin = weakref.ref(source._admin)
    with cyclic_collector_off():
        del source
        assert admin() is None


class StaleMetadata:
    """Stands in for a real consumer whose metadata cache fails every log-offsets call whole, at once and
    without asking a broker, with _UNKNOWN_PARTITION: librdkafka's answer when its cache has no leader for
    any partition of the call (seen scrape after scrape for minutes after a broker restart, and in a CI run's
    ``kobs collect --once`` just after its topics were created). With ``first``, its first call answers every
    partition with that error instead (a killed broker back: LEADER_NOT_AVAILABLE, then the same consumer's
    ask again failed whole so). That state cannot be had on demand, so it is simulated; the consumer asked
    next is a real one of the real cluster."""

    def __init__(self, consumer: Consumer, first: int | None = None):
        self.consumer, self.first = consumer, first

    def offsets_for_times(self, partitions, timeout):
        if self.first is None:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        error, self.first = KafkaError(self.first), None
        return [
            SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=-1, error=error)
            for tp in partitions
        ]

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.parametrize("first", [None, KafkaError.LEADER_NOT_AVAILABLE], ids=["whole", "leader-back"])
def test_a_call_failed_whole_by_stale_metadata_is_asked_again_of_a_fresh_consumer(kafka_cluster, first):
    # The same consumer asked again 0.2 s later failed again: both attempts of the CI run within 0.31 s.
    # Right after a killed broker returned, the same consumer's ask again was the one to fail whole, and
    # the scrape lost its log offsets.
    topic = f"offsets-stale-metadata-{first or 0}"
    create_topic(kafka_cluster.bootstrap, topic, len(PRODUCED))
    _produce(kafka_cluster.bootstrap, topic)
    source = OffsetsSource(Cluster(name="stale", bootstrap_servers=[kafka_cluster.bootstrap]))
    source._consumers = [StaleMetadata(c, first) for c in source._consumers]
    scrape = source.collect()
    assert scrape.errors == []
    assert _end_offsets(scrape, topic) == kafka_tools.end_offsets(kafka_cluster.bootstrap, topic)


class HungLeader:
    """Stands in for a real consumer of a cluster with one leader that never answers while Kafka keeps it
    leader: a broker cut off from its clients but not from the controller, or whose request threads are
    stuck while its heartbeats go on. A real node hung with SIGSTOP is fenced after 6 s, so that state
    cannot be had on demand; a call holding any of ``hung``'s partitions times out, any other is asked of
    the real consumer."""

    def __init__(self, consumer: Consumer, hung: set[tuple[str, int]]):
        self.consumer, self.hung = consumer, hung

    def offsets_for_times(self, partitions, timeout):
        if any((tp.topic, tp.partition) in self.hung for tp in partitions):
            time.sleep(timeout)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return self.consumer.offsets_for_times(partitions, timeout)

    def close(self) -> None:
        self.consumer.close()


def test_a_leader_that_never_answers_costs_its_own_partitions_offsets_not_the_others(kafka_cluster):
    # Before, a call held up to 200 partitions of any leaders: each call with one of its partitions timed
    # out whole, so such a leader cost every partition's offsets, scrape after scrape.
    topic = "offsets-silent-leader"
    create_topic(kafka_cluster.bootstrap, topic, 6, 1)
    _produce(kafka_cluster.bootstrap, topic)
    placement = kafka_tools.describe_topics(kafka_cluster.bootstrap, "--exclude-internal")
    silent = next(r.leader for r in placement if r.topic == topic)
    hung = {(r.topic, r.partition) for r in placement if r.leader == silent}
    source = OffsetsSource(Cluster(name="silent", bootstrap_servers=[kafka_cluster.bootstrap]), timeout_s=4.0)
    source._consumers = [HungLeader(c, hung) for c in source._consumers]
    scrape = source.collect()
    truth = kafka_tools.end_offsets(kafka_cluster.bootstrap, topic)
    assert _end_offsets(scrape, topic) == {p: v for p, v in truth.items() if (topic, p) not in hung}
    lost = sum(int(e.split()[1]) for e in scrape.errors if e.startswith("list_offsets:"))
    assert lost == 2 * len(hung), scrape.errors  # each of its partitions' start and end offset


def test_each_offsets_call_asks_one_leaders_partitions_the_leaders_in_turn():
    tps = {("a", p): p % 3 for p in range(450)} | {("b", 0): 7}
    chunks = leader_chunks(tps)
    assert [(leader, len(c)) for leader, c in chunks] == [(0, 150), (1, 150), (2, 150), (7, 1)]
    assert all(tps[tp] == leader for leader, c in chunks for tp in c)
    tps = {("a", p): 0 for p in range(450)} | {("b", 0): 1}
    assert [(leader, len(c)) for leader, c in leader_chunks(tps)] == [(0, 200), (1, 1), (0, 200), (0, 50)]


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    return {row.partition: row.leader for row in kafka_tools.describe_topics(bootstrap, topic=topic)}


def test_leaders_moved_since_the_last_scrape_cost_no_offsets(kafka_cluster):
    # A CI run's scrape lost a call of 146 partitions so: "Failed to get offsets: Broker: Leader epoch is
    # older than broker epoch". Each partition's leader is moved as an operator would, between two scrapes
    # of one source: its consumers then ask the old leaders with the old leader epochs, and Kafka answers
    # FENCED_LEADER_EPOCH (librdkafka fails the whole call); a new topic's first scrape may be answered
    # UNKNOWN_LEADER_EPOCH by a broker behind the metadata the consumer read elsewhere.
    topic = "offsets-leaders-moved"
    create_topic(kafka_cluster.bootstrap, topic, len(PRODUCED), replication_factor=3)
    _produce(kafka_cluster.bootstrap, topic)
    source = OffsetsSource(Cluster(name="moved", bootstrap_servers=[kafka_cluster.bootstrap]))
    assert source.collect().errors == []
    before = _leaders(kafka_cluster.bootstrap, topic)
    for partition, leader in before.items():
        others = [node for node in kafka_cluster.nodes if node != leader]
        kafka_tools.lead(kafka_cluster.bootstrap, topic, partition, (*others, leader))
    after = _leaders(kafka_cluster.bootstrap, topic)
    assert all(after[p] != before[p] for p in before), (before, after)
    scrape = source.collect()
    assert scrape.errors == []
    assert _end_offsets(scrape, topic) == kafka_tools.end_offsets(kafka_cluster.bootstrap, topic)


def test_a_failed_future_read_keeps_no_frame_of_its_reader():
    # collectors.metadata reads describe_configs answers so: a broker down failed some, and the futures'
    # exceptions held the source's frames until the cyclic collector ran
    failed: Future = Future()
    failed.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT)))

    def read(owner: object) -> dict:
        return wait_all({"broker 1": failed}, time.monotonic() + 1, "describe_configs", errors)

    errors: list[str] = []
    owner = threading.Event()  # any object the reader's caller holds
    held = weakref.ref(owner)
    assert read(owner) == {} and errors == ["describe_configs: 1 failed with KafkaException: " + str(
        failed.exception())]  # fmt: skip
    with cyclic_collector_off():
        del owner
        assert held() is None


def test_sources_asking_while_a_metadata_request_is_out_share_its_answer(kafka_cluster):
    # A cluster that does not answer keeps the first request out for its whole timeout; a second caller
    # arriving meanwhile gets that request's outcome, the very same exception, instead of sending its own.
    dead = AdminClient({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    outcomes = {}

    def ask(who):
        try:
            topics(dead, timeout_s=4.0)
        except Exception as exc:
            outcomes[who] = exc

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    time.sleep(0.5)
    ask("second")
    first.join()
    assert outcomes["second"] is outcomes["first"]
    # Requests one after the other are not shared: each answer is the cluster's state when asked.
    live = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    before = topics(live, timeout_s=10)
    create_topic(kafka_cluster.bootstrap, "shared-metadata-new", 1)
    deadline = time.monotonic() + 10  # each broker learns of a new topic a moment after the controller
    while "shared-metadata-new" not in (after := topics(live, timeout_s=10)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "shared-metadata-new" in after and "shared-metadata-new" not in before


def test_metadata_reports_partitions_and_a_baseline_without_events(kafka_cluster, cluster):
    topic = "metadata-payments"
    create_topic(kafka_cluster.bootstrap, topic, 3, replication_factor=3)
    truth = {r.partition: r for r in kafka_tools.describe_topics(kafka_cluster.bootstrap, topic=topic)}
    source = MetadataSource(cluster)
    first, second = source.collect(), source.collect()
    assert first.errors == [] and second.errors == []

    def per_partition(name):
        return {
            int(dict(k)["partition"]): v
            for k, v in _values(first.batch.samples, name).items()
            if dict(k)["topic"] == topic
        }

    # Kafka's own kafka-topics --describe is the truth: leaders spread over the three nodes, full ISRs
    assert per_partition(names.PARTITION_LEADER) == {p: r.leader for p, r in truth.items()}
    assert (
        per_partition(names.PARTITION_ISR) == {p: len(r.isr) for p, r in truth.items()} == {0: 3, 1: 3, 2: 3}
    )
    assert first.batch.events == () and second.batch.events == ()  # nothing changed in between


def test_metadata_reports_each_topics_min_insync_replicas(kafka_cluster, cluster):
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    topics = [
        NewTopic("metadata-strict", 2, 1, config={"min.insync.replicas": "2"}),
        NewTopic("metadata-lax", 1, 1),
    ]
    for future in admin.create_topics(topics, operation_timeout=10).values():
        future.result(timeout=15)
    scrape = _scrape_seeing(MetadataSource(cluster), "metadata-strict", "metadata-lax")
    assert scrape.errors == []
    min_isr = _values(scrape.batch.samples, names.TOPIC_MIN_ISR)
    assert min_isr[(("topic", "metadata-strict"),)] == 2
    # a topic without its own setting has the broker's default, which Kafka reports with it: 1
    assert min_isr[(("topic", "metadata-lax"),)] == 1


def test_metadata_reports_only_min_isr_when_zookeeper_has_the_partition_state(kafka_cluster, cluster):
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    topic = NewTopic("metadata-zk", 2, 1, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], operation_timeout=10)["metadata-zk"].result(timeout=15)
    scrape = _scrape_seeing(MetadataSource(cluster, partition_state=False), "metadata-zk")
    assert scrape.errors == [] and scrape.batch.events == ()
    assert {s.name for s in scrape.batch.samples} == {names.TOPIC_MIN_ISR, names.BROKER_REGISTERED}
    registered = {s.labels["broker"] for s in scrape.batch.samples if s.name == names.BROKER_REGISTERED}
    assert registered == {str(i) for i in kafka_cluster.nodes}  # every node of the cluster, as it says
    assert _values(scrape.batch.samples, names.TOPIC_MIN_ISR)[(("topic", "metadata-zk"),)] == 2


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        (PartitionState(1, (1, 2, 3)), PartitionState(1, (1, 3)), "shrink"),
        (PartitionState(1, (1, 3)), PartitionState(1, (3, 1, 2)), "expand"),
        (PartitionState(1, (1, 2)), PartitionState(1, (1, 3)), "replace"),
        (PartitionState(1, (1, 2)), PartitionState(2, (2, 1)), "leader_change"),  # same set, new leader
        (PartitionState(1, (1, 2, 3)), PartitionState(3, (3,)), "shrink"),  # leader died and ISR shrank
        (PartitionState(1, (1,)), PartitionState(-1, (1,)), "leader_change"),  # went offline
        (PartitionState(1, (1, 2)), PartitionState(1, (2, 1)), None),  # order is not a change
        (PartitionState(2, (1, 2)), PartitionState(2, (1, 2)), None),  # nothing changed
    ],
)
def test_classify(old, new, kind):
    assert classify(old, new) == kind


def test_diff_states_emits_contract_events_only_for_changed_known_partitions():
    old = {("t", 0): PartitionState(1, (1, 2, 3), 7), ("t", 1): PartitionState(2, (2, 3), 4)}
    new = {
        ("t", 0): PartitionState(1, (1, 3), 7),
        ("t", 1): PartitionState(2, (2, 3), 4),
        ("t", 2): PartitionState(3, (3,), 0),  # new partition: a baseline, not a change
    }
    events = diff_states(old, new, 1000)
    assert events == [
        Event(
            "isr_change",
            1000,
            {
                "topic": "t",
                "partition": 0,
                "old_isr": [1, 2, 3],
                "new_isr": [1, 3],
                "leader": 1,
                "leader_epoch": 7,
                "change": "shrink",
            },
        )
    ]


def _end_offsets(scrape, topic: str) -> dict[int, float]:
    return {
        int(dict(k)["partition"]): v
        for k, v in _values(scrape.batch.samples, names.PARTITION_END_OFFSET).items()
        if dict(k)["topic"] == topic
    }


def _six_partitions_of_one_record(bootstrap: str, topic: str, replication_factor: int) -> None:
    create_topic(bootstrap, topic, 6, replication_factor)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(6):
        producer.produce(topic, b"before", partition=p)
    assert producer.flush(10) == 0


@pytest.mark.timeout(600)
def test_offsets_are_whole_and_right_again_soon_after_a_killed_broker_returns(tmp_path):
    """The demo's incident 1, replayed: a node leading partitions of replication factor 1 is killed and
    restarted (Kafka re-elects it with a new leader epoch). The offsets source's scrapes are whole again
    within seconds and agree with Kafka's own kafka-get-offsets. On a loaded machine (the whole suite, or
    two busy cores) a consumer whose metadata went stale then failed its whole call with _UNKNOWN_PARTITION
    scrape after scrape for minutes; such a consumer is now replaced after the scrape. While the node is
    down, the partitions it alone held are reported and the others read: asked together, the leaderless
    ones failed every call they were in (no end offset of the topic for the whole outage)."""
    topic = "offsets-incident"
    with KafkaCluster(tmp_path / "kafka", nodes=3) as kafka:  # its own: this test kills a node
        _six_partitions_of_one_record(kafka.bootstrap, topic, replication_factor=1)
        source = OffsetsSource(Cluster(name="incident", bootstrap_servers=[kafka.bootstrap]))
        first = source.collect()
        assert first.errors == [] and _end_offsets(first, topic) == dict.fromkeys(range(6), 1)

        placement = kafka_tools.describe_topics(kafka.bootstrap, topic=topic)
        assert any(r.leader == 2 for r in placement), "node 2 leads none of the partitions"
        kafka.kill(2)
        others = {r.partition for r in placement if r.leader != 2}
        down, killed = [source.collect()], time.monotonic()
        while _end_offsets(down[-1], topic) != dict.fromkeys(others, 1) and time.monotonic() < killed + 60:
            down.append(source.collect())  # until Kafka fences node 2 and its partitions lose their leader
            time.sleep(1)
        kafka.restart(2)
        deadline = time.monotonic() + 60
        while any(r.leader < 0 for r in kafka_tools.describe_topics(kafka.bootstrap, topic=topic)):
            assert time.monotonic() < deadline, "the partitions never got their leader back"
            time.sleep(1)
        producer = Producer({"bootstrap.servers": kafka.bootstrap})
        for p in range(6):
            producer.produce(topic, b"after", partition=p)
        assert producer.flush(30) == 0
        del producer  # its client would go on connecting to the stopped cluster

        truth = kafka_tools.end_offsets(kafka.bootstrap, topic)
        assert truth == dict.fromkeys(range(6), 2)
        scrapes = []
        while not scrapes or scrapes[-1].errors or _end_offsets(scrapes[-1], topic) != truth:
            assert time.monotonic() < deadline + 30, [s.errors for s in scrapes]
            scrapes.append(source.collect())
            time.sleep(1)
        again = source.collect()  # and it stays whole
        assert again.errors == [] and _end_offsets(again, topic) == truth
    # while node 2 was down, its partitions were reported, and the others read
    assert all(scrape.errors for scrape in down)
    # and the group listing named the broker that did not answer (its groups child crashed on such an
    # answer before: "groups_process: the child process died")
    errors = [e for scrape in down + scrapes for e in scrape.errors]
    unanswered = tuple(f"list_consumer_groups: KafkaError{{code={c}" for c in ("_TIMED_OUT", "_TRANSPORT"))
    assert any(e.startswith(unanswered) for e in errors), errors  # timed out, or refused as it died
    assert not [e for e in errors if e.startswith("groups_process")], errors
    assert _end_offsets(down[-1], topic) == dict.fromkeys(others, 1), [s.errors for s in down]


@pytest.mark.timeout(600)
def test_a_hung_leader_costs_its_own_offsets_and_only_until_kafka_moves_its_partitions(tmp_path):
    """The demo's incident 2, a node hung with SIGSTOP (here the one the source's metadata requests go to,
    leading some partitions). While Kafka still names it leader, the scrape lists the topics (asked again of
    another node) and reads the other leaders' offsets: before, the listing timed out and the scrape had
    nothing. Kafka fences it after 6 s and moves its partitions' leadership, but the source's consumers
    still named it leader from their metadata, asked it, and the whole call timed out (the demo:
    "list_offsets: 34 partitions failed with _TIMED_OUT" at every scrape for as long as the node hung,
    minutes). The scrapes after the move are whole, and agree with kafka-get-offsets."""
    topic = "offsets-hung-leader"
    with KafkaCluster(tmp_path / "kafka", nodes=3) as kafka:  # its own: this test hangs a node
        _six_partitions_of_one_record(kafka.bootstrap, topic, replication_factor=3)
        source = OffsetsSource(Cluster(name="hung", bootstrap_servers=[kafka.bootstrap]))
        assert source.collect().errors == []
        hung = asked_last(source._admin)
        led = {p for p, leader in _leaders(kafka.bootstrap, topic).items() if leader == hung}
        assert led, f"node {hung} leads no partition of {topic}"
        kafka.pause(hung)
        try:
            during = source.collect()
            deadline = time.monotonic() + 60
            while {hung, -1} & set(_leaders(kafka.live_bootstrap, topic).values()):
                assert time.monotonic() < deadline, f"Kafka never moved node {hung}'s partitions"
                time.sleep(1)
            truth = kafka_tools.end_offsets(kafka.live_bootstrap, topic)
            assert truth == dict.fromkeys(range(6), 1)
            after = [source.collect() for _ in range(2)]
        finally:
            kafka.resume(hung)
    assert not [e for e in during.errors if e.startswith("list_topics")], during.errors
    read = _end_offsets(during, topic)
    assert all(read.get(p) == 1 for p in range(6) if p not in led), (read, led, during.errors)
    errors = [s.errors for s in after]  # the group listing asks every broker: the hung one errs
    assert not [e for s in after for e in s.errors if e.startswith(("list_topics", "list_offsets"))], errors
    assert _end_offsets(after[0], topic) == _end_offsets(after[1], topic) == truth, errors


def test_a_groups_coordinator_killed_costs_scrapes_until_kafka_moves_the_group_not_the_collector(
    kafka_cluster, tmp_path
):
    """librdkafka aborted the collector process (its issue 4605) when a group's coordinator came back for
    requests that had timed out waiting for it; and with a broker down, the group listing (which asks every
    broker) took the whole scrape, so every group was missing until the broker returned. A process of its
    own scrapes the cluster with a 3 s timeout while the group's coordinator is killed: scrapes that miss
    the group say why, the group is read again from the coordinator Kafka elected while the killed node is
    still down, and the process lives on when the node returns."""
    topic, group = "offsets-coordinator", "offsets-coordinator-group"
    expected = _committed_group(kafka_cluster.bootstrap, topic, group)
    coordinator = kafka_tools.group_coordinator(kafka_cluster.bootstrap, group)
    with _scraping(kafka_cluster.bootstrap, group, tmp_path) as (scraper, stderr):
        scrapes = _scrapes_until(scraper, lambda s: s["committed"] == expected)
        killed_at = scrapes[-1]["at"]
        kafka_cluster.kill(coordinator)
        try:
            scrapes += _scrapes_until(
                scraper, lambda s: s["committed"] != expected or s["at"] > killed_at + 60
            )
            scrapes += _scrapes_until(
                scraper, lambda s: s["committed"] == expected or s["at"] > killed_at + 90
            )
            read_while_down = scrapes[-1]["committed"] == expected
        finally:
            kafka_cluster.restart(coordinator)
        restarted_at = scrapes[-1]["at"]
        scrapes += _scrapes_until(scraper, lambda s: s["at"] > restarted_at + 10)
        assert scraper.poll() is None, stderr.read_text()[-3000:]  # it ended with -6 (SIGABRT) before
    unanswered = [s["at"] for s in scrapes if s["committed"] != expected and s["errors"]]  # and said why
    assert unanswered and killed_at < unanswered[0] < restarted_at, scrapes
    assert all(s["errors"] for s in scrapes if s["committed"] != expected), scrapes
    assert read_while_down, scrapes  # not only once the node returned (90+ s before)
    assert scrapes[-1]["committed"] == expected, scrapes
    tool = kafka_tools.describe_group(kafka_cluster.bootstrap, group)
    assert {str(r.partition): r.current_offset for r in tool if r.current_offset is not None} == expected
    until(
        lambda: not kafka_tools.describe_topics(kafka_cluster.bootstrap, "--under-replicated-partitions"),
        timeout_s=60,
    )  # the node is back in every ISR for the tests after this one


def test_a_groups_coordinator_moved_while_the_old_one_runs_costs_a_scrape_not_the_collector(
    kafka_cluster, tmp_path
):
    """librdkafka crashed the collector (SIGSEGV) when the coordinator it knew, moved away but still up,
    answered ListConsumerGroupOffsets with NOT_COORDINATOR (it looks for the coordinator through the
    client's own consumer group, which an Admin client does not have). Kafka's tools move the group's
    coordinator as an operator does (the group's ``__consumer_offsets`` partition gets another preferred
    leader and an election) under a process of its own scraping every second: it lives on and reads the
    group's committed offsets from the new coordinator, as kafka-consumer-groups prints them."""
    topic, group = "offsets-moved", "offsets-moved-group"
    expected = _committed_group(kafka_cluster.bootstrap, topic, group)
    coordinator = kafka_tools.group_coordinator(kafka_cluster.bootstrap, group)
    # Kafka's group coordinator: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions (50)
    partition = abs(_java_string_hash(group)) % 50
    placement = kafka_tools.describe_topics(kafka_cluster.bootstrap, topic="__consumer_offsets")
    replicas = next(r.replicas for r in placement if r.partition == partition)
    others = tuple(r for r in replicas if r != coordinator)
    with _scraping(kafka_cluster.bootstrap, group, tmp_path) as (scraper, stderr):
        scrapes = _scrapes_until(scraper, lambda s: s["committed"] == expected)
        moved_at = scrapes[-1]["at"]
        kafka_tools.lead(kafka_cluster.bootstrap, "__consumer_offsets", partition, (*others, coordinator))
        moved = kafka_tools.group_coordinator(kafka_cluster.bootstrap, group)
        scrapes += _scrapes_until(scraper, lambda s: s["at"] > moved_at + 5 and s["committed"] == expected)
        assert scraper.poll() is None, stderr.read_text()[-3000:]  # it ended with -11 (SIGSEGV) before
    assert moved == others[0], scrapes
    assert scrapes[-1]["committed"] == expected, scrapes
    tool = kafka_tools.describe_group(kafka_cluster.bootstrap, group)
    assert {str(r.partition): r.current_offset for r in tool if r.current_offset is not None} == expected


class CoordinatorsLoading:
    """Stands in for a real Admin client whose first ``listings`` ListConsumerGroups answers are a broker's
    COORDINATOR_LOAD_IN_PROGRESS: a fresh cluster's first listing, while its brokers load the groups of the
    ``__consumer_offsets`` partitions they just took (seen in a run of the suite on two busy cores). That
    state lasts moments and cannot be had on demand, so it is simulated; every other call is the real
    client's."""

    def __init__(self, admin: AdminClient, listings: int):
        self.admin, self.listings, self.asked = admin, listings, 0

    def list_consumer_groups(self, **kwargs) -> Future:
        self.asked += 1
        if self.asked > self.listings:
            return self.admin.list_consumer_groups(**kwargs)
        loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, LOADING_REASON)
        answer: Future = Future()
        answer.set_result(ListConsumerGroupsResult(valid=[], errors=[loading]))  # as the real client's
        return answer

    def __getattr__(self, name: str):
        return getattr(self.admin, name)


LOADING_REASON = "Broker [1] ListConsumerGroups: Broker: Coordinator load in progress"


def test_a_listing_a_broker_answers_while_loading_its_groups_is_asked_again(kafka_cluster, cluster):
    # Kafka's Java Admin client asks again on COORDINATOR_LOAD_IN_PROGRESS; librdkafka returns it at once
    topic, group = "offsets-loading", "offsets-loading-group"
    _committed_group(kafka_cluster.bootstrap, topic, group)
    admin = CoordinatorsLoading(AdminClient(admin_settings(cluster)), listings=2)
    read = GroupRequests(admin).read(10)
    assert read.errors == [] and admin.asked == 3
    assert read.committed[group] == {(topic, p): o for p, o in COMMITTED.items()}
    tool = kafka_tools.describe_group(kafka_cluster.bootstrap, group)
    assert {r.partition: r.current_offset for r in tool if r.current_offset is not None} == COMMITTED


def test_a_broker_loading_its_groups_for_the_whole_listing_share_is_reported(cluster):
    admin = CoordinatorsLoading(AdminClient(admin_settings(cluster)), listings=10**6)
    read = GroupRequests(admin).read(2)  # the listing's share: 1 s
    assert admin.asked > 1 and read.groups == []
    assert read.errors == [f"list_consumer_groups: {KafkaError(14, LOADING_REASON)}"]


def test_a_groups_child_process_killed_or_hung_costs_one_read(kafka_cluster, cluster):
    """The group requests run in a child process: killed (as a librdkafka crash kills it) or hung (SIGSTOP),
    it costs one read, which says so, and the next read comes from a new child."""
    topic, group = "offsets-child", "offsets-child-group"
    _committed_group(kafka_cluster.bootstrap, topic, group)
    expected = {(topic, p): o for p, o in COMMITTED.items()}
    reader = GroupReader(admin_settings(cluster))
    try:
        others = _groups_children()  # of sources other tests left to the garbage collector
        assert reader.read(10).committed[group] == expected
        (child,) = _groups_children() - others
        os.kill(child, signal.SIGKILL)
        killed = reader.read(10)
        assert killed.errors == [
            "groups_process: the child process died of SIGKILL; a new child process asks at the next scrape"
        ]
        assert reader.read(10).committed[group] == expected
        (child,) = _groups_children() - others
        os.kill(child, signal.SIGSTOP)
        hung = reader.read(2)
        assert hung.errors == [
            "groups_process: no answer within 2 s; a new child process asks at the next scrape"
        ]
        assert not _groups_children() - others  # it was ended
        assert reader.read(10).committed[group] == expected
    finally:
        reader.stop()


def _groups_children() -> set[int]:
    """The pids of this process's live ``collectors.groups`` children."""
    return {int(p.parent.name) for p in Path("/proc").glob("*/cmdline") if _child_of_ours(p)}


def _child_of_ours(cmdline: Path) -> bool:
    try:
        stat, command = (cmdline.parent / "stat").read_text(), cmdline.read_bytes()
    except OSError:  # ended meanwhile
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"collectors.groups" in command


def _committed_group(bootstrap: str, topic: str, group: str) -> dict[str, int]:
    """A topic of ``PRODUCED`` messages, replication factor 3, and ``group`` committed at ``COMMITTED``, as
    the scraping process reports them (partition as text)."""
    create_topic(bootstrap, topic, len(PRODUCED), 3)
    _produce(bootstrap, topic)
    _commit_as_group(bootstrap, topic, group)
    return {str(p): o for p, o in COMMITTED.items()}


def _java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit, signed) of ASCII text."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@contextmanager
def _scraping(bootstrap: str, group: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A process of its own (``tests/offsets_scrapes.py``) scraping the cluster every second with a 3 s
    timeout, so that a native crash shows as its exit status; and the file its stderr goes to."""
    stderr = tmp_path / "scraper.err"
    command = [sys.executable, str(ROOT / "tests" / "offsets_scrapes.py"), bootstrap, group, "3"]
    with (
        stderr.open("w") as err,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True) as p,
    ):
        try:
            yield p, stderr
        finally:
            p.terminate()
            p.wait(timeout=30)


def _scrapes_until(scraper: subprocess.Popen, done: Callable[[dict], bool]) -> list[dict]:
    """The scraper's scrapes (its JSON lines) up to the first that is ``done``, or to its end."""
    scrapes = []
    for line in scraper.stdout:
        scrapes.append(json.loads(line))
        if done(scrapes[-1]):
            break
    return scrapes


def test_each_assigned_partitions_member_is_the_one_kafka_consumer_groups_names(kafka_cluster, cluster):
    topic, group = "offsets-members", "offsets-members-group"
    create_topic(kafka_cluster.bootstrap, topic, 2)
    consumer = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap, "group.id": group, "client.id": "member-app",
         "session.timeout.ms": 6000, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 2, "the group never assigned both partitions"
        samples = decode(encode(OffsetsSource(cluster).collect().batch)).samples
        tool = kafka_tools.describe_group(kafka_cluster.bootstrap, group)  # while the member is in the group
    finally:
        consumer.close()
    members = {
        int(s.labels["partition"]): (s.labels["host"], s.labels["client_id"])
        for s in samples
        if s.name == names.GROUP_PARTITION_MEMBER and s.labels["group"] == group
    }
    assert (
        members
        == {r.partition: (r.host, r.client_id) for r in tool}
        == {
            0: ("/127.0.0.1", "member-app"),
            1: ("/127.0.0.1", "member-app"),
        }
    )


@pytest.mark.timeout(600)
def test_deleted_groups_leave_the_lag_two_scrapes_after_kafka_stops_listing_them(kafka_cluster):
    """2,000 groups commit on the real cluster and are read (the offsets source, then the lag analysis); all
    are deleted with the Admin API; as soon as Kafka's own kafka-consumer-groups --list no longer names them,
    two scrapes later the lag analysis has forgotten them: no row, no status series (they once stayed ERR and
    their alerts pending for good). A group kept beside them stays."""
    topic, prefix = f"churn-{os.getpid()}", f"churned-{time.time_ns()}-"
    create_topic(kafka_cluster.bootstrap, topic, len(PRODUCED))
    _produce(kafka_cluster.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    churned = [f"{prefix}{i}" for i in range(2000)]
    offsets = [TopicPartition(topic, 0, 1)]
    for group in [*churned, f"{prefix}kept"]:
        request = ConsumerGroupTopicPartitions(group, offsets)
        # the first commits may find the offsets topic loading: an error on the partition, asked again
        assert until(
            lambda r=request: all(
                tp.error is None
                for tp in admin.alter_consumer_group_offsets([r])[r.group_id].result(30).topic_partitions
            ),
            timeout_s=30,
        )
    source = OffsetsSource(Cluster(name="churn", bootstrap_servers=[kafka_cluster.bootstrap]), timeout_s=60)
    analysis = LagAnalysis()

    def scrape() -> set[str]:
        """The groups of this test the lag analysis holds after one more scrape."""
        batch = source.collect().batch
        analysis.observe(
            Observation(
                s.name, batch.cluster, batch.source, dict(s.labels), batch.ts_ms / 1000, s.value, None
            )
            for s in batch.samples
        )
        return {r["group"] for r in analysis.evaluate().history if r["group"].startswith(prefix)}

    everyone = {*churned, f"{prefix}kept"}
    # a read gives up on the coordinators' answers at its timeout and takes them at the next
    assert any(scrape() == everyone for _ in range(5))
    for done in admin.delete_consumer_groups(churned, request_timeout=60).values():
        done.result(60)
    listed = kafka_tools.run_tool(
        "kafka-consumer-groups", "--bootstrap-server", kafka_cluster.bootstrap, "--list"
    )
    assert not {g for g in listed.split() if g.startswith(prefix)} & set(churned)  # Kafka's word: gone
    scrape()
    held = scrape()
    assert held == {f"{prefix}kept"}
    statuses = {
        labels[1] for name, labels, _ in analysis.evaluate().metrics if name == "kobs_consumergroup_status"
    }
    assert {g for g in statuses if g.startswith(prefix)} == {f"{prefix}kept"}


def test_two_collectors_with_one_config_give_one_collectors_lag_in_seconds(kafka_cluster):
    """An HA pair: two offsets sources with one configuration scrape the real cluster every second, half a
    second apart, into one lag analysis; another takes the first source's scrapes alone. The group's
    partition 0 is 3 messages behind and never commits again: its lag in seconds is what its window of 10
    end offsets spans, about 9 s. The pair's is the one's, within an interval and a half (its window may keep
    either source's scrapes); without the interval (every observation kept) it is about half."""
    topic, group = f"ha-{os.getpid()}", f"ha-billing-{time.time_ns()}"
    create_topic(kafka_cluster.bootstrap, topic, len(PRODUCED))
    _produce(kafka_cluster.bootstrap, topic)
    _commit_as_group(kafka_cluster.bootstrap, topic, group)
    cluster = Cluster(name="ha", bootstrap_servers=[kafka_cluster.bootstrap])
    first, second = OffsetsSource(cluster), OffsetsSource(cluster)
    one, pair, every = LagAnalysis(offsets_interval_s=1), LagAnalysis(offsets_interval_s=1), LagAnalysis()

    def scraped(source: OffsetsSource) -> list[Observation]:
        batch = source.collect().batch
        return [
            Observation(
                s.name, batch.cluster, batch.source, dict(s.labels), batch.ts_ms / 1000, s.value, None
            )
            for s in batch.samples
        ]

    def lag_s(analysis: LagAnalysis) -> float:
        (value,) = [
            v
            for name, labels, v in analysis.evaluate().metrics
            if name == "kobs_consumergroup_lag_seconds" and labels[1:] == (group, topic, "0")
        ]
        return value

    started = time.monotonic()
    for i in range(14):
        if i:
            time.sleep(max(0.0, started + i - 0.5 - time.monotonic()))
            both = scraped(second)
            pair.observe(both)
            every.observe(both)
        time.sleep(max(0.0, started + i - time.monotonic()))
        alone = scraped(first)
        for analysis in (one, pair, every):
            analysis.observe(alone)
    assert 8 <= lag_s(one) <= 10
    assert abs(lag_s(pair) - lag_s(one)) <= 1.5  # the pair's window may keep either source's scrapes
    assert lag_s(every) <= 0.6 * lag_s(one)

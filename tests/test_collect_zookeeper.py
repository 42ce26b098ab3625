"""ZooKeeper-mode partition state, ISR and controller changes against a real ZooKeeper, with znodes written
byte for byte as Kafka 3.9 brokers write them (seen in tests/test_zookeeper_mode.py, docs/peers.md); and the
simulator's cluster read that way into the replication analysis."""

from __future__ import annotations

import json
import time

import pytest
from kazoo.client import KazooClient

from collectors.scheduler import reason_of
from collectors.zookeeper_isr import ZooKeeperIsrSource
from common import names
from common.contract import decode, encode
from peers.zookeeper import ZooKeeper
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario
from spark_jobs.analysis import Observation
from spark_jobs.replication import ReplicationAnalysis


def _state(leader, isr, leader_epoch):
    """A partition state znode as the controller writes it (leader -1 when offline)."""
    doc = {"controller_epoch": 3, "leader": leader, "version": 1, "leader_epoch": leader_epoch, "isr": isr}
    return json.dumps(doc).encode()


def _assignment(replicas):
    """The assignment znode Kafka writes when a topic is created: partition -> replicas, and the topic id."""
    doc = {
        "partitions": {str(p): r for p, r in replicas.items()},
        "topic_id": "fjfAxP3iSXKjDsg_UuUjKA",
        "adding_replicas": {},
        "removing_replicas": {},
        "version": 3,
    }
    return json.dumps(doc).encode()


def _topic(zk, topic, replicas, raw=None):
    zk.create(f"/brokers/topics/{topic}", _assignment(replicas) if raw is None else raw, makepath=True)


def _partitions(samples):
    """(name, topic, partition) -> value of the partition-state samples."""
    return {
        (s.name, s.labels["topic"], int(s.labels["partition"])): s.value
        for s in samples
        if s.name in (names.PARTITION_REPLICAS, names.PARTITION_ISR, names.PARTITION_LEADER)
    }


def _controller(zk, broker_id, epoch):
    """A controller election as Kafka does it: ``/controller`` created and ``/controller_epoch`` set in one
    transaction."""
    doc = {"version": 2, "brokerid": broker_id, "timestamp": "1795472109352", "kraftControllerEpoch": -1}
    election = zk.transaction()
    election.create("/controller", json.dumps(doc).encode(), ephemeral=True)
    election.set_data("/controller_epoch", str(epoch).encode())
    assert not [result for result in election.commit() if isinstance(result, Exception)]


def _events_until(source, count, timeout_s=10):
    events, errors = [], []
    deadline = time.monotonic() + timeout_s
    while len(events) < count and time.monotonic() < deadline:
        scrape = source.collect()
        events += decode(encode(scrape.batch)).events
        errors += scrape.errors
        time.sleep(0.05)
    return events, errors


@pytest.fixture
def zk(zookeeper):
    """A client of the shared ZooKeeper with Kafka's paths empty before and after the test."""
    client = KazooClient(hosts=zookeeper.connect)
    client.start()

    def clear():
        for path in ("/brokers", "/isr_change_notification", "/controller", "/controller_epoch"):
            if client.exists(path):
                client.delete(path, recursive=True)

    clear()
    yield client
    clear()
    client.stop()
    client.close()


def _isr(events):
    return [
        (
            e.fields["topic"],
            e.fields["partition"],
            e.fields["old_isr"],
            e.fields["new_isr"],
            e.fields["leader"],
            e.fields["leader_epoch"],
            e.fields["change"],
        )
        for e in events
        if e.type == "isr_change"
    ]


def test_a_state_write_is_reported_at_once_by_its_watch(zk, zookeeper):
    _topic(zk, "orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 2, 3], 7), makepath=True)
    zk.create("/brokers/topics/orders/partitions/1/state", _state(2, [2, 3], 4), makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600).start()  # only the first full read
    try:
        assert _isr(source.collect().batch.events) == []  # the first full read is the baseline
        # broker 2's session expired: the controller writes the state znode, and nothing else
        zk.set("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3], 8))
        events, errors = _events_until(source, 1)
        assert errors == []
        assert _isr(events) == [("orders", 0, [1, 2, 3], [1, 3], 1, 8, "shrink")]
    finally:
        source.stop()


def test_partition_state_samples_come_from_the_state_and_assignment_znodes(zk, zookeeper):
    # orders has RF 3; partition 1 lost its leader and, as Kafka does, keeps its last ISR member
    _topic(zk, "orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 2, 3], 7), makepath=True)
    zk.create("/brokers/topics/orders/partitions/1/state", _state(-1, [2], 5), makepath=True)
    zk.create("/brokers/topics/orders/partitions/2/state", _state(3, [3, 1, 2], 2), makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600).start()  # only the first full read
    try:
        first = source.collect()
        assert first.errors == []
        expected = {(names.PARTITION_REPLICAS, "orders", p): 3 for p in (0, 1, 2)}
        expected |= {(names.PARTITION_ISR, "orders", p): n for p, n in ((0, 3), (1, 1), (2, 3))}
        expected |= {(names.PARTITION_LEADER, "orders", p): b for p, b in ((0, 1), (1, -1), (2, 3))}
        assert _partitions(decode(encode(first.batch)).samples) == expected
        # broker 2 leaves partition 0's ISR (AlterPartition: the controller writes it, same leader epoch)
        zk.set("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3], 7))
        samples, deadline = {}, time.monotonic() + 10
        while samples.get((names.PARTITION_ISR, "orders", 0)) != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            samples = _partitions(source.collect().batch.samples)
        assert samples == expected | {(names.PARTITION_ISR, "orders", 0): 2}  # replicas still 3
    finally:
        source.stop()


def test_a_malformed_assignment_is_an_error_and_its_partitions_are_still_read(zk, zookeeper):
    _topic(zk, "bad", {}, raw=b'{"version":1,"partitions":[[1,2]]}')  # a list, not partition -> replicas
    zk.create("/brokers/topics/bad/partitions/0/state", _state(1, [1, 2], 0), makepath=True)
    _topic(zk, "orders", {0: [2, 1]})
    zk.create("/brokers/topics/orders/partitions/0/state", _state(2, [2, 1], 0), makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=0).start()  # a full read every scrape
    try:
        scrape = source.collect()
        assert [reason_of(e) for e in scrape.errors] == ["assignment"]
        assert "bad" in scrape.errors[0]
        assert _partitions(scrape.batch.samples) == {
            (names.PARTITION_REPLICAS, "orders", 0): 2,
            (names.PARTITION_ISR, "orders", 0): 2,
            (names.PARTITION_LEADER, "orders", 0): 2,
            (names.PARTITION_ISR, "bad", 0): 2,  # no replica count: its assignment could not be read
            (names.PARTITION_LEADER, "bad", 0): 1,
        }
        zk.set("/brokers/topics/bad", _assignment({0: [1, 2, 3]}))  # with a third replica
        scrape = source.collect()
        assert scrape.errors == []
        assert _partitions(scrape.batch.samples)[(names.PARTITION_REPLICAS, "bad", 0)] == 3
    finally:
        source.stop()


def test_a_topic_created_later_is_watched_after_the_next_full_read_and_a_change_reported_once(zk, zookeeper):
    zk.ensure_path("/brokers/topics")
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=0.2).start()
    try:
        assert source.collect().batch.samples == ()  # no topics yet
        _topic(zk, "orders", {0: [1, 2, 3]})
        zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3], 8), makepath=True)
        samples, deadline = {}, time.monotonic() + 10
        while not samples and time.monotonic() < deadline:
            scrape = source.collect()
            assert _isr(scrape.batch.events) == []  # a new partition is not a change
            samples = _partitions(scrape.batch.samples)
            time.sleep(0.05)
        assert samples[(names.PARTITION_ISR, "orders", 0)] == 2
        # broker 2 rejoins: the watch and the full reads both see it, it is reported once
        zk.set("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3, 2], 8))
        events, _ = _events_until(source, 1)
        assert _isr(events) == [("orders", 0, [1, 3], [1, 3, 2], 1, 8, "expand")]
        time.sleep(0.5)
        assert _isr(_events_until(source, 1, timeout_s=0.5)[0]) == []  # reported once, not per diff
    finally:
        source.stop()


def test_a_state_read_before_a_newer_one_was_recorded_is_dropped(zk, zookeeper):
    """A full read's reads are pipelined: a watch may record a newer write of a znode before the full read
    records what it read earlier. The zxid of each write decides, not the order of recording."""
    _topic(zk, "orders", {0: [1, 2]})
    zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 2], 5), makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600).start()
    try:
        source.collect()
        stale = zk.get("/brokers/topics/orders/partitions/0/state")  # what a slow full read could hold
        zk.set("/brokers/topics/orders/partitions/0/state", _state(1, [1], 5))
        assert _isr(_events_until(source, 1)[0]) == [("orders", 0, [1, 2], [1], 1, 5, "shrink")]
        with source._lock:
            source._record(("orders", 0), source._state(("orders", 0), stale[0]), stale[1].mzxid, 0)
        scrape = source.collect()
        assert _isr(scrape.batch.events) == []
        assert _partitions(scrape.batch.samples)[(names.PARTITION_ISR, "orders", 0)] == 1
    finally:
        source.stop()


def test_controller_failover_and_malformed_state_are_reported(zk, zookeeper):
    zk.create("/controller_epoch", b"2")
    _controller(zk, 0, 3)
    _topic(zk, "bad", {0: [1, 2]})
    zk.create("/brokers/topics/bad/partitions/0/state", b'{"leader": 1}', makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600).start()
    try:
        first, errors = _events_until(source, 1)
        assert [(e.fields["controller_id"], e.fields["controller_epoch"]) for e in first] == [(0, 3)]
        assert len(errors) == 1 and "bad-0" in errors[0]
        zk.delete("/controller")  # controller 0 dies
        gone, _ = _events_until(source, 1)
        assert [(e.fields["controller_id"], e.fields["controller_epoch"]) for e in gone] == [(-1, 3)]
        _controller(zk, 2, 4)  # broker 2 wins the election with the next epoch
        pairs, deadline = [], time.monotonic() + 10
        while pairs[-1:] != [(2, 4)] and time.monotonic() < deadline:  # one event or two
            pairs += [
                (e.fields["controller_id"], e.fields["controller_epoch"]) for e in _events_until(source, 1)[0]
            ]
        assert pairs[-1:] == [(2, 4)]
        assert set(pairs) <= {(-1, 4), (2, 4)}  # both written at once, but read one after the other
    finally:
        source.stop()


def test_after_session_expiry_everything_is_diffed_and_watches_come_back(zk, zookeeper):
    _topic(zk, "orders", {0: [1, 2]})
    zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 2], 5), makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600, timeout_s=4).start()
    try:
        source.collect()
        # expire the source's session the way ZooKeeper does: another client takes it over and closes it
        session_id, password = source._zk.client_id
        thief = KazooClient(hosts=zookeeper.connect, client_id=(session_id, password))
        thief.start()
        thief.stop()
        thief.close()
        deadline = time.monotonic() + 15
        while (source._zk.client_id or (session_id,))[0] == session_id and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (source._zk.client_id or (session_id,))[0] != session_id, "no new session"
        # a change no watch sees (they went with the session): the full read after a lost session sees it
        zk.set("/brokers/topics/orders/partitions/0/state", _state(2, [2], 6))
        events, _ = _events_until(source, 1)
        assert _isr(events) == [("orders", 0, [1, 2], [2], 2, 6, "shrink")]
        # and that read set the state watch again
        zk.set("/brokers/topics/orders/partitions/0/state", _state(2, [2, 1], 6))
        events, _ = _events_until(source, 1)
        assert _isr(events) == [("orders", 0, [2], [2, 1], 2, 6, "expand")]
    finally:
        source.stop()


def test_a_lost_connection_is_counted_as_zookeeper_disconnected_and_watches_come_back(tmp_path):
    def write(change):
        writer = KazooClient(hosts=own.connect)
        writer.start()
        change(writer)
        writer.stop()
        writer.close()

    def create(writer):
        _topic(writer, "orders", {0: [1, 2]})
        writer.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 2], 0), makepath=True)

    with ZooKeeper(tmp_path) as own:  # its own server: stopping the shared one would break other tests
        write(create)
        source = ZooKeeperIsrSource("zk", own.connect, timeout_s=4).start()  # full reads every 30 s
        try:
            first = source.collect()
            assert first.errors == [] and len(first.batch.samples) == 4  # replicas, preferred, ISR, leader
            own.stop()
            scrape, deadline = first, time.monotonic() + 15
            while not scrape.errors and time.monotonic() < deadline:
                scrape = source.collect()
                time.sleep(0.1)
            assert [reason_of(e) for e in scrape.errors] == ["zookeeper_disconnected"]
            assert own.connect in scrape.errors[0]
            assert scrape.batch.samples == ()  # what it knew may be stale by now: not reported as current
            # ZooKeeper returns (same data): kazoo dropped the watches with the connection, the next
            # scrape reads everything again and sets them, so a later write is seen at once
            own.start()
            back, deadline = scrape, time.monotonic() + 20
            while (back.errors or not back.batch.samples) and time.monotonic() < deadline:
                back = source.collect()
                time.sleep(0.1)
            assert back.errors == [] and len(back.batch.samples) == 4
            write(lambda w: w.set("/brokers/topics/orders/partitions/0/state", _state(1, [1], 0)))
            events, _ = _events_until(source, 1)
            assert _isr(events) == [("orders", 0, [1, 2], [1], 1, 0, "shrink")]
        finally:
            source.stop()


def _observations(scrape, inputs):
    """One scrape as the pipeline hands it to an analysis: through the contract, only the names it reads."""
    batch = decode(encode(scrape.batch))
    out = [
        Observation(s.name, batch.cluster, batch.source, dict(s.labels), batch.ts_ms / 1000, s.value, None)
        for s in batch.samples
    ]
    out += [
        Observation(e.type, batch.cluster, batch.source, {}, e.ts_ms / 1000, None, dict(e.fields))
        for e in batch.events
    ]
    return [o for o in out if o.name in inputs]


def test_the_simulated_clusters_offline_partitions_reach_the_replication_analysis(zk, zookeeper):
    """rf1-incident on its ZooKeeper wire (as in ``kobs demo``): broker 1 dies at 30 s and returns at 150 s.
    By hand: placement with startIndex 0 over brokers 0..2 gives broker 1 partitions 1, 4, 7, 10, 13 of
    orders' 16, and with replication factor 1 each of them is left without a leader, put down to broker 1
    (ZooKeeper keeps the dead replica in the ISR of a partition with leader -1)."""
    analysis = ReplicationAnalysis()

    def topic_metrics():
        scrape = source.collect()
        assert scrape.errors == []
        analysis.observe(_observations(scrape, analysis.inputs))
        topic = [(name, labels[2:], v) for name, labels, v in analysis.evaluate().metrics
                 if labels[:2] == ("demo", "orders")]  # fmt: skip
        return {name: v for name, cause, v in topic if cause in ((), ("",))} | {
            f"{name}{{cause_broker={cause[0]}}}": v for name, cause, v in topic if cause and cause[0]
        }

    with Runtime(Simulation(load_scenario("rf1-incident")), zookeeper=zookeeper.connect) as rt:
        source = ZooKeeperIsrSource("demo", zookeeper.connect, full_diff_s=0).start()
        try:
            rt.advance(29.9)
            before = topic_metrics()
            rt.advance(0.2)
            during = topic_metrics()
            rt.advance(120)
            after = topic_metrics()
        finally:
            source.stop()
    assert before["kobs_topic_replication_factor"] == 1 and before["kobs_topic_offline_partitions"] == 0
    assert during["kobs_topic_offline_partitions{cause_broker=1}"] == 5
    assert during["kobs_topic_offline_partitions"] == 0  # none the events do not explain
    assert after["kobs_topic_offline_partitions"] == 0
    assert "kobs_topic_offline_partitions{cause_broker=1}" not in after

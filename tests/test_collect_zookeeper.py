"""ZooKeeper-mode ISR and controller changes against a real ZooKeeper, with znodes written as Kafka does."""

from __future__ import annotations

import json
import time

import pytest
from kazoo.client import KazooClient

from collectors.scheduler import reason_of
from collectors.zookeeper_isr import ZooKeeperIsrSource
from common.contract import decode, encode
from peers.zookeeper import ZooKeeper


def _state(leader, isr, leader_epoch):
    doc = {"controller_epoch": 3, "leader": leader, "version": 1, "leader_epoch": leader_epoch, "isr": isr}
    return json.dumps(doc).encode()


def _notify(zk, *partitions):
    doc = {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    zk.create("/isr_change_notification/isr_change_", json.dumps(doc).encode(), sequence=True)


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
    client = KazooClient(hosts=zookeeper.connect)
    client.start()
    for path in ("/brokers", "/isr_change_notification", "/controller", "/controller_epoch"):
        if client.exists(path):
            client.delete(path, recursive=True)
    yield client
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


def test_notification_path_reports_a_shrink_with_leader_epoch(zk, zookeeper):
    zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 2, 3], 7), makepath=True)
    zk.create("/brokers/topics/orders/partitions/1/state", _state(2, [2, 3], 4), makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600).start()  # only the first full read
    try:
        assert _isr(source.collect().batch.events) == []  # the first full read is the baseline
        zk.set("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3], 8))
        _notify(zk, ("orders", 0))
        events, errors = _events_until(source, 1)
        assert errors == []
        assert _isr(events) == [("orders", 0, [1, 2, 3], [1, 3], 1, 8, "shrink")]
    finally:
        source.stop()


def test_full_diff_catches_a_change_whose_notification_was_deleted(zk, zookeeper):
    zk.create("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3], 8), makepath=True)
    zk.ensure_path("/isr_change_notification")
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=0.2).start()
    try:
        source.collect()
        # broker 2 rejoins; the controller consumed the notification before we could read it
        zk.set("/brokers/topics/orders/partitions/0/state", _state(1, [1, 3, 2], 8))
        events, _ = _events_until(source, 1)
        assert _isr(events) == [("orders", 0, [1, 3], [1, 3, 2], 1, 8, "expand")]
        time.sleep(0.5)
        assert _isr(_events_until(source, 1, timeout_s=0.5)[0]) == []  # reported once, not per diff
    finally:
        source.stop()


def test_controller_failover_and_malformed_state_are_reported(zk, zookeeper):
    zk.create("/controller_epoch", b"3")
    zk.create("/controller", b'{"version":1,"brokerid":0,"timestamp":"1732270000000"}', ephemeral=True)
    zk.create("/brokers/topics/bad/partitions/0/state", b'{"leader": 1}', makepath=True)
    source = ZooKeeperIsrSource("zk", zookeeper.connect, full_diff_s=3600).start()
    try:
        first, errors = _events_until(source, 1)
        assert [(e.fields["controller_id"], e.fields["controller_epoch"]) for e in first] == [(0, 3)]
        assert len(errors) == 1 and "bad-0" in errors[0]
        zk.delete("/controller")  # controller 0 dies
        gone, _ = _events_until(source, 1)
        assert [(e.fields["controller_id"], e.fields["controller_epoch"]) for e in gone] == [(-1, 3)]
        zk.set("/controller_epoch", b"4")  # broker 2 wins the election with the next epoch
        zk.create("/controller", b'{"version":1,"brokerid":2,"timestamp":"1732270001000"}', ephemeral=True)
        events, _ = _events_until(source, 2)
        pairs = [(e.fields["controller_id"], e.fields["controller_epoch"]) for e in events]
        assert pairs[-1] == (2, 4)
        assert set(pairs) <= {(-1, 4), (2, 4)}  # the epoch may be seen before the new controller
    finally:
        source.stop()


def test_after_session_expiry_everything_is_diffed_and_watches_come_back(zk, zookeeper):
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
        # a change without a notification: only the full diff that follows a lost session can see it
        zk.set("/brokers/topics/orders/partitions/0/state", _state(2, [2], 6))
        events, _ = _events_until(source, 1)
        assert _isr(events) == [("orders", 0, [1, 2], [2], 2, 6, "shrink")]
        # and the notification watch is back
        zk.set("/brokers/topics/orders/partitions/0/state", _state(2, [2, 1], 6))
        _notify(zk, ("orders", 0))
        events, _ = _events_until(source, 1)
        assert _isr(events) == [("orders", 0, [2], [2, 1], 2, 6, "expand")]
    finally:
        source.stop()


def test_a_lost_connection_is_counted_as_zookeeper_disconnected(tmp_path):
    with ZooKeeper(tmp_path) as own:  # its own server: stopping the shared one would break other tests
        source = ZooKeeperIsrSource("zk", own.connect, timeout_s=4).start()
        try:
            assert source.collect().errors == []
            own.stop()
            errors, deadline = [], time.monotonic() + 15
            while not errors and time.monotonic() < deadline:
                errors = source.collect().errors
                time.sleep(0.1)
        finally:
            source.stop()
    assert [reason_of(e) for e in errors] == ["zookeeper_disconnected"]
    assert own.connect in errors[0]

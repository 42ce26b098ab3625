"""Scenarios read back the way collectors see them: exporter text over HTTP and znodes in a real ZooKeeper."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from exposition import scrape
from kazoo.client import KazooClient

from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario

MiB = 1024 * 1024


def value(url: str, name: str, **labels: str) -> float:
    return scrape(url)[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def zk(zookeeper, request):
    """A kazoo client on a fresh chroot of the shared ZooKeeper; yields (connect string, client)."""
    chroot = f"/sim-{request.node.name}"
    admin = KazooClient(hosts=zookeeper.connect)
    admin.start(timeout=15)
    admin.ensure_path(chroot)
    client = KazooClient(hosts=zookeeper.connect + chroot)
    client.start(timeout=15)
    yield zookeeper.connect + chroot, client
    client.stop()
    client.close()
    admin.delete(chroot, recursive=True)
    admin.stop()
    admin.close()


def test_rf1_incident_blocks_producers_after_buffer_over_lost_rate():
    scenario = load_scenario("rf1-incident")
    # By hand: placement startIndex 0 over brokers 0..2 puts partitions 1,4,7,10,13 (5 of 16) on broker 1.
    # 16,000 msg/s x 1024 B keyed evenly = 1000 msg/s per partition; the 5 lost ones take 5,120,000 B/s.
    # buffer.memory 32 MiB / 5,120,000 B/s = 6.5536 s after the death at t=30.
    expected_block_s = 32 * MiB / (5 * 1000 * 1024)
    with Runtime(Simulation(scenario)) as rt:
        producer_url = rt.producers["web-frontend"].url
        broker1_url = rt.brokers[1].url
        rt.advance(30)
        assert (
            value(producer_url, "kafka_producer_producer_metrics_waiting_threads", client_id="web-frontend")
            == 0
        )
        assert value(rt.brokers[0].url, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        rt.advance(0.1)  # the death happens at t=30
        with pytest.raises(urllib.error.URLError):  # a dead broker's exporter stops answering
            scrape(broker1_url)
        assert value(rt.brokers[0].url, "kafka_controller_kafkacontroller_offlinepartitionscount") == 5
        rt.advance(round(expected_block_s - 0.3, 1))
        free = value(
            producer_url, "kafka_producer_producer_metrics_buffer_available_bytes", client_id="web-frontend"
        )
        assert free > 0
        assert (
            value(producer_url, "kafka_producer_producer_metrics_waiting_threads", client_id="web-frontend")
            == 0
        )
        rt.advance(0.5)
        metrics = scrape(producer_url)
        label = (("client_id", "web-frontend"),)
        assert metrics[("kafka_producer_producer_metrics_waiting_threads", label)] == 8
        assert metrics[("kafka_producer_producer_metrics_buffer_available_bytes", label)] < 1024
        # as in Kafka's BufferPool, a wait's time is recorded when the wait ends: none has ended yet
        assert metrics[("kafka_producer_producer_metrics_bufferpool_wait_ratio", label)] == 0
        rt.advance(60)  # max.block.ms 60 s later, each of the 8 blocked threads' send() has timed out once
        assert metrics[("kafka_producer_producer_metrics_record_error_total", label)] == 0
        assert (
            value(
                producer_url,
                "kafka_producer_producer_metrics_bufferpool_wait_ratio",
                client_id="web-frontend",
            )
            > 0
        )
        assert (
            value(
                producer_url, "kafka_producer_producer_metrics_record_error_total", client_id="web-frontend"
            )
            == 8
        )
        rt.advance(60)  # broker 1 returns at t=150: the backlog drains and the threads run again
        assert (
            value(producer_url, "kafka_producer_producer_metrics_waiting_threads", client_id="web-frontend")
            == 0
        )
        assert value(broker1_url, "kafka_server_replicamanager_leadercount") == 5


def test_flapping_isr_with_message_count_threshold_writes_batched_notifications(zk):
    connect, client = zk
    scenario = load_scenario("isr-flapping").replace(duration_s=100)
    # Bursts at 10, 40 and 70 s, each shrinking and re-expanding the ISR of every partition. Broker b leads
    # clicks-b (startIndex 0), so each burst makes each of the 3 leaders write one notification once its
    # last change is more than 5 s old: 3 bursts x 3 brokers = 9, each naming that broker's partition.
    seen: list[bytes] = []
    with Runtime(Simulation(scenario), zookeeper=connect, notification_ttl_s=None) as rt:
        rt.advance(8)
        assert client.get_children("/isr_change_notification") == []
        rt.advance(92)
        shrinks = sum(
            value(e.url, "kafka_server_replicamanager_isrshrinks_total") for e in rt.brokers.values()
        )
        expands = sum(
            value(e.url, "kafka_server_replicamanager_isrexpands_total") for e in rt.brokers.values()
        )
        children = sorted(client.get_children("/isr_change_notification"))
        seen = [client.get(f"/isr_change_notification/{c}")[0] for c in children]
    assert len(children) == 9 and all(len(c) == len("isr_change_") + 10 for c in children)
    docs = [json.loads(raw) for raw in seen]
    assert sorted(d["partitions"][0]["partition"] for d in docs) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert all(d["version"] == 1 and len(d["partitions"]) == 1 for d in docs)
    assert shrinks >= 9 and expands >= 2 * shrinks  # each shrink drops both followers; each rejoins
    # The same traffic under replica.lag.time.max.ms alone never shrinks an ISR.
    calm = load_scenario("isr-flapping").replace(duration_s=100)
    calm = calm.replace(cluster=type(calm.cluster)())
    with Runtime(Simulation(calm)) as rt:
        rt.advance(100)
        assert all(
            value(e.url, "kafka_server_replicamanager_isrshrinks_total") == 0 for e in rt.brokers.values()
        )


def test_slow_follower_leaves_the_isr_after_replica_lag_time(zk):
    connect, client = zk
    # By hand (brokers 0..2, RF 2, startIndex 0, shift 0): p0 [0,1] p1 [1,2] p2 [2,0] p3 [0,2] p4 [1,0]
    # p5 [2,1]. Broker 2 follows p1 (leader 1) and p3 (leader 0). Each partition takes 1,000,000 B/s; broker
    # 2 may fetch 1,000,000 B/s in all, so it falls behind from t=20 and leaves both ISRs just after t=30.
    with Runtime(Simulation(load_scenario("slow-follower")), zookeeper=connect) as rt:
        urp = "kafka_server_replicamanager_underreplicatedpartitions"
        rt.advance(29.5)
        assert [value(rt.brokers[b].url, urp) for b in (0, 1, 2)] == [0, 0, 0]
        rt.advance(1.0)
        assert [value(rt.brokers[b].url, urp) for b in (0, 1, 2)] == [1, 1, 0]
        state = json.loads(client.get("/brokers/topics/payments/partitions/1/state")[0])
        assert state == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
        raw = client.get("/brokers/topics/payments/partitions/3/state")[0]
        assert raw == b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
        rt.advance(100)  # the limit is lifted at 120 s; broker 2 catches up and rejoins
        assert [value(rt.brokers[b].url, urp) for b in (0, 1, 2)] == [0, 0, 0]


def test_controller_failover_in_zookeeper(zk):
    connect, client = zk
    with Runtime(
        Simulation(load_scenario("controller-failover")), zookeeper=connect, epoch_ms=1_700_000_000_000
    ) as rt:
        assert sorted(client.get_children("/brokers/ids")) == ["0", "1", "2"]
        controller = json.loads(client.get("/controller")[0])
        assert (controller["brokerid"], controller["version"], client.get("/controller_epoch")[0]) == (
            0,
            1,
            b"1",
        )
        assert value(rt.brokers[0].url, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        rt.advance(30.1)  # broker 0 dies at t=30
        assert sorted(client.get_children("/brokers/ids")) == ["1", "2"]
        controller = json.loads(client.get("/controller")[0])
        assert controller == {"version": 1, "brokerid": 1, "timestamp": "1700000030000"}
        assert client.get("/controller_epoch")[0] == b"2"
        assert [
            value(rt.brokers[b].url, "kafka_controller_kafkacontroller_activecontrollercount") for b in (1, 2)
        ] == [1, 0]
        for index in range(6):
            state = json.loads(client.get(f"/brokers/topics/orders/partitions/{index}/state")[0])
            assert 0 not in state["isr"] and state["leader"] in (1, 2) and state["controller_epoch"] == 2
    admin = KazooClient(hosts=connect)  # the session closed: the ephemeral znodes are gone
    admin.start(timeout=15)
    try:
        assert admin.get_children("/brokers/ids") == [] and admin.exists("/controller") is None
    finally:
        admin.stop()
        admin.close()


def test_isr_notifications_are_deleted_once_processed(zk):
    connect, client = zk
    # The first burst (t=10..11) changes ISRs until t=11.0; the check at t=17.5 is the first one with
    # the last change more than 5 s old, so all three brokers write then; the controller deletes them 1 s
    # later.
    with Runtime(Simulation(load_scenario("isr-flapping")), zookeeper=connect, notification_ttl_s=1.0) as rt:
        rt.advance(17.6)
        assert len(client.get_children("/isr_change_notification")) == 3
        rt.advance(1.0)
        assert client.get_children("/isr_change_notification") == []


def test_page_cache_scenario_degrades_reads_once_they_miss_the_cache_and_retention_caps_the_logs():
    # By hand (docs of simulator/storage.py and the scenario): RF 2 over 3 brokers puts 4 replicas on each,
    # each written at 1 MB/s (1,000 msg/s of 1,000 B), so each broker writes 4 MB/s and from t=25 s each
    # replica's share of its 100 MB page cache is 25 MB = 25,000 messages. 'live' reads every message at
    # the head (6 MB/s); 'batch' reads 800 msg/s per partition (4.8 MB/s) and falls 200 msg/s behind, so
    # its position leaves the cached tail at t=125 s. From then its two partitions per broker share the
    # broker's 1 MB/s of disk reads: 500 msg/s each, 3 MB/s in all.
    def bytes_out(rt) -> float:
        return sum(
            value(e.url, "kafka_server_brokertopicmetrics_bytesout_total", topic="events")
            for e in rt.brokers.values()
        )

    def log_size(rt) -> float:  # partition 0's leader is broker 0 (startIndex 0)
        return value(rt.brokers[0].url, "kafka_log_log_size", topic="events", partition="0")

    def free_disk(rt) -> float:
        return value(rt.brokers[0].url, "node_filesystem_avail_bytes", mountpoint="/var/lib/kafka/data")

    with Runtime(Simulation(load_scenario("page-cache"))) as rt:
        rt.advance(10)
        free_at_10 = free_disk(rt)
        rt.advance(20)
        assert log_size(rt) == 30_000_000  # 30 s of 1 MB/s, nothing deleted yet
        assert free_at_10 - free_disk(rt) == 20 * 4_000_000  # the runway shrinks by 4 MB/s
        rt.advance(70)
        before = bytes_out(rt)
        rt.advance(10)
        assert (bytes_out(rt) - before) / 10 == pytest.approx(6_000_000 + 4_800_000, rel=0.01)
        rt.advance(90)
        before = bytes_out(rt)
        rt.advance(10)
        assert (bytes_out(rt) - before) / 10 == pytest.approx(6_000_000 + 3_000_000, rel=0.01)
        # retention.bytes 60 MB in 10 MB segments, checked every 5 s: from t=70 s the oldest segment goes
        # once the log holds 70 MB, so the log stays at 60..70 MB (6 or 7 segments) however long it runs.
        sizes = []
        for _ in range(4):
            rt.advance(7)
            sizes.append(log_size(rt))
        assert all(60_000_000 <= size < 70_000_000 for size in sizes), sizes
        assert value(rt.brokers[0].url, "kafka_log_log_logstartoffset", topic="events", partition="0") > 0
        segments = value(rt.brokers[0].url, "kafka_log_log_numlogsegments", topic="events", partition="0")
        assert segments in (7, 8)  # 6 or 7 full ones and the active one
        assert free_disk(rt) >= 1_000_000_000 - 4 * 70_000_000  # retention stopped the disk from filling

"""Embedded real peers start on loopback, answer, and are gone after stop; the demo cleans up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser import browser_page
from confluent_kafka import Consumer, Producer, TopicPartition
from kazoo.client import KazooClient
from sockets import beyond_loopback

from common.contract import Batch, Sample, decode, encode
from peers.process import PORTS_ENV, PeerError, free_port, port_is_free
from peers.prometheus import Alertmanager, Prometheus, http_json
from peers.stack import create_topic, pick_port
from peers.zookeeper import ZooKeeper

pytestmark = pytest.mark.peers


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_batches_round_trip_through_the_real_broker_and_keys_pin_partitions(kafka_cluster):
    create_topic(kafka_cluster.bootstrap, "contract-trip", 4)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "batch.num.messages": 1})
    sent = [
        Batch(f"c{i % 3}", "jmx/broker-1", 1000 + i, (Sample("kafka_broker_leaders", {"broker": "1"}, i),))
        for i in range(30)
    ]
    for batch in sent:
        producer.produce("contract-trip", encode(batch), key=batch.key)
    assert producer.flush(10) == 0

    consumer = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap, "group.id": "trip", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("contract-trip", p, 0) for p in range(4)])
    received, deadline = [], time.monotonic() + 20
    while len(received) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            received.append((message.partition(), decode(message.value())))
    consumer.close()
    assert sorted(b.ts_ms for _, b in received) == [b.ts_ms for b in sent]
    partitions_by_key: dict[bytes, set[int]] = {}
    for partition, batch in received:
        partitions_by_key.setdefault(batch.key, set()).add(partition)
    assert all(len(parts) == 1 for parts in partitions_by_key.values()) and len(partitions_by_key) == 3


def test_zookeeper_serves_clients_and_stops_by_pid(tmp_path):
    zk = ZooKeeper(tmp_path).start()
    try:
        client = KazooClient(hosts=zk.connect, timeout=5)
        client.start(timeout=10)
        client.create("/brokers/ids/1", b'{"host":"127.0.0.1"}', makepath=True)
        assert client.get("/brokers/ids/1")[0] == b'{"host":"127.0.0.1"}'
        client.stop()
    finally:
        zk.stop()
    assert not pid_alive(zk.pid) and port_is_free(zk.port)


def test_prometheus_scrapes_and_alertmanager_answers(tmp_path):
    with Alertmanager(tmp_path / "am") as am, Prometheus(tmp_path / "prom", alertmanager=am.address) as prom:
        # Prometheus always knows itself: `up` of its own scrape target is a query with a live answer.
        prom_self = Prometheus(tmp_path / "prom2", {"self": [f"127.0.0.1:{prom.port}"]}).start()
        try:
            deadline = time.monotonic() + 20
            result = []
            while not result and time.monotonic() < deadline:
                result = prom_self.query('up{job="self"} == 1')
                time.sleep(0.5)
            assert result and result[0]["metric"]["instance"] == f"127.0.0.1:{prom.port}"
            assert am.alerts() == []
        finally:
            prom_self.stop()
    assert not any(pid_alive(p.pid) for p in (am, prom, prom_self))


def test_a_peer_that_cannot_start_says_why(tmp_path):
    port = free_port()
    with ZooKeeper(tmp_path / "first", port=port), pytest.raises(PeerError, match=rf"port {port}.*in use"):
        ZooKeeper(tmp_path / "second", port=port).start()
    broken = ZooKeeper(tmp_path / "third")
    broken.argv[broken.argv.index("-cp") + 1] = "/nonexistent.jar"  # the JVM cannot find ZooKeeper
    with pytest.raises(PeerError, match=r"zookeeper exited with code 1: .*QuorumPeerMain"):
        broken.start()


def test_kobs_ports_confines_the_ports_handed_out_and_a_wrong_setting_says_how_to_write_it(monkeypatch):
    # make test's workers each take a range: the conventional ports too would be raced for
    monkeypatch.setenv(PORTS_ENV, "20000-20100")
    assert {free_port() for _ in range(5)} | {pick_port("prometheus")} <= set(range(20000, 20100))
    monkeypatch.setenv(PORTS_ENV, "9000")
    with pytest.raises(PeerError, match=r"KOBS_PORTS='9000': write it as LOW-HIGH in 1024-65536"):
        free_port()


def test_demo_starts_the_stack_and_leaves_nothing_running_after_sigterm(tmp_path):
    kobs = str(Path(sys.executable).with_name("kobs"))
    demo = subprocess.Popen(
        [kobs, "demo", "--run-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        for line in demo.stdout:
            lines.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        output = "".join(lines)
        pids = [int(part.split(")")[0]) for part in output.split("(pid ")[1:]]
        # three Kafka nodes, the Java producer, ZooKeeper, Alertmanager, Prometheus, collect, app, stream
        assert len(pids) == 10 and all(pid_alive(pid) for pid in pids), output
        assert str(tmp_path) in output
        prometheus_url = next(line.split()[-1] for line in lines if line.strip().startswith("prometheus ("))
        rules = http_json(f"{prometheus_url}/api/v1/rules")["data"]["groups"]
        alert_names = {
            rule["name"] for group in rules for rule in group["rules"] if rule["type"] == "alerting"
        }
        assert {"KafkaOfflinePartitions", "KafkaProducerBlocked"} <= alert_names
        # The simulated fleet answers in the JMX exporter's format, and Prometheus is told to scrape it.
        broker_url = next(line.split()[-3] for line in lines if "simulated fleet:" in line)
        # (a liveness check, not a timing one: on a CI run's two busy workers, while the demo's JVMs and
        # Spark started, the fleet's first page once took over 10 s)
        with urllib.request.urlopen(broker_url, timeout=60) as response:
            assert b"kafka_server_replicamanager_underreplicatedpartitions" in response.read()
        scraped, deadline = set(), time.monotonic() + 20
        while broker_url not in scraped and time.monotonic() < deadline:  # target discovery is asynchronous
            time.sleep(0.2)
            targets = http_json(f"{prometheus_url}/api/v1/targets")["data"]["activeTargets"]
            scraped = {t["scrapeUrl"]: t["labels"] for t in targets if t["scrapePool"] == "simulated-kafka"}
        assert broker_url in scraped
        # rules on raw broker metrics group by cluster: the fleet never mixes with the real cluster "demo"
        assert scraped[broker_url]["cluster"] == "simulated-fleet"
        # The demo's app shows live data within a minute: the collector's scrapes, through Prometheus.
        app_url = next(line.split()[-1] for line in lines if line.strip().startswith("kobs-app ("))
        with browser_page() as page:
            page.goto(app_url)
            page.get_by_text("Collector scrapes per minute by source").wait_for(timeout=60_000)
            # Every alert's runbook link opens its section in this app.
            links = {
                r["name"]: r["annotations"]["runbook_url"]
                for g in rules
                for r in g["rules"]
                if r["type"] == "alerting"
            }
            assert links["KafkaProducerBlocked"] == f"{app_url}runbooks?alert=KafkaProducerBlocked"
            assert all(url.startswith(f"{app_url}runbooks?alert=") for url in links.values())
            page.goto(links["KafkaOfflinePartitions"])
            page.get_by_role("heading", name="KafkaOfflinePartitions").wait_for(timeout=60_000)
        # Burrow's API, at the base URL a Burrow client is given, lists the demo's cluster.
        burrow_url = next(line.split()[-1] for line in lines if line.strip().startswith("burrow-api"))
        assert "demo" in http_json(f"{burrow_url}/v3/kafka")["clusters"]
        # Everything the demo started, Spark's JVM and Python workers included, listens on loopback only.
        assert not beyond_loopback(set(pids)), "listening beyond 127.0.0.1 (address, port, pid)"
    finally:  # a failed assertion must not leave the demo's servers running
        demo.send_signal(signal.SIGTERM)
        rest, _ = demo.communicate(timeout=60)
    assert demo.returncode == 0 and "everything it started has exited" in rest
    assert not any(pid_alive(pid) for pid in pids)

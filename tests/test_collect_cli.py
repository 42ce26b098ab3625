"""`kobs collect` as a subprocess against the real broker: offsets end to end, faults, long-running mode."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from exposition import scrape

from common import names
from common.contract import decode
from peers.process import free_port
from peers.stack import create_topic

ROOT = Path(__file__).parents[1]
PRODUCED = {0: 4, 1: 2}  # messages per partition
COMMITTED = {0: 3, 1: 1}  # offsets the group commits


def _config(tmp_path: Path, bootstrap: str, topic: str, **cluster: object) -> Path:
    doc = {
        "clusters": [{"name": "test", "bootstrap_servers": [bootstrap], **cluster}],
        "metrics_topic": {"name": topic},
        "intervals": {"metrics_s": 3, "offsets_s": 5, "metadata_s": 5, "producers_s": 3},
        "sinks": {"run_dir": str(tmp_path / "run"), "self_metrics_address": f"127.0.0.1:{free_port()}"},
    }
    path = tmp_path / "kobs.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _kobs(*args: str) -> list[str]:
    return [sys.executable, "-m", "kobs.cli", "collect", *args]


ENV = os.environ | {"PYTHONPATH": str(ROOT)}


def _collect_once(config: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    command = _kobs("--config", str(config), "--once")
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=60)
    return result, time.monotonic() - started


def _summary_line(stdout: str, source: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.split()[:1] == [source]]
    return line


def _produce_and_commit(bootstrap: str, topic: str, group: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(topic, f"m{i}".encode(), partition=partition)
    assert producer.flush(10) == 0
    settings = {"group.id": group, "session.timeout.ms": 6000, "enable.auto.commit": False}
    consumer = Consumer({"bootstrap.servers": bootstrap, **settings})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the group never assigned partitions"
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()], asynchronous=False
        )
    finally:
        consumer.close()


def _offsets_read_back(bootstrap: str, metrics_topic: str, topic: str, group: str) -> tuple[dict, dict]:
    """End offsets of ``topic`` and the group's committed offsets, from the batches on the metrics topic."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "collect-cli-reader"})
    ends: dict[int, float] = {}
    committed: dict[int, float] = {}
    try:
        partitions = consumer.list_topics(metrics_topic, timeout=10).topics[metrics_topic].partitions
        consumer.assign([TopicPartition(metrics_topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + 20
        while (len(ends) < len(PRODUCED) or len(committed) < len(COMMITTED)) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            batch = decode(message.value())
            for s in batch.samples if (batch.cluster, batch.source) == ("test", "admin/offsets") else ():
                if s.labels.get("topic") != topic:
                    continue
                if s.name == names.PARTITION_END_OFFSET:
                    ends[int(s.labels["partition"])] = s.value
                elif s.name == names.GROUP_COMMITTED_OFFSET and s.labels["group"] == group:
                    committed[int(s.labels["partition"])] = s.value
    finally:
        consumer.close()
    return ends, committed


def test_once_publishes_the_offsets_of_a_real_group(kafka_cluster, tmp_path):
    topic, group, metrics_topic = "collect-cli-orders", "collect-cli-billing", "collect-cli-a"
    create_topic(kafka_cluster.bootstrap, topic, len(PRODUCED))
    _produce_and_commit(kafka_cluster.bootstrap, topic, group)

    result, _ = _collect_once(_config(tmp_path, kafka_cluster.bootstrap, metrics_topic))
    assert result.returncode == 0, result.stderr
    assert "ok" in _summary_line(result.stdout, "test/admin/offsets").split()
    assert "dropped 0 (all delivered)" in result.stdout
    assert _offsets_read_back(kafka_cluster.bootstrap, metrics_topic, topic, group) == (PRODUCED, COMMITTED)


@pytest.fixture
def silent_endpoint():
    """A port that accepts connections and never answers: an exporter that hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/metrics"


def test_down_and_hung_endpoints_do_not_block_the_others(kafka_cluster, tmp_path, silent_endpoint):
    exporters = [
        {"broker_id": 1, "url": f"http://127.0.0.1:{free_port()}/metrics"},  # closed port
        {"broker_id": 2, "url": silent_endpoint},
    ]
    config = _config(tmp_path, kafka_cluster.bootstrap, "collect-cli-b", exporters=exporters)
    result, elapsed = _collect_once(config)
    assert result.returncode == 0, result.stderr
    assert elapsed < 30  # generous safety bound: the 3 s metrics interval caps the hung scrape
    closed = _summary_line(result.stdout, "test/exporter/broker-1")
    assert "FAILED" in closed and "fetch x1" in closed and "refused" in closed
    hung = _summary_line(result.stdout, "test/exporter/broker-2")
    assert "FAILED" in hung and ("timeout x1" in hung or "timed out" in hung)
    for source in ("test/admin/offsets", "test/admin/metadata", "test/admin/log_dirs"):
        assert "ok" in _summary_line(result.stdout, source).split()
    assert result.stdout.splitlines()[0].startswith("kobs collect: 5 sources, 3 succeeded, 2 failed, cycle ")


def test_every_source_failing_exits_1_with_the_reason(tmp_path):
    result, _ = _collect_once(_config(tmp_path, f"127.0.0.1:{free_port()}", "collect-cli-c"))
    assert result.returncode == 1, result.stdout + result.stderr
    for source in ("test/admin/offsets", "test/admin/metadata"):
        line = _summary_line(result.stdout, source)
        assert "FAILED" in line and "list_topics x1" in line


def _wait_for_metrics(url: str, process: subprocess.Popen, timeout_s: float = 20) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            return scrape(url)
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"self-metrics never served (exit code {process.poll()})")


def test_long_running_mode_serves_growing_self_metrics_and_stops_on_sigterm(
    kafka_cluster, zookeeper, tmp_path
):
    config = _config(tmp_path, kafka_cluster.bootstrap, "collect-cli-d", zookeeper=zookeeper.connect)
    doc = yaml.safe_load(config.read_text())
    doc["intervals"] = dict.fromkeys(doc["intervals"], 3)  # each source gives up at 2.4 s
    config.write_text(yaml.safe_dump(doc))
    url = f"http://{doc['sinks']['self_metrics_address']}/metrics"
    scrapes, zk_scrapes = (
        ("kobs_collector_scrape_duration_seconds_count", (("source", f"test/{source}"),))
        for source in ("admin/offsets", "zookeeper/isr")
    )
    sent = ("kobs_collector_samples_total", (("outcome", "sent"),))

    log = tmp_path / "collect.log"
    with open(log, "w") as stderr:
        process = subprocess.Popen(_kobs("--config", str(config)), env=ENV, stderr=stderr)
    try:
        first = _wait_for_metrics(url, process)
        for name in ("kobs_collector_queue_depth", "kobs_collector_spool_bytes"):
            assert (name, ()) in first
        deadline = time.monotonic() + 20
        later = first
        while (
            later[scrapes] <= first[scrapes] or later[sent] <= first[sent]
        ) and time.monotonic() < deadline:
            time.sleep(0.5)
            later = scrape(url)
        assert later[scrapes] > first[scrapes] and later[sent] > first[sent]
        assert later[zk_scrapes] >= 1
        errors = [labels for name, labels in later if name == "kobs_collector_scrape_errors_total"]
        assert errors == [], log.read_text()[-3000:]  # every source, ZooKeeper included, scraped cleanly
        assert later["kobs_collector_restarts_total", ()] == 0

        # The collector aborts, as librdkafka makes it on a failed assertion: the supervisor starts it again.
        collector = ["pgrep", "-P", str(process.pid), "-f", "spawn_main"]  # not the resource tracker
        (child,) = subprocess.run(collector, capture_output=True, text=True).stdout.split()
        os.kill(int(child), signal.SIGABRT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # down until the new collector serves again
                if scrape(url)["kobs_collector_restarts_total", ()] == 1:
                    break
            time.sleep(0.5)
        assert scrape(url)["kobs_collector_restarts_total", ()] == 1, log.read_text()
        assert "the collector died (SIGABRT); starting it again in 5 s" in log.read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_sigterm_stops_the_collector_within_seconds_whatever_its_peers_do(tmp_path, silent_endpoint):
    """A hung exporter, an unreachable metrics topic: SIGTERM still ends kobs collect at once (it once stayed
    alive for over a minute), its scrape given up and what it holds left in the spool."""
    exporters = [{"broker_id": 1, "url": silent_endpoint}]
    config = _config(tmp_path, f"127.0.0.1:{free_port()}", "collect-cli-e", exporters=exporters)
    url = f"http://{yaml.safe_load(config.read_text())['sinks']['self_metrics_address']}/metrics"
    log = tmp_path / "collect.log"
    with open(log, "w") as stderr:
        process = subprocess.Popen(_kobs("--config", str(config)), env=ENV, stderr=stderr)
    try:
        _wait_for_metrics(url, process)
        time.sleep(2)  # the hung scrape is under way
        process.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        assert process.wait(timeout=60) == 0, log.read_text()
        assert time.monotonic() - stopped < 30, log.read_text()  # a stated bound: docs/faults.md#stopping
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

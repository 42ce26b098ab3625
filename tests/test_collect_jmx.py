"""The JMX source against a real JVM serving Kafka-named MBeans over JMX/RMI (one JVM for the module).

Bean names, keys and attributes are Kafka's (shared/KAFKA_NOTES.md, Yammer meters/timers, the producer's
``producer-metrics``); the expected canonical names are those of ``common/names.py`` for each bean.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from collectors.jmx import BROKER_QUERIES, PRODUCER_QUERIES, JmxSource, series_name
from collectors.scheduler import build_jobs
from common import names
from common.config import Config, ConfigError
from common.contract import decode
from peers.jmx import KafkaBeans
from peers.process import free_port

ROOT = Path(__file__).parents[1]

BROKER_1 = """\
gauge kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions Value=3
gauge kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount Value=1
gauge kafka.server:type=ReplicaManager,name=PartitionCount Value=120
gauge kafka.server:type=ReplicaManager,name=LeaderCount Value=40
meter kafka.server:type=ReplicaManager,name=IsrShrinksPerSec Count=41 OneMinuteRate=0.2
meter kafka.server:type=ReplicaManager,name=IsrExpandsPerSec Count=38 OneMinuteRate=0.1
gauge kafka.controller:type=KafkaController,name=ActiveControllerCount Value=1
gauge kafka.controller:type=KafkaController,name=OfflinePartitionsCount Value=2
meter kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec Count=1
timer kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs Count=7 Mean=12.5
meter kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec Count=5000 OneMinuteRate=100
meter kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders Count=1234
meter kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=orders Count=1263616
meter kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,topic=orders Count=2527232
meter kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec,topic=orders Count=9
gauge kafka.log:type=Log,name=Size,topic=orders,partition=0 Value=10485760
gauge kafka.log:type=Log,name=LogStartOffset,topic=orders,partition=0 Value=100
gauge kafka.log:type=Log,name=LogEndOffset,topic=orders,partition=0 Value=1334
gauge kafka.log:type=Log,name=NumLogSegments,topic=orders,partition=0 Value=2
gauge kafka.log:type=LogManager,name=OfflineLogDirectoryCount Value=0
meter kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9 Count=2000
meter kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=8 Count=15
meter kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=Produce,error=NOT_ENOUGH_REPLICAS Count=7
timer kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce Count=2015 Mean=3.5
timer kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=Produce Count=2015 Mean=0.4
gauge kafka.server:type=KafkaServer,name=BrokerState Value=3
"""
BROKER_2 = """\
gauge kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions Value=0
gauge kafka.controller:type=KafkaController,name=ActiveControllerCount Value=0
"""
PRODUCER = (
    "attrs kafka.producer:type=producer-metrics,client-id=checkout buffer-available-bytes=0 "
    "buffer-total-bytes=33554432 bufferpool-wait-ratio=0.85 bufferpool-wait-time-ns-total=1.23E9 "
    "waiting-threads=12 record-send-rate=0 record-error-rate=3.5 record-error-total=420 "
    "request-latency-avg=NaN batch-size-avg=512\n"
    "attrs kafka.producer:type=producer-node-metrics,client-id=checkout,node-id=node-1 request-rate=4\n"
)

B1 = (("broker", "1"),)
EXPECTED_BROKER_1 = {
    (names.UNDER_REPLICATED_PARTITIONS, B1): 3,
    (names.UNDER_MIN_ISR_PARTITIONS, B1): 1,
    (names.PARTITION_COUNT, B1): 120,
    (names.LEADER_COUNT, B1): 40,
    (names.ISR_SHRINKS, B1): 41,
    (names.ISR_EXPANDS, B1): 38,
    (names.ACTIVE_CONTROLLER, B1): 1,
    (names.OFFLINE_PARTITIONS, B1): 2,
    (names.UNCLEAN_ELECTIONS, B1): 1,
    (names.LEADER_ELECTIONS, B1): 7,
    (names.MESSAGES_IN, B1): 5000,
    (names.MESSAGES_IN, (*B1, ("topic", "orders"))): 1234,
    (names.BYTES_IN, (*B1, ("topic", "orders"))): 1263616,
    (names.BYTES_OUT, (*B1, ("topic", "orders"))): 2527232,
    (names.FAILED_PRODUCE_REQUESTS, (*B1, ("topic", "orders"))): 9,
    (names.LOG_SIZE_BYTES, (*B1, ("partition", "0"), ("topic", "orders"))): 10485760,
    (names.PARTITION_START_OFFSET, (*B1, ("partition", "0"), ("topic", "orders"))): 100,
    (names.PARTITION_END_OFFSET, (*B1, ("partition", "0"), ("topic", "orders"))): 1334,
    (names.OFFLINE_LOG_DIRS, B1): 0,
    (names.REQUESTS, (*B1, ("request", "Produce"), ("version", "9"))): 2000,
    (names.REQUESTS, (*B1, ("request", "Produce"), ("version", "8"))): 15,
    (names.REQUEST_ERRORS, (*B1, ("error", "NOT_ENOUGH_REPLICAS"), ("request", "Produce"))): 7,
    (names.REQUEST_TIME_MS, (*B1, ("request", "Produce"))): 3.5,
}  # NumLogSegments, RequestQueueTimeMs and BrokerState are not in the catalogue: left out


@pytest.fixture(scope="module")
def beans(tmp_path_factory):
    ports = {"broker-1": free_port(), "broker-2": free_port(), "producer": free_port()}
    lines = {
        ports["broker-1"]: BROKER_1.splitlines(),
        ports["broker-2"]: BROKER_2.splitlines(),
        ports["producer"]: PRODUCER.splitlines(),
    }
    with KafkaBeans(tmp_path_factory.mktemp("jmx"), lines):
        yield {name: f"127.0.0.1:{port}" for name, port in ports.items()}


@pytest.fixture
def silent_port():
    """A port that accepts connections and never answers: a JMX endpoint that hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def _by_name(samples):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


def test_broker_beans_map_to_canonical_names(beans):
    source = JmxSource("prod", "jmx/broker-1", beans["broker-1"], BROKER_QUERIES, {"broker": "1"})
    scrape = source.collect()
    assert scrape.errors == []
    assert (scrape.batch.cluster, scrape.batch.source) == ("prod", "jmx/broker-1")
    assert _by_name(scrape.batch.samples) == EXPECTED_BROKER_1


def test_producer_metrics_map_with_the_client_id(beans):
    labels = {"client_id": "checkout"}
    scrape = JmxSource("prod", "producer/checkout", beans["producer"], PRODUCER_QUERIES, labels).collect()
    assert scrape.errors == []
    got = _by_name(scrape.batch.samples)
    latency = got.pop((names.PRODUCER_REQUEST_LATENCY_MS, (("client_id", "checkout"),)))
    assert latency != latency  # NaN, as Kafka reports an average over no requests
    c = (("client_id", "checkout"),)
    assert got == {
        (names.PRODUCER_BUFFER_AVAILABLE_BYTES, c): 0,
        (names.PRODUCER_BUFFER_TOTAL_BYTES, c): 33554432,
        (names.PRODUCER_BUFFERPOOL_WAIT_RATIO, c): 0.85,
        (names.PRODUCER_BUFFERPOOL_WAIT_NS, c): 1.23e9,
        (names.PRODUCER_WAITING_THREADS, c): 12,
        (names.PRODUCER_RECORD_SEND_RATE, c): 0,
        (names.PRODUCER_RECORD_ERROR_RATE, c): 3.5,
        (names.PRODUCER_RECORD_ERRORS, c): 420,
    }  # batch-size-avg and the per-node bean are not ours


@pytest.mark.parametrize(
    ("bean", "attribute", "series"),
    [  # the names Strimzi's kafka-metrics.yaml rules give these beans (docs/simulator.md lists them)
        (
            "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
            "Value",
            ("kafka_server_replicamanager_underreplicatedpartitions", {}),
        ),
        (
            "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=orders",
            "Count",
            ("kafka_server_brokertopicmetrics_bytesin_total", {"topic": "orders"}),
        ),
        (
            "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
            "Count",
            ("kafka_controller_controllerstats_leaderelectionrateandtimems_count", {}),
        ),
        (
            "kafka.log:type=Log,name=LogEndOffset,topic=orders,partition=3",
            "Value",
            ("kafka_log_log_logendoffset", {"topic": "orders", "partition": "3"}),
        ),
        (
            'kafka.producer:type=producer-metrics,client-id="web,eu"',  # Kafka quotes special characters
            "bufferpool-wait-ratio",
            ("kafka_producer_producer_metrics_bufferpool_wait_ratio", {"client_id": "web,eu"}),
        ),
    ],
)
def test_beans_are_named_like_the_exporter_rule_sets(bean, attribute, series):
    assert series_name(bean, attribute) == series


def test_a_secured_port_is_scraped_with_the_clusters_jmx_user_and_refuses_a_wrong_password(
    tmp_path, monkeypatch
):
    port = free_port()
    with KafkaBeans(tmp_path, {port: BROKER_1.splitlines()}, credentials=("monitor", "s3cret")):
        cluster = {
            "name": "prod",
            "bootstrap_servers": ["127.0.0.1:9"],
            "jmx": [{"broker_id": 1, "address": f"127.0.0.1:{port}"}],
            "jmx_auth": {"username": "monitor", "password_env": "PROD_JMX_PASSWORD"},
        }
        config = Config.model_validate({"clusters": [cluster]})

        def scrape(password: str):
            monkeypatch.setenv("PROD_JMX_PASSWORD", password)
            (job,) = [j for j in build_jobs(config) if j.source.name == "jmx/broker-1"]
            return job.source.collect()

        good = scrape("s3cret")
        assert good.errors == [] and _by_name(good.batch.samples) == EXPECTED_BROKER_1
        bad = scrape("guess")
        assert bad.batch.samples == ()
        refused = "auth-failed: Authentication failed! Invalid username or password (check jmx_auth)"
        assert bad.errors == [f"{refused} (at 127.0.0.1:{port})"]
        anonymous = JmxSource("prod", "jmx/broker-1", f"127.0.0.1:{port}", BROKER_QUERIES, {"broker": "1"})
        assert anonymous.collect().batch.samples == ()
    monkeypatch.delenv("PROD_JMX_PASSWORD")
    with pytest.raises(ConfigError, match=r"clusters\[prod\]\.jmx_auth\.password_env .*PROD_JMX_PASSWORD"):
        build_jobs(config)


def test_a_closed_port_is_an_error_with_the_reason_not_an_exception():
    address = f"127.0.0.1:{free_port()}"
    scrape = JmxSource("prod", "jmx/broker-9", address, BROKER_QUERIES, {"broker": "9"}).collect()
    assert scrape.batch.samples == ()
    assert len(scrape.errors) == 1
    assert scrape.errors[0].startswith("connection-error: ") and address in scrape.errors[0]
    assert "Connection refused" in scrape.errors[0]


def test_queries_wait_for_a_free_slot_and_give_up_at_their_timeout(beans):
    slots = threading.Semaphore(1)
    labels = {"broker": "2"}
    source = JmxSource(
        "prod", "jmx/broker-2", beans["broker-2"], BROKER_QUERIES, labels, timeout_s=0.5, slots=slots
    )
    slots.acquire()  # another broker's query holds the only slot
    try:
        blocked = source.collect()
    finally:
        slots.release()
    assert blocked.batch.samples == () and blocked.errors[0].startswith("timeout: no free JMX query slot")
    source.timeout_s = 10
    freed = source.collect()
    assert freed.errors == [] and len(freed.batch.samples) == 2


def test_collect_once_scrapes_live_brokers_while_one_is_down_and_one_hangs(
    beans, kafka_cluster, silent_port, tmp_path
):
    topic = "collect-jmx-a"
    jmx = [
        {"broker_id": 1, "address": beans["broker-1"]},
        {"broker_id": 2, "address": beans["broker-2"]},
        {"broker_id": 3, "address": f"127.0.0.1:{free_port()}"},  # JMX port down
        {"broker_id": 4, "address": f"127.0.0.1:{silent_port}"},  # accepts, never answers
    ]
    doc = {
        "clusters": [
            {
                "name": "test",
                "bootstrap_servers": [kafka_cluster.bootstrap],
                "jmx": jmx,
                "producers": [{"client_id": "checkout", "jmx": beans["producer"]}],
            }
        ],
        "metrics_topic": {"name": topic},
        "intervals": {"metrics_s": 8, "offsets_s": 5, "metadata_s": 5, "producers_s": 8},
        "sinks": {"run_dir": str(tmp_path / "run"), "self_metrics_address": f"127.0.0.1:{free_port()}"},
    }
    config = tmp_path / "kobs.yaml"
    config.write_text(yaml.safe_dump(doc))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "collect", "--config", str(config), "--once"],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed < 30  # generous bound: the hung broker is cut off within its 8 s interval
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:-1]}
    assert lines["test/jmx/broker-1"].split()[1:3] == ["ok", str(len(EXPECTED_BROKER_1))]
    assert lines["test/jmx/broker-2"].split()[1:3] == ["ok", "2"]
    assert lines["test/producer/checkout"].split()[1:3] == ["ok", "9"]
    down = lines["test/jmx/broker-3"]
    assert "FAILED" in down and "connection-error x1" in down
    hung = lines["test/jmx/broker-4"]
    assert "FAILED" in hung and "timeout x1" in hung
    assert "dropped 0 (all delivered)" in result.stdout

    # what broker 1 reported arrives on the metrics topic under its canonical names
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap, "group.id": "collect-jmx-reader"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        seen, deadline = None, time.monotonic() + 20
        while seen is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                batch = decode(message.value())
                if batch.source == "jmx/broker-1":
                    seen = _by_name(batch.samples)
    finally:
        consumer.close()
    assert seen == EXPECTED_BROKER_1

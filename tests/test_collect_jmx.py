"""The JMX source's mechanics against real Kafka JVMs: a real Java producer's client metrics, bean naming, a
broker's JMX password, refused and hung endpoints, the shared query slots, and ``kobs collect --once``.

The brokers are the session's Kafka 4.3 nodes; the producers are Kafka's console producer with remote JMX
(one of them with a JMX password file). That the broker samples equal what the brokers report is
checked in ``tests/test_jmx_real.py``.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from collectors.jmx import BROKER_QUERIES, PRODUCER_QUERIES, JmxSource, QuerySlots, series_name
from collectors.scheduler import build_jobs
from common import names
from common.config import Config, ConfigError
from common.contract import decode
from peers import kafka_tools
from peers.process import free_port

pytestmark = pytest.mark.peers

ROOT = Path(__file__).parents[1]
PRODUCER_BEAN = "kafka.producer:type=producer-metrics,client-id=checkout"
BUFFER_MEMORY, BATCH_SIZE = 1048576, 16384
REJECTED = 3  # records the compacted topic refuses (no key): the producer's record errors
# The producer's attribute → canonical name (Kafka 4 has no bufferpool-wait-time-total any more).
PRODUCER_CATALOGUE = {
    "buffer-available-bytes": names.PRODUCER_BUFFER_AVAILABLE_BYTES,
    "buffer-total-bytes": names.PRODUCER_BUFFER_TOTAL_BYTES,
    "bufferpool-wait-ratio": names.PRODUCER_BUFFERPOOL_WAIT_RATIO,
    "bufferpool-wait-time-ns-total": names.PRODUCER_BUFFERPOOL_WAIT_NS,
    "waiting-threads": names.PRODUCER_WAITING_THREADS,
    "record-send-rate": names.PRODUCER_RECORD_SEND_RATE,
    "record-error-rate": names.PRODUCER_RECORD_ERROR_RATE,
    "record-error-total": names.PRODUCER_RECORD_ERRORS,
    "request-latency-avg": names.PRODUCER_REQUEST_LATENCY_MS,
}
# Broker gauges every node of a KRaft cluster (broker and controller) reports.
NODE_GAUGES = {
    names.UNDER_REPLICATED_PARTITIONS, names.UNDER_MIN_ISR_PARTITIONS, names.PARTITION_COUNT,
    names.LEADER_COUNT, names.ACTIVE_CONTROLLER, names.OFFLINE_PARTITIONS, names.OFFLINE_LOG_DIRS,
}  # fmt: skip


@pytest.fixture(scope="module")
def producer(kafka_cluster, tmp_path_factory):
    """A real Java producer (client id ``checkout``) holding still: four 9,000-byte records without a key
    to a compacted topic, which refuses the three sent (each its own batch: two do not fit in one); the
    fourth waits in a batch of the buffer (linger 1 h), so available bytes are the buffer less one batch."""
    topic = f"collect-jmx-producer-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"cleanup.policy": "compact"})])[topic].result(30)
    properties = {
        "client.id": "checkout", "linger.ms": 3600000, "batch.size": BATCH_SIZE,
        "buffer.memory": BUFFER_MEMORY, "max.block.ms": 3600000,
    }  # fmt: skip
    run_dir = tmp_path_factory.mktemp("producer")
    lines = ["x" * 9000] * (REJECTED + 1)
    with kafka_tools.ConsoleProducer(
        run_dir, kafka_cluster.bootstrap, topic, lines, free_port(), properties
    ) as console:
        errors = f"{PRODUCER_BEAN}:record-error-total"
        settled = wait_for(
            lambda: kafka_tools.jmx_values(console.jmx_address, PRODUCER_BEAN).get(errors) == REJECTED, 60
        )
        assert settled, console.log_tail()
        yield console


def _by_name(samples):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


def test_a_real_producers_metrics_map_with_the_client_id_and_equal_what_jmxtool_reads(producer):
    before = kafka_tools.jmx_values(producer.jmx_address, PRODUCER_BEAN)
    labels = {"client_id": "checkout"}
    scrape = JmxSource("prod", "producer/checkout", producer.jmx_address, PRODUCER_QUERIES, labels).collect()
    after = kafka_tools.jmx_values(producer.jmx_address, PRODUCER_BEAN)
    assert scrape.errors == []
    got = _by_name(scrape.batch.samples)
    c = (("client_id", "checkout"),)
    assert set(got) == {
        (name, c) for name in PRODUCER_CATALOGUE.values()
    }  # the producer's other metrics: not ours
    for attribute, name in PRODUCER_CATALOGUE.items():
        low, high, value = (
            before[f"{PRODUCER_BEAN}:{attribute}"],
            after[f"{PRODUCER_BEAN}:{attribute}"],
            got[name, c],
        )
        if low == high or (math.isnan(low) and math.isnan(high)):
            assert value == low or (math.isnan(value) and math.isnan(low)), attribute
        else:  # a windowed rate or average decays (or its window ends: NaN) while the producer idles
            assert value in (low, high) or min(low, high) <= value <= max(low, high) or math.isnan(value)
    assert got[names.PRODUCER_BUFFER_TOTAL_BYTES, c] == BUFFER_MEMORY
    assert got[names.PRODUCER_BUFFER_AVAILABLE_BYTES, c] == BUFFER_MEMORY - BATCH_SIZE  # the lingering batch
    assert got[names.PRODUCER_RECORD_ERRORS, c] == REJECTED
    assert got[names.PRODUCER_WAITING_THREADS, c] == 0 and got[names.PRODUCER_BUFFERPOOL_WAIT_NS, c] == 0


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
        (  # Strimzi: pattern ...<type=(.+), name=(.+), (.+)=(.+)><>(\d+)thPercentile, label quantile "0.$N"
            "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
            "999thPercentile",
            ("kafka_network_requestmetrics_totaltimems", {"request": "Produce", "quantile": "0.999"}),
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


def test_a_jvm_with_a_jmx_password_file_is_scraped_with_the_clusters_jmx_user_and_refuses_others(
    kafka_cluster, tmp_path, monkeypatch
):
    """A real Kafka client JVM started with a JMX password and access file, as brokers are secured (the JVM's
    own JMX agent checks the login, whichever Kafka process it serves); ``jmx_auth`` is the cluster's, for
    its brokers' and producers' endpoints alike."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    with kafka_tools.ConsoleProducer(
        tmp_path, kafka_cluster.bootstrap, "collect-jmx-secured", [], port, {"client.id": "checkout"},
        jmx_credentials=("monitor", "s3cret"),
    ):  # fmt: skip
        cluster = {
            "name": "prod",
            "bootstrap_servers": ["127.0.0.1:9"],
            "producers": [{"client_id": "checkout", "jmx": address}],
            "jmx_auth": {"username": "monitor", "password_env": "PROD_JMX_PASSWORD"},
        }
        config = Config.model_validate({"clusters": [cluster]})

        def scrape(password: str):
            monkeypatch.setenv("PROD_JMX_PASSWORD", password)
            (job,) = [j for j in build_jobs(config) if j.source.name == "producer/checkout"]
            return job.source.collect()

        def logged_in():  # the producer registers its beans over its first seconds: wait for them all
            found = scrape("s3cret")
            names = {name for name, _ in _by_name(found.batch.samples)}
            return found if names == set(PRODUCER_CATALOGUE.values()) else None

        good = wait_for(logged_in, 30)
        assert good and good.errors == []
        with CommandLines() as seen:  # every process's command line while a logged-in scrape runs
            assert scrape("s3cret").batch.samples
        query_jvms = [line for line in seen.children if "kobs-jmx-" in line]
        assert query_jvms, "the query JVM was never seen"  # `java @/tmp/kobs-jmx-....args`
        assert not [line for line in seen.lines if "s3cret" in line]  # the password is in no command line
        assert {name for name, _ in _by_name(good.batch.samples)} == set(PRODUCER_CATALOGUE.values())
        bad = scrape("guess")
        assert bad.batch.samples == ()
        refused = "auth-failed: Authentication failed! Invalid username or password (check jmx_auth)"
        assert bad.errors == [f"{refused} (at {address})"]
        labels = {"client_id": "checkout"}
        anonymous = JmxSource("prod", "producer/checkout", address, PRODUCER_QUERIES, labels).collect()
        assert anonymous.batch.samples == () and anonymous.errors[0].startswith("auth-failed: ")
    monkeypatch.delenv("PROD_JMX_PASSWORD")
    with pytest.raises(ConfigError, match=r"clusters\[prod\]\.jmx_auth\.password_env .*PROD_JMX_PASSWORD"):
        build_jobs(config)


class CommandLines:
    """The command lines of every process (``lines``) and of this one's children (``children``: not another
    test worker's), sampled every few milliseconds in a thread until exit."""

    def __init__(self):
        self.lines: set[str] = set()
        self.children: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            for process in Path("/proc").glob("[0-9]*"):
                with contextlib.suppress(OSError):
                    line = (process / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    self.lines.add(line)
                    if int((process / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        self.children.add(line)
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_exc):
        self._stop.set()
        self._thread.join()


def test_a_closed_port_is_an_error_with_the_reason_not_an_exception():
    address = f"127.0.0.1:{free_port()}"
    scrape = JmxSource("prod", "jmx/broker-9", address, BROKER_QUERIES, {"broker": "9"}).collect()
    assert scrape.batch.samples == ()
    assert len(scrape.errors) == 1
    assert scrape.errors[0].startswith("connection-error: ") and address in scrape.errors[0]
    assert "Connection refused" in scrape.errors[0]


def test_queries_wait_for_a_free_slot_and_give_up_at_their_timeout(kafka_cluster):
    slots = QuerySlots(1)
    address = kafka_cluster.nodes[2].jmx_address
    source = JmxSource(
        "prod", "jmx/broker-2", address, BROKER_QUERIES, {"broker": "2"}, timeout_s=0.5, slots=slots
    )
    slots.answering.acquire()  # another broker's query holds the only slot
    try:
        blocked = source.collect()
    finally:
        slots.answering.release()
    assert blocked.batch.samples == () and blocked.errors[0].startswith("timeout: no free JMX query slot")
    source.timeout_s = 60
    freed = source.collect()
    assert freed.errors == [] and {name for name, _ in _by_name(freed.batch.samples)} >= NODE_GAUGES


def test_a_scrape_carries_the_time_its_query_read_the_beans_not_the_time_it_began_to_wait(kafka_cluster):
    """Rates are counters' changes over scrape times: a query that waited (for a slot, for its JVM to start:
    seconds on a busy machine) must not move its values back to when it began."""
    slots = QuerySlots(1)
    address = kafka_cluster.nodes[2].jmx_address
    source = JmxSource(
        "prod", "jmx/broker-2", address, BROKER_QUERIES, {"broker": "2"}, timeout_s=60, slots=slots
    )
    slots.answering.acquire()  # another broker's query holds the only slot for a second
    released_ms = []

    def release():
        time.sleep(1.0)
        released_ms.append(time.time_ns() // 1_000_000)
        slots.answering.release()

    releasing = threading.Thread(target=release)
    releasing.start()
    scrape = source.collect()
    releasing.join()
    assert scrape.errors == []
    assert scrape.batch.ts_ms >= released_ms[0] + 100  # after the slot was free and its query JVM had started


def test_hung_endpoints_queue_apart_and_never_again_starve_a_broker_that_answers(kafka_cluster):
    """Issue 14: four endpoints that accept and never answer held all four slots, and a healthy broker's
    scrape failed for want of one, every cycle. After their first timeout they wait in a lane of their own."""
    with contextlib.ExitStack() as stack:
        hung = [stack.enter_context(_silent_listener()) for _ in range(4)]
        slots = QuerySlots(4)
        sources = [
            JmxSource(
                "prod",
                f"jmx/broker-{10 + i}",
                f"127.0.0.1:{port}",
                BROKER_QUERIES,
                {},
                timeout_s=5,
                slots=slots,
            )
            for i, port in enumerate(hung)
        ]
        address = kafka_cluster.nodes[1].jmx_address
        healthy = JmxSource(
            "prod", "jmx/broker-1", address, BROKER_QUERIES, {"broker": "1"}, timeout_s=5, slots=slots
        )
        with ThreadPoolExecutor(5) as pool:  # one cycle: every source at once, as the scheduler runs them
            first = list(pool.map(lambda s: s.collect(), sources))
            cycles = [list(pool.map(lambda s: s.collect(), [*sources, healthy])) for _ in range(2)]
    assert all(s.errors[0].startswith("timeout: no answer within") for s in first)
    for cycle in cycles:
        *silent, answered = cycle
        assert answered.errors == [] and {n for n, _ in _by_name(answered.batch.samples)} >= NODE_GAUGES
        assert all(s.errors and s.errors[0].startswith("timeout") for s in silent)


@contextlib.contextmanager
def _silent_listener():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


@pytest.fixture
def silent_port():
    """A port that accepts connections and never answers: a JMX endpoint that hangs."""
    with _silent_listener() as port:
        yield port


def test_collect_once_scrapes_live_brokers_while_one_is_down_and_one_hangs(
    kafka_cluster, producer, silent_port, tmp_path
):
    topic = "collect-jmx-a"
    jmx = [
        {"broker_id": 1, "address": kafka_cluster.nodes[1].jmx_address},
        {"broker_id": 3, "address": f"127.0.0.1:{free_port()}"},  # JMX port down
        {"broker_id": 4, "address": f"127.0.0.1:{silent_port}"},  # accepts, never answers
    ]  # a paused and a killed real node: tests/test_jmx_real.py
    doc = {
        "clusters": [
            {
                "name": "test",
                "bootstrap_servers": [kafka_cluster.bootstrap],
                "jmx": jmx,
                "producers": [{"client_id": "checkout", "jmx": producer.jmx_address}],
            }
        ],
        "metrics_topic": {"name": topic},
        # JMX scrapes give up after 24 s: a real node's scrape (some 700 RMI calls) took 1-2 s alone, but
        # over 20 s with four query JVMs starting at once on this 2-core host while others' jobs loaded it
        "intervals": {"metrics_s": 30, "offsets_s": 5, "metadata_s": 5, "producers_s": 30},
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
        timeout=90,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert elapsed < 60  # generous bound: the hung endpoint is cut off within its 30 s interval
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:-1]}
    broker_1 = lines["test/jmx/broker-1"].split()
    assert broker_1[1] == "ok" and int(broker_1[2]) > 50, result.stdout
    assert lines["test/producer/checkout"].split()[1:3] == ["ok", str(len(PRODUCER_CATALOGUE))]
    down = lines["test/jmx/broker-3"]
    assert "FAILED" in down and "connection-error x1" in down
    hung = lines["test/jmx/broker-4"]
    assert "FAILED" in hung and "timeout x1" in hung
    assert "dropped 0 (all delivered)" in result.stdout

    # what node 1 reported arrives on the metrics topic under its canonical names
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
                    seen = batch.samples
    finally:
        consumer.close()
    assert seen is not None and len(seen) == int(broker_1[2])
    assert {s.name for s in seen} >= NODE_GAUGES and all(s.labels["broker"] == "1" for s in seen)

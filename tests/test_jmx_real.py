"""kobs's two ways to a broker's beans, on the real Kafka 4.3 nodes (KRaft) of the session cluster: the JMX
source (jmxquery) and the exposition source reading the node's Prometheus JMX exporter agent with
``deploy/jmx-exporter-broker.yaml``. Each gives the canonical samples with the names and values that Kafka's
own tools report (JmxTool for the beans, kafka-get-offsets and kafka-log-dirs for the logs), and a hung or
dead node costs only its own scrape.

The expected names are the catalogue below, written out from Kafka's bean names and ``common/names.py``,
not read from ``collectors/mapping.py``. Values that move between two reads (request counters, the metadata
log) are compared to a JmxTool read before and one after the scrape; gauges are compared in a quiet cluster.
"""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from collectors.exposition import ExpositionSource
from collectors.jmx import BROKER_QUERIES, JmxSource
from collectors.scheduler import build_jobs
from common import names
from common.config import Config
from peers import kafka_tools
from peers.stack import create_topic

pytestmark = pytest.mark.peers

RM, KC, CS = (
    "kafka.server:type=ReplicaManager",
    "kafka.controller:type=KafkaController",
    "kafka.controller:type=ControllerStats",
)
TOPICS, LOG, LOGS, REQUESTS = (
    "kafka.server:type=BrokerTopicMetrics",
    "kafka.log:type=Log",
    "kafka.log:type=LogManager",
    "kafka.network:type=RequestMetrics",
)
FETCHERS, CHANNEL, METADATA, RAFT = (
    "kafka.server:type=ReplicaFetcherManager",
    "kafka.network:type=RequestChannel",
    "kafka.server:type=broker-metadata-metrics",
    "kafka.server:type=raft-metrics",
)
STAGES = {
    "Total": names.REQUEST_TOTAL_MS, "RequestQueue": names.REQUEST_QUEUE_MS, "Local": names.REQUEST_LOCAL_MS,
    "Remote": names.REQUEST_REMOTE_MS, "ResponseQueue": names.RESPONSE_QUEUE_MS,
    "ResponseSend": names.RESPONSE_SEND_MS,
}  # fmt: skip
# (Kafka's domain and type, name, attribute) → canonical name: the broker catalogue of docs/metrics.md. The
# bean's other keys (topic, partition, request, version, error) become labels.
CATALOGUE = {
    (RM, "UnderReplicatedPartitions", "Value"): names.UNDER_REPLICATED_PARTITIONS,
    (RM, "UnderMinIsrPartitionCount", "Value"): names.UNDER_MIN_ISR_PARTITIONS,
    (RM, "PartitionCount", "Value"): names.PARTITION_COUNT,
    (RM, "LeaderCount", "Value"): names.LEADER_COUNT,
    (RM, "IsrShrinksPerSec", "Count"): names.ISR_SHRINKS,
    (RM, "IsrExpandsPerSec", "Count"): names.ISR_EXPANDS,
    (KC, "ActiveControllerCount", "Value"): names.ACTIVE_CONTROLLER,
    (KC, "OfflinePartitionsCount", "Value"): names.OFFLINE_PARTITIONS,
    (KC, "ControlledShutdownBrokerCount", "Value"): names.CONTROLLED_SHUTDOWN_BROKERS,
    (CS, "UncleanLeaderElectionsPerSec", "Count"): names.UNCLEAN_ELECTIONS,
    (CS, "LeaderElectionRateAndTimeMs", "Count"): names.LEADER_ELECTIONS,
    (TOPICS, "MessagesInPerSec", "Count"): names.MESSAGES_IN,
    (TOPICS, "BytesInPerSec", "Count"): names.BYTES_IN,
    (TOPICS, "BytesOutPerSec", "Count"): names.BYTES_OUT,
    (TOPICS, "FailedProduceRequestsPerSec", "Count"): names.FAILED_PRODUCE_REQUESTS,
    (LOGS, "OfflineLogDirectoryCount", "Value"): names.OFFLINE_LOG_DIRS,
    (LOG, "Size", "Value"): names.LOG_SIZE_BYTES,
    (LOG, "LogStartOffset", "Value"): names.REPLICA_START_OFFSET,
    (LOG, "LogEndOffset", "Value"): names.REPLICA_END_OFFSET,
    (REQUESTS, "RequestsPerSec", "Count"): names.REQUESTS,
    (REQUESTS, "ErrorsPerSec", "Count"): names.REQUEST_ERRORS,
    (REQUESTS, "TotalTimeMs", "Mean"): names.REQUEST_TIME_MS,
    (TOPICS, "ReplicationBytesInPerSec", "Count"): names.REPLICATION_BYTES_IN,
    (TOPICS, "ReplicationBytesOutPerSec", "Count"): names.REPLICATION_BYTES_OUT,
    (RM, "AtMinIsrPartitionCount", "Value"): names.AT_MIN_ISR_PARTITIONS,
    (FETCHERS, "MaxLag", "Value"): names.REPLICA_MAX_LAG,
    (CHANNEL, "RequestQueueSize", "Value"): names.REQUEST_QUEUE_SIZE,
    (CHANNEL, "ResponseQueueSize", "Value"): names.RESPONSE_QUEUE_SIZE,
    (LOGS, "LogDirectoryOffline", "Value"): names.LOG_DIR_OFFLINE,
    (KC, "FencedBrokerCount", "Value"): names.FENCED_BROKERS,
    (KC, "ActiveBrokerCount", "Value"): names.ACTIVE_BROKERS,
    (METADATA, "", "last-applied-record-lag-ms"): names.METADATA_LAG_MS,
    (RAFT, "", "current-leader"): names.RAFT_LEADER,
    (RAFT, "", "current-epoch"): names.RAFT_EPOCH,
    (RAFT, "", "high-watermark"): names.RAFT_HIGH_WATERMARK,
    (RAFT, "", "log-end-offset"): names.RAFT_LOG_END_OFFSET,
    (RAFT, "", "commit-latency-avg"): names.RAFT_COMMIT_LATENCY_AVG_MS,
    (RAFT, "", "commit-latency-max"): names.RAFT_COMMIT_LATENCY_MAX_MS,
    (RAFT, "", "number-of-voters"): names.RAFT_VOTERS,
    **{
        (REQUESTS, f"{stage}TimeMs", f"{n}thPercentile"): canonical
        for stage, canonical in STAGES.items()
        for n in (50, 99, 999)
    },
}
# The request types whose time percentiles kobs reads (the others' histograms are not asked for), and the
# beans the catalogue's name families hold that kobs does not read: each network thread's own response
# queue (the broker's total is read).
TIMED_REQUESTS = {
    "Produce", "FetchConsumer", "FetchFollower", "Metadata", "OffsetCommit", "JoinGroup",
    "ConsumerGroupHeartbeat",
}  # fmt: skip
LABEL_NAMES = {"clientId": "client_id", "logDirectory": "log_dir"}
# Gauges that hold still in a quiet cluster: equal in both JmxTool reads, and then equal in the scrape.
STEADY = {
    names.UNDER_REPLICATED_PARTITIONS, names.UNDER_MIN_ISR_PARTITIONS, names.PARTITION_COUNT,
    names.LEADER_COUNT, names.ACTIVE_CONTROLLER, names.OFFLINE_PARTITIONS, names.OFFLINE_LOG_DIRS,
    names.CONTROLLED_SHUTDOWN_BROKERS, names.AT_MIN_ISR_PARTITIONS, names.FENCED_BROKERS,
    names.ACTIVE_BROKERS, names.RAFT_LEADER, names.RAFT_EPOCH, names.RAFT_VOTERS,
}  # fmt: skip
# Gauges that may move either way between two reads: only their sign is checked where they moved.
EITHER_WAY = {
    names.REQUEST_TIME_MS, names.REQUEST_TOTAL_MS, names.REQUEST_QUEUE_MS, names.REQUEST_LOCAL_MS,
    names.REQUEST_REMOTE_MS, names.RESPONSE_QUEUE_MS, names.RESPONSE_SEND_MS, names.REQUEST_QUEUE_SIZE,
    names.RESPONSE_QUEUE_SIZE, names.REPLICA_MAX_LAG, names.METADATA_LAG_MS,
    names.RAFT_COMMIT_LATENCY_AVG_MS, names.RAFT_COMMIT_LATENCY_MAX_MS,
}  # fmt: skip
# JmxTool's query: every bean of the catalogue's names, whatever its other keys (one JmxTool run per read)
CATALOGUE_BEANS = sorted({f"{kind},name={name},*" if name else kind for kind, name, _ in CATALOGUE})
_KEY = re.compile(r'([^,=]+)=("(?:[^"\\]|\\.)*"|[^,]*)')

Reading = dict[tuple[str, tuple[tuple[str, str], ...]], float]  # (canonical name, sorted labels) → value


def from_jmxtool(raw: dict[str, float], broker: int) -> Reading:
    """What the catalogue makes of JmxTool's ``ObjectName:Attribute`` → value: type and name pick the
    canonical name, the bean's other keys become labels, plus ``broker``."""
    found = {}
    for key, value in raw.items():
        bean, _, attribute = key.rpartition(":")
        domain, _, keys = bean.partition(":")
        props = dict(_KEY.findall(keys))
        kind, name = f"{domain}:type={props.pop('type', '')}", props.pop("name", "")
        canonical = CATALOGUE.get((kind, name, attribute))
        percentile = re.fullmatch(r"(\d+)thPercentile", attribute)
        if percentile:
            if props.get("request") not in TIMED_REQUESTS:
                continue
            props["quantile"] = f"0.{percentile[1]}"
        if canonical is not None and "processor" not in props:
            props = {LABEL_NAMES.get(k, k): v.strip('"') for k, v in props.items()}
            labels = tuple(sorted({**props, "broker": str(broker)}.items()))
            found[canonical, labels] = value
    return found


RESOURCES = {  # the JVM's and thread pools' samples, checked on their own (they move between any two reads)
    names.PROCESS_CPU_SECONDS, names.JVM_MEMORY_USED_BYTES, names.JVM_MEMORY_MAX_BYTES, names.JVM_GC_SECONDS,
    names.JVM_GC_COLLECTIONS, names.REQUEST_HANDLER_IDLE, names.NETWORK_PROCESSOR_IDLE,
}  # fmt: skip


# kobs's sources of a broker's beans: over JMX (a jmxquery JVM per scrape), or over HTTP from the JMX
# exporter's agent in the node's JVM.
VIA = ("jmx", "exporter")


def scraped(node, via: str) -> Reading:
    labels = {"broker": str(node.node_id)}
    source = (
        JmxSource(
            "test", f"jmx/broker-{node.node_id}", node.jmx_address, BROKER_QUERIES, labels, timeout_s=60
        )
        if via == "jmx"
        else ExpositionSource(
            "test", f"exporter/broker-{node.node_id}", node.exporter_url, labels, timeout_s=60
        )
    )
    scrape = source.collect()
    assert scrape.errors == []
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in scrape.batch.samples}


def catalogued(node, via: str) -> Reading:
    return {k: v for k, v in scraped(node, via).items() if k[0] not in RESOURCES}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def steady_reading(node, via: str, attempts: int = 4) -> tuple[Reading, Reading, Reading, dict[str, float]]:
    """JmxTool, the source, JmxTool again: retried until both JmxTool reads have the same beans and the
    same steady gauges (a topic another test created may still be settling). Also JmxTool's raw answer."""
    for attempt in range(attempts):
        raw = kafka_tools.jmx_values(node.jmx_address, *CATALOGUE_BEANS)
        before = from_jmxtool(raw, node.node_id)
        ours = catalogued(node, via)
        after = from_jmxtool(kafka_tools.jmx_values(node.jmx_address, *CATALOGUE_BEANS), node.node_id)
        settled = before.keys() == after.keys() and all(
            same(before[k], after[k]) for k in before if k[0] in STEADY
        )
        if settled or attempt == attempts - 1:
            return before, ours, after, raw
        time.sleep(3)
    raise AssertionError("unreachable")


@pytest.mark.parametrize("via", VIA)
def test_every_nodes_samples_are_the_beans_jmxtool_reads_under_their_canonical_names(kafka_cluster, via):
    per_node = (names.ACTIVE_CONTROLLER, names.OFFLINE_PARTITIONS, names.RAFT_LEADER, names.RAFT_VOTERS)
    totals: dict[str, list[float]] = {name: [] for name in per_node}
    for node in kafka_cluster.nodes.values():
        before, ours, after, raw = steady_reading(node, via)
        assert before.keys() == after.keys(), "beans came or went between the two JmxTool reads"
        assert ours.keys() == before.keys()  # the same series, no more, no fewer
        exact = 0
        for key, value in ours.items():
            low, high = before[key], after[key]
            if key[0] in EITHER_WAY:  # means, percentiles, queues and lags move either way, and back
                assert value >= 0 or math.isnan(value), key
                exact += same(value, low) and same(low, high)
            elif same(low, high):
                assert same(value, low), key
                exact += 1
            else:  # counters, offsets and sizes only grow while we read
                assert min(low, high) <= value <= max(low, high), (key, low, value, high)
        assert exact > len(ours) / 2  # most of it holds still between the reads
        for name in STEADY:  # every node registers each gauge of the catalogue (combined broker+controller)
            assert (name, (("broker", str(node.node_id)),)) in ours, name
        for name, seen in totals.items():
            seen.append(ours[name, (("broker", str(node.node_id)),)])
        # KRaft has no LeaderElectionRateAndTimeMs (ZooKeeper-mode controllers only): nothing to map
        assert raw and not any("LeaderElectionRateAndTimeMs" in key for key in raw)
        assert not any(name == names.LEADER_ELECTIONS for name, _ in ours)
    # ActiveControllerCount: 1 on the active controller, 0 on the others; OfflinePartitionsCount: the same
    # count on every controller (each replays the metadata log), so it must not be summed over nodes.
    assert sorted(totals[names.ACTIVE_CONTROLLER]) == [0, 0, 1]
    assert len(set(totals[names.OFFLINE_PARTITIONS])) == 1
    # The quorum: every voter names the leader kafka-metadata-quorum names, which is the active controller
    leader = int(kafka_tools.quorum_status(kafka_cluster.bootstrap)["LeaderId"])
    assert totals[names.RAFT_LEADER] == [leader] * 3 and totals[names.RAFT_VOTERS] == [3] * 3
    assert totals[names.ACTIVE_CONTROLLER][list(kafka_cluster.nodes).index(leader)] == 1


@pytest.mark.parametrize("via", VIA)
def test_a_topics_meters_and_logs_equal_the_messages_produced_and_kafkas_offsets_and_log_sizes(
    kafka_cluster, via
):
    topic = f"jmxreal-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_cluster.bootstrap, topic, 3, replication_factor=3)
    produced = {0: 40, 1: 55, 2: 70}
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for partition, count in produced.items():
        for i in range(count):
            producer.produce(
                topic, f"message {i} of partition {partition} ".ljust(100 + i, "."), partition=partition
            )
    assert producer.flush(30) == 0  # acks=all: every replica in the ISR has every record
    time.sleep(1)  # the followers' next fetch moves their high watermark; nothing moves after it

    ends = kafka_tools.end_offsets(kafka_cluster.bootstrap, topic)
    starts = kafka_tools.end_offsets(kafka_cluster.bootstrap, topic, time="-2")
    sizes = kafka_tools.log_dir_sizes(kafka_cluster.bootstrap, topic)
    assert ends == produced and starts == {0: 0, 1: 0, 2: 0}
    ours: Reading = {}
    for node in kafka_cluster.nodes.values():
        patterns = (
            f"kafka.server:type=BrokerTopicMetrics,topic={topic},*",
            f"kafka.log:type=Log,topic={topic},*",
        )
        truth = from_jmxtool(kafka_tools.jmx_values(node.jmx_address, *patterns), node.node_id)
        ours_now = catalogued(node, via)
        mine = {k: v for k, v in ours_now.items() if ("topic", topic) in k[1]}
        assert mine == truth  # traffic has stopped: name for name, value for value
        ours |= mine

    def by(name: str) -> dict[tuple[int, int | None], float]:
        found = {}
        for (n, labels), value in ours.items():
            if n == name:
                label = dict(labels)
                found[int(label["broker"]), int(label["partition"]) if "partition" in label else None] = value
        return found

    # every replica's log: Kafka's offsets and its DescribeLogDirs sizes
    replicas = {(b, p) for b in kafka_cluster.nodes for p in produced}
    assert by(names.REPLICA_END_OFFSET) == {(b, p): produced[p] for b, p in replicas}
    assert by(names.REPLICA_START_OFFSET) == dict.fromkeys(replicas, 0)
    assert by(names.LOG_SIZE_BYTES) == {(b, p): sizes[b, p] for b, p in replicas}
    # the leaders' topic meters: every message produced, every byte appended to the leaders' logs
    assert sum(by(names.MESSAGES_IN).values()) == sum(produced.values())
    assert all(sizes[b, p] == sizes[1, p] for b, p in replicas)  # followers copy the leader's batches as-is
    leader_bytes = sum(sizes[1, p] for p in produced)
    assert sum(by(names.BYTES_IN).values()) == leader_bytes
    assert set(by(names.FAILED_PRODUCE_REQUESTS).values()) <= {0}
    assert set(by(names.BYTES_OUT).values()) <= {
        0
    }  # no consumer read it (followers' fetches are not counted)


@pytest.mark.parametrize("via", VIA)
def test_jvm_and_thread_pool_samples_lie_between_two_jmxtool_reads_in_seconds_bytes_and_ratios(
    kafka_cluster, via
):
    """CPU and GC time are counters in ns and ms in the beans, seconds in the samples (JmxTool reads the
    beans, not the heap's composite value); the heap's maximum is about the node's -Xmx; the thread pools'
    idle shares are fractions (a quiet broker's handlers mostly wait)."""
    beans = ("java.lang:type=OperatingSystem", "java.lang:type=GarbageCollector,*", "java.lang:type=Memory")
    for node in kafka_cluster.nodes.values():
        # A meter's one-minute rate is 0 until its first 5-second tick after the node started
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            k[0] == names.REQUEST_HANDLER_IDLE and v > 0 for k, v in scraped(node, via).items()
        ):
            time.sleep(1)
        before = kafka_tools.jmx_values(node.jmx_address, *beans)
        sampled = scraped(node, via).items()  # the exporter's agent serves the non-heap area too
        ours = {
            (n, dict(labels).get("gc")): v for (n, labels), v in sampled if ("area", "nonheap") not in labels
        }
        after = kafka_tools.jmx_values(node.jmx_address, *beans)
        collectors = {}  # the collector's name -> its bean as JmxTool prints it
        for key in before:
            bean = key.rpartition(":")[0]
            props = dict(_KEY.findall(bean.partition(":")[2]))
            if props.get("type") == "GarbageCollector":
                collectors[props["name"]] = bean
        assert collectors and {gc for n, gc in ours if n == names.JVM_GC_SECONDS} == set(collectors)
        counters = [((names.PROCESS_CPU_SECONDS, None), "java.lang:type=OperatingSystem:ProcessCpuTime", 1e9)]
        for gc, bean in collectors.items():
            counters += [
                ((names.JVM_GC_SECONDS, gc), f"{bean}:CollectionTime", 1e3),
                ((names.JVM_GC_COLLECTIONS, gc), f"{bean}:CollectionCount", 1),
            ]
        for sample, attribute, scale in counters:
            low, high = before[attribute] / scale, after[attribute] / scale
            assert low <= ours[sample] <= high, (sample, low, ours[sample], high)
        # -Xmx in MiB; with the serial collector the JVM's maximum leaves out one survivor space (a 30th)
        xmx = int(node.heap.removesuffix("m")) * 2**20
        heap_max = ours[names.JVM_MEMORY_MAX_BYTES, None]
        assert 0.9 * xmx <= heap_max <= xmx
        assert 0 < ours[names.JVM_MEMORY_USED_BYTES, None] <= heap_max
        # A fraction, not a percentage. Each handler marks its wait's nanoseconds over the pool's size when
        # the wait ends, so the meter's one-minute average of those marks can pass 1 a little (1.015 seen).
        assert 0.3 < ours[names.REQUEST_HANDLER_IDLE, None] < 1.5
        assert 0 <= ours[names.NETWORK_PROCESSOR_IDLE, None] <= 1.0  # low just after the start, then near 1


def wait_fully_replicated(bootstrap: str, timeout_s: float = 90) -> bool:
    """Every partition of the cluster led and with its whole replica set in the ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            topics = admin.list_topics(timeout=5).topics.values()
        except Exception:  # KafkaException while a node rejoins
            topics = None
        if topics and all(
            p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas)
            for t in topics
            for p in t.partitions.values()
        ):
            return True
        time.sleep(1)
    return False


def test_a_paused_nodes_scrape_times_out_and_a_killed_ones_is_refused_while_the_others_are_scraped(
    kafka_cluster, tmp_path
):
    doc = {
        "clusters": [
            {
                "name": "test",
                "bootstrap_servers": [kafka_cluster.bootstrap],
                "jmx": [{"broker_id": i, "address": n.jmx_address} for i, n in kafka_cluster.nodes.items()],
            }
        ],
        "intervals": {"metrics_s": 20},  # each JMX scrape gives up after 16 s (seconds each on a busy host)
    }
    jobs = {j.source.name: j.source for j in build_jobs(Config.model_validate(doc)) if "jmx" in j.source.name}
    hung = kafka_cluster.nodes[3].jmx_address

    def scrape_all() -> dict[str, tuple[float, object]]:
        started, done = time.monotonic(), {}
        lock = threading.Lock()

        def one(name):
            scrape = jobs[name].collect()
            with lock:
                done[name] = (time.monotonic() - started, scrape)

        with ThreadPoolExecutor(len(jobs)) as pool:
            list(pool.map(one, jobs))  # the collector's shared JMX slots, as the scheduler runs them
        return done

    kafka_cluster.pause(3)  # SIGSTOP: its JMX port accepts connections and never answers
    try:
        paused = scrape_all()
    finally:
        kafka_cluster.resume(3)
    kafka_cluster.kill(3)
    try:
        killed = scrape_all()
    finally:
        kafka_cluster.restart(3)
    healed = wait_fully_replicated(kafka_cluster.bootstrap)

    seconds, scrape = paused["jmx/broker-3"]
    assert scrape.batch.samples == () and scrape.errors == [f"timeout: no answer within 16.0 s (at {hung})"]
    assert seconds >= 15.5
    for name in ("jmx/broker-1", "jmx/broker-2"):
        for run in (paused, killed):
            _, healthy = run[name]
            assert healthy.errors == [] and len(healthy.batch.samples) > 50, name
        assert paused[name][0] < seconds  # done before the hung scrape gave up: not held up by it
    _, scrape = killed["jmx/broker-3"]
    assert scrape.batch.samples == () and len(scrape.errors) == 1
    assert scrape.errors[0].startswith("connection-error: ") and hung in scrape.errors[0]
    assert "Connection refused" in scrape.errors[0]
    assert healed, "node 3 did not rejoin every ISR within 90 s"

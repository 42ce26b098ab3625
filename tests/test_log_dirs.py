"""A failed log directory on a real Kafka 4.3 node with two (JBOD): kobs reads it offline, by path, as Kafka's
own JmxTool and ``kafka-log-dirs`` report it, and the brokers analysis serves the count the page reads. The
Admin API's disk space of each directory is the filesystem's as the operating system reports it (statvfs),
and a failed directory answers none.

The directory fails the way Kafka's own LogDirFailureTest makes it fail: it is replaced by a plain file, so
the node's next write there (the high-watermark checkpoint, every 5 s) gets an I/O error and Kafka takes the
directory offline, while the node runs on in its first directory (which holds the metadata log)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from bench.reference import observations
from collectors.exposition import ExpositionSource
from collectors.jmx import BROKER_QUERIES, JmxSource
from collectors.log_dirs import LogDirSource
from common import names
from common.config import Cluster
from common.contract import encode, parse
from peers import kafka_tools
from peers.kafka import KafkaCluster
from peers.stack import create_topic
from spark_jobs.analysis import Observation
from spark_jobs.brokers import BrokerResourceAnalysis

pytestmark = pytest.mark.peers

OFFLINE_COUNT = "kafka.log:type=LogManager,name=OfflineLogDirectoryCount"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("jbod"), nodes=1, log_dirs=2, heap="256m") as cluster:
        yield cluster, cluster.nodes[1]


def log_dirs(bootstrap: str) -> dict[str, dict]:
    """``kafka-log-dirs --describe``: each log dir of broker 1 → its entry (``error``, ``partitions``)."""
    output = kafka_tools.run_tool("kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe")
    doc = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    (broker,) = doc["brokers"]
    return {entry["logDir"]: entry for entry in broker["logDirs"]}


def offline(node, via: str) -> tuple[dict[str, float], list[Observation]]:
    """One scrape: each log dir's LogDirectoryOffline by path, and the brokers analysis's observations of
    it, through the metrics topic's wire format as the pipeline reads them."""
    labels = {"broker": "1"}
    source = (
        JmxSource("c", "jmx/broker-1", node.jmx_address, BROKER_QUERIES, labels, timeout_s=60)
        if via == "jmx"
        else ExpositionSource("c", "exporter/broker-1", node.exporter_url, labels, timeout_s=60)
    )
    scrape = source.collect()
    assert scrape.errors == []
    samples = scrape.batch.samples
    by_dir = {s.labels["log_dir"]: s.value for s in samples if s.name == names.LOG_DIR_OFFLINE}
    return by_dir, list(observations(parse(encode(scrape.batch)), BrokerResourceAnalysis.inputs))


def disk_space(bootstrap: str, timeout_s: float = 10) -> tuple[dict[tuple[str, str], float], list[str]]:
    """One scrape of the log dirs source: (name, log dir) → bytes, and its errors."""
    source = LogDirSource(Cluster(name="c", bootstrap_servers=[bootstrap]), timeout_s)
    try:
        scrape = source.collect()
    finally:
        source.close()
    assert {s.labels["broker"] for s in scrape.batch.samples} <= {"1"}
    return {(s.name, s.labels["log_dir"]): s.value for s in scrape.batch.samples}, scrape.errors


def test_each_log_dirs_disk_space_is_its_filesystems_and_a_hung_cluster_is_one_error_line(node):
    cluster, kafka = node
    space, errors = disk_space(cluster.bootstrap)
    assert errors == []
    for log_dir in map(str, kafka.log_dirs):
        fs = os.statvfs(log_dir)  # Java's getTotalSpace and getUsableSpace, which the broker answers with
        assert space[names.LOG_DIR_TOTAL_BYTES, log_dir] == fs.f_blocks * fs.f_frsize
        usable = space[names.LOG_DIR_USABLE_BYTES, log_dir]
        assert abs(usable - fs.f_bavail * fs.f_frsize) < 64 * 2**20  # other writers on the host meanwhile
    cluster.pause(1)  # SIGSTOP: it accepts connections and answers nothing
    try:
        space, errors = disk_space(kafka.bootstrap, timeout_s=3)
    finally:
        cluster.resume(1)
    assert space == {} and len(errors) == 1 and errors[0].startswith("describe_log_dirs: ")


def test_a_log_dir_replaced_by_a_file_goes_offline_alone_and_kobs_counts_it_by_path(node):
    cluster, kafka = node
    first, second = (str(d) for d in kafka.log_dirs)
    create_topic(cluster.bootstrap, "jbod", 4, replication_factor=1)  # Kafka spreads them over both dirs
    described = log_dirs(cluster.bootstrap)
    assert described[second]["partitions"], "no partition was placed in the second log dir"
    for via in ("jmx", "exporter"):
        by_dir, _ = offline(kafka, via)
        assert by_dir == {first: 0, second: 0}, via

    shutil.rmtree(second)
    kafka.log_dirs[1].write_text("not a directory\n")
    deadline = time.monotonic() + 60
    while kafka_tools.jmx_values(kafka.jmx_address, OFFLINE_COUNT)[f"{OFFLINE_COUNT}:Value"] < 1:
        assert time.monotonic() < deadline, "Kafka did not take the log dir offline within 60 s"
        time.sleep(1)

    described = log_dirs(cluster.bootstrap)  # Kafka's own word: the second dir fails, the first serves
    assert described[second]["error"].endswith("KafkaStorageException") and described[first]["error"] is None
    for via in ("jmx", "exporter"):
        by_dir, seen = offline(kafka, via)
        assert by_dir == {first: 0, second: 1}, via
        analysis = BrokerResourceAnalysis()
        analysis.observe(seen)
        served = {m.name: m.value for m in analysis.evaluate().metrics if m.labels == ("c", "1")}
        assert served["kobs_broker_offline_log_dirs"] == 1, via  # KafkaOfflineLogDirectory: > 0 pages
    space, errors = disk_space(cluster.bootstrap)  # the failed dir answers no space, the other does
    assert errors == [] and {d for _, d in space} == {first}
    assert kafka.running  # the node runs on in its first dir

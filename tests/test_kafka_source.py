"""The metrics topic read by Spark's own Kafka source and decoded on the executors, end to end: the real Kafka
cluster, a real local Spark session."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from test_stream_restart import ROOT, config_for, write_config
from waiting import wait_for

from common.config import Config
from common.contract import Batch, Sample, encode
from common.kafka_clients import metrics_producer_settings
from peers import kafka_tools
from peers.process import free_port
from spark_jobs.dead_letters import write_dead_letters
from spark_jobs.kafka_source import READ_TASK_RECORDS, read_metrics, source_options, unreadable
from spark_jobs.keyed import PIPELINE
from spark_jobs.records import observations
from spark_jobs.stream import QUERY, pipeline, run_queries

END_OFFSET = "kafka_partition_end_offset"

pytestmark = [pytest.mark.peers, pytest.mark.spark]


def create_topic(broker, partitions: int, name: str | None = None) -> str:
    name = name or f"metrics-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name


def produce(broker, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Each value as one record on the given partition."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, value in records:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(10) == 0


def own(row) -> bool:
    """Whether ``row`` is a valid record's own row."""
    return row.table == PIPELINE and row.dead_letter is None


def scrape(source: str, ts_ms: int, n: int) -> bytes:
    samples = tuple(Sample(END_OFFSET, {"topic": "t", "partition": str(i)}, i) for i in range(n))
    return encode(Batch("prod", source, ts_ms, samples))


def run_available_now(
    broker, topic: str, checkpoint, dead_dir=None, per_batch=None, tasks: list | None = None
) -> tuple[list, dict]:
    """One Trigger.AvailableNow run of the source as ``kobs stream`` configures it; returns the rows of every
    micro-batch and the last end offsets (partition -> offset); each batch's read tasks go to ``tasks``."""
    from pyspark.sql import SparkSession

    batches: list = []

    def collect(df, batch_id):
        if tasks is not None:
            tasks.append(df.rdd.getNumPartitions())
        df.persist()
        if dead_dir is not None:
            write_dead_letters(df, batch_id, dead_dir)
        batches.append((batch_id, df.collect()))
        df.unpersist()

    config = Config.model_validate(
        {
            "clusters": [{"name": "prod", "bootstrap_servers": [broker.bootstrap]}],
            "metrics_topic": {"name": topic, "max_records_per_batch": per_batch},
        }
    )
    query = (
        read_metrics(SparkSession.getActiveSession(), source_options(config), {END_OFFSET: ("lag",)})
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return batches, json.loads(query.lastProgress["sources"][0]["endOffset"])[topic]


def test_samples_and_dead_letters_in_limited_batches(spark, kafka_cluster, tmp_path):
    topic = create_topic(kafka_cluster, 2)
    produce(
        kafka_cluster,
        topic,
        [(0, scrape("jmx/broker-1", 1000, 3)), (1, scrape("jmx/broker-2", 2000, 2)), (0, b"not json"),
         (1, scrape("jmx/broker-2", 3000, 1)), (0, scrape("jmx/broker-1", 4000, 4))],
    )  # fmt: skip
    dead_dir = tmp_path / "dead"
    batches, end = run_available_now(kafka_cluster, topic, tmp_path / "cp", dead_dir, per_batch=2)
    # 5 records, at most 2 per micro-batch: 3 batches with data (2 + 2 + 1 records).
    assert [len({(r.partition, r.offset) for r in rows}) for _, rows in batches if rows] == [2, 2, 1]
    rows = [r for _, rows in batches for r in rows]
    samples = [o for r in rows if r.observed for o in observations(r.cluster, r.source, r.observed)]
    dead = [r for r in rows if r.dead_letter is not None]
    assert len(samples) == 3 + 2 + 1 + 4
    records = sorted((r.partition, r.offset) for r in rows if own(r))
    assert records == [(0, 0), (0, 2), (1, 0), (1, 1)]  # one row of its own per valid record
    assert [(d.partition, d.offset, d.raw) for d in dead] == [(0, 1, b"not json")]
    assert dead[0].dead_letter.startswith("not UTF-8 JSON")
    broker2 = sorted((o.t_s, o.labels["partition"], o.value) for o in samples if o.source == "jmx/broker-2")
    assert broker2 == [(2.0, "0", 0.0), (2.0, "1", 1.0), (3.0, "0", 0.0)]
    assert end == {"0": 3, "1": 2}
    # Spark shares maxOffsetsPerTrigger 2 in proportion to what waits (3 and 2 records: 1.2 and 0.8, a
    # share below 1 rounded up, above it down): batch 0 takes offset 0 of each partition, batch 1 offset 1
    # of each, so the bad record (partition 0, offset 1) is batch 1's.
    written = [
        json.loads(line) for f in dead_dir.glob("batch=*/part-*.json") for line in f.read_text().splitlines()
    ]
    assert [(d["partition"], d["offset"], base64.b64decode(d["raw"])) for d in written] == [
        (0, 1, b"not json")
    ]
    assert written[0]["reason"].startswith("not UTF-8 JSON")
    assert [p.name for p in dead_dir.iterdir()] == ["batch=1"]


def test_a_partitions_share_of_a_backlog_is_read_in_pieces(spark, kafka_cluster, tmp_path):
    """A source keeps its partition, so on a backlog one partition can hold most of a batch: Spark's Kafka
    source splits a partition's range into pieces of at most READ_TASK_RECORDS records
    (``maxRecordsPerPartition``), each a task of its own, and every record is still read exactly once."""
    topic = create_topic(kafka_cluster, 2)
    produce(kafka_cluster, topic, [(0, scrape("big", 1000 * (i + 1), 2)) for i in range(20)])
    produce(kafka_cluster, topic, [(1, scrape("small", 1000 * (i + 1), 2)) for i in range(3)])
    tasks: list[int] = []
    batches, _ = run_available_now(kafka_cluster, topic, tmp_path / "cp", tasks=tasks)
    expected = math.ceil(20 / READ_TASK_RECORDS) + 1  # partition 0 in pieces, partition 1's 3 records in one
    assert expected > 2  # the constant still splits this backlog
    assert tasks == [expected]
    read = sorted((r.partition, r.offset) for _, rows in batches for r in rows if own(r))
    assert read == [(0, i) for i in range(20)] + [(1, i) for i in range(3)]


def test_restart_resumes_from_checkpoint_and_survives_a_recreated_topic(spark, kafka_cluster, tmp_path):
    topic = create_topic(kafka_cluster, 1)
    checkpoint = tmp_path / "cp"
    produce(kafka_cluster, topic, [(0, scrape("a", 1000, 1)), (0, scrape("a", 2000, 1))])
    first, _ = run_available_now(kafka_cluster, topic, checkpoint)
    assert sorted(r.offset for _, rows in first for r in rows if own(r)) == [0, 1]

    produce(kafka_cluster, topic, [(0, scrape("a", 3000, 1))])
    second, _ = run_available_now(kafka_cluster, topic, checkpoint)
    assert [r.offset for _, rows in second for r in rows if own(r)] == [2]  # only the new one

    # Deleted and created again with two partitions: offsets start over at 0, below the checkpoint's 3.
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    admin.delete_topics([topic])[topic].result(10)
    create_topic(kafka_cluster, 2, topic)
    produce(kafka_cluster, topic, [(0, scrape("b", 4000, 1)), (1, scrape("b", 5000, 2))])
    third, end = run_available_now(kafka_cluster, topic, checkpoint)
    rows = [r for _, rows in third for r in rows if r.table != PIPELINE]  # one part per record: its samples
    # Spark's source (failOnDataLoss false) warns and goes on: partition 0 resumes at the new end offset (its
    # record at offset 0, below the checkpoint's 3, is skipped); the new partition 1 is read from its start.
    assert sorted((r.source, r.partition, r.offset) for r in rows) == [("b", 1, 0)]
    assert end == {"0": 1, "1": 1}


def test_kobs_stream_rides_out_its_topic_deleted_and_created_again(spark, kafka_cluster, tmp_path):
    """The metrics topic dropped under a running ``kobs stream`` (an operator's mistake): the query loop lives
    on and reads the topic created again from the checkpoint's offset on (records below it are skipped, as
    documented). Whether Spark's source failed the query on the way (Kafka answers UNKNOWN_TOPIC_OR_PARTITION
    to a micro-batch planned while the topic is gone; kobs then starts it again from its checkpoint) depends
    on when its trigger fell: both happened here, with the same records read."""
    topic = create_topic(kafka_cluster, 1)
    config = config_for(tmp_path, topic, kafka_cluster.bootstrap, per_batch=10)
    jobs, stop = pipeline(config), threading.Event()
    runner = threading.Thread(target=run_queries, args=(spark, config, jobs, None, False, stop), daemon=True)
    runner.start()
    try:
        produce(kafka_cluster, topic, [(0, scrape("a", 1000, 1)), (0, scrape("a", 2000, 1))])
        _wait_until(lambda: jobs.health.input_records == 2, runner)
        admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
        admin.delete_topics([topic])[topic].result(10)
        time.sleep(10)  # batches planned against a topic that is gone
        create_topic(kafka_cluster, 1, topic)
        produce(kafka_cluster, topic, [(0, scrape("b", 3000 + i, 1)) for i in range(4)])  # offsets 0 to 3
        _wait_until(lambda: jobs.health.input_records == 4, runner)  # offsets 2 and 3
        time.sleep(3)  # a record read twice or one below the checkpoint would come in the next batches
        assert jobs.health.input_records == 4
        assert jobs.health.last_seen_s["prod", "b"] == 3.003  # the last record, offset 3
    finally:
        stop.set()
        runner.join(60)
    assert not runner.is_alive()


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_a_killed_or_hung_leader_of_the_metrics_topic_holds_the_stream_seconds_not_a_minute(
    spark, kafka_cluster, tmp_path, fault
):
    """The broker leading the metrics topic's partition dies (SIGKILL) or hangs (SIGSTOP) under a running
    kobs stream: the stream reads the next record from the new leader soon after Kafka fenced the old one
    (6 s here). Killed, it waited for the driver's Admin question to the old leader to give up at Kafka's
    default.api.timeout.ms, 60 s (the demo's stream planned no micro-batch for 63 s after its first
    incident's kill). Hung, the old leader holds each request to its timeout: with 10 s the stream read
    the record 13.5 and 40 s after it was written (29 and 55 s after the hang), with 5 s 7.0-7.5 s (23 s).
    The bound, 45 s, sits between: one 15 s attempt that still waits, Spark's second attempt, the batch."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(10)
    leader = wait_for(lambda: _leader(admin, topic), 30, every_s=0.2)  # the broker asked learns it soon
    assert leader, f"{topic} has no leader 30 s after it was created"
    config = config_for(tmp_path, topic, kafka_cluster.bootstrap, per_batch=10)
    producer = Producer(metrics_producer_settings(config))  # the collector's: 10 s to a hung leader
    jobs, stop = pipeline(config), threading.Event()
    runner = threading.Thread(target=run_queries, args=(spark, config, jobs, None, False, stop), daemon=True)
    runner.start()
    try:
        producer.produce(topic, scrape("a", 1000, 1))
        assert producer.flush(10) == 0
        _wait_until(lambda: jobs.health.input_records == 1, runner)
        time.sleep(2)  # between batches the stream keeps asking the leader for new offsets
        fault_s = time.monotonic()
        getattr(kafka_cluster, fault)(leader)
        producer.produce(topic, scrape("a", 2000, 1))
        assert producer.flush(60) == 0  # written to the new leader
        _wait_until(lambda: jobs.health.input_records == 2, runner)
        read_after_s = time.monotonic() - fault_s
    finally:
        stop.set()
        runner.join(90)
        if fault == "kill":
            kafka_cluster.restart(leader)
        else:
            kafka_cluster.resume(leader)
    assert not runner.is_alive()
    assert read_after_s < 45, f"the stream read the record {read_after_s:.0f} s after its leader's {fault}"


def _leader(admin: AdminClient, topic: str) -> int | None:
    """The node id (from 1) leading partition 0 of ``topic``, once the broker asked knows one."""
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
    return partition.leader if partition is not None and partition.leader > 0 else None


def _wait_until(done, runner: threading.Thread, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert runner.is_alive() and time.monotonic() < deadline
        time.sleep(0.5)


def test_a_missing_topic_or_a_silent_cluster_is_named_and_asking_creates_nothing(kafka_cluster, tmp_path):
    """What kobs stream checks before it starts its query: the brokers here create a topic a client asks
    metadata for (``auto.create.topics.enable``, Kafka's default), with the broker's defaults, not the
    metrics topic's partitions and replication."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"  # not created yet
    config = config_for(tmp_path, topic, kafka_cluster.bootstrap)
    reason = unreadable(config)
    assert reason is not None and f"metrics topic {topic} is not on {kafka_cluster.bootstrap}" in reason
    listed = kafka_tools.describe_topics(kafka_cluster.bootstrap)  # Kafka's own kafka-topics
    assert listed and topic not in {row.topic for row in listed}
    create_topic(kafka_cluster, 1, topic)
    deadline = time.monotonic() + 10  # each broker learns of a new topic a moment after it is created
    while unreadable(config) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert unreadable(config) is None
    silent = f"127.0.0.1:{free_port()}"
    reason = unreadable(config_for(tmp_path, topic, silent), timeout_s=2)
    assert reason is not None and f"cluster does not answer at {silent}" in reason


def test_kobs_stream_waits_for_an_unreachable_cluster(spark, tmp_path, capsys):
    """Against a cluster nothing answers for, the query loop keeps running (kobs stream once exited after 17
    and 25 s) and stops when asked; with ``--available-now`` it says why in one line and exits 1."""
    silent = f"127.0.0.1:{free_port()}"
    config = config_for(tmp_path, "metrics", silent, per_batch=10)
    jobs, stop = pipeline(config), threading.Event()
    assert run_queries(spark, config, jobs, None, True, stop) == 1
    assert f"kobs stream: the metrics topic's cluster does not answer at {silent}" in capsys.readouterr().err
    runner = threading.Thread(target=run_queries, args=(spark, config, jobs, None, False, stop))
    runner.start()
    try:
        time.sleep(15)  # two checks of the topic, 5 s apart
        assert runner.is_alive()
    finally:
        stop.set()
        runner.join(60)
    assert not runner.is_alive()


def test_a_backlog_is_read_in_bounded_batches_and_how_it_goes_is_told(spark, kafka_cluster, tmp_path, caplog):
    """A backlog (a stream that was down, a new checkpoint on a topic holding days of records) is read in
    micro-batches of at most 200 records by default: read all at once, 6.4 M samples took 4.8 GB in one
    34 s batch. kobs stream says how far behind it is and when it has caught up."""
    topic = create_topic(kafka_cluster, 1)
    produce(kafka_cluster, topic, [(0, scrape("a", 1000 * (i + 1), 1)) for i in range(450)])
    settings = config_for(tmp_path, topic, kafka_cluster.bootstrap).model_dump(mode="json")
    del settings["metrics_topic"]["max_records_per_batch"]  # the default
    config = Config.model_validate(settings)
    caplog.set_level(logging.INFO, logger="spark_jobs.stream")
    assert run_queries(spark, config, pipeline(config), None, True, threading.Event()) == 0
    told = [r.getMessage() for r in caplog.records if "metrics topic" in r.getMessage()]
    # 450 records on one partition: batches of 200, 200 and 50; after the first, 250 wait (more than a
    # batch's worth); after the second, 50.
    assert len(told) == 2, told
    assert told[0].startswith(
        "catching up with the metrics topic: 250 records behind its end (the last micro-batch read 200 in "
    )
    assert told[1] == "caught up with the metrics topic"


@pytest.mark.timeout(300)
def test_kobs_stream_started_before_its_topic_says_so_in_one_line_and_reads_it_once_there(
    kafka_cluster, tmp_path
):
    """Spark fails a query on a missing topic with an error and a Java stack of 40 lines, at every restart;
    kobs stream checks first and says what is missing in one line until the topic is there."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"  # not created yet
    config = config_for(tmp_path / "run", topic, kafka_cluster.bootstrap, per_batch=10)
    command = [sys.executable, "-m", "kobs.cli", "stream", "--config", str(write_config(tmp_path, config))]
    log_path = tmp_path / "stream.log"
    with open(log_path, "wb") as log:
        driver = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
    missing = f"WARNING spark_jobs.stream: the metrics topic {topic} is not on {kafka_cluster.bootstrap}"
    try:
        _wait_for(lambda: missing in log_path.read_text(), driver, log_path)
        create_topic(kafka_cluster, 1, topic)
        produce(kafka_cluster, topic, [(0, scrape("a", 1000, 1)), (0, scrape("a", 2000, 1))])
        records = f'kobs_pipeline_input_records_total{{query="{QUERY}"}} 2.0'
        _wait_for(lambda: records in _scrape(config.sinks.exporter_address), driver, log_path)
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=60) == 0
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    output = log_path.read_text()
    for noise in ("Traceback", " ERROR ", "\tat ", "Exception"):
        assert noise not in output, output[-3000:]


def _wait_for(done, driver: subprocess.Popen, log_path: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert driver.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
        time.sleep(0.5)


def _scrape(address: str) -> str:
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
            return response.read().decode()
    except OSError:
        return ""

"""Throughput versus stored data and blocked producers end to end: contract batches on the real Kafka cluster
→ local Spark → exporter and Parquet history."""

from __future__ import annotations

import math
import uuid

import pytest
from stream_run import produce, run_available_now

from common import names
from common.config import Config
from common.contract import Batch, Event, Sample
from peers.process import free_port

pytestmark = [pytest.mark.peers, pytest.mark.spark]

T0_MS = 1_700_000_000_000
MB, GB, MIB = 1e6, 1e9, 1024 * 1024
# Topic "orders", 16 partitions: broker 0 leads 0..7, broker 1 leads 8..15. Eleven scrapes a minute apart.
# Broker 0: 2 MB/s in, 1 MB/s out, 50 GB stored, flat. Broker 1: 100 GB growing 60 MB a minute while its
# bytes-in rate falls from 10 MB/s by 0.5 MB/s a minute (5.5 MB/s in the last minute).
BROKER1_RATES = [(10 - 0.5 * m) * MB for m in range(10)]


def broker_batch(broker: int, minute: int) -> Batch:
    if broker == 0:
        bytes_in, stored = 2 * MB * 60 * minute, 50 * GB
    else:
        bytes_in, stored = sum(BROKER1_RATES[:minute]) * 60, 100 * GB + minute * 60 * MB
    b, topic = str(broker), {"broker": str(broker), "topic": "orders"}
    samples = [
        Sample(names.BYTES_IN, topic, bytes_in),
        Sample(names.BYTES_IN, {"broker": b}, bytes_in),  # the broker-wide bean
        Sample(names.BYTES_OUT, topic, bytes_in / 2),
    ]
    partitions = range(8 * broker, 8 * broker + 8)
    samples += [Sample(names.LOG_SIZE_BYTES, {**topic, "partition": str(p)}, stored / 8) for p in partitions]
    return Batch("prod", f"exporter/broker-{b}", T0_MS + minute * 60_000, tuple(samples))


def producer_batch(ts_ms: int) -> Batch:
    labels = {"client_id": "web-frontend"}
    samples = (
        Sample(names.PRODUCER_BUFFER_TOTAL_BYTES, labels, 32 * MIB),
        Sample(names.PRODUCER_BUFFER_AVAILABLE_BYTES, labels, 32 * MIB),
        Sample(names.PRODUCER_WAITING_THREADS, labels, 0),
        Sample(names.PRODUCER_BUFFERPOOL_WAIT_RATIO, labels, 0),
    )
    return Batch("prod", "producer/web-frontend", ts_ms, samples)


def zookeeper_batch(ts_ms: int, lost: range = range(0)) -> Batch:
    """A ZooKeeper source's scrape: every partition's replicas, ISR size and leader, as it reports them at
    each scrape; the ``lost`` ones have lost their leader (broker 1 cannot lead them any more), an event
    each."""
    samples = []
    for p in range(16):
        labels = {"topic": "orders", "partition": str(p)}
        leader = -1 if p in lost else p // 8
        samples += [
            Sample(names.PARTITION_REPLICAS, labels, 1),
            Sample(names.PARTITION_ISR, labels, 1),
            Sample(names.PARTITION_LEADER, labels, leader),
        ]
    fields = {"old_isr": [1], "new_isr": [1], "leader": -1, "leader_epoch": 3, "change": "leader_change"}
    events = tuple(Event("isr_change", ts_ms, {"topic": "orders", "partition": p, **fields}) for p in lost)
    return Batch("prod", "zookeeper/isr", ts_ms, tuple(samples), events)


def test_throughput_and_producers_from_the_metrics_topic(spark, kafka_cluster, tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    batches = [broker_batch(b, m) for m in range(11) for b in (0, 1)]
    batches += [zookeeper_batch(T0_MS + m * 60_000 + 1000) for m in range(10)]
    batches += [producer_batch(T0_MS + 600_000), zookeeper_batch(T0_MS + 605_000, lost=range(12, 16))]
    produce(kafka_cluster.bootstrap, topic, batches)
    cluster = {
        "name": "prod",
        "bootstrap_servers": [kafka_cluster.bootstrap],
        "broker_disk_bytes": int(1000 * GB),
        "producers": [
            {"client_id": "web-frontend", "url": "http://127.0.0.1:1/metrics", "topics": ["orders"]}
        ],
    }
    config = Config.model_validate(
        {
            "clusters": [cluster],
            "metrics_topic": {"name": topic},
            "sinks": {"run_dir": str(tmp_path), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )
    metrics = run_available_now(spark, config)

    orders = (("cluster", "prod"), ("topic", "orders"))
    # last minute: broker 0 at 2 MB/s, broker 1 at 5.5 MB/s (the broker-wide bean is not added again)
    assert metrics["kobs_topic_bytes_in_per_second", orders] == pytest.approx(7.5 * MB)
    assert metrics["kobs_topic_bytes_out_per_second", orders] == pytest.approx(3.75 * MB)
    assert metrics["kobs_topic_stored_bytes", orders] == pytest.approx(150.6 * GB)
    broker1 = (("broker", "1"), ("cluster", "prod"))
    assert metrics["kobs_broker_stored_bytes", broker1] == pytest.approx(100.6 * GB)
    # 1 MB/s = 86.4 GB a day into the 899.4 GB left
    assert metrics["kobs_broker_disk_runway_days", broker1] == pytest.approx(899.4 / 86.4)
    assert metrics["kobs_broker_disk_runway_days", (("broker", "0"), ("cluster", "prod"))] == math.inf
    # broker 0 is flat; broker 1's throughput falls in a straight line as its data grows
    assert metrics["kobs_cluster_throughput_stored_correlation", (("cluster", "prod"),)] == pytest.approx(
        -1.0
    )

    # 4 of 16 partitions lost at 7.5 MB/s: 33554432 B / 1.875 MB/s; lost with broker 1, their ISR's last one
    web = (("cause_broker", "1"), ("client_id", "web-frontend"), ("cluster", "prod"))
    assert metrics["kobs_producer_time_to_block_seconds", web] == pytest.approx(32 * MIB / (7.5 * MB / 4))
    assert metrics["kobs_producer_blocked", web] == 0
    assert (
        metrics[
            "kobs_producer_buffer_utilization_ratio", (("client_id", "web-frontend"), ("cluster", "prod"))
        ]
        == 0
    )

    history = tmp_path / "history"
    throughput = spark.read.parquet(str(history / "throughput")).collect()
    last = max(row.batch_id for row in throughput)
    broker_rows = {r.broker: r for r in throughput if r.batch_id == last and r.topic is None}
    assert broker_rows["1"].stored_bytes == round(100.6 * GB)
    assert broker_rows["1"].growth_bytes_per_day == pytest.approx(86.4 * GB)
    assert broker_rows["1"].throughput_stored_correlation == pytest.approx(-1.0)
    producers = spark.read.parquet(str(history / "producers")).collect()
    topic_row = next(r for r in producers if r.batch_id == last and r.topic == "orders")
    assert (topic_row.partitions, topic_row.offline_partitions) == (16, 4)
    assert topic_row.lost_bytes_per_s == pytest.approx(7.5 * MB / 4)

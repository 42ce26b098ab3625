"""The kobs stream query reads each batch once: dead letters and the analyses' rows come from one pass."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from confluent_kafka import Producer
from test_lag_job import SCRAPES, scrape_batch

from common.config import Config
from common.contract import Batch, Sample, encode
from peers.process import free_port
from spark_jobs.stream import pipeline, start_query

pytestmark = [pytest.mark.peers, pytest.mark.spark]


def test_a_bad_record_is_written_aside_and_the_good_ones_reach_the_analyses(spark, kafka_cluster, tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    broken = b'{"v": 1, "cluster": "prod"'
    unread = Batch("prod", "jmx/broker-1", 40_000, (Sample("kobs_test_read_by_no_analysis", {}, 1.0),))
    values = [encode(scrape_batch(*SCRAPES[0])), broken, *(encode(scrape_batch(*s)) for s in SCRAPES[1:])]
    values.append(encode(unread))
    producer = Producer(
        {"bootstrap.servers": kafka_cluster.bootstrap, "batch.num.messages": 1, "linger.ms": 0}
    )
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0
    config = Config.model_validate(
        {
            "clusters": [{"name": "prod", "bootstrap_servers": [kafka_cluster.bootstrap]}],
            "metrics_topic": {"name": topic, "max_records_per_batch": 2},
            "sinks": {"run_dir": str(tmp_path), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )
    jobs = pipeline(config)
    query = start_query(spark, config, jobs, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None

    # Two records per batch: the broken one (offset 1) is in batch 0, and only there.
    assert sorted(p.name for p in config.sinks.dead_letter_dir.iterdir()) == ["batch=0"]
    (letter,) = [
        json.loads(line)
        for f in (config.sinks.dead_letter_dir / "batch=0").glob("*.json")
        for line in f.open()
    ]
    assert (letter["topic"], letter["partition"], letter["offset"]) == (topic, 0, 1)
    assert letter["reason"].startswith("not UTF-8 JSON")
    assert base64.b64decode(letter["raw"]) == broken
    # All three scrapes reached the lag analysis: end 300 - committed 190 (as in test_lag_job).
    lag = jobs.evaluations["lag", "prod"]
    assert [(row["lag_messages"], row["status"]) for row in lag.history] == [(110, "WARN")]
    # The query's own counts see every record, also those whose samples the source dropped as unread.
    assert (jobs.health.input_records, jobs.health.dead_letters) == (5, 1)
    assert jobs.health.last_seen_s == {("prod", "admin/offsets"): 30.0, ("prod", "jmx/broker-1"): 40.0}


def test_poison_pills_are_dead_lettered_and_the_stream_goes_on(spark, kafka_cluster, tmp_path):
    """The records of issue 14 that once failed every batch from theirs on, forever: a time past what the
    pipeline can carry (dead-lettered by the contract) and the largest long as a value (kept, as a double)."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    far_future = b'{"v":1,"cluster":"prod","source":"s","ts":4611686018427387904,"samples":[]}'
    largest_long = (  # a broker's bytes-in counter, which the throughput analysis reads
        b'{"v":1,"cluster":"prod","source":"jmx/broker-1","ts":1,'
        b'"samples":[["kafka_broker_bytes_in_total",{"broker":"1"},9223372036854775807]]}'
    )
    values = [encode(scrape_batch(*SCRAPES[0])), far_future, largest_long]
    values += [encode(scrape_batch(*s)) for s in SCRAPES[1:]]
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0
    config = Config.model_validate(
        {
            "clusters": [{"name": "prod", "bootstrap_servers": [kafka_cluster.bootstrap]}],
            "metrics_topic": {"name": topic},
            "sinks": {"run_dir": str(tmp_path), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )
    jobs = pipeline(config)
    query = start_query(spark, config, jobs, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    letters = [json.loads(line) for f in config.sinks.dead_letter_dir.rglob("*.json") for line in f.open()]
    assert [(letter["offset"], base64.b64decode(letter["raw"])) for letter in letters] == [(1, far_future)]
    assert letters[0]["reason"].startswith("ts: missing or not epoch milliseconds between 0 and")
    lag = jobs.evaluations["lag", "prod"]  # every scrape after the poison pills reached the analysis
    assert [(row["lag_messages"], row["status"]) for row in lag.history] == [(110, "WARN")]
    assert ("throughput", "prod") in jobs.evaluations  # the long counter reached its analysis too
    assert (jobs.health.input_records, jobs.health.dead_letters) == (len(values), 1)

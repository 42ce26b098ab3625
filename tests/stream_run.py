"""Test helper: contract batches on a fresh topic of the real broker → one ``available_now`` run of the
streaming query on the given SparkSession → the derived exporter's page, scraped before it stops."""

from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka import Producer
from exposition import scrape
from pyspark.sql import SparkSession

from common.config import Config
from common.contract import Batch, encode
from peers.process import free_port
from spark_jobs.pipeline import DerivedCollector
from spark_jobs.stream import exporter, pipeline, start_query


def produce(bootstrap: str, topic: str, batches: list[Batch]) -> None:
    """One record per Kafka batch (tansu reports the end offset as the last batch's first offset + 1)."""
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for batch in batches:
        producer.produce(topic, encode(batch), key=batch.key)
    assert producer.flush(10) == 0


def run_once(spark: SparkSession, bootstrap: str, batches: list[Batch], run_dir: Path) -> dict:
    """Run the query over ``batches`` (cluster ``prod``); history lands under ``run_dir/history``."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, batches)
    config = Config.model_validate(
        {
            "clusters": [{"name": "prod", "bootstrap_servers": [bootstrap]}],
            "metrics_topic": {"name": topic},
            "sinks": {"run_dir": str(run_dir), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )
    return run_available_now(spark, config)


def run_available_now(spark: SparkSession, config: Config) -> dict[tuple[str, tuple], float]:
    """Run the query over everything on ``config``'s metrics topic and scrape the exporter."""
    jobs = pipeline(config)
    with exporter(config.sinks.exporter_address, DerivedCollector(jobs)):
        query = start_query(spark, config, jobs, available_now=True)
        query.awaitTermination(120)
        assert query.exception() is None
        return scrape(f"http://{config.sinks.exporter_address}/metrics")

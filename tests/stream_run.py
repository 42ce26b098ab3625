"""Test helper: contract batches on a fresh topic of the real broker → one ``available_now`` run of the
streaming query on the given SparkSession → the derived exporter's page (and Burrow's API), read before
they stop."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Producer
from exposition import scrape
from pyspark.sql import SparkSession

from common.config import Config
from common.contract import Batch, Sample, encode
from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET, PARTITION_START_OFFSET
from peers.process import free_port
from spark_jobs.exposition import ExpositionPolicy
from spark_jobs.pipeline import DerivedCollector
from spark_jobs.stream import burrow_api, exporter, pipeline, start_query


def produce(bootstrap: str, topic: str, batches: list[Batch | bytes]) -> None:
    """Produce each contract batch as one record, keyed by its batch key. Raw bytes stand for a record that
    fails the contract; it gets the key of the first batch."""
    producer = Producer({"bootstrap.servers": bootstrap})
    key = next(b.key for b in batches if isinstance(b, Batch))
    for batch in batches:
        value, batch_key = (batch, key) if isinstance(batch, bytes) else (encode(batch), batch.key)
        producer.produce(topic, value, key=batch_key)
    assert producer.flush(10) == 0


def offsets_batch(
    ts_ms: int, ends: dict[str, int], commits: dict[tuple[str, str], int], topic: str = "orders"
) -> Batch:
    """One offsets scrape of cluster "prod": ``ends`` partition -> end offset (log start 0), ``commits``
    (group, partition) -> committed offset, all on ``topic``."""
    samples = [
        sample
        for partition, end in ends.items()
        for sample in (
            Sample(PARTITION_START_OFFSET, {"topic": topic, "partition": partition}, 0),
            Sample(PARTITION_END_OFFSET, {"topic": topic, "partition": partition}, end),
        )
    ]
    samples += [
        Sample(GROUP_COMMITTED_OFFSET, {"group": group, "topic": topic, "partition": partition}, committed)
        for (group, partition), committed in commits.items()
    ]
    return Batch("prod", "admin/offsets", ts_ms, tuple(samples))


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


@contextmanager
def served_after_run(spark: SparkSession, config: Config) -> Iterator[str]:
    """Run the query over everything on ``config``'s metrics topic; yields the base URL of the exporter and
    Burrow's API, which serve the outcome until the block ends."""
    jobs = pipeline(config)
    collector = DerivedCollector(jobs, ExpositionPolicy.from_config(config))
    with exporter(config.sinks.exporter_address, collector, api=burrow_api(config, jobs)):
        query = start_query(spark, config, jobs, available_now=True)
        query.awaitTermination(120)
        assert query.exception() is None
        yield f"http://{config.sinks.exporter_address}"


def run_available_now(spark: SparkSession, config: Config) -> dict[tuple[str, tuple], float]:
    """Run the query over everything on ``config``'s metrics topic and scrape the exporter."""
    with served_after_run(spark, config) as url:
        return scrape(f"{url}/metrics")

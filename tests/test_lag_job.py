"""The lag job end to end: contract batches on the real Kafka cluster → local Spark → exporter and history."""

from __future__ import annotations

import uuid

import pytest
from stream_run import offsets_batch, produce, run_available_now

from common.config import Config
from common.contract import Batch
from peers.process import free_port

pytestmark = [pytest.mark.peers, pytest.mark.spark]

# (scrape time ms, end offset, committed offset of group "billing") of orders-0; log start stays 0.
SCRAPES = [(10_000, 100, 50), (20_000, 200, 120), (30_000, 300, 190)]


def scrape_batch(ts_ms: int, end: int, committed: int) -> Batch:
    """The offsets scrape of one ``SCRAPES`` entry."""
    return offsets_batch(ts_ms, {"0": end}, {("billing", "0"): committed})


def test_lag_from_the_metrics_topic_reaches_the_exporter_and_the_history(spark, kafka_cluster, tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    batches = [scrape_batch(*scrape) for scrape in SCRAPES]
    produce(kafka_cluster.bootstrap, topic, [*batches[:2], b"not a contract batch", batches[2]])
    config = Config.model_validate(
        {
            "clusters": [
                {"name": "prod", "bootstrap_servers": [kafka_cluster.bootstrap], "critical_groups": ["bill*"]}
            ],
            "metrics_topic": {"name": topic},
            "sinks": {"run_dir": str(tmp_path), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )
    metrics = run_available_now(spark, config)

    partition = (("cluster", "prod"), ("group", "billing"), ("partition", "0"), ("topic", "orders"))
    group = (("cluster", "prod"), ("group", "billing"))
    # End 300 - committed 190. Lags at the commits 50, 80, 110 never decrease, offsets move: WARN (code 1).
    assert metrics["kobs_consumergroup_lag_messages", partition] == 300 - 190
    assert metrics["kobs_consumergroup_committed_offset", partition] == 190  # the newest commit
    assert metrics["kobs_consumergroup_partition_status", partition] == 1
    assert metrics["kobs_consumergroup_status", group] == 1
    # Offset 191 was written at 10 + 91/100 * 10 = 19.1 s; the newest observation is at 30 s.
    assert metrics["kobs_consumergroup_lag_seconds", partition] == pytest.approx(10.9)
    # Consuming 7/s against 10/s produced: never caught up.
    assert metrics["kobs_consumergroup_catchup_eta_seconds", group] == float("inf")
    assert metrics["kobs_consumergroup_lost_messages", partition] == 0  # log start 0: nothing lost
    assert metrics["kobs_consumergroup_critical", group] == 1  # matches the cluster's "bill*"
    # The pipeline's own health: four records, one of them a dead letter; the newest scrape at 30 s.
    query = (("query", "stream"),)
    assert metrics["kobs_pipeline_input_records_total", query] == 4
    assert metrics["kobs_pipeline_dead_letters_total", query] == 1
    assert (
        metrics["kobs_source_last_seen_timestamp_seconds", (("cluster", "prod"), ("source", "admin/offsets"))]
        == 30
    )
    for bound in ("max_series", "partitions_per_group"):  # no bounds configured: nothing left out
        assert metrics["kobs_pipeline_series_dropped", (("bound", bound), *query)] == 0

    history = spark.read.parquet(str(tmp_path / "history" / "lag")).collect()
    last = max(history, key=lambda row: row.batch_id)
    assert (last.group, last.topic, last.partition, last.lag_messages, last.status) == (
        "billing", "orders", "0", 110, "WARN"
    )  # fmt: skip
    assert len(history) == len({row.batch_id for row in history})  # one row per batch for one partition

"""The lag job end to end: contract batches on the real tansu broker → local Spark → exporter and history."""

from __future__ import annotations

import pytest
from stream_run import run_once

from common.contract import Batch, Sample
from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET, PARTITION_START_OFFSET

pytestmark = [pytest.mark.peers, pytest.mark.spark]

PARTITION = {"topic": "orders", "partition": "0"}
# (scrape time ms, end offset, committed offset of group "billing"); log start stays 0.
SCRAPES = [(10_000, 100, 50), (20_000, 200, 120), (30_000, 300, 190)]


def offsets_batch(ts_ms: int, end: int, committed: int) -> Batch:
    samples = (
        Sample(PARTITION_START_OFFSET, PARTITION, 0),
        Sample(PARTITION_END_OFFSET, PARTITION, end),
        Sample(GROUP_COMMITTED_OFFSET, {"group": "billing", **PARTITION}, committed),
    )
    return Batch("prod", "admin/offsets", ts_ms, samples)


def test_lag_from_the_metrics_topic_reaches_the_exporter_and_the_history(spark, kafka_broker, tmp_path):
    metrics = run_once(spark, kafka_broker.bootstrap, [offsets_batch(*s) for s in SCRAPES], tmp_path)

    partition = (("cluster", "prod"), ("group", "billing"), ("partition", "0"), ("topic", "orders"))
    group = (("cluster", "prod"), ("group", "billing"))
    # End 300 - committed 190. Lags at the commits 50, 80, 110 never decrease, offsets move: WARN (code 1).
    assert metrics["kobs_consumergroup_lag_messages", partition] == 300 - 190
    assert metrics["kobs_consumergroup_partition_status", partition] == 1
    assert metrics["kobs_consumergroup_status", group] == 1
    # Offset 191 was written at 10 + 91/100 * 10 = 19.1 s; the newest observation is at 30 s.
    assert metrics["kobs_consumergroup_lag_seconds", partition] == pytest.approx(10.9)
    # Consuming 7/s against 10/s produced: never caught up.
    assert metrics["kobs_consumergroup_catchup_eta_seconds", group] == float("inf")

    history = spark.read.parquet(str(tmp_path / "history" / "lag")).collect()
    last = max(history, key=lambda row: row.batch_id)
    assert (last.group, last.topic, last.partition, last.lag_messages, last.status) == (
        "billing", "orders", "0", 110, "WARN"
    )  # fmt: skip
    assert len(history) == len({row.batch_id for row in history})  # one row per batch for one partition

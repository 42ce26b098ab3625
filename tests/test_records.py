"""Flattening metrics-topic records into the Arrow batch Spark expects (no Spark session needed)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from pyspark.sql.pandas.types import to_arrow_schema

from common.contract import Batch, Sample, encode
from spark_jobs.kafka_source import SCHEMA
from spark_jobs.records import to_record_batch

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")


def test_one_row_per_sample_and_one_per_dead_letter():
    good = encode(
        Batch("prod", "jmx/broker-1", 1732270000123, (
            Sample("kafka_broker_leaders", {"broker": "1"}, 7.0),
            Sample("kafka_request_time_ms_mean", {"broker": "1", "request": "Produce"}, math.nan),
        ))
    )  # fmt: skip
    batch = to_record_batch([(good, 3, 41), (b"{oops", 3, 42)], "kobs.metrics", ARROW)
    assert batch.schema.equals(ARROW)  # what Spark checks before accepting a batch from read()
    rows = batch.to_pylist()
    assert len(rows) == 3
    first, second, dead = rows
    assert first["cluster"] == "prod" and first["source"] == "jmx/broker-1"
    assert first["ts"] == datetime(2024, 11, 22, 10, 6, 40, 123000, tzinfo=UTC)  # 1732270000.123 s
    assert (first["name"], dict(first["labels"]), first["value"]) == (
        "kafka_broker_leaders",
        {"broker": "1"},
        7.0,
    )
    assert dict(second["labels"]) == {"broker": "1", "request": "Produce"} and math.isnan(second["value"])
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [("kobs.metrics", 3, 41)] * 2 + [
        ("kobs.metrics", 3, 42)
    ]
    assert first["dead_letter"] is None and first["raw"] is None
    assert dead["dead_letter"].startswith("not UTF-8 JSON")
    assert dead["raw"] == b"{oops"
    assert dead["name"] is None and dead["value"] is None

"""Flattening metrics-topic records into the Arrow batch Spark expects (no Spark session needed)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

from pyspark.sql.pandas.types import to_arrow_schema

from common.contract import Batch, Event, Sample, encode
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


def test_events_become_rows_named_by_their_type_with_their_own_time_and_fields():
    shrink = Event(
        "isr_change",
        1732270005000,
        {"topic": "orders", "partition": 2, "old_isr": [1, 2, 3], "new_isr": [1, 3], "leader": 1,
         "leader_epoch": 4, "change": "shrink"},
    )  # fmt: skip
    record = encode(
        Batch("prod", "zookeeper/isr", 1732270000000, (Sample("kafka_broker_leaders", {}, 1),), (shrink,))
    )
    sample, event = to_record_batch([(record, 0, 7)], "kobs.metrics", ARROW).to_pylist()
    assert sample["event"] is None and sample["name"] == "kafka_broker_leaders"
    assert (event["name"], event["labels"], event["value"]) == ("isr_change", None, None)
    assert event["ts"] == datetime(2024, 11, 22, 10, 6, 45, tzinfo=UTC)  # the event's time, not the batch's
    assert json.loads(event["event"])["new_isr"] == [1, 3]
    assert event["dead_letter"] is None and event["offset"] == 7

"""Flattening metrics-topic records into the Arrow batch Spark expects (no Spark session needed)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from bench.workload import Shape, Workload
from common.contract import Batch, DeadLetter, Event, Sample, decode_or_dead_letter, encode
from spark_jobs.kafka_source import SCHEMA
from spark_jobs.records import RECORD, to_record_batch

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")


def test_one_row_per_record_and_sample_and_one_per_dead_letter():
    good = encode(
        Batch("prod", "jmx/broker-1", 1732270000123, (
            Sample("kafka_broker_leaders", {"broker": "1"}, 7.0),
            Sample("kafka_request_time_ms_mean", {"broker": "1", "request": "Produce"}, math.nan),
        ))
    )  # fmt: skip
    batch = to_record_batch([(good, 3, 41), (b"{oops", 3, 42)], "kobs.metrics", ARROW)
    assert batch.schema.equals(ARROW)  # what Spark checks before accepting a batch from read()
    rows = batch.to_pylist()
    assert len(rows) == 4
    record, first, second, dead = rows
    assert (record["name"], record["labels"], record["value"]) == (RECORD, None, None)
    assert (record["cluster"], record["source"], record["ts"]) == ("prod", "jmx/broker-1", first["ts"])
    assert first["cluster"] == "prod" and first["source"] == "jmx/broker-1"
    assert first["ts"] == datetime(2024, 11, 22, 10, 6, 40, 123000, tzinfo=UTC)  # 1732270000.123 s
    assert (first["name"], dict(first["labels"]), first["value"]) == (
        "kafka_broker_leaders",
        {"broker": "1"},
        7.0,
    )
    assert dict(second["labels"]) == {"broker": "1", "request": "Produce"} and math.isnan(second["value"])
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [("kobs.metrics", 3, 41)] * 3 + [
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
    own, sample, event = to_record_batch([(record, 0, 7)], "kobs.metrics", ARROW).to_pylist()
    assert own["name"] == RECORD and own["ts"] == event["ts"]  # a record's newest time: its event's
    assert sample["event"] is None and sample["name"] == "kafka_broker_leaders"
    assert (event["name"], event["labels"], event["value"]) == ("isr_change", None, None)
    assert event["ts"] == datetime(2024, 11, 22, 10, 6, 45, tzinfo=UTC)  # the event's time, not the batch's
    assert json.loads(event["event"])["new_isr"] == [1, 3]
    assert event["dead_letter"] is None and event["offset"] == 7


def test_a_sample_value_that_is_a_list_or_an_object_is_a_dead_letter_not_a_crash():
    for bad in ("[1]", "{}"):
        value = f'{{"v":1,"cluster":"prod","source":"s","ts":1,"samples":[["up",{{}},{bad}]]}}'.encode()
        (row,) = to_record_batch([(value, 0, 5)], "kobs.metrics", ARROW).to_pylist()
        assert (
            row["dead_letter"]
            == f"samples[0]: value {json.loads(bad)!r} is not a number (or NaN, +Inf, -Inf)"
        )
        assert row["raw"] == value


def test_rows_are_the_decoded_samples_and_events_of_every_record_in_order():
    """The columnar flattening against the contract's own decoder, over records of a realistic workload."""
    workload = Workload(Shape(brokers=3, partitions=60, groups=2, rounds=2))
    values = [encode(batch) for r in range(2) for batch in workload.round(r)]
    values.insert(3, b'{"v": 2}')  # a dead letter between good records
    rows = to_record_batch([(v, 1, i) for i, v in enumerate(values)], "kobs.metrics", ARROW).to_pylist()
    expected = []
    for i, value in enumerate(values):
        decoded = decode_or_dead_letter(value)
        if isinstance(decoded, DeadLetter):
            expected.append((i, None, None, None, None, None, decoded.reason))
            continue
        newest_ms = max([decoded.ts_ms] + [e.ts_ms for e in decoded.events])
        expected.append((i, decoded.source, RECORD, newest_ms, None, None, None))
        expected += [
            (i, decoded.source, s.name, decoded.ts_ms, s.labels, s.value, None) for s in decoded.samples
        ]
        expected += [(i, decoded.source, e.type, e.ts_ms, None, e.fields, None) for e in decoded.events]
    assert len(rows) == len(expected) > 1000
    for row, (offset, source, name, ts_ms, labels, value, reason) in zip(rows, expected, strict=True):
        assert (row["offset"], row["source"], row["name"], row["dead_letter"]) == (
            offset,
            source,
            name,
            reason,
        )
        if reason is not None:
            continue
        assert row["ts"] == datetime.fromtimestamp(ts_ms / 1000, UTC)
        if row["name"] == RECORD:
            assert (row["labels"], row["value"], row["event"]) == (None, None, None)
        elif row["event"] is None:
            assert (dict(row["labels"]), row["value"]) == (labels, value)
        else:
            assert (row["labels"], json.loads(row["event"])) == (None, value)


def test_with_names_only_those_samples_and_events_become_rows_and_records_and_dead_letters_stay():
    shrink = Event(
        "isr_change",
        1732270005000,
        {"topic": "orders", "partition": 2, "old_isr": [1, 2], "new_isr": [1], "leader": 1,
         "leader_epoch": 4, "change": "shrink"},
    )  # fmt: skip
    samples = (Sample("kafka_broker_leaders", {"broker": "1"}, 7), Sample("kafka_broker_partitions", {}, 9))
    record = encode(Batch("prod", "jmx/broker-1", 1732270000000, samples, (shrink,)))
    records = [(record, 0, 1), (b"[]", 0, 2)]
    kept = to_record_batch(records, "kobs.metrics", ARROW, {"kafka_broker_partitions", "isr_change"})
    assert [(r["name"], r["offset"]) for r in kept.to_pylist()] == [
        (RECORD, 1), ("kafka_broker_partitions", 1), ("isr_change", 1), (None, 2)
    ]  # fmt: skip
    assert kept.to_pylist()[-1]["dead_letter"] == "record is a JSON list, expected an object"
    assert [r["name"] for r in to_record_batch(records, "kobs.metrics", ARROW, set()).to_pylist()] == [
        RECORD,
        None,
    ]


def test_integers_past_what_a_double_holds_exactly_round_as_prometheus_keeps_them():
    # A JMX long counter (BytesInPerSec's Count passes 2**53 bytes after ~100 days at 1 GB/s) and the largest
    # long once failed the column: Arrow refuses to convert an integer a double cannot hold exactly.
    value = (
        b'{"v":1,"cluster":"a","source":"s","ts":1,'
        b'"samples":[["m",{},9223372036854775807],["m",{},9007199254740993]]}'
    )
    _own, largest, past = to_record_batch([(value, 0, 1)], "kobs.metrics", ARROW).to_pylist()
    assert (largest["value"], past["value"]) == (
        9.223372036854776e18,
        9007199254740992.0,
    )  # IEEE 754 rounding
    assert largest["dead_letter"] is None


def test_a_valid_record_the_columns_cannot_hold_is_dead_lettered_and_its_neighbours_kept():
    # Columns narrower than the pipeline's (a 32-bit time column) stand for any value Arrow refuses.
    narrow = pa.schema([pa.field("ts", pa.int32()) if f.name == "ts" else f for f in ARROW])
    fits = encode(Batch("a", "s", 1_000, (Sample("m", {}, 1.0),)))  # 1,000,000 us fits 32 bits
    too_late = encode(Batch("a", "s", 1_732_270_000_000, (Sample("m", {}, 2.0),)))
    rows = to_record_batch([(fits, 0, 1), (too_late, 0, 2), (fits, 0, 3)], "kobs.metrics", narrow).to_pylist()
    assert [(r["offset"], r["name"], r["value"], r["dead_letter"] is None) for r in rows] == [
        (1, RECORD, None, True), (1, "m", 1.0, True),
        (2, None, None, False),
        (3, RECORD, None, True), (3, "m", 1.0, True),
    ]  # fmt: skip
    assert rows[2]["dead_letter"].startswith("valid, but not convertible to the pipeline's columns")
    assert rows[2]["raw"] == too_late

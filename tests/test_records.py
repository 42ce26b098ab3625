"""Splitting metrics-topic records into the Arrow batch Spark expects: a record's own row, its parts per
analysis, dead letters (no Spark session needed)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from test_pipeline_restore import DEFAULTS

from bench.workload import Shape, Workload
from common import names
from common.contract import Batch, DeadLetter, Event, Sample, decode_or_dead_letter, encode
from spark_jobs.analysis import Observation, Samples
from spark_jobs.kafka_source import SCHEMA
from spark_jobs.keyed import PIPELINE, tables_by_name
from spark_jobs.records import observations, to_record_batch
from spark_jobs.stream import analyses

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")
TABLES = {
    "kafka_broker_leaders": ("replication",),
    "kafka_request_time_ms_mean": ("replication", "throughput"),
    "isr_change": ("replication", "isr_flapping"),
    "m": ("throughput",),
}
SHRINK = Event(
    "isr_change",
    1732270005000,
    {"topic": "orders", "partition": 2, "old_isr": [1, 2, 3], "new_isr": [1, 3], "leader": 1,
     "leader_epoch": 4, "change": "shrink"},
)  # fmt: skip


def parts(rows: list[dict]) -> dict[tuple[int, str], list[Observation]]:
    """(offset, table) -> the observations of that part."""
    return {
        (r["offset"], r["table"]): list(observations(r["cluster"], r["source"], r["observed"]))
        for r in rows
        if r["observed"] is not None
    }


def test_a_record_is_its_own_row_and_one_part_per_analysis_that_reads_it_and_a_bad_one_a_dead_letter():
    good = encode(
        Batch("prod", "jmx/broker-1", 1732270000123, (
            Sample("kafka_broker_leaders", {"broker": "1"}, 7.0),
            Sample("kafka_request_time_ms_mean", {"broker": "1", "request": "Produce"}, math.nan),
        ))
    )  # fmt: skip
    batch = to_record_batch([(good, 3, 41), (b"{oops", 3, 42)], "kobs.metrics", ARROW, TABLES)
    assert batch.schema.equals(ARROW)  # what Spark checks before accepting a batch from mapInArrow
    rows = batch.to_pylist()
    assert [(r["table"], r["offset"]) for r in rows] == [
        (PIPELINE, 41), ("replication", 41), ("throughput", 41), (PIPELINE, 42)
    ]  # fmt: skip
    own, dead = rows[0], rows[-1]
    assert (own["cluster"], own["source"], own["observed"], own["dead_letter"]) == (
        "prod", "jmx/broker-1", None, None
    )  # fmt: skip
    assert own["ts"] == datetime(2024, 11, 22, 10, 6, 40, 123000, tzinfo=UTC)  # 1732270000.123 s
    assert all((r["topic"], r["partition"]) == ("kobs.metrics", 3) for r in rows)
    by_part = parts(rows)
    leaders, request_time = by_part[41, "replication"]
    assert leaders == Observation(
        "kafka_broker_leaders", "prod", "jmx/broker-1", {"broker": "1"}, 1732270000.123, 7.0, None
    )
    assert request_time.labels == {"broker": "1", "request": "Produce"} and math.isnan(request_time.value)
    (only,) = by_part[41, "throughput"]  # the sample two analyses read is in both parts
    assert only.name == "kafka_request_time_ms_mean"
    assert dead["dead_letter"].startswith("not UTF-8 JSON") and dead["raw"] == b"{oops"
    assert (dead["cluster"], dead["observed"]) == (None, None)


def test_events_go_to_their_parts_with_their_own_time_and_fields():
    record = encode(
        Batch("prod", "zookeeper/isr", 1732270000000, (Sample("kafka_broker_leaders", {}, 1),), (SHRINK,))
    )
    rows = to_record_batch([(record, 0, 7)], "kobs.metrics", ARROW, TABLES).to_pylist()
    assert rows[0]["table"] == PIPELINE
    assert rows[0]["ts"] == datetime(
        2024, 11, 22, 10, 6, 45, tzinfo=UTC
    )  # a record's newest time: its event's
    by_part = parts(rows)
    sample, event = by_part[7, "replication"]
    assert (sample.name, sample.t_s, sample.event) == ("kafka_broker_leaders", 1732270000.0, None)
    assert (event.name, event.labels, event.value, event.t_s) == ("isr_change", {}, None, 1732270005.0)
    assert event.event == SHRINK.fields
    assert by_part[7, "isr_flapping"] == [event]


def test_a_sample_value_that_is_a_list_or_an_object_is_a_dead_letter_not_a_crash():
    for bad in ("[1]", "{}"):
        value = f'{{"v":1,"cluster":"prod","source":"s","ts":1,"samples":[["up",{{}},{bad}]]}}'.encode()
        (row,) = to_record_batch([(value, 0, 5)], "kobs.metrics", ARROW, TABLES).to_pylist()
        assert (
            row["dead_letter"]
            == f"samples[0]: value {json.loads(bad)!r} is not a number (or NaN, +Inf, -Inf)"
        )
        assert row["raw"] == value


def test_the_parts_hold_exactly_the_samples_and_events_the_contracts_decoder_reads_in_order():
    """The parts against the contract's own decoder, over records of a realistic workload and every
    analysis's inputs: each name's samples in turn, in the record's order, then the events."""
    tables = tables_by_name(analyses(DEFAULTS))
    workload = Workload(Shape(brokers=3, partitions=60, groups=2, rounds=2))
    values = [encode(batch) for r in range(2) for batch in workload.round(r)]
    values.insert(3, b'{"v": 2}')  # a dead letter between good records
    odd = (  # no labels; labels in another order, one missing
        Sample(names.PARTITION_ISR, {}, 3),
        Sample(names.LOG_SIZE_BYTES, {"topic": "t", "broker": "1"}, math.nan),
        Sample(names.LOG_SIZE_BYTES, {"broker": "2", "topic": "u", "partition": "0"}, 5),
    )
    values.append(encode(Batch("w", "jmx/b", 1, odd)))
    rows = to_record_batch(
        [(v, 1, i) for i, v in enumerate(values)], "kobs.metrics", ARROW, tables
    ).to_pylist()
    got, expected = parts(rows), {}
    for i, value in enumerate(values):
        decoded = decode_or_dead_letter(value)
        if isinstance(decoded, DeadLetter):
            assert [r["dead_letter"] for r in rows if r["offset"] == i] == [decoded.reason]
            continue
        first = {}  # each name's samples in turn, in the record's order
        for s in decoded.samples:
            first.setdefault(s.name, len(first))
        observed = [
            Observation(
                s.name, decoded.cluster, decoded.source, s.labels, decoded.ts_ms / 1000, s.value, None
            )
            for s in sorted(decoded.samples, key=lambda s: first[s.name])
        ] + [
            Observation(e.type, decoded.cluster, decoded.source, {}, e.ts_ms / 1000, None, e.fields)
            for e in decoded.events
        ]
        for o in observed:
            for table in tables.get(o.name, ()):
                expected.setdefault((i, table), []).append(o)
    assert sum(map(len, got.values())) > 1000
    assert comparable(got) == comparable(expected)


def comparable(parts_: dict[tuple[int, str], list[Observation]]) -> dict:
    """The parts with each value as its repr: NaN equals NaN."""
    return {key: [o._replace(value=repr(o.value)) for o in found] for key, found in parts_.items()}


def test_chunked_names_come_as_one_samples_per_name_holding_what_the_observations_hold():
    """Each part read with its analysis's ``chunked`` names (the streaming query's way) against the same part
    read one observation per sample, over a realistic workload with NaN and infinite values among them."""
    tables = tables_by_name(analyses(DEFAULTS))
    chunked = {a.table: a.chunked for a in analyses(DEFAULTS)}
    workload = Workload(Shape(brokers=3, partitions=60, groups=2, rounds=1))
    odd = (
        Sample(names.LOG_SIZE_BYTES, {"topic": "t"}, math.nan),
        Sample(names.PARTITION_ISR, {}, math.inf),
        Sample(names.LOG_SIZE_BYTES, {"broker": "1"}, 2),
    )
    batches = [*workload.round(0), Batch("w", "jmx/b", 1, odd)]
    rows = to_record_batch([(encode(b), 0, i) for i, b in enumerate(batches)], "kobs.metrics", ARROW, tables)
    seen = set()
    for row in rows.to_pylist():
        if row["observed"] is None:
            continue
        names_ = chunked[row["table"]]
        one_by_one = list(observations(row["cluster"], row["source"], row["observed"]))
        fed = list(observations(row["cluster"], row["source"], row["observed"], names_))
        runs = [o for o in fed if isinstance(o, Samples)]
        assert len({r.name for r in runs}) == len(runs) and {r.name for r in runs} <= names_
        expanded = [o for r in runs for o in r.observations()]
        for name in names_:  # each name's samples in the order of the record, the others as they were
            assert repr([o for o in expanded if o.name == name]) == repr(
                [o for o in one_by_one if o.name == name]
            )  # NaN equals NaN through repr
        assert [o for o in fed if not isinstance(o, Samples)] == [
            o for o in one_by_one if o.name not in names_
        ]
        seen |= {r.name for r in runs}
    # every chunked name but the preferred leader, which the workload's metadata source does not report
    assert seen == set().union(*chunked.values()) - {names.PARTITION_PREFERRED_LEADER}


def test_a_record_no_analysis_reads_is_only_its_own_row_and_dead_letters_stay():
    record = encode(Batch("prod", "jmx/broker-1", 1732270000000, (Sample("kafka_unread", {}, 9),), (SHRINK,)))
    rows = to_record_batch([(record, 0, 1), (b"[]", 0, 2)], "kobs.metrics", ARROW, {}).to_pylist()
    assert [(r["table"], r["offset"], r["dead_letter"]) for r in rows] == [
        (PIPELINE, 1, None), (PIPELINE, 2, "record is a JSON list, expected an object")
    ]  # fmt: skip


def test_integers_past_what_a_double_holds_exactly_round_as_prometheus_keeps_them():
    # A JMX long counter (BytesInPerSec's Count passes 2**53 bytes after ~100 days at 1 GB/s) and the largest
    # long once failed the column: Arrow refuses to convert an integer a double cannot hold exactly.
    value = (
        b'{"v":1,"cluster":"a","source":"s","ts":1,'
        b'"samples":[["m",{},9223372036854775807],["m",{},9007199254740993]]}'
    )
    (largest, past) = parts(to_record_batch([(value, 0, 1)], "kobs.metrics", ARROW, TABLES).to_pylist())[
        1, "throughput"
    ]
    assert (largest.value, past.value) == (9.223372036854776e18, 9007199254740992.0)  # IEEE 754 rounding


def test_a_valid_record_the_columns_cannot_hold_is_dead_lettered_and_its_neighbours_kept():
    # Columns narrower than the pipeline's (a 32-bit time column) stand for any value Arrow refuses.
    narrow = pa.schema([pa.field("ts", pa.int32()) if f.name == "ts" else f for f in ARROW])
    fits = encode(Batch("a", "s", 1_000, (Sample("m", {}, 1.0),)))  # 1,000,000 us fits 32 bits
    too_late = encode(Batch("a", "s", 1_732_270_000_000, (Sample("m", {}, 2.0),)))
    records = [(fits, 0, 1), (too_late, 0, 2), (fits, 0, 3)]
    rows = to_record_batch(records, "kobs.metrics", narrow, TABLES).to_pylist()
    assert [(r["offset"], r["table"], r["dead_letter"] is None) for r in rows] == [
        (1, PIPELINE, True), (1, "throughput", True),
        (2, PIPELINE, False),
        (3, PIPELINE, True), (3, "throughput", True),
    ]  # fmt: skip
    assert rows[2]["dead_letter"].startswith("valid, but not convertible to the pipeline's columns")
    assert rows[2]["raw"] == too_late

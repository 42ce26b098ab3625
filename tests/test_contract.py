"""The metrics-topic contract: round trips, rejection with a reason, and the documented example."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.contract import (
    MAX_TS_MS,
    SCHEMA_VERSION,
    Batch,
    ContractError,
    DeadLetter,
    Event,
    Sample,
    decode,
    decode_or_dead_letter,
    encode,
)

names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,30}", fullmatch=True)
label_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,15}", fullmatch=True)
values = st.floats(allow_nan=True, allow_infinity=True)
samples = st.builds(Sample, names, st.dictionaries(label_names, st.text(max_size=20), max_size=4), values)
isr = st.lists(st.integers(0, 1000), max_size=5)
isr_events = st.builds(
    Event,
    st.just("isr_change"),
    st.integers(0, MAX_TS_MS),
    st.fixed_dictionaries(
        {
            "topic": st.text(min_size=1, max_size=20),
            "partition": st.integers(0, 10_000),
            "old_isr": isr,
            "new_isr": isr,
            "leader": st.integers(-1, 1000),
            "leader_epoch": st.integers(0, 2**31),
            "change": st.sampled_from(["shrink", "expand", "replace", "leader_change"]),
        }
    ),
)
batches = st.builds(
    Batch,
    st.text(min_size=1, max_size=20),
    st.text(min_size=1, max_size=30),
    st.integers(0, MAX_TS_MS),
    st.lists(samples, max_size=20).map(tuple),
    st.lists(isr_events, max_size=5).map(tuple),
)


def same_value(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@given(batches)
def test_round_trip_preserves_every_sample_and_event(batch):
    back = decode(encode(batch))
    assert (back.cluster, back.source, back.ts_ms, back.events) == (
        batch.cluster,
        batch.source,
        batch.ts_ms,
        batch.events,
    )
    assert len(back.samples) == len(batch.samples)
    for got, sent in zip(back.samples, batch.samples, strict=True):
        assert (got.name, dict(got.labels)) == (sent.name, dict(sent.labels))
        assert same_value(got.value, sent.value)


@given(batches)
def test_encoded_records_are_strict_json(batch):
    # NaN/Inf travel as strings so that any JSON reader (Spark's included) can parse the record.
    json.loads(encode(batch), parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_reader(raw):
    result = decode_or_dead_letter(raw, key=b"k", topic="t", partition=1, offset=7)
    if isinstance(result, DeadLetter):
        assert result.reason and result.value == raw and result.offset == 7


INVALID = {
    "v": [None, "1", 0, 99, 1.0, True],
    "cluster": [None, "", 5, [], {}],
    "source": [None, "", 5, [], {}],
    "ts": [None, -1, "5", 1.5, True],
    "samples": [None, "x", {}, [["m"]], [[1, {}, 1]], [["m", [], 1]]],
    "events": [None, "x", {}, [{"ts": 1}], [1], [{"type": "x", "ts": -5}]],
}


@settings(max_examples=200)
@given(batches, st.data())
def test_a_corrupted_field_is_rejected_with_a_reason_naming_it(batch, data):
    doc = json.loads(encode(batch))
    field = data.draw(st.sampled_from(sorted(INVALID)))
    doc[field] = data.draw(st.sampled_from(INVALID[field]))
    result = decode_or_dead_letter(json.dumps(doc).encode())
    assert isinstance(result, DeadLetter)
    assert result.reason.startswith(field)


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"v": 2, "cluster": "c", "source": "s", "ts": 1}, "v: unsupported schema version 2"),
        ({"v": 1, "source": "s", "ts": 1}, "cluster: missing"),
        (
            {"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [["bad name", {}, 1]]},
            "samples[0]: metric",
        ),
        (
            {"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [["m", {"a": 1}, 1]]},
            "samples[0]: label",
        ),
        (
            {"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [["m", {}, "high"]]},
            "samples[0]: value",
        ),
        (
            {"v": 1, "cluster": "c", "source": "s", "ts": 1, "events": [{"type": "isr_change", "ts": 1}]},
            "events[0]",
        ),
        ([1, 2], "record is a JSON list"),
        # Times past the year 9999 (2**62 ms: a poison pill that once failed the stream forever), before 1970
        ({"v": 1, "cluster": "c", "source": "s", "ts": 2**62}, "ts: missing or not epoch milliseconds"),
        ({"v": 1, "cluster": "c", "source": "s", "ts": -1}, "ts: missing or not epoch milliseconds"),
        (
            {
                "v": 1,
                "cluster": "c",
                "source": "s",
                "ts": 1,
                "events": [{"type": "x", "ts": 253402300800000}],
            },
            "events[0]: ts missing or not epoch milliseconds between 0 and 253402300799999",
        ),
    ],
)
def test_malformed_records_name_the_problem(doc, reason):
    with pytest.raises(ContractError, match=re.escape(reason)):
        decode(json.dumps(doc).encode())


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (Sample("bad name", {}, 1), "samples[1]: metric name 'bad name'"),
        (Sample("m", {"a": 1}, 1), "samples[1]: label 'a' value is not a string"),
        (Sample("m", {"__a": "x"}, 1), "samples[1]: label name '__a'"),  # reserved by Prometheus
        (Sample("m", {"a-b": "x"}, 1), "samples[1]: label name 'a-b'"),
        (Sample(7, {}, 1), "samples[1]: metric name 7"),
    ],
)
def test_encode_refuses_what_a_reader_would_reject_and_names_the_sample(bad, reason):
    good = Sample("m", {"a": "x"}, 1)
    with pytest.raises(ContractError, match=re.escape(reason)):
        encode(Batch("c", "s", 1, (good, bad, good)))


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (["m", {}, True], "samples[1]: value True is not a number"),  # JSON true is not a number
        (["m", {}, "7"], "samples[1]: value '7' is not a number"),
        (["m", {}, [1]], "samples[1]: value [1] is not a number"),
        (["m", {}, {"NaN": 1}], "samples[1]: value {'NaN': 1} is not a number"),
        (["m", ["a"], 1], "samples[1]: labels are not an object"),
        (["m", {"a": ["x"]}, 1], "samples[1]: label 'a' value is not a string"),
        (["m", {"a-b": "x"}, 1], "samples[1]: label name 'a-b'"),
        ([7, {}, 1], "samples[1]: metric name 7"),
        (["m", {}], "samples[1]: expected [name, labels, value]"),
        ({"name": "m"}, "samples[1]: expected [name, labels, value]"),
    ],
)
def test_a_reader_names_the_one_bad_sample_among_good_ones(bad, reason):
    good = ["m", {"a": "x"}, 1.5]
    doc = {"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [good, bad, ["m", {}, "NaN"]]}
    with pytest.raises(ContractError, match=re.escape(reason)):
        decode(json.dumps(doc).encode())


def test_a_reader_takes_integers_floats_and_the_non_finite_strings():
    samples = [
        ["m", {"a": "x"}, 1],
        ["m", {}, 2.5],
        ["m", {}, "NaN"],
        ["n", {"b": "y"}, "+Inf"],
        ["n", {}, "-Inf"],
    ]
    doc = {"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": samples}
    values = [sample.value for sample in decode(json.dumps(doc).encode()).samples]
    assert values[:2] == [1.0, 2.5] and math.isnan(values[2]) and values[3:] == [math.inf, -math.inf]


def test_tombstone_and_non_json_become_dead_letters():
    assert decode_or_dead_letter(None).reason.startswith("empty record")
    letter = decode_or_dead_letter(b"\xff\xfe", topic="kobs.metrics", partition=2, offset=40)
    doc = json.loads(letter.to_json())
    assert doc["reason"].startswith("not UTF-8 JSON") and doc["offset"] == 40 and doc["value_b64"] == "//4="


@pytest.mark.parametrize(
    "value",
    [
        b'{"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [["m", {}, NaN]]}',  # not JSON
        b'{"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [["m", {}, Infinity]]}',
        b'{"v": 1, "cluster": "c", "source": "s", "ts": 1, "samples": [["m", {"a": "\\ud800"}, 1]]}',
        b"[" * 5000 + b"]" * 5000,
    ],
    ids=["bare NaN", "bare Infinity", "lone surrogate", "nested 5000 deep"],
)
def test_what_strict_json_lacks_becomes_a_dead_letter(value):
    # The contract's NaN and infinities are the strings "NaN", "+Inf", "-Inf"; a lone surrogate is no
    # Unicode text a column could hold.
    assert decode_or_dead_letter(value).reason.startswith("not UTF-8 JSON")


def test_newer_fields_and_event_types_are_kept_compatible():
    doc = {
        "v": 1,
        "cluster": "c",
        "source": "s",
        "ts": 5,
        "added_later": {"x": 1},
        "events": [{"type": "new", "ts": 5}],
    }
    batch = decode(json.dumps(doc).encode())
    assert batch.events == (Event("new", 5, {}),)


def test_key_is_cluster_and_source_and_chunks_keep_it():
    batch = Batch("prod", "admin/offsets", 10, tuple(Sample("m", {"p": str(i)}, i) for i in range(12_001)))
    chunks = list(batch.chunks(5000))
    assert [len(c.samples) for c in chunks] == [5000, 5000, 2001]
    assert {c.key for c in chunks} == {b"prod|admin/offsets"}
    assert [s.value for c in chunks for s in c.samples] == list(range(12_001))


def test_documented_example_decodes_as_described():
    text = (Path(__file__).parents[1] / "docs" / "contract.md").read_text()
    example = re.search(r"```json\n(.*?)```", text, re.S).group(1)
    batch = decode(example.encode())
    assert SCHEMA_VERSION == 1 and batch.cluster == "prod-eu" and batch.source == "jmx/broker-2"
    urp = [s for s in batch.samples if s.name == "kafka_broker_under_replicated_partitions"]
    assert urp == [Sample("kafka_broker_under_replicated_partitions", {"broker": "2"}, 3.0)]
    (event,) = batch.events
    assert event.fields["old_isr"] == [1, 2, 3] and event.fields["new_isr"] == [1, 3]

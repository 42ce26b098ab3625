"""Fuzzing with hypothesis: whatever a configuration file or a metrics-topic record holds, the answer is a
result or one clear line (a ConfigError, a dead letter), never an exception that stops a process."""

from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from common.config import ConfigError, load_config
from spark_jobs.kafka_source import SCHEMA
from spark_jobs.keyed import PIPELINE
from spark_jobs.records import observations, to_record_batch

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")
TABLES = {"kafka_x": ("throughput",), "isr_change": ("replication", "isr_flapping")}
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# JSON-like values with the extremes that once broke things: huge and tiny numbers, non-finite floats
# (as YAML writes them), big integers, odd strings.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, 1e-320, -0.0, 2**63 - 1, 2**64, "inf", "nan", "", "127.0.0.1:9092"]),
    st.text(max_size=20),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
VALID = {
    "clusters": [{"name": "prod", "bootstrap_servers": ["127.0.0.1:9092"], "critical_groups": ["pay-*"]}],
    "metrics_topic": {"name": "kobs.metrics", "partitions": 6, "max_records_per_batch": 100},
    "intervals": {"metrics_s": 15, "offsets_s": 10},
    "analytics": {"flapping": {"flaps": 3, "window_s": 600}},
}


def mutated(doc, data, path=()):
    """``doc`` with one leaf, list or mapping somewhere in it replaced by a fuzzed value."""
    if isinstance(doc, dict) and doc and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(doc)))
        return {**doc, key: mutated(doc[key], data, (*path, key))}
    if isinstance(doc, list) and doc and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], mutated(doc[i], data, (*path, i)), *doc[i + 1 :]]
    return data.draw(documents)


def assert_one_line_or_loaded(tmp_path, text: str) -> None:
    path = tmp_path / "kobs.yaml"
    path.write_text(text)
    try:
        load_config(path, environ={})
    except ConfigError as exc:
        assert str(exc).startswith("config error") and "\n" not in str(exc), str(exc)


@FUZZ
@given(st.data())
def test_a_mutated_configuration_loads_or_is_one_line(tmp_path_factory, data):
    doc = mutated(VALID, data)
    assert_one_line_or_loaded(tmp_path_factory.mktemp("config"), yaml.safe_dump(doc, allow_unicode=True))


@FUZZ
@given(st.text(max_size=200))
def test_any_text_as_a_configuration_file_loads_or_is_one_line(tmp_path_factory, text):
    assert_one_line_or_loaded(tmp_path_factory.mktemp("config"), text)


def record(data) -> bytes:
    """A metrics-topic record: a valid batch's document with fuzzed parts, or arbitrary JSON."""
    doc = {
        "v": 1,
        "cluster": "prod",
        "source": "jmx/broker-1",
        "ts": 1_732_270_000_000,
        "samples": [["kafka_x", {"broker": "1"}, 7.0]],
        "events": [{"type": "isr_change", "ts": 1_732_270_000_000, "topic": "t", "partition": 0}],
    }
    doc = mutated(doc, data) if data.draw(st.booleans()) else data.draw(documents)
    return json.dumps(doc).encode()  # NaN and Infinity, which strict JSON lacks, as Python writes them


@FUZZ
@given(st.data())
def test_any_record_is_rows_or_a_dead_letter_never_an_exception(data):
    values = [record(data) for _ in range(data.draw(st.integers(1, 5)))]
    batch = to_record_batch(
        [(v, 0, offset) for offset, v in enumerate(values)], "kobs.metrics", ARROW, TABLES
    )
    assert batch.schema.equals(ARROW)
    rows = batch.to_pylist()
    for offset in range(len(values)):  # each record: its own row (valid) or one dead letter (not), not both
        own = [r for r in rows if r["offset"] == offset and r["table"] == PIPELINE and not r["dead_letter"]]
        dead = [r for r in rows if r["offset"] == offset and r["dead_letter"] is not None]
        assert len(own) + len(dead) == 1, (values[offset], own, dead)
    for row in rows:  # every value a part holds is a double or null; no sample time past the year 9999
        assert row["ts"] is None or row["ts"].year <= 9999
        if row["observed"] is not None:
            for o in observations(row["cluster"], row["source"], row["observed"]):
                assert o.value is None or isinstance(o.value, float)

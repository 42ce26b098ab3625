"""Metrics-topic records → one Arrow RecordBatch of their parts: one row per record and analysis it feeds.

Pure (no Kafka, no Spark): the Kafka source hands over ``(value, partition, offset)`` triples and the Arrow
schema Spark expects (``spark_jobs.kafka_source.SCHEMA``). A valid record becomes

- one row of its own, ``table`` = ``keyed.PIPELINE``, whose ``ts`` is the record's newest time (its batch
  time or a later event's): the pipeline counts records and sees each source's last report from these
  rows even when no analysis reads the record;
- one row per analysis table that reads some of its samples or events, whose ``observed`` holds those
  samples and events as compact JSON (:func:`part`), read back with :func:`observations`.

A record that fails the contract becomes one row (``table`` = ``keyed.PIPELINE``) with ``dead_letter`` set
to the reason and ``raw`` to its bytes.

Rows are few (a record's samples travel together), so Spark moves, shuffles and sorts thousands of rows
per batch, not millions; each sample is parsed once here and read once more, as columns, in the
analysis's own task.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import orjson
import pyarrow as pa

from common.contract import NON_FINITE, ContractError, parse
from spark_jobs.analysis import Observation, Samples, label_columns
from spark_jobs.keyed import PIPELINE

Record = tuple[bytes | None, int, int]  # (value, partition, offset)
Tables = Mapping[str, Sequence[str]]  # sample or event name -> the tables of the analyses that read it
COLUMNS = (
    "table",
    "cluster",
    "source",
    "ts",
    "topic",
    "partition",
    "offset",
    "observed",
    "dead_letter",
    "raw",
)
# What building the columns raises on a value they cannot hold (an overflow, a type Arrow refuses).
UNCONVERTIBLE = (pa.ArrowException, OverflowError, ValueError, TypeError, orjson.JSONEncodeError)


def to_record_batch(
    records: Sequence[Record], topic: str, schema: pa.Schema, tables: Tables
) -> pa.RecordBatch:
    """Decode records into their parts; columns in ``schema`` order (see ``kafka_source.SCHEMA``). A record
    the contract accepts but the columns cannot hold becomes a dead letter too, so one record can never
    fail its batch (and, retried, every batch after it)."""
    try:
        return _record_batch(records, topic, schema, tables)
    except UNCONVERTIBLE:
        return pa.concat_batches([_alone(record, topic, schema, tables) for record in records])


def _alone(record: Record, topic: str, schema: pa.Schema, tables: Tables) -> pa.RecordBatch:
    try:
        return _record_batch([record], topic, schema, tables)
    except UNCONVERTIBLE as exc:
        reason = f"valid, but not convertible to the pipeline's columns: {type(exc).__name__}: {exc}"
        return _record_batch([record], topic, schema, tables, refused=reason)


def _record_batch(
    records: Sequence[Record], topic: str, schema: pa.Schema, tables: Tables, refused: str | None = None
) -> pa.RecordBatch:
    """:func:`to_record_batch` in one go; ``refused`` makes every record a dead letter with that reason."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for value, partition, offset in records:
        try:
            if refused:
                raise ContractError(refused)
            doc = parse(value)
        except ContractError as exc:
            rows = [(PIPELINE, None, None, None, None, str(exc), value)]
        else:
            cluster, source = doc["cluster"], doc["source"]
            rows = [(PIPELINE, cluster, source, newest_ms(doc) * 1000, None, None, None)]
            rows += [
                (table, cluster, source, doc["ts"] * 1000, observed, None, None)
                for table, observed in part(doc, tables).items()
            ]
        for table, cluster, source, ts, observed, dead_letter, raw in rows:
            for name, cell in (
                ("table", table), ("cluster", cluster), ("source", source), ("ts", ts), ("topic", topic),
                ("partition", partition), ("offset", offset), ("observed", observed),
                ("dead_letter", dead_letter), ("raw", raw),
            ):  # fmt: skip
                columns[name].append(cell)
    arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def part(doc: dict, tables: Tables) -> dict[str, bytes]:
    """A validated record's samples and events by the table that reads them, each table's as the JSON
    ``[batch time ms, {name: [label columns, values]}, events]`` (label columns: ``analysis.label_columns``;
    values as doubles, as Prometheus keeps them: an integer past 2**53, a long JMX counter, rounds; or the
    strings of ``NON_FINITE``). Columns parse into a few lists, not an object per sample."""
    by_name: dict[str, list] = {}
    for sample in doc.get("samples", ()):
        if tables.get(sample[0]):
            by_name.setdefault(sample[0], []).append(sample)
    parts: dict[str, tuple[dict, list]] = {}
    for name, samples in by_name.items():
        values = [float(value) if type(value) is int else value for _, _, value in samples]
        columns = [label_columns([labels for _, labels, _ in samples]), values]
        for table in tables[name]:
            parts.setdefault(table, ({}, []))[0][name] = columns
    for event in doc.get("events", ()):
        for table in tables.get(event["type"], ()):
            parts.setdefault(table, ({}, []))[1].append(event)
    return {table: orjson.dumps([doc["ts"], samples, events]) for table, (samples, events) in parts.items()}


def observations(
    cluster: str, source: str, observed: bytes, chunked: Collection[str] = ()
) -> Iterator[Observation | Samples]:
    """The observations of one record's part (:func:`part`) for the analysis that reads it, each name's
    samples in turn; those named in ``chunked`` as one :class:`Samples` per name."""
    ts_ms, samples, events = orjson.loads(observed)
    t_s, number = ts_ms / 1000, NON_FINITE.get
    for name, (labels, values) in samples.items():
        run = Samples(name, cluster, source, labels, t_s, [number(value, value) for value in values])
        if name in chunked:
            yield run
        else:
            yield from run.observations()
    for event in events:
        yield Observation(event["type"], cluster, source, {}, event["ts"] / 1000, None, event_fields(event))


def newest_ms(doc: dict) -> int:
    """A validated record's newest time (ms): its batch time or a later event's, the time of its own row."""
    return max([doc["ts"], *(event["ts"] for event in doc.get("events", ()))])


def event_fields(event: dict) -> dict:
    """An event's own fields: all but its type and time."""
    return {k: v for k, v in event.items() if k not in ("type", "ts")}

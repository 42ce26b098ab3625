"""Metrics-topic records → one Arrow RecordBatch: a row per record, per sample, per event, per dead letter.

Pure (no Kafka, no Spark): the Kafka source hands over ``(value, partition, offset)`` triples and the Arrow
schema Spark expects (``spark_jobs.kafka_source.SCHEMA``). Every valid record has one row of its own, named
``RECORD``, whose ``ts`` is the record's newest time (its batch time or a later event's): the pipeline
counts records and sees each source's last report from these rows even when a ``names`` filter drops all
of the record's samples. An event's row has its type as ``name``, its own time as ``ts``, its other fields
as JSON in ``event``, and null ``labels`` and ``value``. A record that fails the contract becomes one row
with ``dead_letter`` set to the reason and ``raw`` to its bytes; its sample columns are null. ``seq`` is a
row's place within its record (0: the record's own row), so (``partition``, ``offset``, ``seq``) gives the
order the rows were read in, whatever Spark shuffles.

This runs for every sample in the Python workers, so it works on the validated JSON documents
(``contract.parse``) and fills flat column lists: the ``labels`` map column is built from its offsets,
keys and values rather than from a Python object per row.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

import pyarrow as pa

from common.contract import NON_FINITE, ContractError, parse

Record = tuple[bytes | None, int, int]  # (value, partition, offset)
PER_RECORD = ("cluster", "source", "topic", "partition", "offset", "dead_letter", "raw")
RECORD = ""  # the name of each record's own row; no sample or event name can be empty
# What building the columns raises on a value they cannot hold (an overflow, a type Arrow refuses).
UNCONVERTIBLE = (pa.ArrowException, OverflowError, ValueError, TypeError)


def to_record_batch(
    records: Sequence[Record], topic: str, schema: pa.Schema, names: Collection[str] | None = None
) -> pa.RecordBatch:
    """Decode and flatten records; columns in ``schema`` order (see ``kafka_source.SCHEMA``). With
    ``names``, only the samples and events so named become rows (besides every record's own row and every
    dead letter). A record the contract accepts but the columns cannot hold becomes a dead letter too, so
    one record can never fail its batch (and, retried, every batch after it)."""
    try:
        return _record_batch(records, topic, schema, names)
    except UNCONVERTIBLE:
        return pa.concat_batches([_alone(record, topic, schema, names) for record in records])


def _alone(record: Record, topic: str, schema: pa.Schema, names: Collection[str] | None) -> pa.RecordBatch:
    try:
        return _record_batch([record], topic, schema, names)
    except UNCONVERTIBLE as exc:
        reason = f"valid, but not convertible to the pipeline's columns: {type(exc).__name__}: {exc}"
        return _record_batch([record], topic, schema, names, refused=reason)


def _record_batch(
    records: Sequence[Record],
    topic: str,
    schema: pa.Schema,
    names: Collection[str] | None,
    refused: str | None = None,
) -> pa.RecordBatch:
    """:func:`to_record_batch` in one go; ``refused`` makes every record a dead letter with that reason."""
    columns: dict[str, list] = {name: [] for name in (*PER_RECORD, "ts", "name", "value", "event", "seq")}
    offsets, keys, items, no_labels = [0], [], [], []  # the labels map column
    for value, partition, offset in records:
        try:
            if refused:
                raise ContractError(refused)
            doc = parse(value)
        except ContractError as exc:
            n, per_record = 1, (None, None, topic, partition, offset, str(exc), value)
            for name in ("ts", "name", "value", "event"):
                columns[name].append(None)
            offsets.append(len(keys))
            no_labels.append(True)
        else:
            samples, events = doc.get("samples", ()), doc.get("events", ())
            if names is not None:
                samples = [s for s in samples if s[0] in names]
                events = [e for e in events if e["type"] in names]
            n = 1 + len(samples) + len(events)
            per_record = (doc["cluster"], doc["source"], topic, partition, offset, None, None)
            event_ts = [e["ts"] * 1000 for e in events]  # Spark's µs
            batch_ts = doc["ts"] * 1000
            columns["ts"] += [newest_ms(doc) * 1000] + [batch_ts] * len(samples) + event_ts
            columns["name"] += [RECORD] + [s[0] for s in samples] + [e["type"] for e in events]
            columns["value"].append(None)
            # Every value as a double, as Prometheus keeps it: an integer past 2**53 (a long JMX counter)
            # rounds instead of failing the column.
            columns["value"] += [float(v) if type(v) is not str else NON_FINITE[v] for _, _, v in samples]
            columns["value"] += [None] * len(events)
            columns["event"] += [None] * (1 + len(samples)) + [json.dumps(event_fields(e)) for e in events]
            offsets.append(len(keys))
            for _, labels, _ in samples:
                keys += labels
                items += labels.values()
                offsets.append(len(keys))
            offsets += [len(keys)] * len(events)
            no_labels += [True] + [False] * len(samples) + [True] * len(events)
        for name, constant in zip(PER_RECORD, per_record, strict=True):
            columns[name] += [constant] * n
        columns["seq"] += range(n)
    labels_type = schema.field("labels").type
    labels = pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array(keys, labels_type.key_type),
        pa.array(items, labels_type.item_type),
        type=labels_type,
        mask=pa.array(no_labels, pa.bool_()),
    )
    arrays = [labels if f.name == "labels" else pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def newest_ms(doc: dict) -> int:
    """A validated record's newest time (ms): its batch time or a later event's, the time of its own row."""
    return max([doc["ts"], *(event["ts"] for event in doc.get("events", ()))])


def event_fields(event: dict) -> dict:
    """An event's own fields: all but its type and time."""
    return {k: v for k, v in event.items() if k not in ("type", "ts")}

"""Metrics-topic records → one Arrow RecordBatch: a row per sample, per event and per dead letter.

Pure (no Kafka, no Spark): the Kafka source hands over ``(value, partition, offset)`` triples and the Arrow
schema Spark expects (``spark_jobs.kafka_source.SCHEMA``). An event's row has its type as ``name``, its own
time as ``ts``, its other fields as JSON in ``event``, and null ``labels`` and ``value``. A record that
fails the contract becomes one row with ``dead_letter`` set to the reason and ``raw`` to its bytes; its
sample columns are null.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pyarrow as pa

from common.contract import DeadLetter, decode_or_dead_letter

SAMPLE_COLUMNS = ("cluster", "source", "ts", "name", "labels", "value")
Record = tuple[bytes | None, int, int]  # (value, partition, offset)


def to_record_batch(records: Iterable[Record], topic: str, schema: pa.Schema) -> pa.RecordBatch:
    """Decode and flatten records; columns in ``schema`` order (see ``kafka_source.SCHEMA``)."""
    columns: dict[str, list] = {name: [] for name in schema.names}
    for value, partition, offset in records:
        batch = decode_or_dead_letter(value, topic=topic, partition=partition, offset=offset)
        if isinstance(batch, DeadLetter):
            for name in (*SAMPLE_COLUMNS, "event"):
                columns[name].append(None)
            columns["dead_letter"].append(batch.reason)
            columns["raw"].append(value)
            n = 1
        else:
            samples, events = batch.samples, batch.events
            n = len(samples) + len(events)
            columns["cluster"] += [batch.cluster] * n
            columns["source"] += [batch.source] * n
            # microseconds, Spark's timestamp unit
            columns["ts"] += [batch.ts_ms * 1000] * len(samples) + [e.ts_ms * 1000 for e in events]
            columns["name"] += [s.name for s in samples] + [e.type for e in events]
            columns["labels"] += [list(s.labels.items()) for s in samples] + [None] * len(events)
            columns["value"] += [s.value for s in samples] + [None] * len(events)
            columns["event"] += [None] * len(samples) + [json.dumps(e.fields) for e in events]
            columns["dead_letter"] += [None] * n
            columns["raw"] += [None] * n
        columns["topic"] += [topic] * n
        columns["partition"] += [partition] * n
        columns["offset"] += [offset] * n
    return pa.RecordBatch.from_arrays([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema)

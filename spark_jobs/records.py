"""Metrics-topic records → one Arrow RecordBatch of typed rows: one row per sample, one per dead letter.

Pure (no Kafka, no Spark): the Kafka source hands over ``(value, partition, offset)`` triples and the Arrow
schema Spark expects (``spark_jobs.kafka_source.SCHEMA``). A record that fails the contract becomes one row
with ``dead_letter`` set to the reason and ``raw`` to its bytes; its sample columns are null.
"""

from __future__ import annotations

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
            for name in SAMPLE_COLUMNS:
                columns[name].append(None)
            columns["dead_letter"].append(batch.reason)
            columns["raw"].append(value)
            n = 1
        else:
            samples = batch.samples
            n = len(samples)
            columns["cluster"] += [batch.cluster] * n
            columns["source"] += [batch.source] * n
            columns["ts"] += [batch.ts_ms * 1000] * n  # microseconds, Spark's timestamp unit
            columns["name"] += [s.name for s in samples]
            columns["labels"] += [list(s.labels.items()) for s in samples]
            columns["value"] += [s.value for s in samples]
            columns["dead_letter"] += [None] * n
            columns["raw"] += [None] * n
        columns["topic"] += [topic] * n
        columns["partition"] += [partition] * n
        columns["offset"] += [offset] * n
    return pa.RecordBatch.from_arrays([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema)

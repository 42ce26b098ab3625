"""The stream benchmark's baseline: the same computations in one Python process, without Spark.

It reads the same micro-batches the Spark query read (each batch's offset ranges from the query's progress
reports) with confluent-kafka, validates and parses each record with the contract code
(``contract.parse``) and feeds the observations to a :class:`~spark_jobs.pipeline.Pipeline` of the same
analyses (history and snapshots included). Nothing is distributed and nothing is converted to Arrow or
Spark rows: what the work costs with no engine around it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from confluent_kafka import Consumer, TopicPartition

from common.contract import NON_FINITE, ContractError, parse
from spark_jobs.analysis import Observation
from spark_jobs.pipeline import Pipeline
from spark_jobs.pipeline_health import BatchStats
from spark_jobs.records import event_fields, newest_ms

NAME = "one Python process: confluent-kafka, contract.parse, the same analyses and sinks, no Spark"
Ranges = dict[int, tuple[int, int]]  # partition -> [start, end) offsets of one micro-batch


def observations(doc: dict, names: frozenset[str]) -> Iterator[Observation]:
    """A record's samples and events named in ``names`` (from its validated document, ``contract.parse``),
    as the pipeline feeds them to its analyses."""
    cluster, source, t_s = doc["cluster"], doc["source"], doc["ts"] / 1000
    for name, labels, value in doc.get("samples", ()):
        if name in names:
            value = NON_FINITE[value] if isinstance(value, str) else float(value)
            yield Observation(name, cluster, source, labels, t_s, value, None)
    for event in doc.get("events", ()):
        if event["type"] in names:
            yield Observation(
                event["type"], cluster, source, {}, event["ts"] / 1000, None, event_fields(event)
            )


def batches_of(progress: list[dict], topic: str) -> list[Ranges]:
    """The offset ranges of each micro-batch with data, from a query's progress reports (as dicts)."""
    batches = []
    for report in progress:
        if not report["numInputRows"]:
            continue
        (source,) = report["sources"]
        start, end = (_offsets(source[key], topic) for key in ("startOffset", "endOffset"))
        batches.append({p: (start.get(p, 0), stop) for p, stop in end.items() if stop > start.get(p, 0)})
    return batches


def _offsets(offsets: dict | None, topic: str) -> dict[int, int]:
    return {int(p): offset for p, offset in (offsets or {}).get(topic, {}).items()}


def run(bootstrap: str, topic: str, batches: list[Ranges], jobs: Pipeline) -> list[float]:
    """Process ``batches`` of ``topic`` one after the other; returns each batch's seconds."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kobs-bench", "enable.auto.commit": False}
    )
    try:
        seconds = []
        for batch_id, ranges in enumerate(batches):
            began, started_s = time.perf_counter(), time.time()
            batch, stats = batch_of(read(consumer, topic, ranges), jobs.inputs)
            jobs.feed(batch, stats, batch_id, started_s)
            seconds.append(time.perf_counter() - began)
        return seconds
    finally:
        consumer.close()


def batch_of(values: Iterable[bytes | None], names: frozenset[str]) -> tuple[list[Observation], BatchStats]:
    """One micro-batch's record values → the observations named in ``names`` and the batch's counts."""
    batch, records, dead_letters, newest_s = [], 0, 0, {}
    for value in values:
        records += 1
        try:
            doc = parse(value)
        except ContractError:  # a dead letter: counted, no observations
            dead_letters += 1
            continue
        newest = newest_ms(doc) / 1000
        key = (doc["cluster"], doc["source"])
        newest_s[key] = max(newest, newest_s.get(key, newest))
        batch.extend(observations(doc, names))
    return batch, BatchStats(records, dead_letters, newest_s)


def read(consumer: Consumer, topic: str, ranges: Ranges) -> list[bytes | None]:
    """The values of the records in ``ranges``, all partitions fetched at once, in the order the streaming
    query takes them: by partition, then offset."""
    consumer.assign([TopicPartition(topic, partition, start) for partition, (start, _) in ranges.items()])
    left = {partition: end - start for partition, (start, end) in ranges.items()}
    values: dict[int, list[bytes | None]] = {partition: [] for partition in ranges}
    while any(left.values()):
        messages = consumer.consume(num_messages=min(500, sum(left.values())), timeout=10)
        if not messages:
            raise RuntimeError(f"{topic}: nothing received for 10 s, {sum(left.values())} records short")
        for message in messages:
            if message.error() is not None:
                raise RuntimeError(f"{topic}-{message.partition()}: {message.error().str()}")
            partition = message.partition()
            if message.offset() < ranges[partition][1]:
                left[partition] -= 1
                values[partition].append(message.value())
    return [value for partition in sorted(values) for value in values[partition]]

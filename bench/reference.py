"""The stream benchmark's baseline: the same computations in one Python process, without Spark.

It plans the same micro-batches as the Spark query (the ``kobs-kafka`` source's own planning, with the
same record limit and ``Trigger.AvailableNow`` end), reads each batch's records with confluent-kafka,
validates and parses them with the contract code (``contract.parse``) and feeds the observations to a
:class:`~spark_jobs.pipeline.Pipeline` of the same analyses (history and snapshots included). Nothing is
distributed and nothing is converted to Arrow or Spark rows: what the work costs with no engine around it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from common.contract import NON_FINITE, ContractError, parse
from spark_jobs.analysis import Observation
from spark_jobs.kafka_source import SCHEMA, KafkaStreamReader, consumer_settings, fetch
from spark_jobs.pipeline import Pipeline
from spark_jobs.pipeline_health import BatchStats
from spark_jobs.records import event_fields, newest_ms

NAME = "one Python process: confluent-kafka, contract.parse, the same analyses and sinks, no Spark"


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


def run(options: dict[str, str], jobs: Pipeline) -> list[float]:
    """Process everything now in the topic batch by batch, read with the ``kobs-kafka`` source's
    ``options``; returns each batch's seconds."""
    reader = KafkaStreamReader(options, SCHEMA)
    settings = consumer_settings(reader.settings)
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        seconds, batch_id = [], 0
        while True:
            began, started_s = time.perf_counter(), time.time()
            end = reader.latestOffset(start, reader.getDefaultReadLimit())
            if end == start:
                return seconds
            batch, records, dead_letters, newest_s = [], 0, 0, {}
            for part in (part for task in reader.partitions(start, end) for part in task.slices):
                for value, _ in fetch(settings, part, reader.read_timeout_s):
                    records += 1
                    try:
                        doc = parse(value)
                    except ContractError:  # a dead letter: counted, no observations
                        dead_letters += 1
                        continue
                    newest = newest_ms(doc) / 1000
                    key = (doc["cluster"], doc["source"])
                    newest_s[key] = max(newest, newest_s.get(key, newest))
                    batch.extend(observations(doc, jobs.inputs))
            jobs.feed(batch, BatchStats(records, dead_letters, newest_s), batch_id, started_s)
            seconds.append(time.perf_counter() - began)
            start, batch_id = end, batch_id + 1
    finally:
        reader.stop()

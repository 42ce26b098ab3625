"""A Kafka streaming source for Spark, as a Python data source over confluent-kafka.

Spark's own Kafka connector is a jar that cannot be fetched here, so this reads the metrics topic with
librdkafka and hands Spark typed Arrow batches (``spark_jobs.records``): one row per record (named
``records.RECORD``), one per sample, one per event, one per dead letter. Usage::

    spark.dataSource.register(KafkaSource)
    df = (spark.readStream.format("kobs-kafka").option("bootstrap.servers", "host:9092")
          .option("topic", "kobs.metrics").option("maxRecordsPerBatch", 10000).load())

Options: ``bootstrap.servers`` and ``topic`` (required); ``startingOffsets`` ``earliest`` (default) or
``latest``; ``maxRecordsPerBatch`` (Kafka records, not samples, per micro-batch; default unlimited);
``readTimeoutMs`` (a task fails if the broker sends nothing for this long; default 60000); ``names``
(comma-separated sample names and event types: rows of others are dropped as they are decoded, the
records' own rows and the dead letters are always kept; default all); ``maxTasks`` (read tasks per
micro-batch, each a run of neighbouring partitions of about equal records: every task costs PySpark a
set-up in a Python worker, so more tasks than cores only cost; default one per partition); any ``kafka.*``
option is passed to librdkafka without the prefix (security settings, for instance).

The stream offset and how resets are handled are described in ``spark_jobs.kafka_offsets``. Planning runs
in the driver's long-lived Python planner process; ``read`` runs in executor Python workers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.kafka_offsets import SourceOffset, Watermarks, contiguous_groups, initial_offset, next_offset
from spark_jobs.records import to_record_batch

log = logging.getLogger(__name__)

SCHEMA = StructType(
    [
        StructField("cluster", StringType()),
        StructField("source", StringType()),
        StructField("ts", TimestampType()),
        StructField("name", StringType()),
        StructField("labels", MapType(StringType(), StringType())),
        StructField("value", DoubleType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("event", StringType()),  # an event's fields as JSON, its type in ``name``
        StructField("dead_letter", StringType()),  # reason the record failed the contract; null for samples
        StructField("raw", BinaryType()),  # the failed record's value; null for samples
    ]
)
RECORDS_PER_ARROW_BATCH = 2000
TIMEOUT_S = 10.0


class KafkaSource(DataSource):
    """``format("kobs-kafka")``: the metrics topic as a stream of typed sample rows."""

    @classmethod
    def name(cls) -> str:
        return "kobs-kafka"

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(dict(self.options), schema)


@dataclass(frozen=True)
class KafkaSlice:
    """Records ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int


class KafkaTask(InputPartition):
    """The slices one Spark task reads, one after the other."""

    def __init__(self, slices: list[KafkaSlice]):
        super().__init__(tuple(slices))
        self.slices = slices


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], schema: StructType):
        options = {key.lower(): value for key, value in options.items()}  # Spark lower-cases option names
        missing = [key for key in ("bootstrap.servers", "topic") if not options.get(key)]
        if missing:
            raise ValueError(f"kobs-kafka source: option(s) {', '.join(missing)} required")
        self.topic = options["topic"]
        self.starting = options.get("startingoffsets", "earliest")
        limit = options.get("maxrecordsperbatch")
        self.max_records = int(limit) if limit else None
        self.read_timeout_s = float(options.get("readtimeoutms", 60000)) / 1000
        self.names = frozenset(options["names"].split(",")) if options.get("names") else None
        self.max_tasks = int(options["maxtasks"]) if options.get("maxtasks") else None
        self.schema = schema
        self.settings = {"bootstrap.servers": options["bootstrap.servers"]} | {
            key.removeprefix("kafka."): value for key, value in options.items() if key.startswith("kafka.")
        }
        self._admin: AdminClient | None = None
        self._target: Watermarks | None = None  # end offsets fixed by Trigger.AvailableNow

    # -- planning (driver) --------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        topic_id, marks = self._watermarks()
        return initial_offset(topic_id, marks, self.starting).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.max_records is None else ReadMaxRows(self.max_records)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        try:
            topic_id, marks = self._watermarks()
        except KafkaException as exc:  # no answer about the topic: no new data this time, ask again next
            log.warning("metrics topic %s: no offsets (%s); waiting for its cluster", self.topic, exc)
            # a new client looks the cluster up again: librdkafka keeps waiting for a controller that died
            self._admin = None
            return start
        if self._target is not None:
            marks = {
                p: (low, min(high, self._target.get(p, (0, low))[1])) for p, (low, high) in marks.items()
            }
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return next_offset(SourceOffset.from_json(start), topic_id, marks, max_records).to_json()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._watermarks()[1]

    def partitions(self, start: dict, end: dict) -> list[KafkaTask]:
        begin, until = SourceOffset.from_json(start), SourceOffset.from_json(end)
        slices = []
        for partition, stop in sorted(until.offsets.items()):
            first = until.starts.get(partition, begin.offsets.get(partition, stop))
            if stop > first:
                slices.append(KafkaSlice(self.topic, partition, first, stop))
        groups = contiguous_groups([s.end - s.start for s in slices], self.max_tasks)
        return [KafkaTask([slices[i] for i in group]) for group in groups]

    def _watermarks(self) -> tuple[str, Watermarks]:
        """The topic's id and (log start, end) offsets of the partitions whose leader answered.

        One request of every partition's offsets goes to the leaders at once, so a partition whose leader
        hangs or died costs one ``TIMEOUT_S`` in all, not one each; the partitions missing from the answer
        keep their previous end offset (``next_offset``) until their new leader answers. KafkaException
        when the topic cannot be described.
        """
        if self._admin is None:
            self._admin = AdminClient(self.settings)
        future = self._admin.describe_topics(TopicCollection([self.topic]), request_timeout=TIMEOUT_S)
        description = future[self.topic].result()
        partitions = [TopicPartition(self.topic, p.id) for p in description.partitions]
        lows, highs = (
            self._admin.list_offsets(dict.fromkeys(partitions, spec), request_timeout=TIMEOUT_S)
            for spec in (OffsetSpec.earliest(), OffsetSpec.latest())
        )
        marks = {}
        for tp in partitions:
            try:
                marks[tp.partition] = (lows[tp].result().offset, highs[tp].result().offset)
            except KafkaException as exc:
                log.warning("%s-%d: no offsets (%s); its records wait for the next batch", self.topic,
                            tp.partition, exc)  # fmt: skip
        return str(description.topic_id or ""), marks

    # -- reading (executors) ------------------------------------------------------------------------
    def read(self, partition: KafkaTask) -> Iterator:
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        for part in partition.slices:
            pending: list[tuple[bytes | None, int, int]] = []
            for value, offset in fetch(consumer_settings(self.settings), part, self.read_timeout_s):
                pending.append((value, part.partition, offset))
                if len(pending) >= RECORDS_PER_ARROW_BATCH:
                    yield to_record_batch(pending, part.topic, arrow_schema, self.names)
                    pending = []
            if pending:
                yield to_record_batch(pending, part.topic, arrow_schema, self.names)


def fetch(settings: dict, part: KafkaSlice, read_timeout_s: float) -> Iterator[tuple[bytes | None, int]]:
    """Values and offsets of ``part``; stops early, with a warning, if the records are gone.

    ``settings`` are librdkafka settings (``consumer_settings``); a read fails after ``read_timeout_s``
    without any record.
    """
    consumer = Consumer(settings)
    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        idle_s, position = 0.0, part.start
        while True:
            # consume() waits for all the messages asked for (or the timeout): ask for no more than are left
            messages = consumer.consume(num_messages=max(1, min(500, part.end - position)), timeout=1.0)
            idle_s = 0.0 if messages else idle_s + 1.0
            if idle_s >= read_timeout_s:
                raise TimeoutError(f"{part.topic}-{part.partition}: nothing received for {idle_s:.0f} s")
            for message in messages:
                error = message.error()
                if error is None:
                    if message.offset() >= part.end:
                        return
                    yield message.value(), message.offset()
                    position = message.offset() + 1
                    if position >= part.end:
                        return
                elif error.code() == KafkaError._PARTITION_EOF and message.offset() >= part.end:
                    return  # the last records of the range were not data (compaction, markers)
                elif error.code() in (KafkaError._PARTITION_EOF, KafkaError._AUTO_OFFSET_RESET):
                    log.warning(
                        "%s-%d: records [%d, %d) gone at offset %s (%s); the next batch resumes",
                        part.topic, part.partition, part.start, part.end, message.offset(), error.str(),
                    )  # fmt: skip
                    return
                else:
                    raise KafkaException(error)
    finally:
        consumer.close()


def consumer_settings(settings: dict) -> dict:
    """A consumer that reads given offsets and never commits; a position that is gone is an error."""
    return settings | {
        "group.id": "kobs-spark-source",  # required by librdkafka; offsets are never committed
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    }

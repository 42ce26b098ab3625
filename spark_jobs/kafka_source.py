"""The metrics topic as a stream of typed rows: Spark's own Kafka source, decoded on the executors.

Spark's Kafka source (``spark-sql-kafka-0-10``, resolved by setup from Maven Central with the other jars:
``common.jars``) plans each micro-batch's offset ranges and reads them in the executors' JVMs; its rows
(``value``, ``partition``, ``offset``) go in Arrow batches to the executors' Python workers
(``mapInArrow``), which check each record against the contract and split it into :data:`SCHEMA` rows
(``spark_jobs.records``): one of its own, one per analysis it feeds with that analysis's samples and
events, or one dead letter. Nothing of it runs in the driver.

Offsets live in the query's checkpoint. Records gone before they were read (retention, a recreated topic)
are skipped with a warning in the log (``failOnDataLoss`` false): the platform's own metrics must not stop
the stream. A cluster that does not answer fails the batch's planning; ``kobs stream`` starts the query
again from its checkpoint (``spark_jobs.stream.run_stream``). Before it starts the query it checks that the
topic is there (:func:`unreadable`): Spark fails a query on a missing topic with a Java stack of 40 lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from common.config import Config
from common.kafka_clients import (
    AccessError,
    java_client_settings,
    metadata,
    metrics_topic_settings,
)
from spark_jobs.records import Tables, to_record_batch

SCHEMA = StructType(
    [
        StructField("table", StringType()),  # the analysis the part feeds, or keyed.PIPELINE
        StructField("cluster", StringType()),
        StructField("source", StringType()),
        StructField("ts", TimestampType()),  # the record's newest time on its own row, else its batch time
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("observed", BinaryType()),  # the part's samples and events (records.part)
        StructField("dead_letter", StringType()),  # reason the record failed the contract
        StructField("raw", BinaryType()),  # the failed record's value
    ]
)


# How long the driver's Admin client keeps at one offset question before it gives up (its default: 60 s);
# Spark's source then makes a new client, which reads the cluster's metadata afresh, and asks again (3
# attempts, 1 s apart). A broker leading metrics-topic partitions killed (SIGKILL) while the driver asked:
# the client still addressed the dead leader, which left its metadata once fenced, and waited out the
# whole minute (the demo's stream planned no micro-batch for 63 s after its first incident's kill).
API_TIMEOUT_MS = "15000"

# How long the driver's and the executors' Kafka clients wait for one broker's answer (Kafka's default:
# 30 s; the collectors' clients: HUNG_BROKER_TIMEOUT_MS, 10 s). A hung leader of the metrics topic (SIGSTOP:
# its sockets open) holds each request to this timeout before the client drops the connection and finds
# the new leader: with 10 s the stream read the next record 13.5 and 40 s after the collector wrote it to
# the new leader, with 5 s 7.0-7.5 s (three runs). The stream's requests (offsets, fetches that wait
# FETCH_WAIT_MS) are answered in milliseconds.
REQUEST_TIMEOUT_MS = "5000"

# How long a broker holds a fetch that finds no new records (Kafka's default: 500 ms). Kafka's Java consumer
# sends its next fetch as a poll returns records, so a read that reaches the end of the log leaves a fetch
# held at the broker; a broker answers one connection's requests one at a time, in order, and Spark's reader
# asks for the partition's offsets after each poll, so that question waited behind the held fetch. At the
# default every live micro-batch took ~1 s longer (its pipeline 1.8 s at p50 in the demo, 0.45 s with
# 10 ms) and a backlog's last batch 2.1 s instead of 0.7 s.
FETCH_WAIT_MS = "10"

# The most records of one metrics-topic partition a read task takes (the source's maxRecordsPerPartition):
# a source keeps its partition, so on a backlog the one or two partitions holding a large cluster's offsets
# and metadata scrapes carry most of a batch; split into pieces of at most 8 records (at most 40,000 samples,
# ~0.05 s of decoding), they spread over the cores. A live batch holds a few records a partition: not split.
READ_TASK_RECORDS = 8


def source_options(config: Config) -> dict[str, str]:
    """Spark Kafka source options for the metrics topic: the topic from its start, the batch and read
    task limits, and the connection (``kafka.``-prefixed Java client settings, security included)."""
    topic = config.metrics_topic
    options = {
        "subscribe": topic.name,
        "startingOffsets": "earliest",
        "failOnDataLoss": "false",
        "maxRecordsPerPartition": str(READ_TASK_RECORDS),
        "kafka.request.timeout.ms": REQUEST_TIMEOUT_MS,
        "kafka.default.api.timeout.ms": API_TIMEOUT_MS,
        "kafka.fetch.max.wait.ms": FETCH_WAIT_MS,
    }
    if topic.max_records_per_batch:
        options["maxOffsetsPerTrigger"] = str(topic.max_records_per_batch)
    settings = java_client_settings(config.metrics_bootstrap, topic.security, where="metrics_topic")
    return options | {f"kafka.{key}": value for key, value in settings.items()}


def unreadable(config: Config, timeout_s: float = 5.0) -> str | None:
    """Why the metrics topic cannot be read now, in one line: its cluster does not answer or refuses the
    login, or the topic is not there (kobs stream started before kobs collect first created it, or another
    ``metrics_topic.name``). None when it can be."""
    topic, settings = config.metrics_topic, metrics_topic_settings(config)
    servers = settings["bootstrap.servers"]
    try:
        found = metadata(settings, "metrics_topic", timeout_s, topic=topic.name).topics.get(topic.name)
    except AccessError as exc:
        return str(exc)
    except KafkaException as exc:
        return f"the metrics topic's cluster does not answer at {servers} ({exc.args[0].str()})"
    if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return (
            f"the metrics topic {topic.name} is not on {servers} (kobs collect creates it when it starts; "
            "else check metrics_topic.name)"
        )
    return None


def read_metrics(
    spark: SparkSession, options: dict[str, str], tables: Tables, tasks: int | None = None
) -> DataFrame:
    """The metrics topic's records as :data:`SCHEMA` rows: their parts for the analyses' ``tables``; read
    in one task per topic partition or piece of one (``maxRecordsPerPartition`` in ``options``:
    :func:`source_options`), or at most ``tasks`` (each task is a Python worker round trip every
    micro-batch: on small batches the round trips, not the records, take the time)."""
    records = spark.readStream.format("kafka").options(**options).load()
    return decoded(records if tasks is None else records.coalesce(tasks), tables)


def decoded(records: DataFrame, tables: Tables) -> DataFrame:
    """Kafka source rows (``topic``, ``partition``, ``offset``, ``value``) as :data:`SCHEMA` rows, decoded
    in the executors' Python workers."""
    return records.select("topic", "partition", "offset", "value").mapInArrow(decoder(tables), SCHEMA)


def decoder(tables: Tables) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: each Arrow batch of records → one batch of :data:`SCHEMA` rows."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = to_arrow_schema(SCHEMA, timezone="UTC")
        for batch in batches:
            columns = (batch.column(name).to_pylist() for name in ("topic", "partition", "offset", "value"))
            by_topic: dict[str, list] = {}
            for topic, partition, offset, value in zip(*columns, strict=True):
                by_topic.setdefault(topic, []).append((value, partition, offset))
            for topic, records in by_topic.items():
                yield to_record_batch(records, topic, schema, tables)

    return decode

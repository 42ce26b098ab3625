"""A key's rows in the executors' Python worker (pandas, as ``applyInPandasWithState`` hands them over) →
the observations its analysis gets.

No Spark session: the frame is built from the Kafka source's own rows (``records.to_record_batch``) with
the columns ``stateful.analyzed`` selects, maps as dicts as PySpark converts them.
"""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from common.contract import Batch, Event, Sample, encode
from spark_jobs.analysis import Observation
from spark_jobs.kafka_source import SCHEMA
from spark_jobs.records import RECORD, to_record_batch
from spark_jobs.stateful import observations

SHRINK = {"topic": "orders", "partition": 2, "old_isr": [1, 2, 3], "new_isr": [1, 3], "leader": 1,
          "leader_epoch": 4, "change": "shrink"}  # fmt: skip
RECORDS = [
    Batch("prod", "admin/offsets", 1_732_270_000_000, (
        Sample("kafka_partition_end_offset", {"topic": "orders", "partition": "0"}, 100),
        Sample("kafka_partition_end_offset", {"topic": "orders", "partition": "1"}, math.inf),
    )),
    Batch("prod", "zookeeper/isr", 1_732_270_001_000, (), (Event("isr_change", 1_732_270_000_500, SHRINK),)),
    Batch("prod", "exporter/broker-1", 1_732_270_002_000, (
        Sample("kafka_broker_partitions", {"broker": "1"}, 7),
    )),
]  # fmt: skip


def collected() -> pd.DataFrame:
    """The samples and events of ``RECORDS`` (no dead letter, no records' own rows: those go to the
    health key)."""
    values = [*(encode(b) for b in RECORDS[:2]), b"{not json", encode(RECORDS[2])]
    batch = to_record_batch(
        [(v, 0, i) for i, v in enumerate(values)], "kobs.metrics", to_arrow_schema(SCHEMA, timezone="UTC")
    )
    table = pa.Table.from_batches([batch])
    t_s = pc.divide(pc.cast(pc.cast(table["ts"], pa.int64()), pa.float64()), 1e6)
    own = pc.or_(pc.equal(table["name"], RECORD), pc.is_valid(table["dead_letter"]))
    table = table.select(["name", "cluster", "source", "labels", "value", "event"]).append_column("t_s", t_s)
    table = table.filter(pc.invert(own))
    return table.to_pandas(maps_as_pydicts="strict")


EXPECTED = [
    Observation("kafka_partition_end_offset", "prod", "admin/offsets", {"topic": "orders", "partition": "0"},
                1_732_270_000.0, 100.0, None),
    Observation("kafka_partition_end_offset", "prod", "admin/offsets", {"topic": "orders", "partition": "1"},
                1_732_270_000.0, math.inf, None),
    Observation("isr_change", "prod", "zookeeper/isr", {}, 1_732_270_000.5, None, SHRINK),
    Observation("kafka_broker_partitions", "prod", "exporter/broker-1", {"broker": "1"}, 1_732_270_002.0, 7.0,
                None),
]  # fmt: skip


def test_samples_keep_their_labels_and_events_their_fields_and_own_time():
    assert list(observations(collected())) == EXPECTED


def test_a_frame_sliced_or_reindexed_gives_the_same_rows():
    rows = collected()
    assert list(observations(rows.iloc[1:])) == EXPECTED[1:]
    assert list(observations(rows.iloc[::-1].iloc[::-1])) == EXPECTED

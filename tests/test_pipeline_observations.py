"""A key's rows in the executors' Python worker (pandas frames, as ``applyInPandasWithState`` hands them
over, in any order) → the observations its analysis gets, in the order the records were read.

No Spark session: the frames are built from the Kafka source's own rows (``records.to_record_batch``) with
the columns ``stateful.analyzed`` selects; Spark's own state object is exercised by the streaming tests
(``test_stream_restart``, ``test_stream_standalone``), here a three-method stand-in holds the state.
"""

from __future__ import annotations

import math
import pickle

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from common.contract import Batch, Event, Sample, encode
from spark_jobs.analysis import Evaluation, Observation
from spark_jobs.kafka_source import SCHEMA
from spark_jobs.records import to_record_batch
from spark_jobs.snapshots import decompressed
from spark_jobs.stateful import stepper

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
EXPECTED = [
    Observation("kafka_partition_end_offset", "prod", "admin/offsets", {"topic": "orders", "partition": "0"},
                1_732_270_000.0, 100.0, None),
    Observation("kafka_partition_end_offset", "prod", "admin/offsets", {"topic": "orders", "partition": "1"},
                1_732_270_000.0, math.inf, None),
    Observation("isr_change", "prod", "zookeeper/isr", {}, 1_732_270_000.5, None, SHRINK),
    Observation("kafka_broker_partitions", "prod", "exporter/broker-1", {"broker": "1"}, 1_732_270_002.0, 7.0,
                None),
]  # fmt: skip


class Recording:
    """An analysis that keeps what it observed, in order."""

    table, settings = "recording", ()
    history_schema = pa.schema([("seen", pa.string())])
    inputs = frozenset({"kafka_partition_end_offset", "isr_change", "kafka_broker_partitions"})
    chunked = frozenset()

    def __init__(self):
        self.seen: list[Observation] = []

    def observe(self, observations) -> None:
        self.seen += observations

    def evaluate(self) -> Evaluation:
        return Evaluation([{"seen": repr(self.seen)}])


class State:
    """Stands in for Spark's GroupState: exists, get, update."""

    def __init__(self):
        self.value = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value


def key_rows() -> pd.DataFrame:
    """The key ``(recording, prod)``'s rows of ``RECORDS`` (with a dead letter among them on the topic), as
    ``stateful.analyzed`` selects them."""
    values = [*(encode(b) for b in RECORDS[:2]), b"{not json", encode(RECORDS[2])]
    tables = dict.fromkeys(Recording.inputs, ("recording",))
    schema = to_arrow_schema(SCHEMA, timezone="UTC")
    batch = to_record_batch([(v, 0, i) for i, v in enumerate(values)], "t", schema, tables)
    table = pa.Table.from_batches([batch])
    table = table.filter(pc.equal(table["table"], "recording"))
    t_s = pc.divide(pc.cast(pc.cast(table["ts"], pa.int64()), pa.float64()), 1e6)
    return table.drop_columns(["ts"]).append_column("t_s", t_s).to_pandas()


def test_a_keys_observations_come_in_the_order_read_whatever_order_the_shuffle_hands_them_in():
    rows = key_rows()
    shuffled = rows.iloc[[2, 0, 1]]
    frames = [shuffled.iloc[:1], shuffled.iloc[1:]]  # in two frames, as Arrow batches of the shuffle
    state = State()
    (out,) = stepper(lambda: [Recording()])(("recording", "prod"), iter(frames), state)
    evaluation = pickle.loads(decompressed(out["payload"][0]))
    assert evaluation.history == [{"seen": repr(EXPECTED)}]
    assert pickle.loads(decompressed(state.value[0])).seen == EXPECTED  # the state kept for the next batch

    (out,) = stepper(lambda: [Recording()])(("recording", "prod"), iter([rows.iloc[:1]]), state)
    assert pickle.loads(decompressed(state.value[0])).seen == [*EXPECTED, *EXPECTED[:2]]  # resumed from it

"""The app's Parquet history reader against what Spark really writes, and its empty and partial cases."""

from __future__ import annotations

import pandas as pd
import pytest
from app_data import write_batch

from app.history import batch_ids, read_history


def test_missing_or_empty_table_reads_as_no_rows(tmp_path):
    assert read_history(tmp_path / "nowhere", "lag").empty
    (tmp_path / "lag").mkdir()
    assert read_history(tmp_path, "lag").empty and batch_ids(tmp_path, "lag") == []


def test_reads_committed_batches_in_order_and_skips_one_being_written(tmp_path):
    for batch in (2, 10, 1):
        write_batch(tmp_path, "lag", batch, {"group": ["g"], "lag_messages": [batch * 100]})
    write_batch(tmp_path, "lag", 11, {"group": ["g"], "lag_messages": [-1]}, committed=False)
    assert batch_ids(tmp_path, "lag") == [1, 2, 10]  # numeric order, not 1, 10, 2
    everything = read_history(tmp_path, "lag").sort_values("batch_id")
    assert list(everything["lag_messages"]) == [100, 200, 1000]
    newest = read_history(tmp_path, "lag", last=1)
    assert list(newest["batch_id"]) == [10] and list(newest["lag_messages"]) == [1000]
    assert len(read_history(tmp_path, "lag", last=2)) == 2
    assert read_history(tmp_path, "lag", last=0).empty


@pytest.mark.spark
def test_reads_what_a_spark_job_writes_per_batch_id(spark, tmp_path):
    # Written the way spark_jobs/lag.py writes its history: overwrite per batch id, one directory each.
    for batch, lag in ((0, 5), (1, 7)):
        frame = spark.createDataFrame([("billing", "0", lag)], "group string, partition string, lag long")
        frame.write.mode("overwrite").parquet(str(tmp_path / "lag" / f"batch_id={batch}"))
    spark.createDataFrame([("billing", "0", 9)], "group string, partition string, lag long").write.mode(
        "overwrite"
    ).parquet(str(tmp_path / "lag" / "batch_id=1"))  # a batch replayed after a crash replaces its rows
    rows = read_history(tmp_path, "lag")
    assert sorted(zip(rows["batch_id"], rows["lag"], strict=True)) == [(0, 5), (1, 9)]
    assert isinstance(rows, pd.DataFrame) and list(read_history(tmp_path, "lag", last=1)["lag"]) == [9]

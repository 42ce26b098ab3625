"""Read the Parquet history the Spark jobs write, one table at a time, as pandas.

Layout: ``<history_dir>/<table>/batch_id=<N>/part-*.parquet``; each batch id is written whole by Spark,
which drops a ``_SUCCESS`` marker when the write is committed. Batches without the marker are being
(over)written right now and are left out, so a page never shows half a batch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

BATCH = "batch_id"


def batch_ids(history_dir: str | Path, table: str) -> list[int]:
    """Committed batch ids of ``table``, oldest first; empty when the table does not exist yet."""
    root = Path(history_dir) / table
    if not root.is_dir():
        return []
    ids = []
    for child in root.glob(f"{BATCH}=*"):
        suffix = child.name.partition("=")[2]
        if suffix.isdigit() and (child / "_SUCCESS").exists():
            ids.append(int(suffix))
    return sorted(ids)


def read_history(history_dir: str | Path, table: str, last: int | None = None) -> pd.DataFrame:
    """Rows of the newest ``last`` committed batches of ``table`` (all when None) plus a ``batch_id``
    column; an empty frame when there are none."""
    ids = batch_ids(history_dir, table)
    if last is not None:
        ids = ids[-last:] if last > 0 else []
    root = Path(history_dir) / table
    files = [str(f) for i in ids for f in sorted((root / f"{BATCH}={i}").glob("*.parquet"))]
    if not files:
        return pd.DataFrame(columns=[BATCH])
    partitioning = ds.partitioning(pa.schema([(BATCH, pa.int64())]), flavor="hive")
    dataset = ds.dataset(files, format="parquet", partitioning=partitioning, partition_base_dir=str(root))
    return dataset.to_table().to_pandas()

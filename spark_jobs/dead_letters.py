"""The Kafka source's dead letters (records that failed the contract), kept aside with their reason."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def dead_letters(rows: DataFrame) -> DataFrame:
    """The records that failed the contract: reason, where they came from, and their bytes."""
    return rows.where(F.col("dead_letter").isNotNull()).select(
        F.col("dead_letter").alias("reason"), "topic", "partition", "offset", "raw"
    )


def write_dead_letters(rows: DataFrame, batch_id: int, directory: str | Path) -> int:
    """Write one micro-batch's dead letters as JSON under ``directory/batch=<id>`` and return how many.

    Overwrites that batch's directory, so a batch replayed after a crash writes the same files once.
    ``rows`` is read twice: persist it in ``foreachBatch`` to read Kafka only once.
    """
    dead = dead_letters(rows)
    count = dead.count()
    if count:
        dead.write.mode("overwrite").json(str(Path(directory) / f"batch={batch_id}"))
    return count

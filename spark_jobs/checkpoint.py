"""The query's checkpoint (``sinks.checkpoint_dir/stream``): checked before Spark reads it, set aside on
request, and where a new one numbers its history.

Spark resumes a query from its checkpoint: the query's id (``metadata``, JSON), the planned and the
committed micro-batches (``offsets/N`` and ``commits/N``: a version line such as ``v1``, then JSON lines; a
restart reads the latest of each), the Kafka source's first offsets (``sources/0/0``) and the analyses'
state store (``state/``). A file there that cannot be read fails every start the same way, so ``kobs
stream`` refuses such a checkpoint in one line (:class:`CheckpointError`) naming the file and the way out,
before Spark starts (:func:`check_resumable`), or once Spark says it cannot load the state store
(:data:`STATE_STORE_FAILED`):
``kobs stream --reset-state`` moves the checkpoint aside (:func:`set_aside`; nothing is deleted) and the
query starts over from the metrics topic's earliest record.

The history is written per micro-batch (``<table>/batch_id=<N>``) and Spark numbers a new checkpoint's
batches from 0 again, so a new checkpoint numbers its history after the highest batch already written
(:func:`history_base`): the history of the checkpoint before it is kept, and stays older.

The offsets log also says how many records a micro-batch was planned to read (:func:`planned_records`):
on the metrics topic offsets are dense (the collectors' idempotent producers write no transaction markers),
so a batch that read fewer lost the rest to retention before the stream got to them.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from common.config import ConfigError

# Spark's error class for a state store it cannot load (a changelog or snapshot cut short or corrupt)
STATE_STORE_FAILED = "[CANNOT_LOAD_STATE_STORE."
HISTORY_BASE = "history_base.json"  # in the checkpoint: the history's batch number of Spark's batch 0
_VERSION = re.compile(r"\x00?v\d+\Z")  # Spark's metadata logs open with their format's version
_BATCH = re.compile(r"batch_id=(\d+)\Z")


class CheckpointError(ConfigError):
    """A checkpoint Spark cannot resume; ``str()`` is one line naming it and the way out."""

    def __init__(self, checkpoint: Path, why: str):
        super().__init__(
            f"checkpoint error: {why}; kobs stream cannot resume from {checkpoint}: run kobs stream "
            "--reset-state to set it aside and start over from the metrics topic's earliest record (the "
            "history is kept)"
        )


def check_resumable(checkpoint: Path) -> None:
    """Raise :class:`CheckpointError` for a checkpoint Spark could not resume: one with committed batches
    and no state store (written by a version that kept the analyses' state in the driver), or whose id,
    latest planned or committed batch or source offsets cannot be read."""
    if any((checkpoint / "commits").glob("[0-9]*")) and not (checkpoint / "state").is_dir():
        raise CheckpointError(checkpoint, "it has committed batches but no state store (an older kobs)")
    logs = [*(checkpoint / "sources").glob("*/0")]
    logs += [latest for log in ("offsets", "commits") if (latest := latest_batch(checkpoint / log))]
    files = [(checkpoint / "metadata", False), *((path, True) for path in logs)]
    for path, versioned in files:
        why = unreadable(path, versioned) if path.is_file() else None
        if why:
            raise CheckpointError(checkpoint, f"{path}: {why}")


def latest_batch(log: Path) -> Path | None:
    """The file of the highest batch in one of Spark's metadata logs (``offsets``, ``commits``)."""
    batches = [path for path in log.glob("[0-9]*") if path.name.isdigit()]
    return max(batches, key=lambda path: int(path.name), default=None)


def unreadable(path: Path, versioned: bool) -> str | None:
    """Why Spark could not read ``path`` (None: it can): not UTF-8, no version line (``versioned``), a
    line not JSON."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        return f"not text (byte {exc.start} is not UTF-8)"
    if versioned:
        if not lines or not _VERSION.match(lines[0]):
            return "no version line (v1) at its start"
        lines = lines[1:]
    if not lines:
        return "empty"
    for number, line in enumerate(lines, start=2 if versioned else 1):
        try:
            json.loads(line)
        except ValueError:
            return f"line {number} is not JSON"
    return None


def set_aside(checkpoint: Path) -> Path | None:
    """Rename ``checkpoint`` to ``<name>.set-aside-<UTC time>`` beside it (None: there was none)."""
    if not checkpoint.exists():
        return None
    aside = checkpoint.with_name(
        f"{checkpoint.name}.set-aside-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    )
    checkpoint.rename(aside)
    return aside


def history_base(checkpoint: Path, history_dir: Path) -> int:
    """The history batch number of Spark's batch 0 in ``checkpoint``: the one it stored, else (a new
    checkpoint) one after the highest ``batch_id`` of any table under ``history_dir``, stored. A checkpoint
    with committed batches and none stored keeps 0 (its history is numbered as Spark numbers it)."""
    stored = checkpoint / HISTORY_BASE
    if stored.exists():
        return int(json.loads(stored.read_text())["base"])
    written = (match[1] for path in history_dir.glob("*/batch_id=*") if (match := _BATCH.match(path.name)))
    fresh = not any((checkpoint / "commits").glob("[0-9]*"))
    base = 1 + max(map(int, written), default=-1) if fresh else 0
    checkpoint.mkdir(parents=True, exist_ok=True)
    staged = stored.with_suffix(".tmp")
    staged.write_text(json.dumps({"base": base}))
    staged.replace(stored)
    return base


def planned_partitions(checkpoint: Path) -> int | None:
    """The state partitions of the checkpoint's latest planned micro-batch (None: none planned yet)."""
    latest = latest_batch(checkpoint / "offsets")
    if latest is None:
        return None
    return int(json.loads(latest.read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"])


def planned_records(checkpoint: Path, batch_id: int) -> int | None:
    """Offsets micro-batch ``batch_id`` was planned to read from the Kafka source: its end offsets (its
    line of the offsets log) less its start (the batch before's end; for batch 0 the source's first
    offsets), summed over the partitions both name (a partition new to the batch is read from its first
    record, which no log names). None when either file is gone."""
    end = _source_offsets(checkpoint / "offsets" / str(batch_id), skip=2)
    before = checkpoint / "offsets" / str(batch_id - 1) if batch_id else checkpoint / "sources" / "0" / "0"
    start = _source_offsets(before, skip=2 if batch_id else 1)
    if end is None or start is None:
        return None
    return sum(offset - start[key] for key, offset in end.items() if key in start)


def _source_offsets(path: Path, skip: int) -> dict[tuple[str, str], int] | None:
    """(topic, partition) -> offset from the Kafka source's JSON line after ``skip`` lines of ``path``."""
    try:
        line = path.read_text(encoding="utf-8").splitlines()[skip]
    except (OSError, IndexError):
        return None
    return {(t, p): o for t, offsets in json.loads(line).items() for p, o in offsets.items()}

"""Snapshots of the analyses' state keyed by micro-batch id, so a restarted query resumes exactly.

Spark replays the batch it had not committed with the same id and the same offsets. Restoring the state
saved after the batch before it, then processing the replayed batch again, gives exactly the state and the
answers an uninterrupted run would have had. The last ``keep`` snapshots stay (a crash can come after a
snapshot is written but before Spark commits its batch, so the one before it is needed too).
"""

from __future__ import annotations

import logging
import os
import pickle
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
_NAME = re.compile(r"batch-(\d+)\.pickle\Z")


class Pickled:
    """An object's pickle, taken once: it pickles as those bytes and unpickles as the object, so a snapshot
    need not walk again the state of an analysis no batch has fed since the last one."""

    def __init__(self, obj: Any):
        self.data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def __reduce__(self) -> tuple:
        return pickle.loads, (self.data,)


class Snapshots:
    def __init__(self, directory: str | Path, keep: int = 2):
        self.directory = Path(directory)
        self.keep = keep

    def save(self, batch_id: int, state: Any) -> None:
        """Write the state after ``batch_id`` atomically (a crash leaves the old snapshot or the new one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"batch-{batch_id}.pickle"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            pickle.dump(state, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        for old in self._ids()[: -self.keep]:
            (self.directory / f"batch-{old}.pickle").unlink(missing_ok=True)

    def before(self, batch_id: int) -> tuple[int, Any] | None:
        """The newest snapshot taken before ``batch_id`` as ``(its batch id, state)``, or None."""
        earlier = [i for i in self._ids() if i < batch_id]
        if not earlier:
            return None
        with open(self.directory / f"batch-{earlier[-1]}.pickle", "rb") as snapshot:
            return earlier[-1], pickle.load(snapshot)

    def latest(self) -> tuple[int, Any] | None:
        """The newest snapshot as ``(its batch id, state)``, or None."""
        ids = self._ids()
        return self.before(ids[-1] + 1) if ids else None

    def _ids(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(m[1]) for p in self.directory.iterdir() if (m := _NAME.match(p.name)))

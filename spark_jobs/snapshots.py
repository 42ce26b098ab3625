"""Snapshots of the analyses' state keyed by micro-batch id, so a restarted query resumes exactly.

Spark replays the batch it had not committed with the same id and the same offsets. Restoring the state
saved after the batch before it, then processing the replayed batch again, gives exactly the state and the
answers an uninterrupted run would have had. The last ``keep`` snapshots stay (a crash can come after a
snapshot is written but before Spark commits its batch, so the one before it is needed too).

A snapshot is read back as data, never as code: the unpickler builds only the classes of the analyses'
own modules and a few containers (:class:`StateUnpickler`), so a file planted in the run directory cannot
run anything. A snapshot that cannot be read (cut short by a full disk, planted, from an incompatible
version) is skipped with a warning for the one before it; with none readable the analyses start empty.
"""

from __future__ import annotations

import contextvars
import io
import logging
import os
import pickle
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)
_NAME = re.compile(r"batch-(\d+)\.pickle\Z")


# The modules whose classes make up the analyses' state (an analysis of another module adds its own).
STATE_MODULES = frozenset(
    f"spark_jobs.{name}"
    for name in (
        "analysis", "lag", "lag_tracker", "lag_windows", "lag_status", "replication", "isr_ledger",
        "maintenance", "flapping", "throughput", "rates", "producers", "pipeline_health", "brokers", "quorum",
        "disks",
    )
)  # fmt: skip
CONTAINERS = {
    ("collections", "defaultdict"), ("collections", "deque"), ("collections", "Counter"),
    ("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "list"),
    ("builtins", "dict"), ("builtins", "tuple"), ("builtins", "float"), ("builtins", "int"),
    ("builtins", "object"), ("copyreg", "_reconstructor"),
}  # fmt: skip
_MODULES: contextvars.ContextVar[Collection[str]] = contextvars.ContextVar("modules", default=STATE_MODULES)


class StateUnpickler(pickle.Unpickler):
    """Builds only :data:`CONTAINERS` and the classes (not functions) of ``modules``."""

    def __init__(self, data: bytes, modules: Collection[str]):
        super().__init__(io.BytesIO(data))
        self.modules = modules

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (__name__, "_nested"):
            return _nested
        if (module, name) in CONTAINERS:
            return super().find_class(module, name)
        if module in self.modules:
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of the analyses' state")


# A compressed pickle starts with this, then its uncompressed size (8 bytes, little-endian), then zstd's data.
COMPRESSED = b"kobs-zstd\n"
ZSTD = pa.Codec("zstd", compression_level=1)


def dump_state(obj: Any) -> bytes:
    """An analysis's state (or evaluation) as :func:`load_state` reads it: pickled, then compressed with zstd,
    level 1. The analyses' pickles shrink 10-30 times in about a millisecond a megabyte (the benchmark's lag
    state: 2.6 MB -> 165 kB in 1.4 ms); Spark's JVM copies each state and evaluation between the state store
    and the Python workers every micro-batch."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return COMPRESSED + len(data).to_bytes(8, "little") + ZSTD.compress(data, asbytes=True)


def decompressed(data: bytes) -> bytes:
    """The pickle in :func:`dump_state`'s bytes; anything else as it is (state an earlier version stored)."""
    if not data.startswith(COMPRESSED):
        return data
    size = int.from_bytes(data[len(COMPRESSED) : len(COMPRESSED) + 8], "little")
    return ZSTD.decompress(data[len(COMPRESSED) + 8 :], decompressed_size=size, asbytes=True)


def load_state(data: bytes, modules: Collection[str] = STATE_MODULES) -> Any:
    """Unpickle a snapshot's or :func:`dump_state`'s bytes with :class:`StateUnpickler` (nested
    :class:`Pickled` parts too)."""
    token = _MODULES.set(modules)
    try:
        return StateUnpickler(decompressed(data), modules).load()
    finally:
        _MODULES.reset(token)


def _nested(data: bytes) -> Any:
    return StateUnpickler(decompressed(data), _MODULES.get()).load()


class Pickled:
    """An object's :func:`dump_state` bytes, taken once: it pickles as those bytes and unpickles as the
    object, so a snapshot need not walk again an evaluation no batch has changed since the last one, nor
    one whose bytes came from the executor that made it."""

    def __init__(self, data: bytes):
        self.data = data

    @classmethod
    def of(cls, obj: Any) -> Pickled:
        return cls(dump_state(obj))

    def __reduce__(self) -> tuple:
        return _nested, (self.data,)


class Snapshots:
    def __init__(self, directory: str | Path, keep: int = 2, modules: Collection[str] = STATE_MODULES):
        self.directory = Path(directory)
        self.keep = keep
        self.modules = modules  # whose classes a snapshot may hold

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
        """The newest readable snapshot taken before ``batch_id`` as ``(its batch id, state)``, or None."""
        for earlier in reversed([i for i in self._ids() if i < batch_id]):
            path = self.directory / f"batch-{earlier}.pickle"
            try:
                return earlier, load_state(path.read_bytes(), self.modules)
            except Exception as exc:  # whatever a cut-short or foreign pickle raises: EOFError, KeyError, ...
                kind = type(exc).__name__
                log.warning("state snapshot %s cannot be read (%s: %s): skipped", path, kind, exc)
        return None

    def latest(self) -> tuple[int, Any] | None:
        """The newest snapshot as ``(its batch id, state)``, or None."""
        ids = self._ids()
        return self.before(ids[-1] + 1) if ids else None

    def _ids(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(m[1]) for p in self.directory.iterdir() if (m := _NAME.match(p.name)))

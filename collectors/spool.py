"""A size-capped, on-disk FIFO of encoded records: where the publisher parks batches Kafka cannot take.

Records live in numbered segment files (``000000000001.spool``, ...), each a run of frames
``[key length, value length, item count]`` (three big-endian uint32) followed by key and value. New records
are appended to the newest segment; the publisher replays the oldest segment and then either deletes it or
rewrites it with the records that were not delivered, so order is kept and nothing is replayed twice.
Segments survive a restart of the process; a frame cut short by a crash is ignored. A full disk refuses an
append as the size cap does (``full`` says so), and the segment is cut back to its last whole frame.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO, NamedTuple

_FRAME = struct.Struct(">III")
_SUFFIX = ".spool"


class Record(NamedTuple):
    """One Kafka record of the metrics topic and how many samples and events it carries."""

    key: bytes
    value: bytes
    items: int

    @property
    def size(self) -> int:
        return _FRAME.size + len(self.key) + len(self.value)


def _frame(record: Record) -> bytes:
    return _FRAME.pack(len(record.key), len(record.value), record.items) + record.key + record.value


def read_segment(path: Path) -> list[Record]:
    """Every complete frame of one segment file, in order."""
    data = path.read_bytes()
    records, at = [], 0
    while at + _FRAME.size <= len(data):
        key_len, value_len, items = _FRAME.unpack_from(data, at)
        start = at + _FRAME.size
        end = start + key_len + value_len
        if end > len(data):
            break
        records.append(Record(data[start : start + key_len], data[start + key_len : end], items))
        at = end
    return records


class Spool:
    """FIFO of :class:`Record` in ``directory``, at most ``max_bytes`` on disk (appends beyond are refused).

    ``bytes`` and ``items`` (samples plus events) track what it holds, including what an earlier run left.
    """

    def __init__(self, directory: Path, max_bytes: int, segment_bytes: int = 1 << 20):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._tail: BinaryIO | None = None  # unbuffered: a failed write leaves nothing held back
        self._tail_path: Path | None = None
        self.full = False  # the last append found no room on the disk
        segments = self._segments()
        self._next = int(segments[-1].stem) + 1 if segments else 1
        self.bytes = sum(p.stat().st_size for p in segments)
        self.items = sum(r.items for p in segments for r in read_segment(p))  # left by an earlier run

    def _segments(self) -> list[Path]:
        return sorted(self.directory.glob(f"*{_SUFFIX}"))

    @property
    def empty(self) -> bool:
        return self.bytes == 0

    def append(self, record: Record) -> bool:
        """Write one record at the tail; False (nothing written) when it would exceed ``max_bytes`` or the
        disk has no room for it (then ``full``)."""
        if self.bytes + record.size > self.max_bytes:
            return False
        try:
            if self._tail is None or self._tail.tell() >= self.segment_bytes:
                self._seal()
                self._tail_path = self.directory / f"{self._next:012d}{_SUFFIX}"
                self._next += 1
                self._tail = open(self._tail_path, "ab", buffering=0)  # noqa: SIM115 - kept open across appends
            at = self._tail.tell()
            try:
                self._tail.write(_frame(record))  # a FileIO: one write(2); it may write a part only
                written = self._tail.tell() - at
            except OSError:
                written = -1
            if written != record.size:
                self._tail.truncate(at)  # the frame cut short is cut off: the segment stays whole
                self._tail.seek(at)
                raise OSError("no room for a whole frame")
        except OSError:
            self.full = True
            return False
        self.full = False
        self.bytes += record.size
        self.items += record.items
        return True

    def head(self) -> list[Record]:
        """The records of the oldest segment (sealing it if it is still being appended to)."""
        segments = self._segments()
        if not segments:
            return []
        if segments[0] == self._tail_path:
            self._seal()
        return read_segment(segments[0])

    def commit_head(self, remaining: list[Record]) -> None:
        """Replace the oldest segment by ``remaining`` (its undelivered records), deleting it when none. With
        no room for the rewrite the segment is kept whole: its delivered records go again (at least once,
        which the contract allows)."""
        path = self._segments()[0]
        before, held = path.stat().st_size, sum(r.items for r in read_segment(path))
        if remaining:
            tmp = path.with_suffix(".tmp")
            try:
                tmp.write_bytes(b"".join(map(_frame, remaining)))
            except OSError:
                tmp.unlink(missing_ok=True)
                self.full = True
                return
            os.replace(tmp, path)
            self.bytes += path.stat().st_size - before
        else:
            path.unlink()
            self.bytes -= before
        self.items -= held - sum(r.items for r in remaining)

    def close(self) -> None:
        self._seal()

    def _seal(self) -> None:
        if self._tail is not None:
            self._tail.close()
        self._tail = self._tail_path = None

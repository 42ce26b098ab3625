"""Planning a micro-batch of the Kafka source: pure functions over offsets, no Kafka or Spark calls.

The stream offset Spark checkpoints is a JSON object (``SourceOffset.to_json``)::

    {"topic_id": "…", "offsets": {"0": 120, "1": 98}, "starts": {"2": 0}, "resets": 1}

``offsets`` holds, per partition, the next offset to read (exclusive end of the batch). ``starts`` names the
partitions whose batch does *not* begin at the previous batch's end: a partition first seen in this batch
(read from its log start) or one reset because its position no longer exists (the topic was recreated,
or retention deleted records the query had not read). Keeping that in the end offset makes a batch's
input a pure function of (start, end), so replaying a batch after a crash reads the same records.
``resets`` counts resets over the life of the query (visible in the query progress).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

log = logging.getLogger(__name__)

Watermarks = Mapping[int, tuple[int, int]]  # partition -> (log start offset, end offset)


@dataclass(frozen=True)
class SourceOffset:
    topic_id: str = ""
    offsets: dict[int, int] = field(default_factory=dict)
    starts: dict[int, int] = field(default_factory=dict)
    resets: int = 0

    def to_json(self) -> dict:
        return {
            "topic_id": self.topic_id,
            "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
            "starts": {str(p): o for p, o in sorted(self.starts.items())},
            "resets": self.resets,
        }

    @classmethod
    def from_json(cls, doc: Mapping) -> SourceOffset:
        return cls(
            topic_id=doc.get("topic_id", ""),
            offsets={int(p): int(o) for p, o in doc.get("offsets", {}).items()},
            starts={int(p): int(o) for p, o in doc.get("starts", {}).items()},
            resets=int(doc.get("resets", 0)),
        )


def initial_offset(topic_id: str, watermarks: Watermarks, starting: str) -> SourceOffset:
    """Where a new query begins: every partition's log start (``earliest``) or end (``latest``)."""
    if starting not in ("earliest", "latest"):
        raise ValueError(f"startingOffsets must be 'earliest' or 'latest', not {starting!r}")
    pick = 0 if starting == "earliest" else 1
    return SourceOffset(topic_id, {p: marks[pick] for p, marks in watermarks.items()})


def next_offset(
    start: SourceOffset, topic_id: str, watermarks: Watermarks, max_records: int | None = None
) -> SourceOffset:
    """The end of the next batch: all records up to the end offsets, at most ``max_records`` in total.

    A changed topic id (the topic was deleted and created again) restarts every partition from its log
    start; a position beyond the end offset (recreated, where the broker has no topic ids) or below the
    log start (deleted by retention) restarts that partition from its log start. Each reset is logged
    and counted. Returns ``start`` itself when there is nothing new.
    """
    recreated = bool(start.topic_id and topic_id and topic_id != start.topic_id)
    if recreated:
        log.warning("topic id changed %s -> %s: the topic was recreated; reading it from the start",
                    start.topic_id, topic_id)  # fmt: skip
    starts: dict[int, int] = {}
    resets = start.resets + recreated
    for partition, (low, high) in sorted(watermarks.items()):
        position = start.offsets.get(partition)
        if position is None or recreated:
            starts[partition] = low
        elif not low <= position <= high:
            cause = "recreated topic or truncated log" if position > high else "records deleted by retention"
            log.warning(
                "partition %d: offset %d out of range [%d, %d] (%s); resuming at %d, %d records skipped",
                partition, position, low, high, cause, low, max(0, low - position),
            )  # fmt: skip
            starts[partition] = low
            resets += 1
    begin = {p: starts.get(p, start.offsets.get(p, low)) for p, (low, _) in watermarks.items()}
    available = {p: max(0, watermarks[p][1] - begin[p]) for p in begin}
    take = share_limit(available, max_records)
    offsets = {**start.offsets, **{p: begin[p] + take[p] for p in begin}}
    if offsets == start.offsets and not starts and topic_id == start.topic_id:
        return start
    return SourceOffset(topic_id or start.topic_id, offsets, starts, resets)


def share_limit(available: Mapping[int, int], limit: int | None) -> dict[int, int]:
    """Records to take per partition: all, or ``limit`` shared in proportion to what each has waiting."""
    total = sum(available.values())
    if limit is None or total <= limit:
        return dict(available)
    take = {p: n * limit // total for p, n in available.items()}
    by_remainder = sorted(available, key=lambda p: (-(available[p] * limit % total), p))
    for p in by_remainder[: limit - sum(take.values())]:
        take[p] += 1
    return take


def contiguous_groups(sizes: list[int], groups: int | None) -> list[list[int]]:
    """Indexes of ``sizes`` cut into at most ``groups`` runs of neighbours with about equal sums.

    The source's read tasks: each costs PySpark a set-up in a Python worker, so a batch needs no more
    than the cluster has cores; runs of neighbours keep the rows in partition order. Each cut goes where
    the sum before it is nearest its share of the total. ``None``: one run each.
    """
    if groups is None or groups >= len(sizes):
        return [[i] for i in range(len(sizes))]
    before = list(accumulate(sizes, initial=0))  # before[i]: the sum of sizes[:i]
    total, cuts = before[-1], [0]
    for j in range(1, groups):
        share = total * j / groups
        room = range(cuts[-1] + 1, len(sizes) - groups + j + 1)  # every run keeps one item at least
        cuts.append(min(room, key=lambda i: abs(before[i] - share)))
    cuts.append(len(sizes))
    return [list(range(a, b)) for a, b in pairwise(cuts)]

"""A broker's batching of ISR-change notifications (``ReplicaManager.maybePropagateIsrChanges``).

Changes made by a partition leader are collected; every 2.5 s the broker writes one notification with all
of them, but only when the last change is more than 5 s old or the last write more than 60 s old.
"""

from __future__ import annotations

from dataclasses import dataclass

CHECK_INTERVAL_S = 2.5
QUIET_S = 5.0
MAX_DELAY_S = 60.0


@dataclass(frozen=True)
class IsrNotification:
    ts: float
    broker: int
    partitions: tuple[tuple[str, int], ...]


class IsrChangeBatcher:
    def __init__(self, broker: int, started_at: float):
        self.broker = broker
        self._pending: dict[tuple[str, int], None] = {}  # insertion-ordered set
        self._last_change = started_at
        self._last_write = started_at
        self._next_check = started_at + CHECK_INTERVAL_S

    def record(self, topic: str, partition: int, now: float) -> None:
        self._pending[(topic, partition)] = None
        self._last_change = now

    def due(self, now: float) -> IsrNotification | None:
        """The notification to write at ``now``, if the schedule and the 5 s / 60 s rule say so."""
        if now < self._next_check:
            return None
        while self._next_check <= now:
            self._next_check += CHECK_INTERVAL_S
        quiet = self._last_change + QUIET_S < now
        overdue = self._last_write + MAX_DELAY_S < now
        if not self._pending or not (quiet or overdue):
            return None
        note = IsrNotification(now, self.broker, tuple(self._pending))
        self._pending.clear()
        self._last_write = now
        return note

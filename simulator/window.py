"""A sliding time window of per-step amounts, for client rates such as ``record-send-rate``."""

from __future__ import annotations

from collections import deque

WINDOW_S = 30.0


class Window:
    def __init__(self, span_s: float = WINDOW_S):
        self.span_s = span_s
        self._steps: deque[tuple[float, float, float]] = deque()  # (end time, duration, amount)
        self._time = 0.0
        self._amount = 0.0

    def add(self, now: float, dt: float, amount: float) -> None:
        self._steps.append((now, dt, amount))
        self._time += dt
        self._amount += amount
        while self._steps and self._steps[0][0] <= now - self.span_s:
            _, old_dt, old_amount = self._steps.popleft()
            self._time -= old_dt
            self._amount -= old_amount

    def rate(self) -> float:
        """Amount per second over the window (0 before any step)."""
        return self._amount / self._time if self._time > 0 else 0.0

"""Per-second rates of cumulative counters (``..._total`` samples), the way Prometheus' ``rate()`` reads them.

Pure (no Spark). Each series keeps its (time, value) points of the last ``window_s`` plus the one just before
(so the rate spans the whole window, and an interval longer than the window still gives one). The increase
over those points counts a drop as a counter reset (the broker restarted): the increase across it is the new
value, as in Prometheus. A series not scraped for ``stale_s`` is forgotten (a dead broker's meters are not
a current rate).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator
from itertools import pairwise


def increase(values: list[float]) -> float:
    """Increase of a counter over successive values; a drop is a reset to zero before the new value."""
    return sum(b - a if b >= a else b for a, b in pairwise(values))


class CounterRates:
    """Rates of many counter series, by key; add points in time order per key."""

    def __init__(self, window_s: float = 60.0, stale_s: float = 300.0):
        self.window_s, self.stale_s = window_s, stale_s
        self.points: dict[Hashable, deque[tuple[float, float]]] = {}

    def add(self, key: Hashable, t_s: float, value: float) -> None:
        points = self.points.get(key)
        if points is None:
            points = self.points[key] = deque()
        if points and t_s <= points[-1][0]:
            return  # a replayed or out-of-order scrape adds nothing
        points.append((t_s, value))
        while len(points) > 2 and points[1][0] <= t_s - self.window_s:
            points.popleft()

    def forget_stale(self, now_s: float) -> None:
        for key in [k for k, p in self.points.items() if p[-1][0] < now_s - self.stale_s]:
            del self.points[key]

    def rates(self) -> Iterator[tuple[Hashable, float]]:
        """(key, per-second rate) of every series with two points or more."""
        for key, points in self.points.items():
            if len(points) >= 2:
                span = points[-1][0] - points[0][0]
                yield key, increase([v for _, v in points]) / span

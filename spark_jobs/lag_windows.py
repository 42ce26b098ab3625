"""The last few observations of many series, held as arrays so a micro-batch's samples go in at once.

Pure (numpy only). The lag analysis keeps tens of thousands of windows (the last ten committed, end or start
offsets of every partition and group) and stores and restores them every micro-batch: as two arrays they
pickle as two byte strings and take a batch's samples with a few array operations, where a Python object
per window cost a Python call per window and per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np


class Windows:
    """The last ``size`` observations of each series, one per time (a time observed again takes the later
    value), oldest first; with a ``spacing_s``, about one per spacing (:meth:`add`).

    Row ``i`` holds the series ``keys[i]``; rows stay sorted by key. ``times`` and ``values`` are
    ``[rows, size]`` arrays filled from the right: a series' newest observation is in the last column and
    the columns before its oldest hold NaN times (and 0 values).
    """

    def __init__(self, size: int):
        self.size = size
        self.keys: list[tuple] = []
        self.rows: dict[Hashable, int] = {}
        self.times = np.full((0, size), np.nan)
        self.values = np.zeros((0, size), np.int64)

    def __getstate__(self) -> tuple:
        return self.size, self.keys, self.times.tobytes(), self.values.tobytes()

    def __setstate__(self, state: tuple) -> None:
        self.size, self.keys, times, values = state
        self.rows = _index(self.keys)
        self.times = np.frombuffer(times).reshape(-1, self.size).copy()
        self.values = np.frombuffer(values, np.int64).reshape(-1, self.size).copy()

    @classmethod
    def of(cls, size: int, series: dict[tuple, tuple[Sequence[float], Sequence[int]]]) -> Windows:
        """Windows holding each key's observations, given as (times, values) oldest first."""
        keys, times, values = [], [], []
        for key, (key_times, key_values) in series.items():
            keys += [key] * len(key_times)
            times += key_times
            values += key_values
        windows = cls(size)
        windows.add(keys, times, values)
        return windows

    def add(
        self, keys: Sequence[tuple], times: Sequence[float], values: Sequence[int], spacing_s: float = 0.0
    ) -> None:
        """Take observations (in the order they were read) of the series ``keys``. With ``spacing_s`` (the
        interval the series are scraped at), a series' newest observation gives way to a newer one less
        than 1.5 spacings after the observation before it: two collectors scraping the same series (an HA
        pair) fill a window no faster than one, and it spans as long."""
        if not keys:
            return
        rows = self._rows(keys)
        t = np.asarray(times, np.float64)
        v = np.asarray(values, np.int64)
        newer = ~(t <= self.times[rows, -1])  # than the series' newest (NaN: none yet)
        if not newer.all():
            self._merge(rows[~newer], t[~newer], v[~newer])  # late: put in place among the held
            rows, t, v = rows[newer], t[newer], v[newer]
        if len(np.unique(rows)) == len(rows):
            self._append(rows, t, v, 1.5 * spacing_s)  # the usual batch: one newer scrape of each series
            return
        order = np.lexsort((t, rows))  # stable: of equal times, the later read comes later
        rows, t, v = rows[order], t[order], v[order]
        rank = np.arange(len(rows)) - np.searchsorted(rows, rows)  # each one's place in its series' run
        for k in range(int(rank.max()) + 1):
            at = rank == k
            self._append(rows[at], t[at], v[at], 1.5 * spacing_s)

    def drop(self, gone: Callable[[tuple], bool]) -> None:
        """Forget the series whose key ``gone`` says."""
        kept = [i for i, key in enumerate(self.keys) if not gone(key)]
        if len(kept) < len(self.keys):
            self.keys = [self.keys[i] for i in kept]
            self.rows = _index(self.keys)
            self.times, self.values = self.times[kept], self.values[kept]

    def _rows(self, keys: Sequence[tuple]) -> np.ndarray:
        """The rows of ``keys``, adding those not seen before (all rows kept in key order)."""
        new = set(keys).difference(self.rows)
        if new:
            self._grow(list(new))
        return np.fromiter(map(self.rows.__getitem__, keys), np.int64, len(keys))

    def _grow(self, new: list[tuple]) -> None:
        keys = self.keys + new
        order = sorted(range(len(keys)), key=keys.__getitem__)
        empty = len(new), self.size
        self.keys = [keys[i] for i in order]
        self.rows = _index(self.keys)
        self.times = np.concatenate([self.times, np.full(empty, np.nan)])[order]
        self.values = np.concatenate([self.values, np.zeros(empty, np.int64)])[order]

    def _append(self, rows: np.ndarray, t: np.ndarray, v: np.ndarray, replace_within_s: float) -> None:
        """One observation, no older than its series' newest, for each of ``rows`` (distinct): it replaces
        the newest when their times are equal or it is within ``replace_within_s`` of the one before."""
        before = self.times[rows, -2] if self.size > 1 else np.full(len(rows), np.nan)
        shifted = rows[~((t == self.times[rows, -1]) | (t - before < replace_within_s))]
        for held, new in ((self.times, t), (self.values, v)):
            held[shifted, :-1] = held[shifted, 1:]
            held[rows, -1] = new

    def _merge(self, rows: np.ndarray, t: np.ndarray, v: np.ndarray) -> None:
        """The general case: per row, the held and new observations sorted by time, the later of equal
        times kept, the newest ``size`` of them."""
        touched = np.unique(rows)
        held = ~np.isnan(self.times[touched])
        all_rows = np.concatenate([np.broadcast_to(touched[:, None], held.shape)[held], rows])
        all_t = np.concatenate([self.times[touched][held], t])
        all_v = np.concatenate([self.values[touched][held], v])
        read = np.arange(len(all_t))  # held observations first, then the new ones as read
        order = np.lexsort((read, all_t, all_rows))
        all_rows, all_t, all_v = all_rows[order], all_t[order], all_v[order]
        later = np.ones(len(order), bool)  # the last of each (row, time)
        later[:-1] = (all_rows[1:] != all_rows[:-1]) | (all_t[1:] != all_t[:-1])
        all_rows, all_t, all_v = all_rows[later], all_t[later], all_v[later]
        from_newest = np.searchsorted(all_rows, all_rows, side="right") - 1 - np.arange(len(all_rows))
        kept = from_newest < self.size
        column = self.size - 1 - from_newest[kept]
        self.times[touched], self.values[touched] = np.nan, 0
        self.times[all_rows[kept], column] = all_t[kept]
        self.values[all_rows[kept], column] = all_v[kept]


def _index(keys: list[tuple]) -> dict[tuple, int]:
    return dict(zip(keys, range(len(keys)), strict=True))

"""Segments, retention, the page cache and per-broker disk and network limits.

- Segments: every message of a topic has the same size, so a segment of ``segment.bytes`` holds
  ``segment_bytes // message_bytes`` messages and segments start at multiples of that; the one holding the
  log end offset is the active segment.
- Retention, checked every ``log.retention.check.interval.ms`` as Kafka does: the oldest segment is deleted
  while the log without it still holds at least ``retention.bytes`` (per partition), or while its newest
  message is older than ``retention.ms`` (known from the log end offsets at earlier checks, so a segment
  may outlive it by up to one check interval); never the active segment, nor one holding offsets at or
  above the high watermark. The log start offset is the partition's; a follower left below it restarts
  from it, a consumer position below it resets to it (``auto.offset.reset=earliest``; the messages in
  between are lost to that group).
- Page cache: a broker's cache holds the newest ``page_cache_bytes`` written to it (leader appends and
  follower copies). Each replica's cached tail is its share of the broker's write rate (10 s average), or
  all of it while the broker stores less than its cache. Consumer reads below the leader's cached tail hit
  the disk.
- Limits per broker: ``disk_read_bytes_per_s`` for those uncached reads, ``network_out_bytes_per_s`` for all
  consumer fetches (replication traffic is not counted). Within a step, a limited broker serves the readers
  in proportion to what they ask; consumer groups ask in turn.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.model import Topic

WRITE_RATE_WINDOW_S = 10.0  # averaging time of the write rates that share out the page cache


class Storage:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.next_check = cluster.settings.log_retention_check_s
        self.cached_from: np.ndarray | None = None  # per replica: first offset in the page cache
        self._history: deque[tuple[float, np.ndarray]] = deque()  # (time, leaders' LEO) at retention checks
        self._write_rate = np.zeros((0, 0))  # per replica, bytes/s
        self._seen_leo = np.zeros((0, 0), np.int64)
        self._disk_left = self._network_left = np.zeros(0, np.int64)  # bytes left this step, by broker

    # --- what is stored ----------------------------------------------------------------------------
    def stored_bytes(self) -> np.ndarray:
        """Bytes of each replica's log, ``[replica slot, partition]`` (0 in unused slots)."""
        st = self.cluster.state
        stored = np.maximum(st.leo - st.log_start, 0) * st.message_bytes
        return np.where(st.broker >= 0, stored, 0)

    def broker_bytes(self, stored: np.ndarray | None = None) -> np.ndarray:
        """Bytes stored on each broker, by broker id."""
        st = self.cluster.state
        stored = self.stored_bytes() if stored is None else stored
        return np.bincount(np.maximum(st.broker, 0).ravel(), stored.ravel(), minlength=self.cluster.slots)

    def segments(self, topic: Topic) -> np.ndarray:
        """Per replica of the topic's partitions, the number of segments (``[slot, partition]``)."""
        st, rows = self.cluster.state, topic.rows
        per_segment = max(topic.spec.segment_bytes // topic.spec.message_bytes, 1)
        return st.leo[:, rows] // per_segment - st.log_start[rows] // per_segment + 1

    # --- time --------------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        """After replication: retention when due, the page cache's contents, this step's I/O budgets."""
        cluster, s = self.cluster, self.cluster.settings
        if cluster.now >= self.next_check:
            self.next_check += s.log_retention_check_s
            self._check_retention()
        if s.page_cache_bytes is not None:
            self._cache(dt, s.page_cache_bytes)
        if s.disk_read_bytes_per_s is not None:
            self._disk_left = np.full(cluster.slots, round(s.disk_read_bytes_per_s * dt), np.int64)
        if s.network_out_bytes_per_s is not None:
            self._network_left = np.full(cluster.slots, round(s.network_out_bytes_per_s * dt), np.int64)

    def _check_retention(self) -> None:
        """``log.retention.check``: per partition, the oldest segments past ``retention.bytes`` or older than
        ``retention.ms`` go."""
        st, now = self.cluster.state, self.cluster.now
        leo = np.where(st.broker == st.leader, st.leo, 0).max(axis=0)  # the leaders' log end offsets
        self._history.append((now, leo))
        for topic in self.cluster.topics.values():
            spec, rows = topic.spec, topic.rows
            # Segment [b, b + n) is due once b + n <= due: by size, when the log keeps retention.bytes
            # without it; by time, when it was full before now - retention.ms (its newest message is older).
            due = np.zeros(rows.stop - rows.start, np.int64)
            if spec.retention_bytes is not None:
                due = np.maximum(due, leo[rows] - -(-spec.retention_bytes // spec.message_bytes))
            if (
                spec.retention_s is not None
                and (then := self._leo_before(now - spec.retention_s)) is not None
            ):
                due = np.maximum(due, then[rows] if len(then) >= rows.stop else 0)
            self._delete(topic, due, leo[rows])
        horizon = now - max((t.spec.retention_s or 0 for t in self.cluster.topics.values()), default=0)
        while len(self._history) > 1 and self._history[1][0] < horizon:
            self._history.popleft()

    def _leo_before(self, time: float) -> np.ndarray | None:
        """The leaders' log end offsets at the latest retention check before ``time``, if any."""
        return next((leo for t, leo in reversed(self._history) if t < time), None)

    def _delete(self, topic: Topic, due: np.ndarray, leo: np.ndarray) -> None:
        """Moves the log start past the segments wholly below ``due``, but never past the active segment or
        the segment holding the high watermark; followers left below it restart from it."""
        st, rows = self.cluster.state, topic.rows
        per_segment = max(topic.spec.segment_bytes // topic.spec.message_bytes, 1)
        start = np.minimum(due, np.minimum(leo, st.hw[rows])) // per_segment * per_segment
        live = self.cluster.live_leaders(rows)
        log_start = st.log_start[rows]  # a view: writes go to the state
        log_start[live] = np.maximum(log_start[live], start[live])
        replicas = st.broker[:, rows] >= 0
        np.copyto(st.leo[:, rows], np.maximum(st.leo[:, rows], log_start), where=replicas)

    def _cache(self, dt: float, cache_bytes: int) -> None:
        st, slots = self.cluster.state, self.cluster.slots
        if self._seen_leo.shape != st.leo.shape:  # first step, or topics were added
            self._seen_leo, self._write_rate = st.leo.copy(), np.zeros(st.leo.shape)
        written = np.maximum(st.leo - self._seen_leo, 0) * st.message_bytes / dt
        self._write_rate += (written - self._write_rate) * min(dt / WRITE_RATE_WINDOW_S, 1.0)
        self._seen_leo = st.leo.copy()
        brokers = np.maximum(st.broker, 0)
        stored = self.stored_bytes()
        on_broker = self.broker_bytes(stored)
        rate = np.where(st.broker >= 0, self._write_rate, 0)
        broker_rate = np.bincount(brokers.ravel(), rate.ravel(), minlength=slots)
        share = np.divide(
            rate, broker_rate[brokers], out=np.zeros(rate.shape), where=broker_rate[brokers] > 0
        )
        tail = np.where(on_broker[brokers] <= cache_bytes, stored, np.minimum(stored, share * cache_bytes))
        self.cached_from = st.leo - (tail // st.message_bytes).astype(np.int64)

    # --- consumer reads ----------------------------------------------------------------------------
    def read(self, topic: Topic, positions: np.ndarray, wanted: np.ndarray) -> np.ndarray:
        """How many of the ``wanted`` messages from ``positions`` each of the topic's partitions serves this
        step (``wanted`` is 0 where there is no live leader); uses up the brokers' budgets."""
        s, st, rows = self.cluster.settings, self.cluster.state, topic.rows
        size = topic.spec.message_bytes
        leaders = np.maximum(st.leader[rows], 0)
        served = wanted
        if s.disk_read_bytes_per_s is not None and self.cached_from is not None:
            leader_slot = (st.broker[:, rows] == st.leader[rows]).argmax(axis=0)
            cached_from = self.cached_from[leader_slot, np.arange(rows.start, rows.stop)]
            cold = np.clip(cached_from - positions, 0, wanted)
            cold_served = self._share(self._disk_left, leaders, cold, size)
            served = np.where(cold_served < cold, cold_served, wanted)  # a read stops where the disk did
        if s.network_out_bytes_per_s is not None:
            served = self._share(self._network_left, leaders, served, size)
        return served

    @staticmethod
    def _share(left: np.ndarray, brokers: np.ndarray, messages: np.ndarray, size: int) -> np.ndarray:
        """Serves ``messages`` from each broker's byte budget ``left``, in proportion when it is short."""
        asked = np.bincount(brokers, messages * size, minlength=len(left)).astype(np.int64)
        short = asked > left
        served = np.where(short[brokers], messages * left[brokers] // np.maximum(asked[brokers], 1), messages)
        left -= np.bincount(brokers, served * size, minlength=len(left)).astype(np.int64)
        return served

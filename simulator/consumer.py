"""Consumer groups: range assignment, reading below the high watermark, periodic commits, lag.

A group is ``active`` (consumes and commits), ``stalled`` (commits the same offsets, never advances), or
``stopped`` (no members: neither consumes nor commits). ``rewind`` moves its positions back, so the next
commit goes backwards. Reads are served within the leaders' disk and network limits
(``simulator.storage``); a position out of the log's range resets to the log start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from common.placement import range_assign

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.model import Partition

MODES = ("active", "stalled", "stopped")


@dataclass(frozen=True)
class GroupSpec:
    group: str
    topic: str
    members: int = 1
    messages_per_s: float | None = None  # per member; None = as fast as the HW allows
    commit_interval_s: float = 5.0  # auto.commit.interval.ms
    mode: str = "active"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")


class ConsumerGroup:
    """Positions, commits and read credit are arrays over the topic's partitions."""

    def __init__(self, spec: GroupSpec):
        self.spec = spec
        self.mode = spec.mode
        self.messages_per_s = spec.messages_per_s
        self.last_commit = 0.0
        self.position = np.zeros(0, np.int64)  # sized on first use, from the log start offsets
        self._committed = np.zeros(0, np.int64)
        self._credit = np.zeros(0)
        self._loads_of: tuple[int, np.ndarray] = (-1, np.zeros(0, np.int64))  # (members, loads)

    @property
    def member_ids(self) -> list[str]:
        count = 0 if self.mode == "stopped" else self.spec.members
        return [f"{self.spec.group}-{i}" for i in range(count)]

    @property
    def committed(self) -> dict[int, int]:
        """Committed offset per partition (empty before the first commit)."""
        return {i: int(offset) for i, offset in enumerate(self._committed)}

    def assignment(self, cluster: Cluster) -> dict[str, list[int]]:
        return range_assign([p.index for p in cluster.topics[self.spec.topic].partitions], self.member_ids)

    def lag(self, p: Partition) -> int:
        """Messages between the committed offset and the end offset consumers see (the HW)."""
        return p.hw - (int(self._committed[p.index]) if len(self._committed) else 0)

    def rewind(self, messages: int, cluster: Cluster) -> None:
        rows = self._start(cluster)
        self.position = np.maximum(cluster.state.log_start[rows], self.position - messages)

    def tick(self, cluster: Cluster, dt: float) -> None:
        if self.mode == "stopped":
            return
        rows = self._start(cluster)
        if self.mode == "active":
            self._consume(cluster, rows, dt)
        if cluster.now - self.last_commit >= self.spec.commit_interval_s:
            self._committed = self.position.copy()
            self.last_commit = cluster.now

    def _start(self, cluster: Cluster) -> slice:
        """The topic's rows; positions start at the log start offsets."""
        rows = cluster.topics[self.spec.topic].rows
        if not len(self.position):
            self.position = cluster.state.log_start[rows].copy()
            self._credit = np.zeros(len(self.position))
        return rows

    def _loads(self, cluster: Cluster) -> np.ndarray:
        """Per partition, how many partitions its member reads (0: unassigned); it gets that share of time."""
        members = len(self.member_ids)
        if self._loads_of[0] != members:
            loads = np.zeros(len(self.position), np.int64)
            for owned in self.assignment(cluster).values():
                loads[owned] = len(owned)
            self._loads_of = (members, loads)
        return self._loads_of[1]

    def _consume(self, cluster: Cluster, rows: slice, dt: float) -> None:
        st, loads, topic = cluster.state, self._loads(cluster), cluster.topics[self.spec.topic]
        reading = cluster.live_leaders(rows) & (loads > 0)
        # OffsetOutOfRange (retention deleted the position, or an unclean election cut the log below it):
        # auto.offset.reset=earliest.
        if ((self.position < st.log_start[rows]) | (self.position > st.hw[rows])).any():
            leader_leo = np.where(st.broker[:, rows] == st.leader[rows], st.leo[:, rows], 0).max(axis=0)
            lost = reading & ((self.position < st.log_start[rows]) | (self.position > leader_leo))
            self.position[lost] = st.log_start[rows][lost]
        available = st.hw[rows] - self.position
        if self.messages_per_s is None:
            n = available
        else:
            budget = self._credit + self.messages_per_s * (dt / np.maximum(loads, 1))
            n = np.minimum(available, budget.astype(np.int64))
            np.copyto(self._credit, np.where(n < available, budget - n, 0.0), where=reading)
        n = cluster.storage.read(topic, self.position, np.where(reading & (n > 0), n, 0))
        self.position += n
        cluster.meters.add("messages_out", st.leader[rows], topic.number, n)

"""Consumer groups: range assignment, reading below the high watermark, periodic commits, lag.

A group is ``active`` (consumes and commits), ``stalled`` (commits the same offsets, never advances),
or ``stopped`` (no members: neither consumes nor commits). ``rewind`` moves its positions back, so the next
commit goes backwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    def __init__(self, spec: GroupSpec):
        self.spec = spec
        self.mode = spec.mode
        self.messages_per_s = spec.messages_per_s
        self.position: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.last_commit = 0.0
        self._credit: dict[int, float] = {}

    @property
    def member_ids(self) -> list[str]:
        count = 0 if self.mode == "stopped" else self.spec.members
        return [f"{self.spec.group}-{i}" for i in range(count)]

    def assignment(self, cluster: Cluster) -> dict[str, list[int]]:
        return range_assign([p.index for p in cluster.topics[self.spec.topic].partitions], self.member_ids)

    def lag(self, p: Partition) -> int:
        """Messages between the committed offset and the end offset consumers see (the HW)."""
        return p.hw - self.committed.get(p.index, 0)

    def rewind(self, messages: int, cluster: Cluster) -> None:
        for p in cluster.topics[self.spec.topic].partitions:
            self.position[p.index] = max(p.log_start, self.position.get(p.index, 0) - messages)

    def tick(self, cluster: Cluster, dt: float) -> None:
        if self.mode == "stopped":
            return
        partitions = cluster.topics[self.spec.topic].partitions
        for p in partitions:
            self.position.setdefault(p.index, p.log_start)
        if self.mode == "active":
            for owned in self.assignment(cluster).values():
                for index in owned:
                    self._consume(cluster, partitions[index], dt / len(owned))
        if cluster.now - self.last_commit >= self.spec.commit_interval_s:
            self.committed.update(self.position)
            self.last_commit = cluster.now

    def _consume(self, cluster: Cluster, p: Partition, share_dt: float) -> None:
        if not cluster.has_live_leader(p):
            return
        position = self.position[p.index]
        available = p.hw - position
        if self.messages_per_s is None:
            n = available
        else:
            budget = self._credit.get(p.index, 0.0) + self.messages_per_s * share_dt
            n = min(available, int(budget))
            self._credit[p.index] = budget - n if n < available else 0.0
        if n <= 0:
            return
        self.position[p.index] = position + n
        c = cluster.counters[p.leader]
        c.add(c.bytes_out, p.topic, n * p.message_bytes)

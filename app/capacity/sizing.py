"""Sizing a cluster for a sustained demand: disk for retention, page cache for read-behind, broker count.

Every resource of one broker (NIC in and out, disk bandwidth and space, page cache, CPU) is loaded by the
demand spread evenly over the brokers; a broker may be used up to ``1 - headroom`` of each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from app.capacity.model import (
    DEFAULT_COSTS,
    GIB,
    MIB,
    CapacityError,
    CpuCosts,
    Hardware,
    Workload,
    check_positive,
)


@dataclass(frozen=True)
class Demand:
    """Sustained traffic to plan for (payload MiB/s in), how it is kept and how it is read."""

    ingress_mbps: float = 10.0
    message_bytes: int = 100
    overhead_bytes: int = 22
    replication_factor: int = 3
    partitions: int = 6
    consumer_groups: int = 1  # each group reads everything once
    retention_hours: float = 168.0  # log.retention.hours
    read_behind_s: float = 600.0  # consumers this far behind must still read from page cache
    segment_bytes: int = GIB  # log.segment.bytes
    headroom: float = 0.3  # keep 30 % of every resource free

    def __post_init__(self) -> None:
        check_positive(self, allow_zero=("headroom", "consumer_groups"))
        if self.headroom >= 1:
            raise CapacityError("headroom", f"must be in [0, 1), got {self.headroom!r} — e.g. 0.3 for 30 %")

    @property
    def wire_bytes_per_s(self) -> float:
        """Bytes/s the producers send, per-message framing included."""
        return self.ingress_mbps * MIB * (self.message_bytes + self.overhead_bytes) / self.message_bytes

    @property
    def records_per_s(self) -> float:
        return self.ingress_mbps * MIB / self.message_bytes


@dataclass(frozen=True)
class Need:
    """The cluster-wide load on one resource, one broker's usable capacity, and the brokers it takes."""

    resource: str
    load: float
    per_broker: float
    unit: str

    def brokers(self, headroom: float) -> int:
        return math.ceil(self.load / (self.per_broker * (1 - headroom)) - 1e-9)

    def utilisation(self, brokers: int) -> float:
        return self.load / (self.per_broker * brokers)


@dataclass(frozen=True)
class Sizing:
    demand: Demand
    brokers: int  # brokers in the current hardware
    needs: tuple[Need, ...]

    @property
    def disk_bytes(self) -> float:
        return self._need("disk space").load

    @property
    def page_cache_bytes(self) -> float:
        return self._need("page cache").load

    @property
    def brokers_needed(self) -> int:
        by_resource = max(n.brokers(self.demand.headroom) for n in self.needs)
        return max(by_resource, self.demand.replication_factor)

    @property
    def binding(self) -> str:
        """The resource that sets the broker count (or the replication factor, when that is larger)."""
        top = max(self.needs, key=lambda n: n.load / n.per_broker)
        if top.brokers(self.demand.headroom) >= self.demand.replication_factor:
            return top.resource
        return "replication factor"

    def _need(self, resource: str) -> Need:
        return next(n for n in self.needs if n.resource == resource)

    def as_dict(self) -> dict[str, object]:
        return {
            "disk_gb_total": round(self.disk_bytes / 1e9, 1),
            "disk_gb_per_broker": round(self.disk_bytes / 1e9 / self.brokers, 1),
            "page_cache_gb_per_broker": round(self.page_cache_bytes / 1e9 / self.brokers, 2),
            "brokers_needed": self.brokers_needed,
            "binding_resource": self.binding,
            "utilisation": {n.resource: round(n.utilisation(self.brokers), 3) for n in self.needs},
        }


def size(hw: Hardware, demand: Demand, costs: CpuCosts = DEFAULT_COSTS) -> Sizing:
    """What ``demand`` needs, per resource, against brokers like ``hw`` (``hw.brokers`` of them now)."""
    rf = demand.replication_factor
    wire = demand.wire_bytes_per_s
    # the default producer's batches of this message size: cycles per record on all replicas' brokers
    records = Workload(
        message_bytes=demand.message_bytes, overhead_bytes=demand.overhead_bytes, replication_factor=rf
    )
    cycles = costs.brokers(records)
    retention_s = demand.retention_hours * 3600
    # Retention deletes whole segments, so each partition replica may keep one segment past retention.
    disk = wire * retention_s * rf + demand.partitions * rf * demand.segment_bytes
    needs = (
        Need("NIC in", wire * rf, hw.goodput_bytes_per_s, "B/s"),
        Need("NIC out", wire * (rf - 1 + demand.consumer_groups), hw.goodput_bytes_per_s, "B/s"),
        Need("disk bandwidth", wire * rf, hw.disk_bytes_per_s, "B/s"),
        Need("disk space", disk, hw.disks * hw.disk_tb * 1e12, "B"),
        # Every replica's writes go through the page cache; to serve the last read_behind_s seconds of the
        # leaders' data from memory, the cache must hold that long of everything written.
        Need("page cache", wire * rf * demand.read_behind_s, hw.page_cache_bytes, "B"),
        Need("CPU", demand.records_per_s * cycles, hw.cores * hw.clock_ghz * 1e9, "cycles/s"),
    )
    return Sizing(demand, hw.brokers, needs)


def grow(demand: Demand, percent: float) -> Demand:
    """The same demand with traffic grown by ``percent`` (negative shrinks it)."""
    if percent <= -100:
        raise CapacityError("growth_pct", f"must be above -100, got {percent!r}")
    return replace(demand, ingress_mbps=demand.ingress_mbps * (1 + percent / 100))

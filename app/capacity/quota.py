"""CKafka's per-broker split of a tenant instance's throughput limit, re-balanced from reported traffic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.capacity.model import CapacityError, check_number

BUSY = 0.8  # a broker using 80 % of its base share counts as busy; shares within 80 % of each other are even
GROWTH = 0.1  # extra share (of the busiest's) a quieter broker may grow into before the next round


@dataclass(frozen=True)
class BrokerLoad:
    partitions: int
    traffic_mbps: float


@dataclass(frozen=True)
class QuotaAllocation:
    allocation_mbps: dict[int, float]
    produce_blocked: bool
    rule: str  # which rule decided: "base share", "proportional" or "busiest plus headroom"

    def as_dict(self) -> dict[str, object]:
        return {
            "allocation_mbps": {str(b): round(v, 3) for b, v in self.allocation_mbps.items()},
            "produce_blocked": self.produce_blocked,
            "rule": self.rule,
        }


def allocate(
    limit_mbps: float, brokers: Mapping[int, BrokerLoad], storage_full: bool = False
) -> QuotaAllocation:
    """Split ``limit_mbps`` over ``brokers``; a full instance blocks producing (consuming goes on)."""
    check_number("limit_mbps", limit_mbps)
    if not brokers:
        raise CapacityError("broker", "no brokers given — pass at least one ID=PARTITIONS:TRAFFIC_MBPS")
    for b, load in brokers.items():
        check_number("broker", load.partitions, allow_zero=True, label=f"broker {b}: partitions ")
        check_number("broker", load.traffic_mbps, allow_zero=True, label=f"broker {b}: traffic ")
    total_partitions = sum(load.partitions for load in brokers.values())
    if total_partitions == 0:
        raise CapacityError("broker", "the brokers hold no partitions — give at least one a partition count")
    base = {b: limit_mbps * load.partitions / total_partitions for b, load in brokers.items()}
    total_traffic = sum(load.traffic_mbps for load in brokers.values())
    if total_traffic == 0 or all(load.traffic_mbps < BUSY * base[b] for b, load in brokers.items()):
        return QuotaAllocation(base, storage_full, "base share")
    share = {b: load.traffic_mbps / total_traffic for b, load in brokers.items()}
    p_max, p_min = max(share.values()), min(share.values())
    if p_min / p_max >= BUSY:
        return QuotaAllocation({b: limit_mbps * p for b, p in share.items()}, storage_full, "proportional")
    allocation = {b: limit_mbps * min(p + GROWTH * p_max, p_max) for b, p in share.items()}
    return QuotaAllocation(allocation, storage_full, "busiest plus headroom")


def parse_load(text: str) -> tuple[int, BrokerLoad]:
    """``ID=PARTITIONS:TRAFFIC_MBPS`` (e.g. ``1=12:35.5``) as (broker id, load)."""
    try:
        broker, _, rest = text.strip().partition("=")
        partitions, _, traffic = rest.partition(":")
        return int(broker), BrokerLoad(int(partitions), float(traffic))
    except ValueError:
        hint = "write it like 1=12:35.5 (ID=PARTITIONS:TRAFFIC_MBPS)"
        raise CapacityError("broker", f"{text.strip()!r}: {hint}") from None

"""Losing brokers: which partitions go offline or under min ISR, and which producers block, and when.

A producer's ``send()`` only appends to its accumulator (``buffer.memory``). Batches for a partition with no
leader cannot be sent, so they pile up; with ``acks=all``, batches for a partition under
``min.insync.replicas`` are rejected (NOT_ENOUGH_REPLICAS) and retried, so they pile up too. When the
buffer is full, ``send()`` blocks the caller — after about ``buffer.memory`` / bytes-per-second aimed at the
stuck partitions. Keyed records are bound to their partition; records without a key are spread by the
Java client over partitions that have a leader only, so they avoid offline partitions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.capacity.model import ACKS, MIB, Acks, CapacityError, check_number
from common.placement import Assignment

DEFAULT_BUFFER_MEMORY = 32 * MIB


@dataclass(frozen=True)
class Producer:
    """One producer client writing ``bytes_per_s`` spread evenly over ``partitions`` (all when empty)."""

    name: str
    bytes_per_s: float
    acks: Acks = "1"
    keyed: bool = True
    partitions: tuple[int, ...] = ()
    buffer_memory: int = DEFAULT_BUFFER_MEMORY

    @classmethod
    def from_mib(
        cls, name: str, mib_per_s: float, acks: Acks = "1", keyed: bool = True, buffer_mib: float = 32.0
    ) -> Producer:
        """A producer as people write it: MiB/s and a buffer in MiB, checked in those units."""
        check_number("bytes_per_s", mib_per_s, allow_zero=True, label=f"producer {name}: MiB/s ")
        check_number("buffer_memory", buffer_mib, label=f"producer {name}: buffer MiB ")
        return cls(name, mib_per_s * MIB, acks, keyed, (), int(buffer_mib * MIB))

    def __post_init__(self) -> None:
        check_number("bytes_per_s", self.bytes_per_s, allow_zero=True, label=f"producer {self.name}: rate ")
        if self.acks not in ACKS:
            raise CapacityError("acks", f"producer {self.name}: must be one of 0, 1, all, got {self.acks!r}")
        check_number("buffer_memory", self.buffer_memory, label=f"producer {self.name}: buffer ")


@dataclass(frozen=True)
class ProducerImpact:
    name: str
    stuck_partitions: tuple[int, ...]
    stuck_bytes_per_s: float
    buffer_memory: int

    @property
    def seconds_to_block(self) -> float | None:
        """Seconds until ``send()`` blocks; None when nothing piles up."""
        return self.buffer_memory / self.stuck_bytes_per_s if self.stuck_bytes_per_s > 0 else None


@dataclass(frozen=True)
class FailureImpact:
    lost: tuple[int, ...]
    leaders: dict[int, int | None]  # partition -> new leader (None: offline)
    offline: tuple[int, ...]
    under_min_isr: tuple[int, ...]
    under_replicated: tuple[int, ...]
    producers: tuple[ProducerImpact, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "lost_brokers": list(self.lost),
            "offline_partitions": list(self.offline),
            "under_min_isr_partitions": list(self.under_min_isr),
            "under_replicated_partitions": list(self.under_replicated),
            "leaders": {str(p): leader for p, leader in self.leaders.items()},
            "producers": {
                p.name: {
                    "stuck_partitions": list(p.stuck_partitions),
                    "stuck_bytes_per_s": round(p.stuck_bytes_per_s, 1),
                    "seconds_to_block": None if p.seconds_to_block is None else round(p.seconds_to_block, 1),
                }
                for p in self.producers
            },
        }


def lose_brokers(
    assignment: Assignment,
    lost: Collection[int],
    min_insync_replicas: int = 1,
    producers: Iterable[Producer] = (),
) -> FailureImpact:
    """The effect of brokers ``lost`` dying, assuming every replica was in sync before."""
    brokers = {b for replicas in assignment.values() for b in replicas}
    unknown = sorted(set(lost) - brokers)
    if unknown:
        raise CapacityError("broker", f"{unknown} hold no replica here — pick from {sorted(brokers)}")
    if min_insync_replicas < 1:
        raise CapacityError("min_insync_replicas", f"must be at least 1, got {min_insync_replicas}")
    alive = {p: [b for b in replicas if b not in lost] for p, replicas in assignment.items()}
    # The controller elects the first live in-sync replica in assignment order.
    leaders = {p: (live[0] if live else None) for p, live in alive.items()}
    offline = tuple(p for p, live in alive.items() if not live)
    under_min = tuple(p for p, live in alive.items() if 0 < len(live) < min_insync_replicas)
    under_replicated = tuple(p for p, live in alive.items() if 0 < len(live) < len(assignment[p]))
    impacts = tuple(_producer_impact(pr, assignment, set(offline), set(under_min)) for pr in producers)
    return FailureImpact(tuple(sorted(lost)), leaders, offline, under_min, under_replicated, impacts)


def _producer_impact(
    producer: Producer, assignment: Assignment, offline: set[int], under_min: set[int]
) -> ProducerImpact:
    targets = producer.partitions or tuple(assignment)
    missing = sorted(set(targets) - set(assignment))
    if missing:
        raise CapacityError("partitions", f"producer {producer.name} writes to unknown partitions {missing}")
    rejecting = offline | under_min if producer.acks == "all" else offline
    # Unkeyed records only go to partitions with a leader, unless none has one.
    with_leader = [p for p in targets if p not in offline]
    spread = with_leader if not producer.keyed and with_leader else list(targets)
    stuck = tuple(p for p in spread if p in rejecting)
    share = len(stuck) / len(spread)
    return ProducerImpact(producer.name, stuck, producer.bytes_per_s * share, producer.buffer_memory)


def stalled_members(members: Mapping[str, Sequence[int]], offline: Collection[int]) -> dict[str, list[int]]:
    """Consumer-group members (member -> assigned partitions) that own offline partitions: they get nothing
    from those partitions until a leader returns, and the group's lag grows there."""
    stalled = {m: [p for p in parts if p in offline] for m, parts in members.items()}
    return {m: parts for m, parts in stalled.items() if parts}

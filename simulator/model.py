"""The state of a simulated cluster: settings, brokers, topics, partitions and the changes they record."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClusterSettings:
    """Broker-side configuration, named after the Kafka properties (times in seconds)."""

    replica_lag_time_max_s: float = 10.0  # replica.lag.time.max.ms
    replica_lag_max_messages: int | None = None  # replica.lag.max.messages (Kafka ≤ 0.8); None = unused
    replica_fetch_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes, per partition per fetch round
    min_insync_replicas: int = 1  # min.insync.replicas (topic default)
    unclean_leader_election: bool = False  # unclean.leader.election.enable


@dataclass(eq=False)
class Broker:
    id: int
    alive: bool = True
    fetch_bytes_per_s: float | None = None  # follower fetch throughput limit (a slow disk); None = unlimited
    registered_at: float = 0.0


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    message_bytes: int = 1024  # size of every message on the topic (stored and on the wire)
    min_insync_replicas: int | None = None  # None = the cluster default
    unclean_leader_election: bool | None = None  # None = the cluster default
    start_index: int | None = None  # placement: fixed startIndex, else seeded random
    replica_shift: int | None = None  # placement: fixed nextReplicaShift, else seeded random


@dataclass(eq=False)
class Partition:
    """One partition; per-replica state is keyed by broker id."""

    topic: str
    index: int
    replicas: list[int]
    message_bytes: int
    leader: int = -1  # -1: offline
    leader_epoch: int = 0
    controller_epoch: int = 0  # epoch of the controller that last wrote leader/ISR
    isr: list[int] = field(default_factory=list)
    leo: dict[int, int] = field(default_factory=dict)
    fetch_offset: dict[int, int] = field(default_factory=dict)  # the leader's view of each follower's LEO
    caught_up_at: dict[int, float] = field(
        default_factory=dict
    )  # last time a follower reached the leader LEO
    fetched_at: dict[int, float] = field(default_factory=dict)  # last fetch request per follower
    fetch_credit: dict[int, float] = field(default_factory=dict)  # unused fetch bytes carried between rounds
    hw: int = 0
    log_start: int = 0
    unclean: bool = False  # the current leader was elected out of sync

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(eq=False)
class Topic:
    spec: TopicSpec
    partitions: list[Partition]
    min_insync_replicas: int
    unclean_leader_election: bool


@dataclass(frozen=True)
class IsrChange:
    """A change of leader or ISR; ``by`` is the broker that made it (the leader, or the controller)."""

    ts: float
    topic: str
    partition: int
    old_isr: tuple[int, ...]
    new_isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    by: int
    by_controller: bool

    @property
    def change(self) -> str:
        """``shrink``, ``expand``, ``replace`` or ``leader_change``, as in the metrics-topic contract."""
        old, new = set(self.old_isr), set(self.new_isr)
        if new < old:
            return "shrink"
        if new > old:
            return "expand"
        return "leader_change" if new == old else "replace"


@dataclass
class BrokerCounters:
    """Cumulative meters of one broker (the ``Count`` of each Kafka meter)."""

    isr_shrinks: int = 0
    isr_expands: int = 0
    leader_elections: int = 0
    unclean_elections: int = 0
    messages_in: dict[str, int] = field(default_factory=dict)
    bytes_in: dict[str, int] = field(default_factory=dict)
    bytes_out: dict[str, int] = field(default_factory=dict)
    failed_produce: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def add(meter: dict[str, int], topic: str, amount: int) -> None:
        meter[topic] = meter.get(topic, 0) + amount

"""The state of a simulated cluster: settings, brokers, topics, partitions and the changes they record."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClusterSettings:
    """Broker-side configuration, named after the Kafka properties (times in seconds)."""

    replica_lag_time_max_s: float = 10.0  # replica.lag.time.max.ms
    replica_lag_max_messages: int | None = None  # replica.lag.max.messages (Kafka ≤ 0.8); None = unused
    replica_fetch_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes, per partition per fetch round
    min_insync_replicas: int = 1  # min.insync.replicas (topic default)
    unclean_leader_election: bool = False  # unclean.leader.election.enable
    log_retention_check_s: float = 300.0  # log.retention.check.interval.ms
    # Per broker (None = unlimited): what simulator.storage models.
    page_cache_bytes: int | None = None  # memory the OS gives the page cache
    disk_read_bytes_per_s: float | None = None  # reads that miss the page cache
    network_out_bytes_per_s: float | None = None  # consumer fetch responses
    disk_bytes: int | None = None  # log directory capacity


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
    segment_bytes: int = 1024**3  # segment.bytes
    retention_bytes: int | None = None  # retention.bytes per partition; None = -1 (no size limit)
    retention_s: float | None = 7 * 24 * 3600.0  # retention.ms (log.retention.hours=168); None = -1
    min_insync_replicas: int | None = None  # None = the cluster default
    unclean_leader_election: bool | None = None  # None = the cluster default
    start_index: int | None = None  # placement: fixed startIndex, else seeded random
    replica_shift: int | None = None  # placement: fixed nextReplicaShift, else seeded random


class ReplicaState:
    """Every partition's state as numpy arrays, so a fetch round is a few array operations.

    Per-partition arrays have one entry per partition, in the cluster's order. Per-replica arrays are
    ``[replica slot, partition]``, slots in replica order (``broker`` is -1 in the unused slots of partitions
    with a smaller replication factor); slot-major keeps the reductions over a partition's few replicas fast.
    ISR membership is ``isr_rank`` ≥ 0, the rank keeping the order members joined in (-1: not in the ISR).
    """

    PER_PARTITION = ("leader", "hw", "log_start", "message_bytes", "unclean")
    PER_REPLICA = ("broker", "leo", "fetch_offset", "caught_up_at", "fetched_at", "fetch_credit", "isr_rank")
    FLOATS = ("caught_up_at", "fetched_at", "fetch_credit")

    def __init__(self) -> None:
        for name in self.PER_PARTITION:
            setattr(self, name, np.zeros(0, bool if name == "unclean" else np.int64))
        for name in self.PER_REPLICA:
            setattr(self, name, np.zeros((0, 0), np.float64 if name in self.FLOATS else np.int64))

    @property
    def width(self) -> int:
        return self.broker.shape[0]

    def add(self, placement: list[list[int]], message_bytes: int, now: float) -> int:
        """Adds a partition per replica list, all replicas in sync at offset 0; returns the first's row."""
        first, width = len(self.leader), max(self.width, *map(len, placement))
        rows = len(placement)
        broker = np.full((width, rows), -1, np.int64)
        for row, replicas in enumerate(placement):
            broker[: len(replicas), row] = replicas
        new = {
            "leader": broker[0],
            "hw": np.zeros(rows, np.int64),
            "log_start": np.zeros(rows, np.int64),
            "message_bytes": np.full(rows, message_bytes, np.int64),
            "unclean": np.zeros(rows, bool),
            "broker": broker,
            "leo": np.zeros((width, rows), np.int64),
            "fetch_offset": np.zeros((width, rows), np.int64),
            "caught_up_at": np.full((width, rows), now),
            "fetched_at": np.full((width, rows), now),
            "fetch_credit": np.zeros((width, rows)),
            "isr_rank": np.where(broker >= 0, np.arange(width)[:, None], -1),
        }
        for name, added in new.items():
            old = getattr(self, name)
            if old.ndim == 2 and old.shape[0] < width:
                pad = -1 if name in ("broker", "isr_rank") else 0
                old = np.pad(old, ((0, width - old.shape[0]), (0, 0)), constant_values=pad)
            setattr(self, name, np.concatenate([old, added.astype(old.dtype)], axis=old.ndim - 1))
        return first


class _PartitionField:
    """A per-partition value of :class:`ReplicaState`, read and written through a :class:`Partition`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, p: Partition, owner: type | None = None) -> int | bool:
        return getattr(p.state, self.name)[p.row].item()

    def __set__(self, p: Partition, value: int | bool) -> None:
        getattr(p.state, self.name)[p.row] = value


class _ReplicaField:
    """A per-replica array of :class:`ReplicaState`, seen from a :class:`Partition` as broker id -> value."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, p: Partition, owner: type | None = None) -> ReplicaValues:
        return ReplicaValues(getattr(p.state, self.name)[:, p.row], p.replicas)


class ReplicaValues(MutableMapping):
    """One partition's values of a per-replica array, keyed by broker id (writes go to the array)."""

    def __init__(self, slots: np.ndarray, replicas: list[int]):
        self._slots, self._replicas = slots, replicas

    def __getitem__(self, broker: int) -> int | float:
        return self._slots[self._slot(broker)].item()

    def __setitem__(self, broker: int, value: int | float) -> None:
        self._slots[self._slot(broker)] = value

    def _slot(self, broker: int) -> int:
        if broker not in self._replicas:
            raise KeyError(broker)
        return self._replicas.index(broker)

    def __delitem__(self, broker: int) -> None:
        raise TypeError("every replica has a value")

    def __iter__(self) -> Iterator[int]:
        return iter(self._replicas)

    def __len__(self) -> int:
        return len(self._replicas)


class Partition:
    """One partition: its identity here, its state at index ``row`` of the cluster's :class:`ReplicaState`."""

    leader = _PartitionField()  # -1: offline
    hw = _PartitionField()
    log_start = _PartitionField()
    unclean = _PartitionField()  # the current leader was elected out of sync
    leo = _ReplicaField()
    fetch_offset = _ReplicaField()  # the leader's view of each follower's LEO
    caught_up_at = _ReplicaField()  # last time a follower reached the leader LEO
    fetched_at = _ReplicaField()  # last fetch request per follower

    def __init__(self, state: ReplicaState, row: int, topic: str, index: int, replicas: list[int]):
        self.state, self.row = state, row
        self.topic, self.index, self.replicas = topic, index, replicas
        self.message_bytes = state.message_bytes[row].item()
        self.leader_epoch = 0
        self.controller_epoch = 0  # epoch of the controller that last wrote leader/ISR

    @property
    def isr(self) -> list[int]:
        """In-sync replicas in the order they joined (a copy: assign to change it)."""
        ranks = self.state.isr_rank[:, self.row]
        members = [(ranks[slot], broker) for slot, broker in enumerate(self.replicas) if ranks[slot] >= 0]
        return [broker for _, broker in sorted(members)]

    @isr.setter
    def isr(self, members: list[int]) -> None:
        ranks = self.state.isr_rank[:, self.row]
        ranks[:] = -1
        for rank, broker in enumerate(members):
            ranks[self.replicas.index(broker)] = rank

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(eq=False)
class Topic:
    spec: TopicSpec
    number: int  # creation order: the topic's column in the per-topic meters
    rows: slice  # its partitions' rows in the ReplicaState
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
    """Cumulative meters of one broker (the ``Count`` of each Kafka meter); per-topic ones are TopicMeters."""

    isr_shrinks: int = 0
    isr_expands: int = 0
    leader_elections: int = 0
    unclean_elections: int = 0


class TopicMeters:
    """The ``BrokerTopicMetrics`` meters (``Count``) of every broker and topic, in messages: one matrix per
    meter, a row per broker id, a column per topic number."""

    NAMES = ("messages_in", "messages_out", "failed_produce")

    def __init__(self, broker_slots: int):
        self.counts = {name: np.zeros((broker_slots, 0), np.int64) for name in self.NAMES}

    def add_topic(self) -> None:
        for name, counts in self.counts.items():
            self.counts[name] = np.pad(counts, ((0, 0), (0, 1)))

    def add(self, name: str, brokers: np.ndarray | int, topic: int, amounts: np.ndarray | int) -> None:
        """Adds ``amounts`` to ``name`` of each of ``brokers`` (repeats add up) for topic number ``topic``;
        broker -1 (no leader) must come with amount 0."""
        counts = self.counts[name]
        brokers, amounts = np.maximum(np.atleast_1d(brokers), 0), np.atleast_1d(amounts)
        counts[:, topic] += np.bincount(brokers, amounts, minlength=len(counts)).astype(np.int64)

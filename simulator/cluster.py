"""An N-broker cluster advanced in discrete time steps: produce, replicate, keep the ISR, consume.

One ``step(dt)`` is one fetch round. Its order is fixed, which makes a run deterministic:
producers append to leaders; each leader shrinks its ISR; followers fetch a batch (at most
``replica.fetch.max.bytes``, and their broker's fetch throughput) and rejoin the ISR once they reach the HW;
the leader advances the HW (after a shrink too) to the smallest offset its ISR fetched from, so it lags
one round behind;
the storage applies retention and works out the page cache (``simulator.storage``); consumer groups read
below the HW, within the brokers' disk and network limits, and commit; brokers write due ISR-change
notifications.

A round works on all partitions at once, as array operations on the :class:`ReplicaState`; only the rare
ISR changes are applied partition by partition.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np

from common.placement import assign_replicas
from simulator import controller
from simulator.model import (
    Broker,
    BrokerCounters,
    ClusterSettings,
    IsrChange,
    Partition,
    ReplicaState,
    Topic,
    TopicMeters,
    TopicSpec,
)
from simulator.notifications import IsrChangeBatcher, IsrNotification
from simulator.storage import Storage

NOT_IN_ISR = np.iinfo(np.int64).max  # ignored by the HW's minimum
BYTE_METERS = {"bytes_in": "messages_in", "bytes_out": "messages_out"}  # every message has its topic's size


class Cluster:
    def __init__(self, broker_ids: Iterable[int], settings: ClusterSettings | None = None, seed: int = 0):
        self.settings = settings or ClusterSettings()
        self.rng = random.Random(seed)
        self.now = 0.0
        self.brokers = {b: Broker(b) for b in sorted(broker_ids)}
        if not self.brokers or min(self.brokers) < 0:
            raise ValueError(
                f"brokers: need at least one broker, with ids 0 or more, not {list(self.brokers)}"
            )
        self.slots = max(self.brokers) + 1  # per-broker arrays are indexed by broker id
        self.counters = {b: BrokerCounters() for b in self.brokers}
        self.meters = TopicMeters(self.slots)
        self.state = ReplicaState()
        self.topics: dict[str, Topic] = {}
        self.partitions: list[Partition] = []
        self.controller = -1
        self.controller_epoch = 0
        self.controller_changes: list[tuple[float, int, int]] = []
        self.changes: list[IsrChange] = []
        self.notifications: list[IsrNotification] = []
        self.messages_lost = 0  # messages cut off by unclean elections (the model's ground truth)
        self.producers: list = []  # simulator.producer.Producer
        self.groups: list = []  # simulator.consumer.ConsumerGroup
        self._batchers = {b: IsrChangeBatcher(b, self.now) for b in self.brokers}
        self._alive = self.alive_slots()
        self.storage = Storage(self)
        controller.elect_controller(self)

    # --- set-up and faults -------------------------------------------------------------------------
    def create_topic(self, spec: TopicSpec) -> Topic:
        if spec.name in self.topics:
            raise ValueError(f"topic {spec.name!r} exists")
        live = [b.id for b in self.brokers.values() if b.alive]
        placement = assign_replicas(
            live, spec.partitions, spec.replication_factor, spec.start_index, spec.replica_shift, rng=self.rng
        )
        number = len(self.topics)
        first = self.state.add(list(placement.values()), spec.message_bytes, self.now)
        self.meters.add_topic()
        partitions = [
            Partition(self.state, first + i, spec.name, index, replicas)
            for i, (index, replicas) in enumerate(placement.items())
        ]
        for p in partitions:
            p.controller_epoch = self.controller_epoch
        s = self.settings
        topic = Topic(
            spec,
            number,
            slice(first, first + len(partitions)),
            partitions,
            spec.min_insync_replicas or s.min_insync_replicas,
            s.unclean_leader_election
            if spec.unclean_leader_election is None
            else spec.unclean_leader_election,
        )
        self.topics[spec.name] = topic
        self.partitions.extend(partitions)
        return topic

    def kill_broker(self, broker_id: int) -> None:
        if self.brokers[broker_id].alive:
            controller.on_broker_failure(self, broker_id)

    def start_broker(self, broker_id: int) -> None:
        if not self.brokers[broker_id].alive:
            controller.on_broker_startup(self, broker_id)

    def slow_broker(self, broker_id: int, fetch_bytes_per_s: float | None) -> None:
        """Limits the broker's follower fetching (a disk that cannot keep up); ``None`` lifts the limit."""
        self.brokers[broker_id].fetch_bytes_per_s = fetch_bytes_per_s

    # --- queries -----------------------------------------------------------------------------------
    def partitions_of(self, broker_id: int) -> list[Partition]:
        rows = np.flatnonzero((self.state.broker == broker_id).any(axis=0))
        return [self.partitions[row] for row in rows]

    def has_live_leader(self, p: Partition) -> bool:
        return p.leader >= 0 and self.brokers[p.leader].alive

    def accepts_acks_all(self, p: Partition) -> bool:
        return self.has_live_leader(p) and len(p.isr) >= self.topics[p.topic].min_insync_replicas

    def alive_slots(self) -> np.ndarray:
        """Liveness by broker id, with one extra ``False`` last so that id -1 (no broker) reads as dead."""
        alive = np.zeros(self.slots + 1, bool)
        alive[[b.id for b in self.brokers.values() if b.alive]] = True
        return alive

    def live_leaders(self, rows: slice = slice(None)) -> np.ndarray:
        """Which partitions of ``rows`` have a live leader (brokers do not fail within a step)."""
        return self._alive[self.state.leader[rows]]

    def accepting(self, topic: Topic, acks_all: bool) -> np.ndarray:
        """Which partitions of ``topic`` take writes: a live leader, and for acks=all enough ISR members."""
        accepts = self.live_leaders(topic.rows)
        if acks_all:
            accepts &= (self.state.isr_rank[:, topic.rows] >= 0).sum(axis=0) >= topic.min_insync_replicas
        return accepts

    def fetch_shares(self, followers: np.ndarray | None = None) -> dict[int, float]:
        """Per broker with a fetch throughput limit, the bytes/s each of its follower replicas may fetch: the
        limit shared fairly. ``followers`` marks the follower replicas (worked out when not given)."""
        st = self.state
        if followers is None:
            followers = (st.broker >= 0) & (st.broker != st.leader)
        count = np.bincount(st.broker[followers], minlength=self.slots)
        return {b: limit / max(count[b], 1) for b, limit in self._fetch_limits().items()}

    def isr_catch_up_s(self) -> np.ndarray:
        """Per partition, how long until what its leader has now is on every in-sync follower, or the leader
        has dropped those without it: per follower, its backlog over its fetch share (0 without a limit), at
        most the time left until it has not caught up for ``replica_lag_time_max_s``."""
        st = self.state
        rate = np.full(self.slots + 1, np.inf)  # the extra last slot: id -1
        for b, share in self.fetch_shares().items():
            rate[b] = share
        is_leader = st.broker == st.leader
        backlog = (np.where(is_leader, st.leo, 0).max(axis=0) - st.leo) * st.message_bytes
        waiting = (st.isr_rank >= 0) & ~is_leader & (backlog > 0)
        left = np.maximum(self.settings.replica_lag_time_max_s - (self.now - st.caught_up_at), 0.0)
        with np.errstate(divide="ignore"):  # a follower limited to 0 B/s waits out its time left
            seconds = np.where(waiting, np.minimum(backlog / rate[st.broker], left), 0.0)
        return seconds.max(axis=0, initial=0.0)

    def follower_max_lag(self, broker_id: int) -> int:
        """``ReplicaFetcherManager`` ``MaxLag``: the largest leader HW minus this broker's log end offset
        over the partitions it follows a live leader of (0 when it follows none)."""
        st = self.state
        following = (st.broker == broker_id) & (st.leader != broker_id) & self.alive_slots()[st.leader]
        return int(np.where(following, st.hw - st.leo, 0).max(initial=0))

    def topic_meter(self, name: str, broker_id: int) -> dict[str, int]:
        """A ``BrokerTopicMetrics`` meter of one broker per topic, for the topics it has counted. Byte meters
        are the message meters times the topic's message size."""
        counted, in_bytes = BYTE_METERS.get(name, name), name in BYTE_METERS
        counts = self.meters.counts[counted][broker_id]
        return {
            t: int(counts[topic.number]) * (topic.spec.message_bytes if in_bytes else 1)
            for t, topic in self.topics.items()
            if counts[topic.number]
        }

    # --- changes -----------------------------------------------------------------------------------
    def append(self, p: Partition, messages: int) -> int:
        """Appends to the leader's log; returns the new log end offset."""
        counts = np.zeros(len(self.topics[p.topic].partitions), np.int64)
        counts[p.index] = messages
        return int(self.append_rows(self.topics[p.topic], counts)[p.index])

    def append_rows(self, topic: Topic, counts: np.ndarray) -> np.ndarray:
        """Appends ``counts[i]`` messages to the leader of the topic's partition ``i`` (0 where it has no live
        leader); returns the leaders' log end offsets."""
        st, rows = self.state, topic.rows
        leaders = st.leader[rows]
        slots = (st.broker[:, rows] == leaders).argmax(axis=0)
        cells = slots * st.leo.shape[1] + np.arange(rows.start, rows.stop)  # in the flattened [slot, row]
        leo = st.leo.reshape(-1)
        ends = leo[cells] + counts
        leo[cells] = ends
        self.meters.add("messages_in", leaders, topic.number, counts)
        return ends

    def become_follower(self, p: Partition, broker_id: int) -> None:
        """A replica follows the current leader: it truncates what the leader does not have."""
        leo = min(p.leo[broker_id], p.leo[p.leader])
        p.leo[broker_id] = leo
        p.fetch_offset[broker_id] = min(p.fetch_offset[broker_id], leo)
        p.caught_up_at[broker_id] = p.fetched_at[broker_id] = self.now

    def record_change(self, p: Partition, old_isr: list[int], by: int, by_controller: bool) -> None:
        self.changes.append(
            IsrChange(
                self.now,
                p.topic,
                p.index,
                tuple(old_isr),
                tuple(p.isr),
                p.leader,
                p.leader_epoch,
                by,
                by_controller,
            )
        )
        if not by_controller:
            self._batchers[by].record(p.topic, p.index, self.now)

    def restart_batcher(self, broker_id: int) -> None:
        self._batchers[broker_id] = IsrChangeBatcher(broker_id, self.now)

    # --- time --------------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        self.now = round(self.now + dt, 9)
        self._alive = self.alive_slots()
        for producer in self.producers:
            producer.tick(self, dt)
        self._replicate(dt)
        self.storage.step(dt)
        for group in self.groups:
            group.tick(self, dt)
        for broker_id, batcher in self._batchers.items():
            if self.brokers[broker_id].alive and (note := batcher.due(self.now)):
                self.notifications.append(note)

    def _fetch_limits(self) -> dict[int, float]:
        return {b.id: b.fetch_bytes_per_s for b in self.brokers.values() if b.fetch_bytes_per_s is not None}

    def _fetch_allowance(self, dt: float, followers: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Messages each replica may fetch this round: ``replica.fetch.max.bytes`` worth, and on a broker
        with a fetch throughput limit its fair share of the limit plus the credit it carried over. Also the
        byte budgets behind it, or ``None`` when no broker is limited."""
        st, most = self.state, self.settings.replica_fetch_max_bytes
        shares = self.fetch_shares(followers)
        if not shares:
            return most // st.message_bytes, None  # per partition; broadcasts over the replicas
        share = np.full(self.slots + 1, float(most))
        for b, rate in shares.items():
            share[b] = rate * dt
        budget = np.minimum(most, st.fetch_credit + share[st.broker])
        return budget // st.message_bytes, budget

    def _replicate(self, dt: float) -> None:
        st, s, now, alive = self.state, self.settings, self.now, self._alive
        live = alive[st.leader]
        is_leader = (st.broker == st.leader) & live
        followers = (st.broker >= 0) & (st.broker != st.leader)
        leader_leo = np.where(is_leader, st.leo, 0).sum(axis=0)
        # The leader drops followers that have not caught up for replica.lag.time.max.ms (or, Kafka ≤ 0.8,
        # fell too many messages behind); the HW may move up at once.
        if s.replica_lag_max_messages is None:
            out_of_sync = now - st.caught_up_at > s.replica_lag_time_max_s
        else:
            behind = leader_leo - st.fetch_offset > s.replica_lag_max_messages
            out_of_sync = (now - st.fetched_at > s.replica_lag_time_max_s) | behind
        in_isr = st.isr_rank >= 0
        lagging = followers & in_isr & out_of_sync & (live & (in_isr.sum(axis=0) > 1))
        shrunk = lagging.any(axis=0)
        if shrunk.any():
            for row in np.flatnonzero(shrunk):
                p = self.partitions[row]
                old, dropped = p.isr, {p.replicas[slot] for slot in np.flatnonzero(lagging[:, row])}
                p.isr = [r for r in old if r not in dropped]
                self.counters[p.leader].isr_shrinks += 1
                self.record_change(p, old, by=p.leader, by_controller=False)
            self._advance_hw(shrunk, is_leader)
        # Live followers fetch what the leader has, up to their allowance.
        fetching = followers & live & alive[st.broker]
        allowed, budget = self._fetch_allowance(dt, followers)
        behind = leader_leo - st.leo
        fetched = np.where(fetching, np.minimum(behind, allowed), 0).astype(np.int64)
        if budget is not None:  # a limited follower still behind carries its unused budget over
            limited = fetching & np.isin(st.broker, list(self._fetch_limits()))
            carry = np.where(fetched < behind, budget - fetched * st.message_bytes, 0.0)
            np.copyto(st.fetch_credit, carry, where=limited)
        np.copyto(st.fetch_offset, st.leo, where=fetching)
        st.fetched_at[fetching] = now
        st.leo += fetched
        st.caught_up_at[fetching & (st.leo == leader_leo)] = now
        # A follower that reached the HW rejoins the ISR (in replica order within a partition).
        joining = fetching & (st.isr_rank < 0) & (st.leo >= st.hw)
        for row, slot in sorted(zip(*reversed(np.nonzero(joining)), strict=True)) if joining.any() else ():
            p = self.partitions[row]
            old = p.isr
            p.isr = [*old, p.replicas[slot]]
            self.counters[p.leader].isr_expands += 1
            self.record_change(p, old, by=p.leader, by_controller=False)
        self._advance_hw(live, is_leader)

    def _advance_hw(self, rows: np.ndarray, is_leader: np.ndarray) -> None:
        """HW = the smallest LEO the leader knows of in the ISR (its own, the followers' fetch offsets), for
        the partitions selected by the mask ``rows``; it never goes down."""
        st = self.state
        known = np.where(is_leader, st.leo, st.fetch_offset)
        lowest = np.where(st.isr_rank >= 0, known, NOT_IN_ISR).min(axis=0)
        np.maximum(st.hw, lowest, out=st.hw, where=rows)

"""An N-broker cluster advanced in discrete time steps: produce, replicate, keep the ISR, consume.

One ``step(dt)`` is one fetch round. Its order is fixed, which makes a run deterministic:
producers append to leaders; each leader shrinks its ISR; followers fetch a batch (at most
``replica.fetch.max.bytes``, and their broker's fetch throughput) and rejoin the ISR once they reach the HW;
the leader advances the HW (after a shrink too) to the smallest offset its ISR fetched from, so it lags
one round behind;
consumer groups read below the HW and commit; brokers write due ISR-change notifications.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from common.placement import assign_replicas
from simulator import controller
from simulator.model import (
    Broker,
    BrokerCounters,
    ClusterSettings,
    IsrChange,
    Partition,
    Topic,
    TopicSpec,
)
from simulator.notifications import IsrChangeBatcher, IsrNotification


class Cluster:
    def __init__(self, broker_ids: Iterable[int], settings: ClusterSettings | None = None, seed: int = 0):
        self.settings = settings or ClusterSettings()
        self.rng = random.Random(seed)
        self.now = 0.0
        self.brokers = {b: Broker(b) for b in sorted(broker_ids)}
        self.counters = {b: BrokerCounters() for b in self.brokers}
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
        controller.elect_controller(self)

    # --- set-up and faults -------------------------------------------------------------------------
    def create_topic(self, spec: TopicSpec) -> Topic:
        if spec.name in self.topics:
            raise ValueError(f"topic {spec.name!r} exists")
        live = [b.id for b in self.brokers.values() if b.alive]
        placement = assign_replicas(
            live, spec.partitions, spec.replication_factor, spec.start_index, spec.replica_shift, rng=self.rng
        )
        s = self.settings
        topic = Topic(
            spec,
            [],
            spec.min_insync_replicas or s.min_insync_replicas,
            s.unclean_leader_election
            if spec.unclean_leader_election is None
            else spec.unclean_leader_election,
        )
        for index, replicas in placement.items():
            p = Partition(
                spec.name, index, replicas, spec.message_bytes, leader=replicas[0], isr=list(replicas)
            )
            p.controller_epoch = self.controller_epoch
            for r in replicas:
                p.leo[r] = p.fetch_offset[r] = 0
                p.caught_up_at[r] = p.fetched_at[r] = self.now
            topic.partitions.append(p)
        self.topics[spec.name] = topic
        self.partitions.extend(topic.partitions)
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
        return [p for p in self.partitions if broker_id in p.replicas]

    def has_live_leader(self, p: Partition) -> bool:
        return p.leader >= 0 and self.brokers[p.leader].alive

    def accepts_acks_all(self, p: Partition) -> bool:
        return self.has_live_leader(p) and len(p.isr) >= self.topics[p.topic].min_insync_replicas

    # --- changes -----------------------------------------------------------------------------------
    def append(self, p: Partition, messages: int) -> int:
        """Appends to the leader's log; returns the new log end offset."""
        p.leo[p.leader] += messages
        c = self.counters[p.leader]
        c.add(c.messages_in, p.topic, messages)
        c.add(c.bytes_in, p.topic, messages * p.message_bytes)
        return p.leo[p.leader]

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
        for producer in self.producers:
            producer.tick(self, dt)
        shares = self._fetch_shares(dt)
        for p in self.partitions:
            if self.has_live_leader(p):
                self._replicate(p, shares)
        for group in self.groups:
            group.tick(self, dt)
        for broker_id, batcher in self._batchers.items():
            if self.brokers[broker_id].alive and (note := batcher.due(self.now)):
                self.notifications.append(note)

    def _fetch_shares(self, dt: float) -> dict[int, float]:
        """Bytes each follower replica may fetch this round on a throughput-limited broker (fair share)."""
        limited = {
            b.id: b.fetch_bytes_per_s * dt for b in self.brokers.values() if b.fetch_bytes_per_s is not None
        }
        if not limited:
            return {}
        followers = dict.fromkeys(limited, 0)
        for p in self.partitions:
            for r in p.replicas:
                if r in followers and r != p.leader:
                    followers[r] += 1
        return {b: budget / max(followers[b], 1) for b, budget in limited.items()}

    def _replicate(self, p: Partition, shares: dict[int, float]) -> None:
        leader, now, s = p.leader, self.now, self.settings
        leader_leo = p.leo[leader]
        if len(p.isr) > 1:
            lagging = [r for r in p.isr if r != leader and self._out_of_sync(p, r, leader_leo)]
            if lagging:
                old = list(p.isr)
                p.isr = [r for r in p.isr if r not in lagging]
                self.counters[leader].isr_shrinks += 1
                self.record_change(p, old, by=leader, by_controller=False)
                self._advance_hw(p)
        for r in p.replicas:
            if r == leader or not self.brokers[r].alive:
                continue
            budget = min(
                s.replica_fetch_max_bytes,
                p.fetch_credit.get(r, 0.0) + shares.get(r, s.replica_fetch_max_bytes),
            )
            behind = leader_leo - p.leo[r]
            fetched = min(behind, int(budget // p.message_bytes))
            if r in shares:
                p.fetch_credit[r] = budget - fetched * p.message_bytes if fetched < behind else 0.0
            p.fetch_offset[r] = p.leo[r]
            p.fetched_at[r] = now
            p.leo[r] += fetched
            if p.leo[r] == leader_leo:
                p.caught_up_at[r] = now
            if r not in p.isr and p.leo[r] >= p.hw:
                old = list(p.isr)
                p.isr.append(r)
                self.counters[leader].isr_expands += 1
                self.record_change(p, old, by=leader, by_controller=False)
        self._advance_hw(p)

    @staticmethod
    def _advance_hw(p: Partition) -> None:
        """HW = the smallest LEO the leader knows of in the ISR (its own, the followers' fetch offsets)."""
        known = [p.leo[r] if r == p.leader else p.fetch_offset[r] for r in p.isr]
        p.hw = max(p.hw, min(known))

    def _out_of_sync(self, p: Partition, follower: int, leader_leo: int) -> bool:
        s, now = self.settings, self.now
        if s.replica_lag_max_messages is None:
            return now - p.caught_up_at[follower] > s.replica_lag_time_max_s
        stuck = now - p.fetched_at[follower] > s.replica_lag_time_max_s
        return stuck or leader_leo - p.fetch_offset[follower] > s.replica_lag_max_messages

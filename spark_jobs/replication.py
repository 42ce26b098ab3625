"""Replication health as an analysis: partition metadata, broker gauges, ISR events → topic and broker state.

Pure (no Spark). Definitions (Kafka's): a partition is *under-replicated* when its ISR
is smaller than its replica set, *under min ISR* when its ISR is smaller than the topic's
``min.insync.replicas`` (Kafka's default 1 until the topic's value is seen), *offline* when it has no leader
(-1). Two more: *shrunk to min ISR*, an under-replicated partition whose ISR is down to min.insync.replicas
(one more replica out and acks=all producers fail; Kafka's AtMinIsrPartitionCount also counts in-sync
partitions whose replication factor equals min.insync.replicas), and *reassigning*, a partition whose replica
set grew past the size it last had in sync while no replica left its ISR (a reassignment or a replication
factor increase adding replicas, which join the ISR as they catch up): it is not under-replicated. The
partition counts come from the partition-state samples (the ZooKeeper source in ZooKeeper mode, the metadata
source in KRaft mode); each state's time runs from the first scrape that saw it and resets when a scrape sees
it end. A topic's ``..._seconds`` is its longest running state, 0 when none.

Each troubled partition is put down to a *cause broker* (``cause_broker``): the broker whose absence explains
it, from the ISR events (:meth:`~spark_jobs.isr_ledger.IsrLedger.culprit`); the topic's series are split by
it ("" when the events do not say), so that the pages of one broken broker travel together.

Brokers: a broker is up while the newest metadata scrape lists it (``kafka_broker_registered``: the cluster's
own word), or, for a cluster without recent metadata (no Admin API access), while it reported a broker gauge
within ``stale_after_s`` of the cluster's newest observation: a broker whose JMX scrape fails is not down for
that. Whether a broker that left asked to (a controlled shutdown: a planned restart) comes from the
controllers' ``ControlledShutdownBrokerCount`` (:mod:`spark_jobs.maintenance`); a planned restart is
*maintenance* until the broker is back in every ISR it left, for at most ``maintenance_grace_s``.
A dedicated KRaft controller (controller gauges, never listed) is no broker: it counts for the
controller while its gauges are recent. Its out-of-ISR count is the partitions whose ISR it was seen leaving
(ISR change events) and has not rejoined. Active controllers: the ``ActiveControllerCount`` gauges of the live
brokers that reported within ``stale_after_s`` (a broker's 1 read before another broker's first 1 is a
handover its next scrape will show, not a second controller; a sum of 0 counts only once every live broker was
read after the last controller stopped: its gauge read 0, or the metadata no longer listed it), or, without
any, the last ``controller_change`` event (1 unless it names no controller); with neither the count is unknown
and not exported (not 0).

Unclean elections: Kafka's own count wherever a controller serves it — the increments of the active
controller's ``UncleanLeaderElections`` counter (a reset counts from 0). Only the counter of a broker whose
``ActiveControllerCount`` reads 1 (or is not reported) is added: in KRaft every controller replays the
metadata log and counts every election, so adding the standbys' counters would count each election once per
controller. A cluster whose controllers are not scraped gets the count from the ISR events instead, and only
what they prove (:meth:`~spark_jobs.isr_ledger.IsrLedger.apply`): a new leader alone in the ISR that was not
in the last ISR with members. A clean election the metadata scrapes half missed (the preferred leader
rejoined and was elected between two scrapes) is none, and neither is an election from the eligible leader
replicas of KIP-966 that Kafka counts as unclean because the replica had stopped uncleanly.
ISR changes are counted per topic and kind once each (``spark_jobs.isr_ledger``), whichever sources report
them.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import pyarrow as pa

from common import names
from common.contract import ISR_CHANGE_KINDS
from spark_jobs.analysis import Derived, Evaluation, Observation, Samples, gathered
from spark_jobs.isr_ledger import IsrLedger
from spark_jobs.maintenance import Departures

log = logging.getLogger(__name__)

PARTITION_FIELDS = {  # partition-state sample -> the _Partition field it sets
    names.PARTITION_REPLICAS: "replicas",
    names.PARTITION_ISR: "isr",
    names.PARTITION_LEADER: "leader",
    names.PARTITION_PREFERRED_LEADER: "preferred",
}
BROKER_INPUTS = (
    names.PARTITION_COUNT, names.ACTIVE_CONTROLLER, names.UNCLEAN_ELECTIONS, names.BROKER_REGISTERED,
    names.CONTROLLED_SHUTDOWN_BROKERS,
)  # fmt: skip
EVENTS = ("isr_change", "controller_change")
CAUSED = ("under_replicated", "under_min_isr", "offline", "shrunk_to_min_isr")  # put down to a cause broker
STATES = (*CAUSED, "reassigning")
DEFAULT_MIN_ISR = 1  # min.insync.replicas when the topic's value was not reported

HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("at_s", pa.float64()),
        ("scope", pa.string()),  # partition (only those in a bad state), topic, broker or cluster
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("broker", pa.string()),
        *((state, pa.int64()) for state in STATES),  # 0/1 for a partition, counts for a topic
        *((f"{state}_s", pa.float64()) for state in STATES),
        ("replication_factor", pa.int64()),
        ("cause_broker", pa.string()),  # a partition's: the broker whose absence explains its state
        ("out_of_isr", pa.int64()),
        ("up", pa.bool_()),
        ("maintenance", pa.int64()),  # a broker's: 0 none, 1 planned restart, 2 overdue
        ("maintenance_s", pa.float64()),
        ("active_controllers", pa.int64()),
        ("unclean_elections", pa.int64()),
    ]
)


class _Malformed(Exception):
    """An observation without the labels or value its name needs: skipped and counted."""


@dataclass
class _Partition:
    seen_s: float
    replicas: int | None = None
    isr: int | None = None
    leader: int | None = None
    preferred: int | None = None  # the first assigned replica
    in_sync_size: int | None = None  # its replica count when last seen in sync
    since: dict[str, float] = field(default_factory=dict)  # state -> first scrape that saw it
    cause: dict[str, str] = field(default_factory=dict)  # state -> the broker it was last put down to

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(_Partition(0.0).__dict__ | state)  # state stored before a field was added

    def holds(self, state: str, t_s: float, cause: str = "") -> None:
        """``state`` holds at ``t_s``, put down to broker ``cause`` ("": the events do not say). Put down to
        another broker than before, it starts again: the next node of a rolling restart is a new absence,
        even when no scrape saw the partition whole in between. An unknown cause keeps the known one."""
        before = self.cause.get(state)
        if cause and before and cause != before:
            self.since[state] = t_s
        self.since.setdefault(state, t_s)
        if cause:
            self.cause[state] = cause

    def ends(self, state: str) -> None:
        self.since.pop(state, None)
        self.cause.pop(state, None)


@dataclass
class _Cluster:
    now_s: float = -math.inf
    metadata_s: float = -math.inf  # newest partition metadata scrape
    broker_seen_s: dict[str, float] = field(default_factory=dict)  # newest broker gauge (JMX, exporter)
    registered: dict[str, float] = field(default_factory=dict)  # broker -> newest metadata listing it
    registered_s: float = -math.inf  # newest metadata scrape that listed brokers
    isr_brokers: set[str] = field(default_factory=set)  # brokers named in ISR events
    controller_gauge: dict[str, float] = field(default_factory=dict)  # broker -> ActiveControllerCount
    controller_read_s: dict[str, float] = field(default_factory=dict)  # broker -> time of that reading
    controller_since_s: dict[str, float] = field(default_factory=dict)  # broker -> its first 1 in a row
    controller_lost_s: float = -math.inf  # newest time a controller was seen to stop being one
    controller_event: int | None = None  # controller id of the last controller_change event
    unclean_counters: dict[str, float] = field(default_factory=dict)  # broker -> last counter value
    unclean_read_s: dict[str, float] = field(default_factory=dict)  # broker -> time of that value
    unclean_from_counters: int = 0
    unclean_from_events: int = 0
    isr_changes: Counter = field(default_factory=Counter)  # (topic, change) -> events
    departures: Departures = field(default_factory=Departures)  # brokers away, planned or not

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(_Cluster().__dict__ | state)  # state stored before a field was added


def _counts_elections(cluster: _Cluster, broker: str, t_s: float) -> bool:
    """Whether a broker's election counter read at ``t_s`` adds to the count. In KRaft every controller
    counts each election as it replays the metadata log, so only the active controller's increments are
    new: its ActiveControllerCount of the same scrape decides, never an older one (a restarting node serves
    its replayed counter before its gauge: 0.6 s apart on a Kafka 4.3 node here, while the gauge last read
    was the 1 of before it died). A source that serves no gauge counts every increment."""
    read_s = cluster.controller_read_s.get(broker)
    return read_s is None or (read_s == t_s and cluster.controller_gauge[broker] >= 1)


class ReplicationAnalysis:
    """Under-replicated, under-min-ISR and offline partitions with time in state; brokers and controller."""

    table = "replication"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset((*PARTITION_FIELDS, names.TOPIC_MIN_ISR, *BROKER_INPUTS, *EVENTS))
    settings = ("stale_after_s", "forget_after_s", "maintenance_grace_s")  # scrape intervals, alerts
    chunked = frozenset(PARTITION_FIELDS)  # a sample each per partition and scrape

    def __init__(
        self, stale_after_s: float = 45.0, forget_after_s: float = 90.0, maintenance_grace_s: float = 600.0
    ):
        self.stale_after_s = stale_after_s
        self.forget_after_s = forget_after_s
        self.maintenance_grace_s = maintenance_grace_s
        self.clusters: dict[str, _Cluster] = defaultdict(_Cluster)
        self.partitions: dict[tuple[str, str, str], _Partition] = {}
        self.min_isr: dict[tuple[str, str], int] = {}
        self.ledger = IsrLedger()
        self.skipped = 0

    def observe(self, observations: Iterable[Observation | Samples]) -> None:
        skipped = self.skipped
        # within a scrape, a broker's ActiveControllerCount first: it decides whether its counter is added
        in_order = sorted(observations, key=lambda o: (o.t_s, o.name != names.ACTIVE_CONTROLLER))
        for t_s, group in groupby(in_order, key=lambda o: o.t_s):
            touched: set[tuple[str, str, str]] = set()
            for o in gathered(group, self.chunked):
                if type(o) is Samples:
                    self.skipped += self._take_partitions(o, touched)
                    continue
                try:
                    self._take(o)
                except _Malformed:
                    self.skipped += 1
            for key in touched:
                self._settle(key, t_s)
            for cluster in self.clusters.values():
                if cluster.registered_s == t_s:
                    _controllers_gone(cluster, t_s)
                    cluster.departures.listing(t_s, cluster.registered)
        if self.skipped > skipped:
            log.warning("replication: skipped %d malformed observations", self.skipped - skipped)

    def _take_partitions(self, run: Samples, touched: set[tuple[str, str, str]]) -> int:
        """A scrape's samples of one partition state, each partition added to ``touched``; how many were
        skipped (no topic or partition, not finite)."""
        cluster, field_, t_s = self.clusters[run.cluster], PARTITION_FIELDS[run.name], run.t_s
        cluster.now_s = max(cluster.now_s, t_s)
        complete = run.complete("topic", "partition")
        for topic, partition, value in complete:
            key = (run.cluster, topic, partition)
            p = self.partitions.get(key)
            if p is None:
                p = self.partitions[key] = _Partition(t_s)
            elif t_s > p.seen_s:
                p.seen_s = t_s
            setattr(p, field_, int(value))
            touched.add(key)
        if complete:
            cluster.metadata_s = max(cluster.metadata_s, t_s)
        return len(run.values) - len(complete)

    def _take(self, o: Observation) -> None:
        """Apply one observation of a topic, a broker or an event."""
        cluster, t_s = self.clusters[o.cluster], o.t_s
        if t_s > cluster.now_s:
            cluster.now_s = t_s
        if o.event is not None:
            self._take_event(cluster, o)
            return
        if o.value is None or not math.isfinite(o.value):
            raise _Malformed
        if o.name == names.TOPIC_MIN_ISR:
            if "topic" not in o.labels:
                raise _Malformed
            self.min_isr[o.cluster, o.labels["topic"]] = int(o.value)
            return
        broker = o.labels.get("broker")
        if broker is None:
            raise _Malformed
        if o.name == names.BROKER_REGISTERED:
            cluster.registered[broker] = max(cluster.registered.get(broker, t_s), t_s)
            cluster.registered_s = max(cluster.registered_s, t_s)
            return
        cluster.broker_seen_s[broker] = max(cluster.broker_seen_s.get(broker, o.t_s), o.t_s)
        if o.name == names.CONTROLLED_SHUTDOWN_BROKERS:
            cluster.departures.reading(t_s, o.value, broker)
        elif o.name == names.ACTIVE_CONTROLLER:
            if t_s >= cluster.controller_read_s.get(broker, -math.inf):  # a late scrape is not newer
                if o.value >= 1 > cluster.controller_gauge.get(broker, 0):
                    cluster.controller_since_s[broker] = t_s
                elif o.value < 1 <= cluster.controller_gauge.get(broker, 0):
                    cluster.controller_lost_s = max(cluster.controller_lost_s, t_s)
                cluster.controller_gauge[broker] = o.value
                cluster.controller_read_s[broker] = t_s
        elif o.name == names.UNCLEAN_ELECTIONS:
            if t_s < cluster.unclean_read_s.get(broker, -math.inf):
                return  # a late scrape: older than the counter value already taken
            last = cluster.unclean_counters.get(broker)
            # the first value is the baseline; a lower one a restart (the counter began again at 0)
            if last is not None and _counts_elections(cluster, broker, t_s):
                cluster.unclean_from_counters += int(o.value - last if o.value >= last else o.value)
            cluster.unclean_counters[broker] = o.value
            cluster.unclean_read_s[broker] = t_s

    def _take_event(self, cluster: _Cluster, o: Observation) -> None:
        if o.name == "controller_change":
            controller = o.event.get("controller_id")
            if not isinstance(controller, int):
                raise _Malformed
            cluster.controller_event = controller
            return
        transition = self.ledger.apply(o.cluster, o.t_s, o.event)
        if transition is not None:
            cluster.isr_brokers |= {str(b) for b in transition.isr | transition.left}
            cluster.isr_changes[transition.topic, transition.change] += 1
            cluster.unclean_from_events += transition.unclean

    def _settle(self, key: tuple[str, str, str], t_s: float) -> None:
        p = self.partitions[key]
        min_isr = self.min_isr.get(key[:2], DEFAULT_MIN_ISR)
        known = p.isr is not None
        short = known and p.replicas is not None and p.isr < p.replicas
        if known and p.replicas is not None and not short:
            p.in_sync_size = p.replicas
            self.ledger.fully_replicated(*key)
        adding = short and p.in_sync_size is not None and p.replicas > p.in_sync_size
        reassigning = adding and self.ledger.culprit(*key, offline=False) is None
        under_replicated = short and not reassigning
        offline = p.leader is not None and p.leader < 0
        flags = {
            "under_replicated": under_replicated,
            "under_min_isr": known and p.isr < min_isr,
            "offline": offline,
            "shrunk_to_min_isr": under_replicated and p.isr == min_isr,
            "reassigning": reassigning,
        }
        culprit = self.ledger.culprit(*key, offline=offline)
        cause = "" if culprit is None else str(culprit)
        for state, on in flags.items():
            if on:
                p.holds(state, t_s, cause if state in CAUSED else "")
            else:
                p.ends(state)

    def evaluate(self) -> Evaluation:
        self._forget_deleted_partitions()
        history: list[dict[str, Any]] = []
        metrics: list[Derived] = []
        topics: dict[tuple[str, str], list[tuple[str, _Partition]]] = defaultdict(list)
        for (cluster, topic, partition), p in sorted(self.partitions.items()):
            topics[cluster, topic].append((partition, p))
        for name, cluster in sorted(self.clusters.items()):
            for topic in {t for c, t in topics if c == name} | {t for t, _ in cluster.isr_changes}:
                history += self._topic(name, cluster, topic, topics.get((name, topic), []), metrics)
            history += self._brokers(name, cluster, metrics)
            history.append(self._cluster(name, cluster, metrics))
        return Evaluation(history, metrics)

    def _forget_deleted_partitions(self) -> None:
        """A partition missing from the metadata scrapes for ``forget_after_s`` was deleted."""
        for key, p in list(self.partitions.items()):
            if self.clusters[key[0]].metadata_s - p.seen_s > self.forget_after_s:
                del self.partitions[key]
                self.ledger.forget(*key)

    def _topic(
        self, name: str, cluster: _Cluster, topic: str, parts: list[tuple[str, _Partition]], out: list
    ) -> list[dict[str, Any]]:
        now, labels = cluster.now_s, (name, topic)
        rows, row = [], _row(name, now, "topic", topic=topic)
        for state in STATES:
            starts = [p.since[state] for _, p in parts if state in p.since]
            row[state], row[f"{state}_s"] = len(starts), max((now - s for s in starts), default=0.0)
        by_cause: dict[tuple[str, str], list[float]] = defaultdict(list)  # (state, cause) -> starts
        for partition, p in parts:
            out += _partition_series((name, topic, partition), p)
            if not p.since:
                continue
            culprit = self.ledger.culprit(name, topic, partition, offline="offline" in p.since)
            cause = "" if culprit is None else str(culprit)
            for state in CAUSED:
                if state in p.since:
                    by_cause[state, cause].append(p.since[state])
            rows.append(
                _row(name, now, "partition", topic=topic, partition=partition)
                | {s: int(s in p.since) for s in STATES}
                | {f"{s}_s": now - p.since[s] if s in p.since else 0.0 for s in STATES}
                | {"replication_factor": p.replicas, "cause_broker": cause or None}
            )
        replicas = [p.replicas for _, p in parts if p.replicas is not None]
        row["replication_factor"] = min(replicas, default=None)
        if parts:
            for state in CAUSED:
                causes = sorted({c for s, c in by_cause if s == state} | {""})
                for cause in causes:  # the "" series always, 0 when every partition is fine
                    starts = by_cause.get((state, cause), [])
                    since = max((now - s for s in starts), default=0.0)
                    out.append(Derived(f"kobs_topic_{state}_partitions", (*labels, cause), len(starts)))
                    out.append(Derived(f"kobs_topic_{state}_seconds", (*labels, cause), since))
            out.append(Derived("kobs_topic_reassigning_partitions", labels, row["reassigning"]))
        if replicas:
            out.append(Derived("kobs_topic_replication_factor", labels, row["replication_factor"]))
        for change in sorted(ISR_CHANGE_KINDS):
            count = cluster.isr_changes[topic, change]
            out.append(Derived("kobs_isr_changes_total", (*labels, change), count))
        return [row, *rows]

    def _brokers(self, name: str, cluster: _Cluster, out: list) -> list[dict[str, Any]]:
        out_of_isr = Counter(str(broker) for c, broker, _, _ in self.ledger.out_of_isr() if c == name)
        leads, imbalance = self._leadership(name)
        cluster.departures.classify()
        cluster.departures.settle(catching_up=set(out_of_isr))
        rows = []
        known = set(cluster.broker_seen_s) | set(cluster.registered)
        if self._listing(cluster):  # a dedicated controller is no broker: the broker list never names it
            known = {b for b in known if not _controller_only(cluster, b)}
        for broker in sorted(known | cluster.isr_brokers, key=_broker_order):
            labels = (name, broker)
            row = _row(name, cluster.now_s, "broker", broker=broker)
            row["out_of_isr"] = out_of_isr[broker]
            out.append(Derived("kobs_broker_out_of_isr_partitions", labels, row["out_of_isr"]))
            if broker in known:
                row["up"] = self._up(cluster, broker)
                out.append(Derived("kobs_broker_up", labels, float(row["up"])))
                state = cluster.departures.state(broker, cluster.now_s, self.maintenance_grace_s)
                row["maintenance"], row["maintenance_s"] = state
                out.append(Derived("kobs_broker_maintenance", labels, state[0]))
                out.append(Derived("kobs_broker_maintenance_seconds", labels, state[1]))
                unexplained = cluster.departures.unexplained(broker, cluster.now_s)
                out.append(Derived("kobs_broker_departure_unexplained", labels, float(unexplained)))
            out.append(Derived("kobs_broker_leader_partitions", labels, leads[broker]))
            if broker in imbalance:
                out.append(Derived("kobs_broker_leader_imbalance_ratio", labels, imbalance[broker]))
            rows.append(row)
        return rows

    def _leadership(self, name: str) -> tuple[Counter, dict[str, float]]:
        """Per broker of cluster ``name``: the partitions it leads, and Kafka's leader imbalance ratio (the
        controller's ``leader.imbalance.per.broker.percentage`` check): of the partitions whose preferred
        leader it is, the share it does not lead."""
        leads, preferred, elsewhere = Counter(), Counter(), Counter()
        for (cluster, _, _), p in self.partitions.items():
            if cluster != name or p.leader is None:
                continue
            if p.leader >= 0:
                leads[str(p.leader)] += 1
            if p.preferred is not None:
                preferred[str(p.preferred)] += 1
                elsewhere[str(p.preferred)] += p.leader != p.preferred
        return leads, {broker: elsewhere[broker] / count for broker, count in preferred.items()}

    def _up(self, cluster: _Cluster, broker: str) -> bool:
        """Listed by the newest metadata scrape, while there are recent ones (the cluster's own word: a
        broker whose JMX does not answer is not down for that); else, or for a dedicated KRaft controller
        (which the broker list never names), its gauges are recent."""
        if self._listing(cluster) and not _controller_only(cluster, broker):
            return cluster.registered.get(broker) == cluster.registered_s
        return self._reported(cluster, broker)

    def _listing(self, cluster: _Cluster) -> bool:
        """The cluster's broker list (metadata scrapes) is recent."""
        return cluster.now_s - cluster.registered_s <= self.forget_after_s

    def _reported(self, cluster: _Cluster, broker: str) -> bool:
        """Its broker gauges (JMX, exporter) are recent."""
        seen = cluster.broker_seen_s.get(broker)
        return seen is not None and cluster.now_s - seen <= self.stale_after_s

    def _cluster(self, name: str, cluster: _Cluster, out: list) -> dict[str, Any]:
        row = _row(name, cluster.now_s, "cluster")
        row["active_controllers"] = self._active_controllers(cluster)
        if row["active_controllers"] is not None:
            out.append(Derived("kobs_cluster_active_controllers", (name,), row["active_controllers"]))
        counted = cluster.unclean_from_counters if cluster.unclean_counters else cluster.unclean_from_events
        row["unclean_elections"] = counted  # Kafka's own count when a controller serves it
        out.append(Derived("kobs_unclean_leader_elections_total", (name,), counted))
        out.append(Derived("kobs_maintenance_grace_seconds", (name,), self.maintenance_grace_s))
        return row

    def _active_controllers(self, cluster: _Cluster) -> int | None:
        """The live brokers' gauges that reported lately; none (every JMX scrape failing): unknown, not 0.
        A sum of 0 is unknown too while a live broker's gauge is missing (that broker may be the controller
        whose JMX scrape is slow on a busy host) or was read before the last controller stopped (the new
        controller's next scrape will read 1): 0 controllers pages."""
        up = [b for b in cluster.controller_gauge if self._up(cluster, b)]
        reported = [b for b in up if self._reported(cluster, b)]
        gauges = [_still_active(cluster, b, reported) for b in reported]
        if gauges and sum(gauges) >= 0.5:
            return round(sum(gauges))
        since_loss = all(_read_s(cluster, b) >= cluster.controller_lost_s for b in reported)
        if gauges and len(gauges) == len(up) and since_loss:
            return 0
        if cluster.controller_event is not None:
            return int(cluster.controller_event >= 0)
        return None


def _controllers_gone(cluster: _Cluster, t_s: float) -> None:
    """A controller that the metadata scrape at ``t_s`` no longer lists (killed, or hung past its session)
    stopped being the controller by then: its gauge reads 0 from ``t_s``."""
    for broker, value in cluster.controller_gauge.items():
        if value >= 1 and cluster.registered.get(broker, t_s) < t_s:
            cluster.controller_gauge[broker] = 0.0
            cluster.controller_read_s[broker] = t_s
            cluster.controller_lost_s = max(cluster.controller_lost_s, t_s)


def _controller_only(cluster: _Cluster, node: str) -> bool:
    """A node with controller gauges that no metadata scrape has listed: a dedicated KRaft controller
    (broker-only nodes have no ``kafka.controller`` beans; a broker listed once stays a broker)."""
    return node in cluster.controller_gauge and node not in cluster.registered


def _read_s(cluster: _Cluster, broker: str) -> float:
    """When the broker's controller gauge was read (its newest gauge for state stored before that field)."""
    return cluster.controller_read_s.get(broker, cluster.broker_seen_s[broker])


def _still_active(cluster: _Cluster, broker: str, reported: list[str]) -> float:
    """The broker's ActiveControllerCount, 0 if it read 1 before another broker became the controller: the
    other's scrape saw the handover first (scrapes are seconds apart), and its own next scrape will say 0.
    Two brokers that both read 1 after the newer one became the controller are two controllers."""
    value, since = cluster.controller_gauge[broker], cluster.controller_since_s
    others = [since.get(b, -math.inf) for b in reported if b != broker and cluster.controller_gauge[b] >= 1]
    return 0.0 if value >= 1 and others and _read_s(cluster, broker) < max(others) else value


def _partition_series(labels: tuple[str, str, str], p: _Partition) -> list[Derived]:
    """The partition's own series, named after kafka_exporter's (docs/migrating.md); unknown ones left out."""
    out = [
        Derived(f"kobs_partition_{name}", labels, value)
        for name, value in (("leader", p.leader), ("replicas", p.replicas), ("in_sync_replicas", p.isr))
        if value is not None
    ]
    if p.replicas is not None and p.isr is not None:
        out.append(Derived("kobs_partition_under_replicated", labels, float(p.isr < p.replicas)))
    if p.preferred is not None and p.leader is not None:
        out.append(Derived("kobs_partition_leader_is_preferred", labels, float(p.leader == p.preferred)))
    return out


def _row(cluster: str, at_s: float, scope: str, **labels: str) -> dict[str, Any]:
    return dict.fromkeys(HISTORY_SCHEMA.names) | {"cluster": cluster, "at_s": at_s, "scope": scope} | labels


def _broker_order(broker: str) -> tuple[int, str]:
    return (int(broker), "") if broker.lstrip("-").isdigit() else (0, broker)

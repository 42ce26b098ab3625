"""The KRaft controller quorum: its leader, epoch, time without a leader, commit latency and fenced brokers.

Pure (no Spark). Every node serves the quorum as it sees it (raft-metrics): the leader's node id (-1 while
an election is under way), the epoch (every election raises it), the number of voters and, on the leader,
how long committing a metadata record takes; every controller serves how many brokers it has fenced. The
quorum is what the highest epoch among the nodes heard from within ``stale_s`` says: a node that stopped
answering (a hung or dead old leader) is left at an older epoch and outvoted. It is leaderless while no
such node names a leader at that epoch; ``kobs_quorum_leaderless_seconds`` counts from the first scrape
that saw it so, and is 0 again once a leader is named. ``kobs_quorum_leader`` is the last leader named,
kept through an election, so that ``changes()`` over it counts moves of the active controller (the leader
of the quorum is the active controller). ZooKeeper-mode clusters serve no raft-metrics and get no series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import groupby
from operator import attrgetter

import pyarrow as pa

from common import names
from spark_jobs.analysis import Derived, Evaluation, Observation

READ = {
    names.RAFT_LEADER, names.RAFT_EPOCH, names.RAFT_VOTERS, names.RAFT_COMMIT_LATENCY_AVG_MS,
    names.RAFT_COMMIT_LATENCY_MAX_MS, names.FENCED_BROKERS,
}  # fmt: skip
HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("at_s", pa.float64()),
        ("leader", pa.int64()),
        ("epoch", pa.int64()),
        ("leaderless_s", pa.float64()),
        ("commit_latency_s", pa.float64()),
        ("fenced_brokers", pa.float64()),
    ]
)


class Quorum:
    """One cluster's quorum: each node's newest readings, the last leader named, since when none is."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, tuple[float, float]]] = {}  # node -> name -> (t, value)
        self.leader = -1
        self.leaderless_since: float | None = None

    def fresh(self, since: float) -> dict[str, dict[str, float]]:
        """node -> name -> value of the readings taken at ``since`` or later."""
        found = {}
        for node, readings in self.nodes.items():
            values = {name: value for name, (t, value) in readings.items() if t >= since}
            if values:
                found[node] = values
        return found

    def settle(self, t_s: float, stale_s: float) -> None:
        """The quorum's state after the scrapes up to ``t_s``: its leader, or since when it has none."""
        voters = [v for v in self.fresh(t_s - stale_s).values() if names.RAFT_EPOCH in v]
        if not voters:
            return  # nothing heard: neither a leader nor proof of its absence
        epoch = max(v[names.RAFT_EPOCH] for v in voters)
        named = {v.get(names.RAFT_LEADER, -1) for v in voters if v[names.RAFT_EPOCH] == epoch} - {-1}
        if named:
            self.leader, self.leaderless_since = int(min(named)), None
        elif self.leaderless_since is None:
            self.leaderless_since = t_s


class QuorumAnalysis:
    """Per KRaft cluster: the quorum's leader, epoch, voters, leaderless time, commit latency, fenced
    brokers."""

    table = "quorum"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset(READ)
    settings = ("stale_s",)
    chunked: frozenset[str] = frozenset()

    def __init__(self, stale_s: float = 300.0):
        self.stale_s = stale_s
        self.quorums: dict[str, Quorum] = {}
        self.now_s = -math.inf

    def observe(self, observations: Iterable[Observation]) -> None:
        for t_s, group in groupby(sorted(observations, key=attrgetter("t_s")), key=attrgetter("t_s")):
            touched = set()
            for o in group:
                node = o.labels.get("broker")
                if node is None or o.value is None or math.isnan(o.value):
                    continue
                quorum = self.quorums.setdefault(o.cluster, Quorum())
                quorum.nodes.setdefault(node, {})[o.name] = (t_s, o.value)
                touched.add(o.cluster)
            self.now_s = max(self.now_s, t_s)
            for cluster in touched:
                self.quorums[cluster].settle(t_s, self.stale_s)

    def evaluate(self) -> Evaluation:
        history, metrics = [], []
        since = self.now_s - self.stale_s
        for cluster, quorum in sorted(self.quorums.items()):
            nodes = quorum.fresh(since)
            voters = [v for v in nodes.values() if names.RAFT_EPOCH in v]
            if not nodes:
                continue
            figures: dict[str, float] = {}
            if voters:
                leaderless = 0.0 if quorum.leaderless_since is None else self.now_s - quorum.leaderless_since
                figures |= {
                    "kobs_quorum_leader": quorum.leader,
                    "kobs_quorum_epoch": max(v[names.RAFT_EPOCH] for v in voters),
                    "kobs_quorum_leaderless_seconds": leaderless,
                }
                counted = [v[names.RAFT_VOTERS] for v in voters if names.RAFT_VOTERS in v]
                if counted:
                    figures["kobs_quorum_voters"] = max(counted)
            leader = nodes.get(str(quorum.leader), {}) if quorum.leaderless_since is None else {}
            for name, metric in (
                (names.RAFT_COMMIT_LATENCY_AVG_MS, "kobs_quorum_commit_latency_seconds"),
                (names.RAFT_COMMIT_LATENCY_MAX_MS, "kobs_quorum_commit_latency_max_seconds"),
            ):
                if name in leader:
                    figures[metric] = leader[name] / 1e3
            fenced = [v[names.FENCED_BROKERS] for v in nodes.values() if names.FENCED_BROKERS in v]
            if fenced:  # every controller replays the same metadata log: the same count on each
                figures["kobs_cluster_fenced_brokers"] = max(fenced)
            metrics += [Derived(name, (cluster,), value) for name, value in sorted(figures.items())]
            history.append(
                {
                    "cluster": cluster,
                    "at_s": self.now_s,
                    "leader": quorum.leader if voters else None,
                    "epoch": int(figures["kobs_quorum_epoch"]) if voters else None,
                    "leaderless_s": figures.get("kobs_quorum_leaderless_seconds"),
                    "commit_latency_s": figures.get("kobs_quorum_commit_latency_seconds"),
                    "fenced_brokers": figures.get("kobs_cluster_fenced_brokers"),
                }
            )
        return Evaluation(history, metrics)

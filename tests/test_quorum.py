"""The KRaft quorum from each node's raft-metrics, pure: the leader, elections and the time without a leader,
against hand-written timelines of what Kafka's nodes report (a follower that stops hearing from its leader
becomes a candidate with a higher epoch and no leader, current-leader -1, until a vote names one)."""

from __future__ import annotations

import pickle

from common import names
from spark_jobs.analysis import Observation
from spark_jobs.quorum import QuorumAnalysis


def node(t_s: float, node_id: int, epoch: int, leader: int, **more: float) -> list[Observation]:
    """One node's raft-metrics scrape at ``t_s``."""
    values = {names.RAFT_EPOCH: epoch, names.RAFT_LEADER: leader, names.RAFT_VOTERS: 3, **more}
    return [
        Observation(name, "prod", f"jmx/broker-{node_id}", {"broker": str(node_id)}, t_s, float(v), None)
        for name, v in values.items()
    ]


def figures(analysis: QuorumAnalysis) -> dict[str, float]:
    return {m.name: m.value for m in analysis.evaluate().metrics if m.labels == ("prod",)}


LATENCY = {names.RAFT_COMMIT_LATENCY_AVG_MS: 4.0, names.RAFT_COMMIT_LATENCY_MAX_MS: 18.0}


def test_a_quorum_with_a_leader_names_it_with_its_commit_latency_and_no_leaderless_time():
    analysis = QuorumAnalysis(stale_s=45)
    analysis.observe(
        [*node(0, 1, 4, 1, **LATENCY, **{names.FENCED_BROKERS: 0}), *node(1, 2, 4, 1), *node(2, 3, 4, 1)]
    )
    assert figures(analysis) == {
        "kobs_quorum_leader": 1,
        "kobs_quorum_epoch": 4,
        "kobs_quorum_leaderless_seconds": 0,
        "kobs_quorum_voters": 3,
        "kobs_quorum_commit_latency_seconds": 0.004,
        "kobs_quorum_commit_latency_max_seconds": 0.018,
        "kobs_cluster_fenced_brokers": 0,
    }


def test_a_hung_leader_is_outvoted_by_the_candidates_epoch_and_the_election_is_timed_until_a_leader():
    analysis = QuorumAnalysis(stale_s=45)
    analysis.observe([*node(0, 1, 4, 1, **LATENCY), *node(0, 2, 4, 1), *node(0, 3, 4, 1)])
    # node 1 stops answering; its last reading (epoch 4, itself the leader) is still fresh but older
    analysis.observe([*node(15, 2, 5, -1), *node(15, 3, 5, -1)])
    analysis.observe([*node(21, 2, 5, -1), *node(21, 3, 5, -1)])
    got = figures(analysis)
    assert got["kobs_quorum_leaderless_seconds"] == 6  # since the first scrape that saw no leader
    assert got["kobs_quorum_leader"] == 1 and got["kobs_quorum_epoch"] == 5  # the last named, kept
    assert "kobs_quorum_commit_latency_seconds" not in got  # no leader commits anything
    analysis.observe([*node(25, 2, 5, 2, **LATENCY), *node(25, 3, 5, 2)])
    got = figures(analysis)
    assert got["kobs_quorum_leader"] == 2 and got["kobs_quorum_leaderless_seconds"] == 0
    assert got["kobs_quorum_commit_latency_seconds"] == 0.004


def test_one_voter_of_three_left_stays_a_candidate_and_the_leaderless_time_grows():
    analysis = QuorumAnalysis(stale_s=45)
    analysis.observe([*node(0, 1, 7, 2), *node(0, 2, 7, 2), *node(0, 3, 7, 2)])
    for t_s, epoch in ((10, 8), (20, 9), (30, 10), (40, 11)):  # no majority: every vote fails
        analysis.observe(node(t_s, 3, epoch, -1))
    assert figures(analysis)["kobs_quorum_leaderless_seconds"] == 30
    restored = pickle.loads(pickle.dumps(analysis))  # the pipeline's snapshot between batches
    restored.observe(node(50, 3, 12, -1))
    assert figures(restored)["kobs_quorum_leaderless_seconds"] == 40


def test_a_cluster_silent_for_longer_than_stale_s_is_forgotten():
    analysis = QuorumAnalysis(stale_s=45)
    analysis.observe(node(0, 1, 1, 1))
    other = Observation(names.RAFT_EPOCH, "other", "jmx/broker-1", {"broker": "1"}, 100, 3.0, None)
    analysis.observe([other])  # another cluster's scrape moves time on
    assert {m.labels for m in analysis.evaluate().metrics} == {("other",)}

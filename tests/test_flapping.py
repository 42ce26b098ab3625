"""Flapping-ISR detection against known answers: hand-built sequences and the simulator's ISR changes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from chunks import fed_both_ways

from common.metrics import FLAPPING_CAUSE
from common.names import PARTITION_COUNT
from simulator.scenario import Event, Simulation, load_scenario
from spark_jobs.analysis import Observation
from spark_jobs.flapping import FlappingAnalysis

fed = fed_both_ways(FlappingAnalysis)  # every test: one by one (the reference) and in chunks (the stream)


def isr_change(t_s, old, new, partition=0, topic="t", cluster="c", leader=None) -> Observation:
    left, joined = set(old) - set(new), set(new) - set(old)
    change = "replace" if left and joined else "shrink" if left else "expand"
    leader = new[0] if leader is None else leader
    return observation(cluster, t_s, topic, partition, old, new, leader, -1, change)


def observation(cluster, t_s, topic, partition, old, new, leader, leader_epoch, change) -> Observation:
    """An ``isr_change`` event as the pipeline hands it over (fields as in docs/contract.md)."""
    event = {"topic": topic, "partition": partition, "old_isr": list(old), "new_isr": list(new)}
    event |= {"leader": leader, "leader_epoch": leader_epoch, "change": change}
    return Observation("isr_change", cluster, "zookeeper/isr", {}, t_s, None, event)


def tick(t_s, cluster="c") -> Observation:
    """A broker gauge that only advances the analysis's clock."""
    return Observation(PARTITION_COUNT, cluster, "exporter/broker-0", {"broker": "0"}, t_s, 3, None)


def flap(t_left, t_back, broker=2, partition=0, others=(0, 1)):
    """Broker ``broker`` leaves the ISR of ``partition`` at ``t_left`` and rejoins it at ``t_back``."""
    return [
        isr_change(t_left, [*others, broker], list(others), partition),
        isr_change(t_back, list(others), [*others, broker], partition),
    ]


def metrics(analysis: FlappingAnalysis) -> dict:
    return {(name, labels): value for name, labels, value in analysis.evaluate().metrics}


def test_a_broker_that_only_reports_gets_its_zero_series_and_the_clock_moves_with_each_scrape():
    analysis = FlappingAnalysis()
    analysis.observe([tick(0), *flap(10, 20)])
    analysis.observe(
        [Observation(PARTITION_COUNT, "c", "exporter/broker-7", {"broker": "7"}, 500, 4, None), tick(600)]
    )
    m = metrics(analysis)
    assert (m["kobs_isr_flapping_partitions", ("c", "7")], m["kobs_isr_flap_share_ratio", ("c", "7")]) == (
        0,
        0.0,
    )
    assert m["kobs_isr_flap_share_ratio", ("c", "2")] == 1.0  # broker 2's one flap, broker 0 reporting too
    assert {r["at_s"] for r in analysis.evaluate().history} == {600}


def test_three_rejoins_within_ten_minutes_make_a_partition_flap_one_broker_behind_it():
    analysis = FlappingAnalysis()  # 3 flaps in 600 s, cleared after 900 s without one
    analysis.observe([*flap(0, 30), *flap(100, 130)])
    assert metrics(analysis)["kobs_isr_flapping_partitions", ("c", "2")] == 0  # two flaps: not yet
    analysis.observe(flap(200, 230))
    m = metrics(analysis)
    assert m["kobs_isr_flapping_partitions", ("c", "2")] == 1
    assert m["kobs_isr_flapping_partitions", ("c", "0")] == 0  # brokers seen in ISRs get a 0 series
    assert m["kobs_isr_flap_share_ratio", ("c", "2")] == 1.0
    assert m["kobs_cluster_isr_flapping_cause", ("c",)] == FLAPPING_CAUSE["one_broker"]
    [row] = analysis.evaluate().history
    assert (row["broker"], row["flaps"], row["flapping"], row["last_flap_s"], row["cause"]) == (
        "2", 3, True, 230, "one_broker"
    )  # fmt: skip


def test_three_rejoins_spread_over_more_than_the_window_do_not_flap():
    analysis = FlappingAnalysis()
    analysis.observe([*flap(0, 30), *flap(300, 330), *flap(620, 650)])  # 30 and 650 are 620 s apart
    assert metrics(analysis)["kobs_isr_flapping_partitions", ("c", "2")] == 0
    assert metrics(analysis)["kobs_cluster_isr_flapping_cause", ("c",)] == FLAPPING_CAUSE["none"]


def test_hysteresis_keeps_a_slow_flapper_flapping_until_it_is_quiet_for_clear_after():
    analysis = FlappingAnalysis(flaps=3, window_s=600, clear_after_s=900)
    analysis.observe([*flap(0, 10), *flap(230, 240), *flap(470, 480)])  # a flap every 4 minutes
    assert metrics(analysis)["kobs_isr_flapping_partitions", ("c", "2")] == 1
    # At 700 only 2 flaps (240, 480) are within 10 minutes: without hysteresis the state would end here.
    analysis.observe([tick(700)])
    assert metrics(analysis)["kobs_isr_flapping_partitions", ("c", "2")] == 1
    analysis.observe([tick(480 + 899)])
    assert metrics(analysis)["kobs_isr_flapping_partitions", ("c", "2")] == 1
    analysis.observe([tick(480 + 900)])  # 15 minutes without a flap
    m = metrics(analysis)
    assert m["kobs_isr_flapping_partitions", ("c", "2")] == 0
    assert m["kobs_cluster_isr_flapping_cause", ("c",)] == FLAPPING_CAUSE["none"]
    assert analysis.evaluate().history == []  # nothing left to remember


def test_the_same_change_from_two_sources_and_a_stale_report_count_once():
    analysis = FlappingAnalysis()
    zookeeper = [*flap(0, 30), *flap(100, 130)]
    metadata = [o._replace(source="admin/metadata", t_s=o.t_s + 5) for o in zookeeper]
    analysis.observe([*zookeeper, *metadata])
    analysis.observe([isr_change(20, [0, 1, 2], [0, 1])])  # older than what is known: stale
    [row] = analysis.evaluate().history
    assert (row["flaps"], row["flapping"]) == (2, False)


def test_a_replica_joining_for_the_first_time_is_not_a_flap():
    analysis = FlappingAnalysis(flaps=1)
    analysis.observe([isr_change(0, [0, 1], [0, 1, 2]), isr_change(10, [0, 1, 2], [0, 1, 2, 3])])
    assert metrics(analysis)["kobs_isr_flapping_partitions", ("c", "2")] == 0
    assert analysis.evaluate().history == []


def test_malformed_events_are_skipped():
    analysis = FlappingAnalysis()
    bad = [
        Observation("isr_change", "c", "s", {}, 1.0, None, {"topic": "t"}),
        Observation("isr_change", "c", "s", {}, 2.0, None, {**flap(0, 1)[0].event, "new_isr": ["x"]}),
        Observation("isr_change", "c", "s", {}, 3.0, None, {**flap(0, 1)[0].event, "change": "grow"}),
    ]
    analysis.observe([*bad, *flap(10, 20)])
    [row] = analysis.evaluate().history
    assert row["flaps"] == 1


def simulated_changes(sim: Simulation, cluster: str = "sim") -> list[Observation]:
    """The ISR writes of a simulation as the contract's events (what Kafka wrote to the state znodes)."""
    return [
        observation(cluster, c.ts, c.topic, c.partition, c.old_isr, c.new_isr, c.leader, -1, c.change)
        for c in sim.cluster.changes
    ]


def test_scenario_b_traffic_bursts_flap_every_follower_many_brokers_at_once():
    # isr-flapping: 0.8's replica.lag.max.messages=4000, bursts every 30 s; 3 partitions of RF 3 on 3
    # brokers, so each broker follows 2 partitions, and each burst drops both followers of every partition.
    sim = Simulation(load_scenario("isr-flapping"))
    sim.advance(sim.scenario.duration_s)
    analysis = FlappingAnalysis()
    analysis.observe(simulated_changes(sim))
    m = metrics(analysis)
    for broker in ("0", "1", "2"):
        assert m["kobs_isr_flapping_partitions", ("sim", broker)] == 2
        assert m["kobs_isr_flap_share_ratio", ("sim", broker)] == pytest.approx(1 / 3)
    assert m["kobs_cluster_isr_flapping_cause", ("sim",)] == FLAPPING_CAUSE["many_brokers"]


def test_a_broker_stalling_every_40_seconds_flaps_alone():
    # slow-follower with broker 2 throttled 20 s out of every 40: after replica.lag.time.max.ms (10 s) it
    # leaves the ISRs of the two partitions it follows (1 and 3), and rejoins once unthrottled.
    scenario = load_scenario("slow-follower")
    toggles = [
        Event(at, "slow_broker", {"broker": 2, "fetch_bytes_per_s": rate})
        for start in (20, 60, 100, 140)
        for at, rate in ((start, 1_000_000), (start + 20, None))
    ]
    sim = Simulation(dataclasses.replace(scenario, events=toggles))
    sim.advance(180)
    analysis = FlappingAnalysis()
    analysis.observe(simulated_changes(sim))
    m = metrics(analysis)
    assert m["kobs_isr_flapping_partitions", ("sim", "2")] == 2
    assert m["kobs_isr_flapping_partitions", ("sim", "0")] == 0
    assert m["kobs_isr_flap_share_ratio", ("sim", "2")] == 1.0
    assert m["kobs_cluster_isr_flapping_cause", ("sim",)] == FLAPPING_CAUSE["one_broker"]
    assert sorted((r["partition"], r["flaps"]) for r in analysis.evaluate().history) == [("1", 4), ("3", 4)]


def test_state_survives_a_snapshot():
    analysis = FlappingAnalysis()
    analysis.observe([*flap(0, 30), *flap(100, 130)])
    restored = pickle.loads(pickle.dumps(analysis))
    for a in (analysis, restored):
        a.observe(flap(200, 230))
    assert metrics(restored) == metrics(analysis)

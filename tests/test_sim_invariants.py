"""Property-based: the model's invariants hold at every step of random clusters, clients and faults."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.consumer import GroupSpec
from simulator.invariants import violations
from simulator.model import ClusterSettings, TopicSpec
from simulator.producer import ProducerSpec
from simulator.scenario import Event, Scenario, Simulation


@st.composite
def scenarios(draw) -> Scenario:
    brokers = draw(st.integers(1, 5))
    topics = [
        TopicSpec(
            f"t{i}",
            draw(st.integers(1, 8)),
            draw(st.integers(1, brokers)),
            message_bytes=draw(st.sampled_from([100, 1000, 10_000])),
            min_insync_replicas=draw(st.integers(1, 3)),
            segment_bytes=draw(st.sampled_from([20_000, 1024**3])),
            retention_bytes=draw(st.sampled_from([None, 50_000])),
            retention_s=draw(st.sampled_from([None, 3.0])),
        )
        for i in range(draw(st.integers(1, 2)))
    ]
    producers = [
        ProducerSpec(
            f"p{i}",
            draw(st.sampled_from(topics)).name,
            draw(st.sampled_from([0, 100, 5000, 50_000])),
            acks=draw(st.sampled_from(["0", "1", "all"])),
            buffer_memory=draw(st.sampled_from([100_000, 2_000_000])),
            max_block_ms=draw(st.sampled_from([500, 3000])),
            delivery_timeout_ms=draw(st.sampled_from([2000, 120_000])),
            partitioner=draw(st.sampled_from(["keyed", "sticky"])),
            burst_every_s=draw(st.sampled_from([None, 3.0])),
            burst_messages_per_s=50_000,
        )
        for i in range(draw(st.integers(0, 3)))
    ]
    groups = [
        GroupSpec(
            f"g{i}",
            draw(st.sampled_from(topics)).name,
            members=draw(st.integers(1, 3)),
            messages_per_s=draw(st.sampled_from([None, 500])),
            commit_interval_s=1.0,
        )
        for i in range(draw(st.integers(0, 2)))
    ]
    actions = st.one_of(
        st.builds(lambda b: ("kill_broker", {"broker": b}), st.integers(0, brokers - 1)),
        st.builds(lambda b: ("start_broker", {"broker": b}), st.integers(0, brokers - 1)),
        st.builds(
            lambda b, r: ("slow_broker", {"broker": b, "fetch_bytes_per_s": r}),
            st.integers(0, brokers - 1),
            st.sampled_from([None, 0, 50_000]),
        ),
    )
    events = [
        Event(at, *action)
        for at, action in draw(st.lists(st.tuples(st.integers(0, 14).map(float), actions), max_size=8))
    ]
    cluster = ClusterSettings(
        replica_lag_time_max_s=draw(st.sampled_from([1.0, 10.0])),
        replica_lag_max_messages=draw(st.sampled_from([None, 200])),
        min_insync_replicas=draw(st.integers(1, 2)),
        unclean_leader_election=draw(st.booleans()),
        replica_fetch_max_bytes=draw(st.sampled_from([10_000, 1_048_576])),
        log_retention_check_s=draw(st.sampled_from([1.0, 300.0])),
        page_cache_bytes=draw(st.sampled_from([None, 100_000])),
        disk_read_bytes_per_s=draw(st.sampled_from([None, 0, 200_000])),
        network_out_bytes_per_s=draw(st.sampled_from([None, 500_000])),
    )
    return Scenario(
        "random",
        topics,
        seed=draw(st.integers(0, 99)),
        tick_s=0.1,
        brokers=brokers,
        cluster=cluster,
        producers=producers,
        groups=groups,
        events=sorted(events, key=lambda e: e.at),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_at_every_step(scenario):
    sim = Simulation(scenario)
    assert violations(sim.cluster) == []
    for _ in range(160):
        sim.tick()
        assert violations(sim.cluster) == []


def test_the_invariant_check_catches_a_broken_state():
    sim = Simulation(Scenario("x", [TopicSpec("t", 1, 2, start_index=0, replica_shift=0)]))
    p = sim.cluster.partitions[0]
    p.hw = 5  # above every LEO
    p.isr = [1]  # leader 0 outside its ISR after a clean election
    problems = violations(sim.cluster)
    assert any("t-0: HW above the LEO of an ISR member" in v for v in problems)
    assert any("t-0: leader not in the ISR after a clean election" in v for v in problems)

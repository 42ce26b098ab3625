"""Losing brokers: offline and under-min-ISR partitions, and when producers block."""

from __future__ import annotations

import pytest

from app.capacity.failure import Producer, lose_brokers, stalled_members
from app.capacity.model import MIB, CapacityError
from common.placement import assign_replicas, range_assign

# The classic incident: 16 partitions, replication factor 1, 3 brokers. With start 0, partition p sits on
# broker p % 3, so broker 1 holds partitions 1, 4, 7, 10, 13.
INCIDENT = assign_replicas([0, 1, 2], 16, 1, start_index=0, replica_shift=0)


def test_incident_partitions_on_the_dead_broker_go_offline():
    impact = lose_brokers(INCIDENT, {1})
    assert impact.offline == (1, 4, 7, 10, 13)
    assert all(impact.leaders[p] is None for p in impact.offline)
    assert impact.leaders[0] == 0 and impact.leaders[2] == 2


def test_incident_keyed_producer_blocks_after_buffer_over_stuck_rate():
    web = Producer("web", bytes_per_s=1 * MIB)
    (impact,) = lose_brokers(INCIDENT, {1}, producers=[web]).producers
    # 5 of 16 partitions are stuck: 5/16 MiB/s piles up in a 32 MiB buffer -> 32 / (5/16) = 102.4 s.
    assert impact.stuck_bytes_per_s == pytest.approx(5 / 16 * MIB)
    assert impact.seconds_to_block == pytest.approx(102.4)


def test_unkeyed_producer_avoids_leaderless_partitions():
    (impact,) = lose_brokers(INCIDENT, {1}, producers=[Producer("logs", MIB, keyed=False)]).producers
    assert impact.seconds_to_block is None


def test_producer_writing_only_healthy_partitions_never_blocks():
    (impact,) = lose_brokers(INCIDENT, {1}, producers=[Producer("p", MIB, partitions=(0, 2, 3))]).producers
    assert impact.stuck_partitions == () and impact.seconds_to_block is None


def test_rf3_survives_two_losses_but_goes_under_min_isr():
    # Worked example placement: p0 [0,1,2], p1 [1,2,3], p4 [4,0,1], p5 [0,2,3], p9 [4,1,2].
    placement = assign_replicas(range(5), 10, 3, start_index=0, replica_shift=0)
    impact = lose_brokers(placement, {0, 1}, min_insync_replicas=2)
    assert impact.offline == ()
    assert {0, 4} <= set(impact.under_min_isr)  # p0 keeps only 2, p4 only 4
    assert 5 not in impact.under_min_isr and 5 in impact.under_replicated  # p5 keeps 2 and 3
    assert impact.leaders[0] == 2 and impact.leaders[4] == 4 and impact.leaders[1] == 2


def test_acks_all_producers_also_pile_up_on_under_min_isr_partitions():
    placement = assign_replicas(range(5), 10, 3, start_index=0, replica_shift=0)
    producers = [Producer("strict", MIB, acks="all"), Producer("relaxed", MIB, acks="1")]
    strict, relaxed = lose_brokers(placement, {0, 1}, 2, producers).producers
    assert set(strict.stuck_partitions) >= {0, 4} and strict.seconds_to_block is not None
    assert relaxed.seconds_to_block is None


def test_losing_all_replicas_takes_rf3_partitions_offline():
    placement = assign_replicas(range(5), 10, 3, start_index=0, replica_shift=0)
    assert 0 in lose_brokers(placement, {0, 1, 2}).offline  # p0 lived on [0, 1, 2]


def test_unknown_broker_and_negative_rate_are_errors():
    with pytest.raises(CapacityError, match=r"pick from \[0, 1, 2\]"):
        lose_brokers(INCIDENT, {7})
    with pytest.raises(CapacityError, match="negative"):
        Producer("p", -1.0)


def test_group_members_owning_offline_partitions_stall():
    offline = lose_brokers(INCIDENT, {1}).offline  # 1, 4, 7, 10, 13
    members = range_assign(INCIDENT, ["a", "b", "c"])  # a: 0-5, b: 6-10, c: 11-15
    assert stalled_members(members, offline) == {"a": [1, 4], "b": [7, 10], "c": [13]}
    assert stalled_members(members, ()) == {}

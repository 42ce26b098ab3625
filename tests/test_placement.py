"""Replica placement, range assignment and coordinator lookup against Kafka's documented algorithms."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from common.errors import InputError
from common.placement import assign_replicas, coordinator_partition, java_string_hash, range_assign


def test_worked_example_from_kafka_notes():
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, replica_shift=0)
    assert got[0] == [0, 1, 2]
    assert got[1] == [1, 2, 3]
    assert got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3]
    assert got[9] == [4, 1, 2]
    assert sorted(got) == list(range(10))


def test_broker_ids_are_sorted_first():
    assert assign_replicas([40, 10, 30, 20, 0], 10, 3, 0, 0) == {
        p: [b * 10 for b in replicas] for p, replicas in assign_replicas(range(5), 10, 3, 0, 0).items()
    }


def test_a_seed_reproduces_a_random_placement():
    seeded = [assign_replicas([3, 1, 2, 7], 20, 2, rng=random.Random(5)) for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_random_starts_still_give_distinct_replicas_and_balanced_leaders():
    got = assign_replicas(range(6), 60, 3, rng=random.Random(7))
    assert all(len(set(replicas)) == 3 for replicas in got.values())
    assert set(Counter(replicas[0] for replicas in got.values()).values()) == {10}


def test_adding_partitions_counts_from_the_current_count():
    # p6: first (6 + 0) % 5 = 1, then 1+1+0 = 2, 1+1+1 = 3; p10 is a multiple of 5: the shift becomes 1,
    # first 0, then (0+1+1) % 5 = 2 and (0+1+2) % 5 = 3.
    got = assign_replicas(range(5), 5, 3, 0, 0, first_partition=6)
    assert sorted(got) == [6, 7, 8, 9, 10]
    assert got[6] == [1, 2, 3] and got[10] == [0, 2, 3]


@pytest.mark.parametrize("rf", [0, 6])
def test_replication_factor_outside_1_to_brokers_is_an_error(rf):
    with pytest.raises(InputError, match=r"outside 1\.\.5") as err:
        assign_replicas(range(5), 10, rf, 0, 0)
    assert err.value.field == "replication_factor"


def test_range_assignor_gives_the_first_members_one_more():
    assert range_assign(range(10), ["c", "a", "b"]) == {"a": [0, 1, 2, 3], "b": [4, 5, 6], "c": [7, 8, 9]}


def test_members_beyond_the_partition_count_sit_idle():
    got = range_assign(range(2), ["m1", "m2", "m3"])
    assert got["m3"] == [] and got["m1"] == [0] and got["m2"] == [1]


def test_java_string_hash_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("polygenelubricants") == -(2**31)  # the classic Integer.MIN_VALUE hash


def test_coordinator_partition():
    assert coordinator_partition("test_group_1") == 30  # docs/kafka-behaviour.md
    assert coordinator_partition("polygenelubricants") == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert coordinator_partition("hello", 7) == 99162322 % 7

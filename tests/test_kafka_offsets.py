"""Planning micro-batches of the Kafka source: resets, new partitions, read limits (no Kafka, no Spark)."""

from __future__ import annotations

import pytest

from spark_jobs.kafka_offsets import SourceOffset, initial_offset, next_offset, share_limit

MARKS = {0: (0, 10), 1: (5, 8)}  # partition -> (log start, end)


def test_initial_offset_earliest_or_latest():
    assert initial_offset("id", MARKS, "earliest").offsets == {0: 0, 1: 5}
    assert initial_offset("id", MARKS, "latest").offsets == {0: 10, 1: 8}
    with pytest.raises(ValueError, match="startingOffsets"):
        initial_offset("id", MARKS, "newest")


def test_reads_everything_up_to_the_end_offsets_then_nothing_new():
    start = SourceOffset("id", {0: 4, 1: 5})
    end = next_offset(start, "id", MARKS)
    assert end == SourceOffset("id", {0: 10, 1: 8})
    assert next_offset(end, "id", MARKS) is end  # nothing new: the same offset, so Spark plans no batch


def test_new_partition_is_read_from_its_log_start():
    start = SourceOffset("id", {0: 10, 1: 8})
    end = next_offset(start, "id", {**MARKS, 2: (3, 7)})
    assert end.offsets == {0: 10, 1: 8, 2: 7}
    assert end.starts == {2: 3}
    assert end.resets == 0  # a new partition is not a reset


def test_offset_beyond_the_end_means_recreated_topic_resumes_at_log_start_and_counts():
    start = SourceOffset("id", {0: 50, 1: 8}, resets=2)
    end = next_offset(start, "id", MARKS)
    assert (end.offsets, end.starts, end.resets) == ({0: 10, 1: 8}, {0: 0}, 3)


def test_offset_below_log_start_means_retention_deleted_records_resumes_at_log_start():
    start = SourceOffset("id", {0: 10, 1: 2})
    end = next_offset(start, "id", MARKS)
    assert (end.offsets, end.starts, end.resets) == ({0: 10, 1: 8}, {1: 5}, 1)


def test_changed_topic_id_restarts_every_partition_once():
    start = SourceOffset("old", {0: 3, 1: 6})
    end = next_offset(start, "new", MARKS)
    assert (end.topic_id, end.offsets, end.starts, end.resets) == ("new", {0: 10, 1: 8}, {0: 0, 1: 5}, 1)


def test_read_limit_is_shared_in_proportion_to_what_waits():
    # 10 and 3 records wait, limit 5: 10*5/13 = 3 rest 11/13, 3*5/13 = 1 rest 2/13; the fifth record goes
    # to the larger rest, partition 0.
    assert share_limit({0: 10, 1: 3}, 5) == {0: 4, 1: 1}
    assert share_limit({0: 10, 1: 3}, None) == {0: 10, 1: 3}
    assert share_limit({0: 1, 1: 1, 2: 1}, 2) == {0: 1, 1: 1, 2: 0}
    end = next_offset(SourceOffset("id", {0: 0, 1: 5}), "id", MARKS, max_records=5)
    assert end.offsets == {0: 4, 1: 6}


def test_offset_json_round_trip():
    offset = SourceOffset("id", {0: 10, 1: 8}, {1: 5}, 4)
    assert offset.to_json() == {
        "topic_id": "id",
        "offsets": {"0": 10, "1": 8},
        "starts": {"1": 5},
        "resets": 4,
    }
    assert SourceOffset.from_json(offset.to_json()) == offset

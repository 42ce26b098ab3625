"""Planning micro-batches of the Kafka source: resets, new partitions, read limits (no Kafka, no Spark)."""

from __future__ import annotations

import pytest

from spark_jobs.kafka_offsets import SourceOffset, contiguous_groups, initial_offset, next_offset, share_limit
from spark_jobs.kafka_source import SCHEMA, KafkaSlice, KafkaStreamReader

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


def test_read_tasks_are_runs_of_neighbouring_partitions_of_about_equal_records():
    # Six partitions of 5 records in two tasks: 15 + 15.
    assert contiguous_groups([5] * 6, 2) == [[0, 1, 2], [3, 4, 5]]
    # 105 records: the cut nearest 52.5 is after 3 (sum 3) rather than after 103.
    assert contiguous_groups([1, 1, 1, 100, 1, 1], 2) == [[0, 1, 2], [3, 4, 5]]
    # 21 in three: cuts nearest 7 (6, after three) and 14 (15, after five): 6 + 9 + 6.
    assert contiguous_groups([1, 2, 3, 4, 5, 6], 3) == [[0, 1, 2], [3, 4], [5]]
    assert contiguous_groups([100, 1, 1, 1], 3) == [[0], [1], [2, 3]]  # no task left empty
    assert contiguous_groups([3, 3], 5) == [[0], [1]]  # fewer partitions than tasks allowed
    assert contiguous_groups([3, 3], None) == [[0], [1]]


def test_a_micro_batch_is_planned_as_at_most_max_tasks_tasks_in_partition_order():
    options = {"bootstrap.servers": "127.0.0.1:9", "topic": "m", "maxTasks": "2"}
    reader = KafkaStreamReader(options, SCHEMA)
    start = SourceOffset("id", {0: 0, 1: 5, 2: 7, 3: 0}).to_json()
    end = SourceOffset("id", {0: 10, 1: 8, 2: 7, 3: 12}).to_json()  # partition 2 has nothing new
    tasks = reader.partitions(start, end)
    assert [task.slices for task in tasks] == [
        [KafkaSlice("m", 0, 0, 10), KafkaSlice("m", 1, 5, 8)],
        [KafkaSlice("m", 3, 0, 12)],
    ]

"""The streaming query's own health counters and gauges (spark_jobs.pipeline_health)."""

from __future__ import annotations

import copy

import pytest

from spark_jobs.pipeline_health import BatchStats, PipelineHealth

NONE_DROPPED = {"partitions_per_group": 0, "max_series": 0}


def values(health: PipelineHealth, dropped=NONE_DROPPED) -> dict[tuple[str, tuple[str, ...]], float]:
    return {(d.name, d.labels): d.value for d in health.metrics(dropped)}


def test_counters_add_up_and_sources_keep_their_newest_time():
    health = PipelineHealth("stream")
    health.record(BatchStats(4, 1, {("prod", "admin/offsets"): 100.0, ("prod", "zk/isr"): 98.0}), 105, 107)
    health.record(BatchStats(3, 0, {("prod", "admin/offsets"): 110.0}), 111, 111.5)
    got = values(health, dropped={"partitions_per_group": 12, "max_series": 3})
    q = ("stream",)
    assert got[("kobs_pipeline_input_records_total", q)] == 7
    assert got[("kobs_pipeline_dead_letters_total", q)] == 1
    assert got[("kobs_pipeline_series_dropped", (*q, "partitions_per_group"))] == 12
    assert got[("kobs_pipeline_series_dropped", (*q, "max_series"))] == 3
    assert got[("kobs_source_last_seen_timestamp_seconds", ("prod", "admin/offsets"))] == 110
    assert got[("kobs_source_last_seen_timestamp_seconds", ("prod", "zk/isr"))] == 98
    # Completed at 111.5 after 0.5 s; the newest time processed is 110: 1.5 s behind.
    assert got[("kobs_pipeline_last_batch_timestamp_seconds", q)] == 111.5
    assert got[("kobs_pipeline_batch_duration_seconds", q)] == pytest.approx(0.5)
    assert got[("kobs_pipeline_batch_lag_seconds", q)] == pytest.approx(1.5)


def test_an_older_source_time_does_not_move_last_seen_back():
    health = PipelineHealth("stream")
    health.record(BatchStats(1, 0, {("prod", "admin/offsets"): 100.0}), 100, 101)
    health.record(BatchStats(1, 0, {("prod", "admin/offsets"): 90.0}), 102, 103)  # a spooled replay
    assert values(health)[("kobs_source_last_seen_timestamp_seconds", ("prod", "admin/offsets"))] == 100


def test_before_any_batch_only_the_counters_exist_at_zero():
    got = values(PipelineHealth("stream"))
    assert got == {
        ("kobs_pipeline_input_records_total", ("stream",)): 0,
        ("kobs_pipeline_dead_letters_total", ("stream",)): 0,
        ("kobs_pipeline_query_restarts_total", ("stream",)): 0,
        ("kobs_pipeline_records_lost_total", ("stream",)): 0,
        ("kobs_pipeline_series_dropped", ("stream", "partitions_per_group")): 0,
        ("kobs_pipeline_series_dropped", ("stream", "max_series")): 0,
    }


def test_the_state_copies_so_a_snapshot_restores_exact_counts():
    health = PipelineHealth("stream")
    health.record(BatchStats(5, 2, {}), 1, 2)
    saved = copy.deepcopy(health)  # what the pipeline's pickle snapshot does
    health.record(BatchStats(5, 2, {}, lost=3), 3, 4)
    assert (saved.input_records, saved.dead_letters, saved.records_lost) == (5, 2, 0)
    assert health.records_lost == 3

"""Log directories' disk space, pure: free share and bytes, the fill rate over the day and the runway, against
hand-computed answers."""

from __future__ import annotations

import math
import pickle

import pytest

from common import names
from spark_jobs.analysis import Observation
from spark_jobs.disks import DiskAnalysis

GB = 1e9
DAY = 86_400.0


def space(t_s: float, usable: float, total: float = 1000 * GB, log_dir: str = "/data/kafka") -> list:
    labels = {"broker": "1", "log_dir": log_dir}
    return [
        Observation(names.LOG_DIR_TOTAL_BYTES, "prod", "admin/log_dirs", labels, t_s, total, None),
        Observation(names.LOG_DIR_USABLE_BYTES, "prod", "admin/log_dirs", labels, t_s, usable, None),
    ]


def figures(analysis: DiskAnalysis, log_dir: str = "/data/kafka") -> dict[str, float]:
    return {m.name: m.value for m in analysis.evaluate().metrics if m.labels == ("prod", "1", log_dir)}


def test_free_share_and_bytes_at_once_and_no_rate_before_an_hour_of_history():
    analysis = DiskAnalysis()
    analysis.observe(space(0, 250 * GB))
    analysis.observe(space(1800, 249 * GB))
    assert figures(analysis) == {"kobs_log_dir_free_bytes": 249 * GB, "kobs_log_dir_free_ratio": 0.249}


def test_a_disk_filling_48_gb_a_day_with_240_gb_free_has_5_days():
    analysis = DiskAnalysis(stale_s=3600)
    for hour in range(7):  # 2 GB an hour: 48 GB a day
        analysis.observe(space(hour * 3600, (252 - 2 * hour) * GB))
    got = figures(analysis)
    assert got["kobs_log_dir_fill_bytes_per_second"] == pytest.approx(2 * GB / 3600)
    assert got["kobs_log_dir_runway_days"] == pytest.approx(240 / 48)
    restored = pickle.loads(pickle.dumps(analysis))  # the pipeline's snapshot between batches
    restored.observe(space(7 * 3600, 238 * GB))
    assert figures(restored)["kobs_log_dir_runway_days"] == pytest.approx(238 / 48)


def test_retention_freeing_space_is_no_runway_and_the_window_keeps_only_a_day():
    analysis = DiskAnalysis(stale_s=DAY, window_s=DAY, step_s=900)
    analysis.observe(space(0, 100 * GB))  # a day ago the disk was fuller
    analysis.observe(space(DAY / 2, 300 * GB))
    analysis.observe(space(DAY, 400 * GB))
    assert figures(analysis)["kobs_log_dir_runway_days"] == math.inf
    # at a day and a half the oldest point left in the day's window is the one at half a day (300 GB):
    # 300 -> 220 GB in a day is 80 GB a day, 220 GB free lasts 2.75 days
    analysis.observe(space(1.5 * DAY, 220 * GB))
    got = figures(analysis)
    assert got["kobs_log_dir_fill_bytes_per_second"] == pytest.approx(80 * GB / DAY)
    assert got["kobs_log_dir_runway_days"] == pytest.approx(2.75)


def test_a_directory_that_stops_answering_is_forgotten_and_dirs_are_apart():
    analysis = DiskAnalysis(stale_s=900)
    analysis.observe([*space(0, 10 * GB, log_dir="/a"), *space(0, 20 * GB, total=40 * GB, log_dir="/b")])
    assert figures(analysis, "/b")["kobs_log_dir_free_ratio"] == 0.5
    analysis.observe(space(1000, 10 * GB, log_dir="/a"))  # /b failed: no space answered for it
    assert figures(analysis, "/b") == {} and figures(analysis, "/a")["kobs_log_dir_free_bytes"] == 10 * GB

"""The consumer-lag tracker against hand-computed answers (Burrow's partition and group rules)."""

from __future__ import annotations

import itertools
import math
import pickle

import pytest
from chunks import fed_both_ways

from common.names import (
    GROUP_COMMITTED_OFFSET,
    GROUP_INFO,
    GROUP_MEMBERS,
    GROUP_PARTITION_MEMBER,
    PARTITION_END_OFFSET,
    PARTITION_START_OFFSET,
)
from spark_jobs import lag_tracker
from spark_jobs.analysis import Observation
from spark_jobs.lag import LagAnalysis
from spark_jobs.lag_tracker import GroupLag, LagTracker, Window
from spark_jobs.lag_windows import Windows
from spark_jobs.snapshots import load_state

fed = fed_both_ways(LagAnalysis)  # every test: one by one (the reference) and in chunks (the stream)


def feed(tracker: LagTracker, ends=(), commits=(), starts=(), group="g", partition="0") -> None:
    """``ends``/``starts``: (t_s, offset) of topic t; ``commits``: (t_s, offset) of ``group`` on it."""
    for name, points, key in (
        (PARTITION_END_OFFSET, ends, ("c", "t", partition)),
        (PARTITION_START_OFFSET, starts, ("c", "t", partition)),
        (GROUP_COMMITTED_OFFSET, commits, ("c", group, "t", partition)),
    ):
        tracker.add(name, [key] * len(points), [t for t, _ in points], [v for _, v in points])


GROWING = {"ends": [(10, 100), (20, 200), (30, 300)], "commits": [(10, 50), (20, 120), (30, 190)]}


def test_growing_lag_over_three_commits_is_warn():
    tracker = LagTracker()
    feed(tracker, **GROWING)
    [p] = tracker.evaluate().partitions
    # Lags at the commits: 100-50=50, 200-120=80, 300-190=110: never decreasing, offsets moving → WARN.
    assert (p.committed, p.end_offset, p.lag_messages, p.lost_messages) == (190, 300, 110, 0)
    assert p.status == "WARN"
    # Offset 191 was written when the end offset passed it: between (10, 100) and (20, 200), at
    # 10 + (191-100)/100*10 = 19.1 s; now is 30 s → 10.9 s old.
    assert p.lag_seconds == pytest.approx(10.9)
    # Consumed (190-50)/20 = 7/s against produced (300-100)/20 = 10/s: never catches up.
    assert (p.consume_per_s, p.produce_per_s) == (7, 10)
    assert tracker.evaluate().groups == (GroupLag("c", "g", "WARN", math.inf),)


def test_replayed_samples_change_nothing():
    once, twice = LagTracker(), LagTracker()
    feed(once, **GROWING)
    feed(twice, **GROWING)
    feed(twice, **GROWING)
    assert twice.evaluate() == once.evaluate()


def test_caught_up_is_ok_with_zero_lag_and_eta():
    tracker = LagTracker()
    feed(tracker, ends=[(10, 100), (20, 200)], commits=[(10, 60), (20, 200)])
    report = tracker.evaluate()
    [p] = report.partitions
    assert (p.lag_messages, p.lag_seconds, p.status) == (0, 0.0, "OK")
    assert report.groups == (GroupLag("c", "g", "OK", 0.0),)


def test_committed_below_log_start_is_lost_messages_not_a_status():
    tracker = LagTracker()
    feed(tracker, **GROWING, starts=[(30, 500)])
    report = tracker.evaluate()
    [p] = report.partitions
    # Retention moved the log start to 500 past the committed 190: 310 messages the group never read.
    # The status stays Burrow's, from the commits alone (lag grows at every commit: WARN).
    assert (p.lost_messages, p.status) == (500 - 190, "WARN")
    assert report.groups[0].status == "WARN"


def test_same_offset_with_lag_is_stall_and_makes_the_group_err():
    tracker = LagTracker()
    feed(tracker, **GROWING, partition="0")
    feed(tracker, ends=GROWING["ends"], commits=[(10, 50), (20, 50), (30, 50)], partition="1")
    report = tracker.evaluate()
    assert [(p.partition, p.status) for p in report.partitions] == [("0", "WARN"), ("1", "STALL")]
    # Burrow's group evaluation: any STOP, STALL or REWIND partition makes the group ERR.
    assert report.groups[0].status == "ERR"


def test_offsets_no_longer_reported_while_the_end_moves_is_stop():
    tracker = LagTracker()
    feed(tracker, ends=[(10, 100), (20, 200), (100, 900)], commits=[(10, 50), (20, 60)])
    [p] = tracker.evaluate().partitions
    # Now 100 s: 80 s since the last commit > the 10 s the commits span; 60 never reached an end offset.
    assert (p.lag_messages, p.status) == (840, "STOP")


def test_only_the_last_window_of_commits_counts():
    tracker = LagTracker(window=3)
    feed(
        tracker,
        ends=[(10, 200), (20, 250), (30, 360), (40, 470), (50, 580)],
        commits=[(10, 100), (20, 200), (30, 300), (40, 400), (50, 500)],
    )
    # Lags 100, 50, 60, 70, 80: the decrease 100 → 50 makes all five OK; the last three (60, 70, 80) WARN.
    [p] = tracker.evaluate().partitions
    assert (p.lag_messages, p.status) == (80, "WARN")


def test_a_group_on_a_partition_without_end_offsets_is_not_reported_yet():
    tracker = LagTracker()
    feed(tracker, commits=[(10, 5)])
    assert tracker.evaluate().partitions == ()


def test_the_analysis_skips_and_counts_malformed_samples_instead_of_failing():
    def sample(name, labels, value, t_s=10.0):
        return Observation(name, "c", "admin/offsets", labels, t_s, value, None)

    tp = {"topic": "t", "partition": "0"}
    good = [sample(PARTITION_END_OFFSET, tp, 100), sample(GROUP_COMMITTED_OFFSET, {"group": "g", **tp}, 40)]
    bad = [
        sample(GROUP_COMMITTED_OFFSET, {"group": "g", **tp}, math.nan, t_s=20.0),  # a NaN offset
        sample(GROUP_COMMITTED_OFFSET, tp, 50, t_s=20.0),  # a commit of no group
        sample(PARTITION_END_OFFSET, {"topic": "t"}, 200, t_s=20.0),  # no partition
    ]
    clean, mixed = LagAnalysis(), LagAnalysis()
    clean.observe(good)
    mixed.observe([good[0], *bad, good[1]])
    assert mixed.evaluate() == clean.evaluate()
    assert (mixed.skipped, clean.skipped) == (3, 0)
    [row] = mixed.evaluate().history
    assert (row["lag_messages"], row["at_s"]) == (60, 10.0)  # the bad samples moved neither lag nor "now"


def group_sample(name, t_s, group, value, cluster="c", **labels) -> Observation:
    return Observation(name, cluster, "admin/offsets", {"group": group, **labels}, t_s, value, None)


def test_groups_state_and_members_are_the_newest_scrapes_and_a_deleted_group_leaves():
    analysis = LagAnalysis()
    analysis.observe([
        group_sample(GROUP_INFO, 10, "billing", 1, state="stable"),
        group_sample(GROUP_MEMBERS, 10, "billing", 3),
        group_sample(GROUP_INFO, 10, "audit", 1, state="empty"),
        group_sample(GROUP_MEMBERS, 10, "audit", 0),
    ])  # fmt: skip
    series = {(n, labels): v for n, labels, v in analysis.evaluate().metrics}
    assert series == {
        ("kobs_consumergroup_state", ("c", "audit", "empty")): 1,
        ("kobs_consumergroup_members", ("c", "audit")): 0,
        ("kobs_consumergroup_state", ("c", "billing", "stable")): 1,
        ("kobs_consumergroup_members", ("c", "billing")): 3,
    }  # fmt: skip
    # the next scrape: billing rebalances with one member fewer; audit was deleted
    analysis.observe([
        group_sample(GROUP_INFO, 20, "billing", 1, state="preparingrebalance"),
        group_sample(GROUP_MEMBERS, 20, "billing", 2),
    ])  # fmt: skip
    series = {(n, labels): v for n, labels, v in analysis.evaluate().metrics}
    assert series == {
        ("kobs_consumergroup_state", ("c", "billing", "preparingrebalance")): 1,
        ("kobs_consumergroup_members", ("c", "billing")): 2,
    }


def test_a_group_no_longer_listed_twice_is_forgotten_with_its_lag():
    """Kafka's listing stops naming a deleted group: missing from one listing its lag is still served (a
    coordinator moving may hide a group for a scrape), from two it is forgotten; another cluster's listings
    forget nothing of this one."""

    def scrape(t_s, groups, cluster="c"):
        tp = {"topic": "t", "partition": "0"}
        out = [Observation(PARTITION_END_OFFSET, cluster, "admin/offsets", tp, t_s, 100 + t_s, None)]
        for g in groups:
            out += [group_sample(GROUP_INFO, t_s, g, 1, cluster, state="empty"),
                    group_sample(GROUP_COMMITTED_OFFSET, t_s, g, 40, cluster, **tp)]  # fmt: skip
        return out

    analysis = LagAnalysis()
    analysis.observe([*scrape(10, ["kept", "deleted"]), *scrape(10, ["deleted"], cluster="d")])
    analysis.observe(scrape(20, ["kept"]))
    assert {r["group"] for r in analysis.evaluate().history} == {"kept", "deleted"}
    analysis.observe(scrape(30, ["kept"]))
    rows = analysis.evaluate().history
    assert {(r["cluster"], r["group"]) for r in rows} == {("c", "kept"), ("d", "deleted")}
    assert ("kobs_consumergroup_status", ("c", "deleted")) not in {
        (n, k) for n, k, _ in analysis.evaluate().metrics
    }
    restored = pickle.loads(pickle.dumps(analysis))
    restored.observe(scrape(40, ["kept", "deleted"]))  # created again: a new group, its window from now
    again = {(r["cluster"], r["group"]): r for r in restored.evaluate().history}
    assert again["c", "deleted"]["complete"] == 0.1 and again["c", "kept"]["complete"] == 0.4  # 1, 4 of 10


def test_partition_offsets_are_the_newest_scrapes_end_and_log_start():
    analysis = LagAnalysis()
    offsets = [
        Observation(name, "c", "admin/offsets", {"topic": "orders", "partition": p}, t_s, value, None)
        for t_s, p, name, value in [
            (10, "0", PARTITION_START_OFFSET, 5), (10, "0", PARTITION_END_OFFSET, 40),
            (10, "1", PARTITION_END_OFFSET, 7), (20, "0", PARTITION_END_OFFSET, 55),
        ]
    ]  # fmt: skip
    analysis.observe(offsets)
    series = {(n, labels): v for n, labels, v in analysis.evaluate().metrics}
    # orders-1 was not in the newest scrape (20 s): deleted, it has no series
    assert series == {
        ("kobs_partition_current_offset", ("c", "orders", "0")): 55,
        ("kobs_partition_oldest_offset", ("c", "orders", "0")): 5,
    }


def test_a_state_stored_before_groups_were_kept_reads_back():
    old = LagAnalysis()
    del old.groups  # as pickled by the previous version
    restored = pickle.loads(pickle.dumps(old))
    restored.observe([group_sample(GROUP_MEMBERS, 10, "billing", 3)])
    assert ("kobs_consumergroup_members", ("c", "billing"), 3) in restored.evaluate().metrics


class TrackerAsStoredBefore:
    """A tracker as the versions before the arrays stored it: a window object per series, and each cluster's
    newest time; pickled under the tracker's name."""

    __module__, __qualname__ = LagTracker.__module__, LagTracker.__qualname__

    def __init__(self, window_of):
        self.window = 4
        self._commits = {("c", "g", "t", "0"): window_of(GROWING["commits"])}
        self._ends = {("c", "t", "0"): window_of(GROWING["ends"])}
        self._starts = {("c", "t", "0"): window_of([(30, 60)])}
        self._now = {"c": 30}


class WindowAsStoredFirst:
    """A window as the first version stored it (a tuple per point), pickled under the window's name."""

    __module__, __qualname__ = Window.__module__, Window.__qualname__

    def __init__(self, points):
        self.size, self.points = 4, points


def window_of_two_lists(points) -> Window:
    window = Window()
    window.extend(([t for t, _ in points], [v for _, v in points]))
    return window


@pytest.mark.parametrize("window_of", [window_of_two_lists, WindowAsStoredFirst], ids=["lists", "tuples"])
def test_a_state_stored_before_the_arrays_reads_back_and_answers_the_same(window_of, monkeypatch):
    tracker = LagTracker(window=4)
    feed(tracker, **GROWING, starts=[(30, 60)])
    before = TrackerAsStoredBefore(window_of)
    with monkeypatch.context() as patched:
        patched.setattr(lag_tracker, "LagTracker", TrackerAsStoredBefore)
        patched.setattr(lag_tracker, "Window", type(before._ends["c", "t", "0"]))
        stored = pickle.dumps(before)
    restored = load_state(stored)
    assert isinstance(restored, LagTracker)
    assert restored.evaluate() == tracker.evaluate()
    feed(restored, ends=[(40, 400)], commits=[(40, 400)])
    assert restored.evaluate().partitions[0].status == "OK"  # caught up: lag 0


def test_burrows_window_of_a_partition_is_its_oldest_and_newest_commit_and_how_full_it_is():
    tracker = LagTracker(window=4)
    feed(tracker, **GROWING)
    (p,) = tracker.evaluate().partitions
    # (offset, seen at ms, lag then): 100 - 50 at 10 s and 300 - 190 at 30 s; 3 of 4 commits held
    assert (p.start, p.end, p.complete) == ((50, 10_000, 50), (190, 30_000, 110), 3 / 4)


def test_a_partitions_member_is_served_and_named_in_its_history_row_as_burrow_names_it():
    analysis = LagAnalysis()
    analysis.observe([
        Observation(PARTITION_END_OFFSET, "c", "admin/offsets", {"topic": "t", "partition": p}, 10, 100, None)
        for p in ("0", "1")
    ] + [
        group_sample(GROUP_COMMITTED_OFFSET, 10, "billing", 90, topic="t", partition=p) for p in ("0", "1")
    ] + [
        group_sample(GROUP_PARTITION_MEMBER, 10, "billing", 1, topic="t", partition="0", client_id="app-1",
                     host="/10.0.0.7"),
    ])  # fmt: skip
    evaluation = analysis.evaluate()
    rows = {row["partition"]: row for row in evaluation.history}
    assert (rows["0"]["client_id"], rows["0"]["owner"]) == ("app-1", "/10.0.0.7")
    assert "owner" not in rows["1"]  # no member: Burrow's empty owner
    members = [m for m in evaluation.metrics if m.name == "kobs_consumergroup_partition_member"]
    assert members == [
        ("kobs_consumergroup_partition_member", ("c", "billing", "t", "0", "app-1", "/10.0.0.7"), 1)
    ]


def test_two_collectors_scraping_the_same_offsets_give_one_collectors_lag_in_seconds():
    """An HA pair of collectors with one config (offsets every 10 s, the second 5 s after the first): the
    windows keep about one observation per interval, so a stopped group's lag in seconds, bounded by the
    time its 10 end offsets span, is one collector's 90 s at 200 s (it was 45 s: twice the observations
    spanned half the time)."""

    def lag_seconds(times: list[float], spacing_s: float) -> float:
        tracker = LagTracker()
        for t in times:  # 10 records/s written since long before; the group committed 50 and stopped
            for name, key, value in (
                (PARTITION_END_OFFSET, ("c", "t", "0"), 1000 + 10 * t),
                (GROUP_COMMITTED_OFFSET, ("c", "g", "t", "0"), 50),
            ):
                tracker.add(name, [key], [t], [value], spacing_s=spacing_s)
        [p] = tracker.evaluate().partitions
        return p.lag_seconds

    one = [float(t) for t in range(0, 201, 10)]
    pair = sorted(one + [t + 5 for t in one[:-1]])
    assert lag_seconds(one, 10) == lag_seconds(one, 0) == 90  # the window: 110 s to 200 s
    assert lag_seconds(pair, 10) == 90
    assert lag_seconds(pair, 0) == 45


def test_windows_spaced_keep_the_newest_observation_and_about_one_per_spacing():
    """Observations from two scrapers in one batch, late ones and repeats: the newest is always kept, and
    those kept before it are at least a spacing apart."""
    windows = Windows(5)
    times = [0.0, 4.0, 10.0, 14.0, 20.0, 24.0, 30.0, 34.0, 40.0, 44.0, 50.0]
    windows.add([("k",)] * len(times), times, list(range(len(times))), spacing_s=10)
    windows.add([("k",), ("k",)], [44.0, 52.0], [90, 91], spacing_s=10)  # a repeat, then one 2 s later
    kept = windows.times[0].tolist()
    assert kept[-1] == 52.0 and windows.values[0, -1] == 91
    assert all(b - a >= 10 for a, b in itertools.pairwise(kept[:-1]))
    assert kept[0] <= 52.0 - 3 * 10  # five observations span over three spacings

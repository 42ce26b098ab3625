"""Lag rules against known answers: Burrow's evaluator test table, and hand-computed lag figures."""

from __future__ import annotations

import math

import pytest

from common.metrics import GROUP_STATUS
from spark_jobs.lag_status import (
    PARTITION_STATUSES,
    catch_up_eta_s,
    group_status,
    lag_seconds,
    lost_messages,
    partition_status,
    rate_per_s,
)


def commits(*rows):
    """(offset, commit time in seconds, lag) rows → the (offset, epoch ms, lag) commits Burrow stores."""
    return [(offset, seconds * 1000, lag) for offset, seconds, lag in rows]


# fmt: off
# Offsets advance by 1000 every 100 s; the lag grows by 50 per commit from 0 (Burrow cases 0-2).
GROWING_FROM_ZERO = commits((1000, 100, 0), (2000, 200, 50), (3000, 300, 100), (4000, 400, 150),
                            (5000, 500, 200))
# The same without a zero-lag commit (Burrow cases 3 and 8).
GROWING = commits((1000, 100, 50), (2000, 200, 100), (3000, 300, 150), (4000, 400, 200), (5000, 500, 250))
# Committing every ~1 s, caught up at every commit (Burrow cases 9, 10): a 14.041 s window.
CAUGHT_UP = [
    (792748079 + i, 1512224600000 + ms, 0)
    for i, ms in enumerate((18356, 19362, 20366, 21367, 22370, 23373, 24378, 25379, 26383, 27383, 28383,
                            29388, 30391, 31394, 32397))
]

# Burrow's evaluator test table as of v1.9.5 (core/internal/evaluator/caching_test.go: all 16 cases), its
# numbering, with the reason.
# (case, commits, recent end offsets, current lag, now in seconds, allowed lag, expected status, why)
REWOUND = commits((1000, 100, 100), (2000, 200, 150), (3000, 300, 200), (2000, 400, 1250), (4000, 500, 300))
BURROW_CASES = [
    (0, GROWING_FROM_ZERO, [5200], 200, 600, 0, "OK",
     "a commit in the window had zero lag; 100 s since the last commit is less than the 400 s window"),
    (1, GROWING_FROM_ZERO, [5200], 200, 900, 0, "OK",
     "not STOP: 400 s since the last commit equals the 400 s window, and STOP needs strictly more"),
    (2, GROWING_FROM_ZERO, [5200], 200, 1000, 0, "STOP",
     "500 s since the last commit exceeds the 400 s window; STOP wins even over an old zero-lag commit"),
    (3, GROWING, [5250], 250, 1000, 0, "STOP", "stopped committing, lag never zero"),
    (4, commits((1000, 100, 0), (1000, 200, 50), (1000, 300, 100), (1000, 400, 150), (1000, 500, 200)),
     [1200], 200, 600, 0, "OK", "the offset never moves (would be STALL), but the first commit had zero lag"),
    (5, commits((1000, 100, 100), (1000, 200, 150), (1000, 300, 200), (1000, 400, 250), (1000, 500, 300)),
     [1300], 300, 600, 0, "STALL", "committing the same offset while lag exists and never was zero"),
    (6, commits((1000, 100, 100), (1000, 200, 100), (1000, 300, 100), (1000, 400, 100), (1000, 500, 100)),
     [1100], 100, 600, 0, "STALL", "still STALL when the lag stays flat: the offset does not move"),
    (7, REWOUND, [4300], 300, 600, 0, "OK",
     "the offset went back from 3000 to 2000, then past 3000 again: a recovered rewind; the lag decreased"),
    (8, GROWING, [5250], 0, 1000, 0, "OK", "current lag is 0: OK even though the commits alone say STOP"),
    (9, CAUGHT_UP, [792749024, 792749000, 792748800, 792748600, 792748500], 931, 1512224650, 0, "STOP",
     "zero lag at every commit, but new data came (lag 931) and the last commit is 17.603 s old, more than "
     "the 14.041 s window; no recent end offset is at or below the last committed offset"),
    (10, CAUGHT_UP, [792748094, 792748093, 792748093, 792748093], 1, 1512224650, 0, "OK",
     "STOP by time, but a recent end offset (792748093) equals the last committed offset: caught up lately"),
    (11, commits((1000, 100, 0), (1500, 150, None), (2000, 200, 50), (2500, 250, None), (3000, 300, 100),
                 (3500, 350, None), (4000, 400, 150), (4500, 450, None), (5000, 500, 200), (5500, 550, None)),
     [5700], 200, 600, 0, "OK", "case 0 with commits of unknown lag in between: they change nothing"),
    (12, commits((1000, 100, 2), (2000, 200, 1), (2000, 300, 1)), [2001], 1, 550, 1, "OK",
     "STOP by time (250 s since the last commit, a 200 s window), but the current lag 1 is allowed"),
    (13, commits((1000, 100, 100), (1000, 200, 150), (1000, 300, 200), (1000, 400, 250), (1000, 500, 300)),
     [1300], 300, 600, 99, "STALL", "case 5 with an allowed lag of 99: every lag is above it"),
    (14, REWOUND, [4300], 300, 600, 99, "OK", "case 7 with an allowed lag of 99: the rewind recovered"),
    (15, commits((1000, 100, 100), (2000, 200, 150), (3000, 300, 200), (2000, 400, 1250), (2500, 500, 300)),
     [4300], 300, 600, 0, "REWIND", "the offset went back from 3000 to 2000 and has not come back to 3000"),
]

# Burrow's table never ends in WARN; these follow the rule text in docs/kafka-behaviour.md.
# (commits, recent end offsets, current lag, now in seconds, expected status, why)
RULE_CASES = [
    (GROWING, [5250], 250, 600, "WARN",
     "offsets advance, lag never zero and never decreases (50..250), last commit 100 s ago < 400 s window"),
    (commits((1000, 100, 300), (2000, 200, 400), (3000, 300, 350), (4000, 400, 500)), [4500], 500, 450, "OK",
     "lag decreased once (400 → 350): the consumer is making headway, so not WARN"),
    (commits((1000, 100, 300), (2000, 200, None), (3000, 300, 250)), [3250], 250, 350, "OK",
     "commits with unknown lag are skipped: 300 → 250 is a decrease"),
    (commits((1000, 100, 300), (2000, 200, None), (3000, 300, 350)), [3350], 350, 350, "WARN",
     "commits with unknown lag are skipped: 300 → 350 never decreased"),
    (commits((1000, 100, 300), (1000, 200, None), (1000, 300, 350)), [1350], 350, 350, "STALL",
     "a commit with unknown lag still counts for the offset rules: the offset never moved"),
    ([], [100], 50, 1000, "OK", "no commits in the window: nothing to judge"),
    (commits((1000, 100, 10)), [1200], 200, 100, "STALL",
     "one commit, just now: not stopped (0 s > 0 s is false), and the offset never moved"),
]

# End offsets seen at (seconds, end offset); the message at offset c was written when the end reached c + 1.
ENDS = [(0.0, 100), (10.0, 200)]
# (committed offset, end offsets, now in seconds, expected lag in seconds, how)
LAG_SECONDS_CASES = [
    (150, ENDS, 20.0, 14.9, "end reached 151 at 0 + 51 * 10 / 100 = 5.1 s; 20 - 5.1"),
    (199, ENDS, 20.0, 10.0, "end reached 200 at 10 s"),
    (200, ENDS, 20.0, 0.0, "caught up: committed equals the end offset"),
    (99, ENDS, 20.0, 20.0, "written at or before the oldest observation: lower bound 20 - 0"),
    (149, [(0.0, 100), (10.0, 100), (20.0, 300)], 30.0, 17.5,
     "no traffic 0-10 s; end reached 150 at 10 + 50 * 10 / 200 = 12.5 s"),
    (10, [(0.0, 1000), (10.0, 5), (20.0, 25)], 30.0, 17.0,
     "topic recreated at 10 s: only (10, 5), (20, 25) count; end reached 11 at 10 + 6 * 10 / 20 = 13 s"),
    (5, [], 30.0, 0.0, "no observations: nothing to estimate"),
]
# fmt: on


@pytest.mark.parametrize(
    ("case", "window", "ends", "lag", "now_s", "allowed", "expected", "why"),
    BURROW_CASES,
    ids=[f"burrow-{c[0]}" for c in BURROW_CASES],
)
def test_partition_status_matches_burrow_table(case, window, ends, lag, now_s, allowed, expected, why):
    assert partition_status(window, ends, lag, now_s, allowed) == expected, why


@pytest.mark.parametrize(("window", "ends", "lag", "now_s", "expected", "why"), RULE_CASES)
def test_partition_status_rules(window, ends, lag, now_s, expected, why):
    assert partition_status(window, ends, lag, now_s) == expected, why


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], "OK"),
        (["OK", "OK"], "OK"),
        (["OK", "WARN"], "WARN"),
        (["WARN", "STOP", "OK"], "ERR"),
        (["STALL"], "ERR"),
        (["OK", "REWIND", "WARN"], "ERR"),
    ],
)
def test_group_status_is_worst_partition_capped_at_err(statuses, expected):
    assert group_status(statuses) == expected


def test_status_codes_are_burrows_status_constants_minus_one():
    # Burrow's core/protocol/evaluator.go: NOTFOUND 0, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, REWIND 6.
    assert {name: code + 1 for name, code in GROUP_STATUS.items()} == {
        "OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6
    }  # fmt: skip
    # so the worst partition by code is the worst by the rules' severity order, and a group code is max()
    assert sorted(PARTITION_STATUSES, key=GROUP_STATUS.__getitem__) == list(PARTITION_STATUSES)


@pytest.mark.parametrize(("committed", "ends", "now_s", "expected", "how"), LAG_SECONDS_CASES)
def test_lag_seconds_interpolates_end_offsets(committed, ends, now_s, expected, how):
    assert lag_seconds(committed, ends, now_s) == pytest.approx(expected), how


def test_rates_and_catch_up_eta():
    produce = rate_per_s([(0.0, 100), (5.0, 130), (10.0, 200)])  # (200 - 100) / 10 s
    consume = rate_per_s([(0.0, 0), (10.0, 300)])  # 300 / 10 s
    assert produce == pytest.approx(10.0)
    assert consume == pytest.approx(30.0)
    assert rate_per_s([(3.0, 7)]) is None
    assert rate_per_s([(0.0, 900), (10.0, 20), (20.0, 120)]) == pytest.approx(10.0)  # recreated at 10 s
    assert catch_up_eta_s(1000, consume, produce) == pytest.approx(50.0)  # 1000 / (30 - 10)
    assert catch_up_eta_s(1000, 10.0, 10.0) == math.inf  # never catches up
    assert catch_up_eta_s(0, 1.0, 5.0) == 0.0
    assert catch_up_eta_s(10, None, 5.0) is None


@pytest.mark.parametrize(("committed", "log_start", "lost"), [(40, 100, 60), (100, 100, 0), (150, 100, 0)])
def test_lost_messages_below_log_start(committed, log_start, lost):
    assert lost_messages(committed, log_start) == lost

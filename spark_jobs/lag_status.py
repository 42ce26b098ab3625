"""Consumer-lag rules as pure functions: Burrow-compatible status, lag in seconds, catch-up ETA, data loss.

No Spark here: the numpy rules of ``spark_jobs/lag_tracker.py`` give the same answers for every partition at
once, and the tests hold the two to each other. The status rules are LinkedIn Burrow's evaluator as of its
v1.3.7 (2021) and still in v1.9.5 (``core/internal/evaluator/caching.go``; see ``docs/kafka-behaviour.md``),
over a window of recent commits of one group on one partition, with an allowed lag (Burrow's
``allowed-lag``, 0 by default):

1. current lag at most the allowed lag → ``OK`` (caught up now, whatever the history says);
2. ``STOP`` when the time since the last commit exceeds the time the window spans (last - first commit),
   unless the last committed offset reached one of the recent end offsets (caught up moments ago);
3. ``REWIND`` when a committed offset went backwards and no later commit came back to the offset before
   it (a rewind the consumer recovered from, as after a rebalance, is not held against it);
4. if every commit with a known lag had more than the allowed lag: ``STALL`` (all committed offsets equal),
   else ``WARN`` (lag never decreased between successive commits with a known lag); otherwise ``OK``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import pairwise

# Severity order, least bad first. Partition statuses follow Burrow's StatusConstant order
# (OK < WARN < STOP < STALL < REWIND); a group reports OK, WARN or ERR, where ERR stands for any
# partition in STOP, STALL or REWIND (Burrow caps the group status at ERR the same way).
PARTITION_STATUSES = ("OK", "WARN", "STOP", "STALL", "REWIND")
ERROR_STATUSES = frozenset({"STOP", "STALL", "REWIND"})

Commit = tuple[int, int, int | None]  # (committed offset, commit time in epoch ms, lag at commit or None)
Observation = tuple[float, float]  # (time in seconds, value: an offset)


def partition_status(
    commits: Sequence[Commit],
    broker_offsets: Sequence[int],
    current_lag: int,
    now_s: float,
    allowed_lag: int = 0,
) -> str:
    """Burrow status of one partition from its recent commits (oldest first) and recent end offsets."""
    if current_lag <= allowed_lag or not commits:
        return "OK"
    offsets = [offset for offset, _, _ in commits]
    lags = [lag for _, _, lag in commits if lag is not None]
    first_ms, last_ms = commits[0][1], commits[-1][1]
    stopped = now_s * 1000 - last_ms > last_ms - first_ms
    caught_up_recently = any(end <= offsets[-1] for end in broker_offsets)
    if stopped and not caught_up_recently:
        return "STOP"
    rewind = next((i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]), None)
    if rewind is not None and all(later < offsets[rewind - 1] for later in offsets[rewind:]):
        return "REWIND"
    if any(lag <= allowed_lag for lag in lags):
        return "OK"
    if len(set(offsets)) == 1:
        return "STALL"
    if all(b >= a for a, b in pairwise(lags)):
        return "WARN"
    return "OK"


def group_status(statuses: Iterable[str]) -> str:
    """Worst partition status of a group: ``ERR`` for any STOP/STALL/REWIND, else WARN or OK."""
    worst = max(statuses, key=PARTITION_STATUSES.index, default="OK")
    return "ERR" if worst in ERROR_STATUSES else worst


def lag_seconds(committed: int, end_offsets: Sequence[Observation], now_s: float) -> float:
    """Age in seconds of the first unconsumed message (offset ``committed``).

    That message was written when the end offset moved from ``committed`` to ``committed + 1``; the time
    is interpolated linearly between the two ``(time_s, end_offset)`` observations that bracket it
    (oldest first). Caught up → 0. When it is older than every observation the result is a lower
    bound: the age of the oldest observation. Observations before an end offset went backwards (the
    topic was recreated) are ignored.
    """
    end_offsets = since_last_reset(end_offsets)
    if not end_offsets or committed >= end_offsets[-1][1]:
        return 0.0
    target = committed + 1
    written_s = end_offsets[0][0]
    for (t0, e0), (t1, e1) in pairwise(end_offsets):
        if e0 < target <= e1:
            written_s = t0 + (target - e0) * (t1 - t0) / (e1 - e0)
    return max(0.0, now_s - written_s)


def since_last_reset(observations: Sequence[Observation]) -> Sequence[Observation]:
    """The observations after the last time the value went backwards (a recreated topic starts over)."""
    start = 0
    for i in range(1, len(observations)):
        if observations[i][1] < observations[i - 1][1]:
            start = i
    return observations[start:]


def rate_per_s(observations: Sequence[Observation]) -> float | None:
    """Average rate of change (per second) from the oldest to the newest observation since the last reset
    (see :func:`since_last_reset`); None when fewer than two observations span any time."""
    observations = since_last_reset(observations)
    if len(observations) < 2 or observations[-1][0] <= observations[0][0]:
        return None
    (t0, v0), (t1, v1) = observations[0], observations[-1]
    return (v1 - v0) / (t1 - t0)


def catch_up_eta_s(
    lag_messages: float, consume_rate: float | None, produce_rate: float | None
) -> float | None:
    """Seconds until the lag reaches zero at current rates; ``inf`` if it never will, None if unknown."""
    if lag_messages <= 0:
        return 0.0
    if consume_rate is None or produce_rate is None:
        return None
    gain = consume_rate - produce_rate
    return lag_messages / gain if gain > 0 else math.inf


def lost_messages(committed: int, log_start: int) -> int:
    """Messages the group lost to retention: committed offset below the log start offset (0 if none)."""
    return max(0, log_start - committed)

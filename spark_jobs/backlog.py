"""How far ``kobs stream`` is behind the end of the metrics topic, told while it catches up.

A stream that was down, or a new checkpoint on a topic that holds hours of records, meets a backlog; the
query reads it in micro-batches of at most ``metrics_topic.max_records_per_batch`` records. Spark's
progress report of each batch names the offsets it read up to and the topic's end offsets when it planned
the batch: their difference is the backlog. :class:`CatchUp` turns the reports into log lines: when more
than one batch waits, again every ``REPORT_EVERY_S`` while that lasts (with the pace and the time left at
it), and once caught up. Pure: the reports come in as dicts (``StreamingQueryProgress.json``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

REPORT_EVERY_S = 30.0


def records_behind(progress: Mapping) -> int | None:
    """Records on the topics after the batch's end offsets; None when a source reports no offsets."""
    behind = 0
    for source in progress.get("sources") or ():
        end, latest = source.get("endOffset"), source.get("latestOffset")  # topic -> partition -> offset
        if end is None or latest is None:
            return None
        for topic, partitions in latest.items():
            read = end.get(topic, {})
            behind += sum(max(0, offset - read.get(p, 0)) for p, offset in partitions.items())
    return behind


def duration(seconds: float) -> str:
    """``seconds`` in the unit a reader takes in at a glance: 45 s, 12 min, 3.5 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class CatchUp:
    """Reads the query's progress reports; says when it is catching up, how it goes, and when it is done.

    Behind means more records waiting than one batch reads (``batch_records``; None: a batch reads all
    there is, so a stream is never behind by more than what arrived during its last batch)."""

    def __init__(self, batch_records: int | None, every_s: float = REPORT_EVERY_S):
        self.batch_records = math.inf if batch_records is None else batch_records
        self.every_s = every_s
        self.told_s: float | None = None  # when it last said it was catching up; None: not behind
        self.batch_id = -1  # the newest batch seen (a report may come twice: see it once)

    def see(self, progress: Mapping, now_s: float) -> str | None:
        """The line to log for this report, if any."""
        if progress["batchId"] <= self.batch_id:
            return None
        self.batch_id = progress["batchId"]
        behind = records_behind(progress)
        if behind is None or not progress.get("numInputRows"):
            return None
        if behind <= self.batch_records:
            if self.told_s is None:
                return None
            self.told_s = None
            return "caught up with the metrics topic"
        if self.told_s is not None and now_s - self.told_s < self.every_s:
            return None
        self.told_s = now_s
        read, seconds = progress["numInputRows"], progress["durationMs"]["triggerExecution"] / 1000
        pace = f"the last micro-batch read {read:,} in {seconds:.1f} s"
        if seconds > 0:
            pace += f": about {duration(behind * seconds / read)} to go at that pace"
        return f"catching up with the metrics topic: {behind:,} records behind its end ({pace})"

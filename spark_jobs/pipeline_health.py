"""The streaming query's own health: what it read, what it rejected, how fresh and how fast it is.

Pure (no Spark): ``spark_jobs.pipeline`` measures each micro-batch (:class:`BatchStats`) and records it
here. The counters and the sources' last-seen times are part of the state the pipeline snapshots per batch
id, so after a crash the replayed batch is counted once and the totals are exact. The batch time, duration
and lag are wall-clock facts about the last batch this process (or the one before it) completed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from spark_jobs.analysis import Derived


class BatchStats(NamedTuple):
    records: int  # metrics-topic records, dead letters included
    dead_letters: int
    newest_s: dict[tuple[str, str], float]  # (cluster, source) -> newest sample or event time, Unix seconds
    lost: int = 0  # records the batch was planned to read that retention deleted before it read them


@dataclass
class PipelineHealth:
    query: str
    input_records: int = 0
    dead_letters: int = 0
    last_seen_s: dict[tuple[str, str], float] = field(default_factory=dict)
    last_batch: tuple[float, float, float] | None = None  # (completed at, duration, lag) in seconds
    query_restarts: int = 0  # times the query failed and was started again from its checkpoint
    records_lost: int = 0  # metrics-topic records retention deleted before the query read them

    def record(self, stats: BatchStats, started_s: float, finished_s: float) -> None:
        """Count one micro-batch that ran from ``started_s`` to ``finished_s`` (wall clock)."""
        self.input_records += stats.records
        self.dead_letters += stats.dead_letters
        self.records_lost += stats.lost
        for source, newest in stats.newest_s.items():
            self.last_seen_s[source] = max(newest, self.last_seen_s.get(source, newest))
        newest = max(self.last_seen_s.values(), default=finished_s)
        self.last_batch = (finished_s, finished_s - started_s, max(0.0, finished_s - newest))

    def metrics(self, series_dropped: Mapping[str, int]) -> list[Derived]:
        """The "pipeline's own health" metrics of ``docs/metrics.md``; ``series_dropped``: bound -> series
        it left out (``spark_jobs.exposition.expose``)."""
        query = (self.query,)
        seen = list(self.last_seen_s.items())  # the exporter's thread reads while a batch may record
        derived = [
            Derived("kobs_pipeline_input_records_total", query, self.input_records),
            Derived("kobs_pipeline_dead_letters_total", query, self.dead_letters),
            Derived("kobs_pipeline_query_restarts_total", query, self.query_restarts),
            Derived("kobs_pipeline_records_lost_total", query, self.records_lost),
            *(Derived("kobs_pipeline_series_dropped", (*query, b), n) for b, n in series_dropped.items()),
            *(Derived("kobs_source_last_seen_timestamp_seconds", s, t) for s, t in seen),
        ]
        if self.last_batch is not None:
            done, duration, lag = self.last_batch
            derived += [
                Derived("kobs_pipeline_last_batch_timestamp_seconds", query, done),
                Derived("kobs_pipeline_batch_duration_seconds", query, duration),
                Derived("kobs_pipeline_batch_lag_seconds", query, lag),
            ]
        return derived

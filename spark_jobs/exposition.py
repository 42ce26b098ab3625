"""What the exporter serves: the analyses' derived values, marked and bounded as the configuration says.

Pure (no Spark, no HTTP): ``DerivedCollector`` (``spark_jobs.pipeline``) calls :func:`expose` on every
scrape. The policy comes from the configuration, not from the analyses' snapshotted state, so a restart
with a changed configuration applies it at once. Three steps:

1. ``kobs_consumergroup_critical`` is 1 or 0 for every group that has a ``kobs_consumergroup_status``
   series, from ``clusters[].critical_groups`` (group names or shell patterns).
2. ``sinks.exporter_partitions_per_group`` keeps the per-partition consumer-group series of only the N
   worst partitions of each group: highest partition status first, then most lag in messages. The group
   series stay, so group alerts and the group's status still account for every partition.
3. ``sinks.exporter_max_series`` caps the number of series; the finest-grained ones (most labels) are left
   out first, so cluster-, broker- and topic-level series survive a flood of partitions.

What steps 2 and 3 leave out is counted per bound (``kobs_pipeline_series_dropped``, label ``bound`` one of
:data:`BOUNDS`); the Parquet history keeps it all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from common.config import Config
from common.metrics import DERIVED_METRICS
from spark_jobs.analysis import Derived

CRITICAL = "kobs_consumergroup_critical"
GROUP_STATUS_METRIC = "kobs_consumergroup_status"
PER_GROUP_PARTITION = frozenset(
    m.name for m in DERIVED_METRICS if m.labels[:4] == ("cluster", "group", "topic", "partition")
)  # a partition's member adds its client id and host
RANK_BY = ("kobs_consumergroup_partition_status", "kobs_consumergroup_lag_messages")  # worst first
BOUNDS = ("partitions_per_group", "max_series")  # steps 2 and 3, named after their ``sinks.exporter_`` keys


@dataclass(frozen=True)
class ExpositionPolicy:
    critical_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # cluster -> patterns
    partitions_per_group: int | None = None  # None: every partition
    max_series: int | None = None  # None: no cap

    @classmethod
    def from_config(cls, config: Config) -> ExpositionPolicy:
        return cls(
            {c.name: tuple(c.critical_groups) for c in config.clusters},
            config.sinks.exporter_partitions_per_group,
            config.sinks.exporter_max_series,
        )


def expose(derived: Iterable[Derived], policy: ExpositionPolicy) -> tuple[list[Derived], dict[str, int]]:
    """The series to serve, in their original order, and how many each of the :data:`BOUNDS` left out."""
    series = list(derived)
    series += critical_marks(series, policy.critical_groups)
    shown, dropped = series, dict.fromkeys(BOUNDS, 0)
    if policy.partitions_per_group is not None:
        worst = worst_partitions(series, policy.partitions_per_group)
        shown = [d for d in shown if d.name not in PER_GROUP_PARTITION or d.labels[:4] in worst]
        dropped["partitions_per_group"] = len(series) - len(shown)
    if policy.max_series is not None and len(shown) > policy.max_series:
        coarse_first = sorted(range(len(shown)), key=lambda i: len(shown[i].labels))
        kept = set(coarse_first[: policy.max_series])
        dropped["max_series"] = len(shown) - policy.max_series
        shown = [d for i, d in enumerate(shown) if i in kept]
    return shown, dropped


def critical_marks(derived: Iterable[Derived], patterns: Mapping[str, tuple[str, ...]]) -> list[Derived]:
    """``kobs_consumergroup_critical`` for every (cluster, group) with a status: 1 if a pattern matches."""
    groups = sorted({d.labels for d in derived if d.name == GROUP_STATUS_METRIC})
    return [
        Derived(
            CRITICAL, (cluster, group), float(any(fnmatchcase(group, p) for p in patterns.get(cluster, ())))
        )
        for cluster, group in groups
    ]


def worst_partitions(derived: Iterable[Derived], n: int) -> set[tuple[str, ...]]:
    """Labels (cluster, group, topic, partition) of the ``n`` worst partitions of each group."""
    scores: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0] * len(RANK_BY))
    for d in derived:
        if d.name in PER_GROUP_PARTITION:
            score = scores[d.labels[:4]]
            if d.name in RANK_BY:
                score[RANK_BY.index(d.name)] = d.value
    by_group: dict[tuple[str, ...], list[tuple]] = defaultdict(list)
    for labels, score in scores.items():
        by_group[labels[:2]].append((*(-s for s in score), labels))
    return {ranked[-1] for group in by_group.values() for ranked in sorted(group)[:n]}

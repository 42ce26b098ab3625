"""Consumer lag as an analysis: offset observations → ``LagTracker`` → lag history and lag metrics.

Pure (no Spark): the pipeline (``spark_jobs.pipeline``) feeds it the offsets collector's samples. History
rows go to the ``lag`` table, one per group partition per batch; the metrics are those of the "Consumer lag"
section of ``docs/metrics.md``, with each partition's offsets and each group's state and member count as the
newest offsets scrape of its cluster saw them.
"""

from __future__ import annotations

import logging
import math
from bisect import insort
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import repeat
from operator import attrgetter

import pyarrow as pa

from common.metrics import DERIVED_METRICS, GROUP_STATUS
from common.names import GROUP_COMMITTED_OFFSET, GROUP_INFO, GROUP_MEMBERS, GROUP_PARTITION_MEMBER
from spark_jobs.analysis import Derived, Evaluation, Observation, Samples, gathered
from spark_jobs.lag_tracker import INPUT_NAMES, LagTracker, PartitionLag

HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("at_s", pa.float64()),
        ("committed", pa.int64()),
        ("end_offset", pa.int64()),
        ("lag_messages", pa.int64()),
        ("lag_seconds", pa.float64()),
        ("lost_messages", pa.int64()),
        ("status", pa.string()),
        ("consume_per_s", pa.float64()),
        ("produce_per_s", pa.float64()),
    ]
)
# Each gauge's field of a PartitionLag or a GroupLag (a status served as its code; None: no sample).
PARTITION_GAUGES = {
    "kobs_consumergroup_lag_messages": "lag_messages",
    "kobs_consumergroup_lag_seconds": "lag_seconds",
    "kobs_consumergroup_partition_status": "status",
    "kobs_consumergroup_lost_messages": "lost_messages",
    "kobs_consumergroup_committed_offset": "committed",
}
GROUP_GAUGES = {
    "kobs_consumergroup_status": "status",
    "kobs_consumergroup_catchup_eta_seconds": "catchup_eta_s",
}
# The largest offset a sample carries exactly (the contract's values are doubles); the tracker holds
# offsets as 64-bit integers, so a NaN, an infinity or a value past this is no offset.
MAX_OFFSET = 2**53
# A group missing from this many group listings of its cluster since it was last listed was deleted: its
# windows are forgotten (one listing may miss a group whose coordinator is moving).
DELETED_AFTER_LISTINGS = 2
LABELS = {m.name: m.labels for m in DERIVED_METRICS}
MEMBER_LABELS = frozenset(("topic", "partition", "client_id", "host"))
log = logging.getLogger(__name__)


class LagAnalysis:
    """Lag in messages and seconds, Burrow status and catch-up ETA of every consumer group."""

    table = "lag"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset((*INPUT_NAMES, GROUP_INFO, GROUP_MEMBERS, GROUP_PARTITION_MEMBER))
    # intervals.offsets_s (how often the collectors scrape offsets) and analytics.lag (Burrow's allowed lag)
    settings = ("offsets_interval_s", "allowed_lag", "allowed_lag_by_group")
    chunked = frozenset(INPUT_NAMES)  # a sample each per partition (and group) and scrape

    def __init__(
        self,
        window: int = 10,
        offsets_interval_s: float = 0.0,
        allowed_lag: int = 0,
        allowed_lag_by_group: tuple[tuple[str, int], ...] = (),
    ):
        """``offsets_interval_s``: the windows keep about one observation per interval, however many
        collectors scrape the same offsets (0: every observation); ``allowed_lag``: Burrow's allowed lag,
        for the groups no pattern of ``allowed_lag_by_group`` (``fnmatch``, the first that matches) names."""
        self.tracker = LagTracker(window)
        self.offsets_interval_s = offsets_interval_s
        self.allowed_lag = allowed_lag
        self.allowed_lag_by_group = allowed_lag_by_group
        self.groups: dict[tuple[str, str], GroupSeen] = {}  # (cluster, group)
        self.listings: dict[str, list[float]] = {}  # cluster -> times of its newest group listings
        self.skipped = 0  # samples without topic, partition (and group for commits) or a finite value

    def __setstate__(self, state: dict) -> None:
        defaults = {"groups": {}, "listings": {}, "offsets_interval_s": 0.0}  # state stored before these were
        self.__dict__.update(defaults | {"allowed_lag": 0, "allowed_lag_by_group": ()} | state)

    def observe(self, observations: Iterable[Observation | Samples]) -> None:
        offsets = {name: ([], [], []) for name in INPUT_NAMES}  # keys, times, values
        skipped = 0
        for o in gathered(observations, self.chunked):
            if type(o) is Samples:
                skipped += self._take_offsets(o, *offsets[o.name])
            else:
                skipped += not self._group(o)
        for name, read in offsets.items():
            self.tracker.add(name, *read, spacing_s=self.offsets_interval_s)
        self._forget_deleted_groups()
        if skipped:
            self.skipped += skipped
            log.warning("lag: skipped %d samples without topic/partition/group or not an offset", skipped)

    @staticmethod
    def _take_offsets(run: Samples, keys: list, times: list, values: list) -> int:
        """Append a scrape's offsets of one name to its columns; how many were unusable (a label missing,
        not an offset)."""
        commit, cluster, taken = run.name == GROUP_COMMITTED_OFFSET, run.cluster, len(keys)
        columns = (run.column("topic"), run.column("partition"), run.column("group"), run.values)
        for topic, partition, group, value in zip(*columns, strict=True):
            if (
                topic is None
                or partition is None
                or (group is None and commit)
                or value is None
                or not -MAX_OFFSET <= value <= MAX_OFFSET
            ):
                continue
            keys.append((cluster, group, topic, partition) if commit else (cluster, topic, partition))
            values.append(value)
        taken = len(keys) - taken
        times += [run.t_s] * taken
        return len(run.values) - taken

    def _allowed_lag(self, group: str) -> int:
        patterns = self.allowed_lag_by_group
        return next((lag for pattern, lag in patterns if fnmatchcase(group, pattern)), self.allowed_lag)

    def _group(self, o: Observation) -> bool:
        """Take a group's state, member count or a partition's member; False when it lacks its labels or a
        finite value."""
        labels = o.labels
        group = labels.get("group")
        if group is None or o.value is None or not math.isfinite(o.value):
            return False
        seen = self.groups.get((o.cluster, group))
        if seen is None or seen.t_s < o.t_s:
            seen = self.groups[o.cluster, group] = GroupSeen(o.t_s)
        if o.name == GROUP_MEMBERS:
            seen.members = int(o.value)
        elif o.name == GROUP_INFO and "state" in labels:
            seen.state = labels["state"]
            listings = self.listings.setdefault(o.cluster, [])
            if o.t_s not in listings:
                insort(listings, o.t_s)
                del listings[:-DELETED_AFTER_LISTINGS]
        elif o.name == GROUP_PARTITION_MEMBER and labels.keys() >= MEMBER_LABELS:
            seen.assigned[labels["topic"], labels["partition"]] = (labels["client_id"], labels["host"])
        else:
            return False
        return True

    def _forget_deleted_groups(self) -> None:
        """Forget the groups (state, members, committed offsets) that the newest listings of their cluster
        no longer name: deleted, or expired by Kafka's ``offsets.retention.minutes``."""
        gone = {
            key
            for key, seen in self.groups.items()
            if len(listed := self.listings.get(key[0], ())) == DELETED_AFTER_LISTINGS and seen.t_s < listed[0]
        }
        if gone:
            for key in gone:
                del self.groups[key]
            self.tracker.forget_groups(gone)
            named = ", ".join(f"{c}/{g}" for c, g in sorted(gone)[:5]) + (" ..." if len(gone) > 5 else "")
            log.info("lag: %d consumer groups no longer listed (deleted) forgotten: %s", len(gone), named)

    def evaluate(self) -> Evaluation:
        report = self.tracker.evaluate(self._allowed_lag)
        return Evaluation(
            history=list(self._with_members(report.partitions)),
            metrics=[
                *_derived(PARTITION_GAUGES, report.partitions),
                *_derived(GROUP_GAUGES, report.groups),
                *self._offsets(),
                *self._group_series(),
            ],
        )

    def _with_members(self, partitions: tuple[PartitionLag, ...]) -> list[dict]:
        """History rows; a partition with a member in its group's newest scrape gets its ``client_id`` and
        ``owner`` (the member's host, as Burrow names it), the others none."""
        rows = list(map(dict, map(zip, repeat(PartitionLag._fields), partitions)))
        if any(seen.assigned for seen in self.groups.values()):
            for row, p in zip(rows, partitions, strict=True):
                seen = self.groups.get((p.cluster, p.group))
                member = seen.assigned.get((p.topic, p.partition)) if seen is not None else None
                if member is not None:
                    row["client_id"], row["owner"] = member
        return rows

    def _offsets(self) -> Iterable[Derived]:
        partitions, starts, ends = self.tracker.partition_offsets()
        yield from _series("kobs_partition_current_offset", partitions, ends)
        yield from _series("kobs_partition_oldest_offset", partitions, starts)

    def _group_series(self) -> Iterable[Derived]:
        """State and members of the groups in their cluster's newest scrape (a deleted group leaves)."""
        newest: dict[str, float] = {}
        for (cluster, _), seen in self.groups.items():
            newest[cluster] = max(newest.get(cluster, -math.inf), seen.t_s)
        for (cluster, group), seen in sorted(self.groups.items()):
            if seen.t_s < newest[cluster]:
                continue
            if seen.state is not None:
                yield Derived("kobs_consumergroup_state", (cluster, group, seen.state), 1.0)
            if seen.members is not None:
                yield Derived("kobs_consumergroup_members", (cluster, group), seen.members)
            for (topic, partition), (client_id, host) in sorted(seen.assigned.items()):
                labels = (cluster, group, topic, partition, client_id, host)
                yield Derived("kobs_consumergroup_partition_member", labels, 1.0)


@dataclass
class GroupSeen:
    """A group as one offsets scrape described it (the Admin API's DescribeConsumerGroups)."""

    t_s: float
    state: str | None = None
    members: int | None = None
    assigned: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # -> (client id, host)


def _derived(gauges: dict[str, str], items: tuple) -> Iterable[Derived]:
    for name, field_name in gauges.items():
        values = map(attrgetter(field_name), items)
        if field_name == "status":
            values = map(GROUP_STATUS.__getitem__, values)
        labels = map(attrgetter(*LABELS[name]), items)  # a tuple: every lag metric has cluster and group
        yield from _series(name, labels, values)


def _series(name: str, labels: Iterable[tuple], values: Iterable[float | None]) -> Iterable[Derived]:
    """``name``'s values with their labels (None: no sample), built without a Python call per value."""
    values = list(values)
    rows = zip(repeat(name, len(values)), labels, values, strict=True)
    if None in values:
        rows = (row for row in rows if row[2] is not None)
    return map(tuple.__new__, repeat(Derived), rows)

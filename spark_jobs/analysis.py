"""What every analysis is: a pure tracker the pipeline feeds observations and asks for an evaluation.

No Spark here (pyarrow only names the history columns). The pipeline hands each analysis the samples
and events named in its ``inputs`` as :class:`Observation` (the samples of its ``chunked`` names, from
the streaming query, as one :class:`Samples` per record and name); the analysis keeps whatever bounded
state it needs and returns an
:class:`Evaluation`: rows for its Parquet history table and the derived metric values the exporter serves
(names, labels and help in ``common.metrics``). An analysis must be picklable: the pipeline snapshots every
analysis after each batch so a restarted query resumes with exactly the same state.

Its ``settings`` name the attributes that come from the configuration; everything else is learned state.
A restarted query takes the state from the snapshot and the settings from a fresh analysis
(:func:`reconfigure`), so a changed configuration applies at once without losing what was learned. The
code must therefore read a setting where it is used, never copy it into the state.

"Now" for an analysis is the newest observation time it has seen, never the wall clock, so replaying the
same batches gives the same answers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

log = logging.getLogger(__name__)


class Observation(NamedTuple):
    """One sample (``value`` set) or one event (``event`` set, ``name`` its type) from the metrics topic."""

    name: str
    cluster: str
    source: str
    labels: dict[str, str]  # empty for events
    t_s: float  # the batch's scrape time for samples, the event's own time for events (Unix seconds)
    value: float | None
    event: dict[str, Any] | None


class Samples(NamedTuple):
    """One record's samples of one name as columns: what as many :class:`Observation` say, without an
    object per sample (a broker's log sizes are thousands a scrape). ``labels`` maps each label name to its
    value per sample (None where a sample lacks it); ``values`` are floats, non-finite ones included."""

    name: str
    cluster: str
    source: str
    labels: dict[str, list[str | None]]
    t_s: float
    values: list[float]

    def column(self, label: str) -> list[str | None]:
        """The label's value per sample (None where a sample lacks it)."""
        found = self.labels.get(label)
        return [None] * len(self.values) if found is None else found

    def complete(self, *labels: str) -> list[tuple]:
        """``(label values..., value)`` of each sample that has all of ``labels`` and a finite value, in
        order (the rest are what an analysis counts as skipped)."""
        rows = zip(*map(self.column, labels), self.values, strict=True)
        return [row for row in rows if None not in row and math.isfinite(row[-1])]

    def observations(self) -> Iterator[Observation]:
        """One :class:`Observation` per sample, in order."""
        names = list(self.labels)
        rows = zip(*self.labels.values(), strict=True) if names else repeat((), len(self.values))
        for row, value in zip(rows, self.values, strict=True):
            labels = {name: found for name, found in zip(names, row, strict=True) if found is not None}
            yield tuple.__new__(
                Observation, (self.name, self.cluster, self.source, labels, self.t_s, value, None)
            )


def label_columns(labels: Sequence[Mapping[str, str]]) -> dict[str, list[str | None]]:
    """Samples' label maps as :attr:`Samples.labels` columns, label names in the order first seen."""
    names = dict.fromkeys(name for found in labels for name in found)
    return {name: [found.get(name) for found in labels] for name in names}


def gathered(
    observations: Iterable[Observation | Samples], chunked: Collection[str]
) -> list[Observation | Samples]:
    """The single samples of ``chunked`` names gathered into one :class:`Samples` per name, cluster,
    source and time, then the :class:`Samples` given and the rest, each in order: an analysis takes those
    names one way, however they came."""
    runs: dict[tuple[str, str, str, float], tuple[list, list]] = {}
    rest = []
    for o in observations:
        if type(o) is Observation and o.name in chunked and o.event is None:
            labels, values = runs.setdefault((o.name, o.cluster, o.source, o.t_s), ([], []))
            labels.append(o.labels)
            values.append(o.value)
        else:
            rest.append(o)
    return [
        *(Samples(name, cluster, source, label_columns(labels), t_s, values)
          for (name, cluster, source, t_s), (labels, values) in runs.items()),
        *rest,
    ]  # fmt: skip


class Derived(NamedTuple):
    """One value of a derived metric: ``labels`` in the order ``common.metrics`` lists them."""

    name: str
    labels: tuple[str, ...]
    value: float


@dataclass(frozen=True)
class Evaluation:
    """An analysis's answer after a batch: history rows (column -> value) and derived metric values.

    Pickled with its metrics as three columns (names, labels, values), which pickle and load without a
    Python call per value: an evaluation crosses from the executors to the driver every micro-batch, with
    tens of thousands of values for a large cluster."""

    history: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[Derived] = field(default_factory=list)

    def __getstate__(self) -> tuple[list, tuple, tuple, tuple]:
        return self.history, *(zip(*self.metrics, strict=True) if self.metrics else ((), (), ()))

    def __setstate__(self, state: tuple | dict) -> None:
        if isinstance(state, dict):  # pickled before the columns: its attributes
            history, metrics = state["history"], state["metrics"]
        else:
            history, names, labels, values = state
            metrics = list(map(tuple.__new__, repeat(Derived), zip(names, labels, values, strict=True)))
        object.__setattr__(self, "history", history)
        object.__setattr__(self, "metrics", metrics)


class Analysis(Protocol):
    table: str  # Parquet history table under ``sinks.history_dir``
    history_schema: pa.Schema  # the columns of ``Evaluation.history`` rows
    inputs: frozenset[str]  # sample names and event types it reads
    chunked: frozenset[str]  # of its inputs, the sample names it also takes as :class:`Samples`
    settings: tuple[str, ...]  # attributes set from the configuration (the rest is learned state)

    def observe(self, observations: Iterable[Observation | Samples]) -> None: ...

    def evaluate(self) -> Evaluation: ...


def reconfigure(restored: Analysis, fresh: Analysis) -> bool:
    """Give ``restored`` (state from a snapshot) the settings of ``fresh`` (the current configuration);
    whether any changed (logged in one line naming the analysis and each change)."""
    changed = {
        name: (getattr(restored, name), getattr(fresh, name))
        for name in fresh.settings
        if getattr(restored, name) != getattr(fresh, name)
    }
    for name, (_, new) in changed.items():
        setattr(restored, name, new)
    if changed:
        log.warning(
            "%s: configuration changed since the snapshot (%s): state kept, new settings applied",
            fresh.table,
            ", ".join(f"{name} {old!r} -> {new!r}" for name, (old, new) in changed.items()),
        )
    return bool(changed)

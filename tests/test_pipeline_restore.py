"""Where a pipeline's state comes from when it starts or resumes: the snapshots (no Spark session needed)."""

from __future__ import annotations

import pyarrow as pa

from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET
from spark_jobs.analysis import Evaluation, Observation
from spark_jobs.lag import LagAnalysis
from spark_jobs.pipeline import Pipeline
from spark_jobs.pipeline_health import BatchStats, PipelineHealth
from spark_jobs.snapshots import Snapshots


class Counting:
    """A minimal analysis: counts what it observed."""

    history_schema = pa.schema([("seen", pa.int64())])
    inputs = frozenset({PARTITION_END_OFFSET})

    def __init__(self, table: str):
        self.table, self.seen = table, 0

    def observe(self, observations) -> None:
        self.seen += len(list(observations))

    def evaluate(self) -> Evaluation:
        return Evaluation([{"seen": self.seen}])


END = Observation(
    PARTITION_END_OFFSET, "prod", "admin/offsets", {"topic": "t", "partition": "0"}, 10.0, 5, None
)


def test_a_new_pipeline_starts_from_the_newest_snapshot(tmp_path):
    old = Counting("counting")
    old.observe([END, END])
    health = PipelineHealth("stream")
    health.record(BatchStats(2, 0, {}), 1, 2)
    Snapshots(tmp_path / "state").save(6, ([old], {"counting": old.evaluate()}, health))

    jobs = Pipeline(lambda: [Counting("counting")], tmp_path / "history", tmp_path / "state")
    assert jobs.last_batch_id == 6
    assert [a.seen for a in jobs.analyses] == [2]
    assert jobs.evaluations == {"counting": Evaluation([{"seen": 2}])}
    assert jobs.health.input_records == 2


def test_analyses_added_since_the_snapshot_start_empty_and_removed_ones_are_dropped(tmp_path):
    kept, removed = Counting("counting"), Counting("retired")
    kept.observe([END])
    removed.observe([END])
    evaluations = {"counting": kept.evaluate(), "retired": removed.evaluate()}
    Snapshots(tmp_path / "state").save(3, ([kept, removed], evaluations, PipelineHealth("stream")))

    jobs = Pipeline(lambda: [LagAnalysis(), Counting("counting")], tmp_path / "history", tmp_path / "state")
    lag, counting = jobs.analyses
    assert isinstance(lag, LagAnalysis) and lag.evaluate() == Evaluation()  # new: starts empty
    assert counting.seen == 1  # the snapshot's state
    assert set(jobs.evaluations) == {"counting"}  # the retired analysis's metrics are no longer served


def test_without_snapshots_a_pipeline_starts_empty(tmp_path):
    jobs = Pipeline(lambda: [Counting("counting")], tmp_path / "history", tmp_path / "state")
    assert (jobs.last_batch_id, jobs.evaluations, jobs.analyses[0].seen) == (None, {}, 0)


class PickleCounting(Counting):
    """Counts its own pickling (in a class attribute, which pickles do not carry)."""

    pickled = 0

    def __getstate__(self) -> dict:
        PickleCounting.pickled += 1
        return self.__dict__


class Commits(PickleCounting):
    inputs = frozenset({GROUP_COMMITTED_OFFSET})


def test_an_analysis_no_batch_fed_is_not_pickled_again_yet_restores_exactly(tmp_path):
    commit = END._replace(name=GROUP_COMMITTED_OFFSET, labels={"group": "g", "topic": "t", "partition": "0"})
    make = lambda: [PickleCounting("ends"), Commits("commits")]  # noqa: E731
    jobs = Pipeline(make, tmp_path / "history", tmp_path / "state")
    PickleCounting.pickled = 0
    jobs.feed([END, commit], BatchStats(1, 0, {}), 0, 1.0)  # both fed: both pickled
    for batch_id in (1, 2):
        jobs.feed([END], BatchStats(1, 0, {}), batch_id, 1.0)  # only "ends": "commits" keeps its pickle
    assert PickleCounting.pickled == 2 + 1 + 1

    restarted = Pipeline(make, tmp_path / "history", tmp_path / "state")
    assert restarted.last_batch_id == 2
    assert [a.seen for a in restarted.analyses] == [3, 1]
    assert restarted.evaluations == {"ends": Evaluation([{"seen": 3}]), "commits": Evaluation([{"seen": 1}])}
    assert restarted.evaluations == jobs.evaluations

"""Where a pipeline's state comes from when it starts or resumes: the snapshots (no Spark session needed)."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

import pyarrow as pa
from test_flapping import flap, tick

from common.config import Config
from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET
from spark_jobs.analysis import Evaluation, Observation
from spark_jobs.keyed import advance
from spark_jobs.pipeline import Pipeline
from spark_jobs.pipeline_health import BatchStats, PipelineHealth
from spark_jobs.snapshots import Pickled, Snapshots, dump_state, load_state
from spark_jobs.stream import analyses


class Counting:
    """A minimal analysis: counts what it observed."""

    history_schema = pa.schema([("seen", pa.int64())])
    inputs = frozenset({PARTITION_END_OFFSET})
    settings = ()
    chunked = frozenset()

    def __init__(self, table: str):
        self.table, self.seen = table, 0

    def observe(self, observations) -> None:
        self.seen += len(list(observations))

    def evaluate(self) -> Evaluation:
        return Evaluation([{"seen": self.seen}])


END = Observation(
    PARTITION_END_OFFSET, "prod", "admin/offsets", {"topic": "t", "partition": "0"}, 10.0, 5, None
)
COUNTING = ("counting", "prod")  # the key of Counting("counting") fed END


def state_of(jobs: Pipeline, key: tuple[str, str]):
    """The analysis a one-process pipeline holds for ``key``."""
    return load_state(jobs.states[key], jobs.modules)


def test_a_new_pipeline_starts_from_the_newest_snapshot(tmp_path):
    old = Counting("counting")
    old.observe([END, END])
    health = PipelineHealth("stream")
    health.record(BatchStats(2, 0, {}), 1, 2)
    Snapshots(tmp_path / "state").save(6, ({COUNTING: pickle.dumps(old)}, {COUNTING: old.evaluate()}, health))

    jobs = Pipeline(lambda: [Counting("counting")], tmp_path / "history", tmp_path / "state")
    assert jobs.last_batch_id == 6
    assert state_of(jobs, COUNTING).seen == 2
    assert jobs.evaluations == {COUNTING: Evaluation([{"seen": 2}])}
    assert jobs.health.input_records == 2


def test_analyses_added_since_the_snapshot_start_empty_and_removed_ones_are_dropped(tmp_path):
    kept, removed = Counting("counting"), Counting("retired")
    kept.observe([END])
    removed.observe([END])
    retired = ("retired", "prod")
    states = {COUNTING: pickle.dumps(kept), retired: pickle.dumps(removed)}
    evaluations = {COUNTING: kept.evaluate(), retired: removed.evaluate()}
    Snapshots(tmp_path / "state").save(3, (states, evaluations, PipelineHealth("stream")))

    make = lambda: [Counting("new"), Counting("counting")]  # noqa: E731
    jobs = Pipeline(make, tmp_path / "history", tmp_path / "state")
    assert set(jobs.states) == set(jobs.evaluations) == {COUNTING}  # the retired analysis is not served
    jobs.feed([END], BatchStats(1, 0, {}), 4, 1.0)
    assert state_of(jobs, COUNTING).seen == 2  # the snapshot's state, fed on
    assert state_of(jobs, ("new", "prod")).seen == 1  # new: started empty


def test_without_snapshots_a_pipeline_starts_empty(tmp_path):
    jobs = Pipeline(lambda: [Counting("counting")], tmp_path / "history", tmp_path / "state")
    assert (jobs.last_batch_id, jobs.evaluations, jobs.states) == (None, {}, {})


CLUSTER = {"name": "c", "bootstrap_servers": "b:9092"}
DEFAULTS = Config.model_validate({"clusters": [CLUSTER]})
# Every key spark_jobs.stream.analyses reads, changed.
CHANGED = Config.model_validate(
    {
        "clusters": [
            CLUSTER
            | {
                "broker_disk_bytes": 10**12,
                "producers": [
                    {"client_id": "checkout", "url": "http://p:7072/metrics", "topics": ["orders"]}
                ],
            }
        ],
        "intervals": {"metrics_s": 30, "metadata_s": 60, "producers_s": 20, "offsets_s": 45},
        "analytics": {
            "flapping": {"flaps": 5, "window_s": 300, "clear_after_s": 1200},
            "lag": {"allowed_lag": 10, "allowed_lag_by_group": {"batch-*": 1000}},
        },
        "alerts": {"maintenance_grace_s": 900},
    }
)


def test_settings_name_exactly_what_the_configuration_sets_in_each_analysis():
    """The guard on the design: any other attribute the configuration sets would be restored stale."""
    for default, changed in zip(analyses(DEFAULTS), analyses(CHANGED), strict=True):
        differs = {k for k, v in vars(default).items() if pickle.dumps(v) != pickle.dumps(vars(changed)[k])}
        assert differs == set(default.settings), default.table


def test_restored_analyses_take_every_setting_from_the_current_configuration(caplog):
    with caplog.at_level(logging.WARNING, "spark_jobs.analysis"):
        for old, fresh in zip(analyses(DEFAULTS), analyses(CHANGED), strict=True):
            state, _ = advance(fresh, pickle.dumps(old), [])
            restored = load_state(state)
            assert {s: getattr(restored, s) for s in fresh.settings} == {
                s: getattr(fresh, s) for s in fresh.settings
            }
    changed = [r.getMessage() for r in caplog.records]
    assert len(changed) == 8  # one line per analysis
    assert (
        "isr_flapping: configuration changed since the snapshot (flaps 3 -> 5, window_s 600.0 -> 300.0, "
        "clear_after_s 900.0 -> 1200.0): state kept, new settings applied"
    ) in changed


def flapping_config(**flapping) -> Config:
    return Config.model_validate({"clusters": [CLUSTER], "analytics": {"flapping": flapping}})


def feed(jobs: Pipeline, batch_id: int, observations: list[Observation]) -> float:
    """Feed one batch; broker 2's flapping partitions afterwards."""
    jobs.feed(observations, BatchStats(1, 0, {}), batch_id, 0.0)
    return flapping_partitions(jobs)


def flapping_partitions(jobs: Pipeline) -> float:
    metrics = jobs.evaluations["isr_flapping", "c"].metrics
    return {(d.name, d.labels): d.value for d in metrics}["kobs_isr_flapping_partitions", ("c", "2")]


def restart(run_dir, config: Config) -> Pipeline:
    return Pipeline(lambda: analyses(config), run_dir / "history", run_dir / "state")


def test_a_restart_with_more_flaps_applies_them_to_the_flaps_seen_before_it(tmp_path):
    """Broker 2 rejoins partition 0's ISR at 30, 130 (before the restart), 230, 330 and 430 s."""
    for run_dir in (tmp_path / "same", tmp_path / "raised"):
        first = restart(run_dir, flapping_config(flaps=3))
        assert feed(first, 0, [*flap(0, 30), *flap(100, 130)]) == 0  # two flaps
    # Unchanged, the third rejoin within 600 s makes the pair flap.
    assert feed(restart(tmp_path / "same", flapping_config(flaps=3)), 1, flap(200, 230)) == 1
    # Raised to 5: three are not enough; the fifth is, counting the two from before the restart.
    raised = restart(tmp_path / "raised", flapping_config(flaps=5))
    assert feed(raised, 1, flap(200, 230)) == 0
    assert feed(raised, 2, [*flap(300, 330), *flap(400, 430)]) == 1


def test_a_shorter_clear_after_ends_a_flapping_state_with_the_first_batch_after_the_restart(tmp_path):
    """Flapping since 230 s, quiet until 600 s: within 900 s of quiet, but past 300 s of it."""
    for run_dir in (tmp_path / "same", tmp_path / "shorter"):
        first = restart(run_dir, flapping_config())
        assert feed(first, 0, [*flap(0, 30), *flap(100, 130), *flap(200, 230), tick(600)]) == 1
    assert flapping_partitions(restart(tmp_path / "same", flapping_config())) == 1  # served from the snapshot
    assert feed(restart(tmp_path / "same", flapping_config()), 1, [tick(610)]) == 1
    assert feed(restart(tmp_path / "shorter", flapping_config(clear_after_s=300)), 1, [tick(610)]) == 0


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
    assert [state_of(restarted, (t, "prod")).seen for t in ("ends", "commits")] == [3, 1]
    assert restarted.evaluations == {
        ("ends", "prod"): Evaluation([{"seen": 3}]),
        ("commits", "prod"): Evaluation([{"seen": 1}]),
    }
    assert restarted.evaluations == jobs.evaluations


class NotAgain:
    """A value whose pickling fails: what the driver must not pickle a second time."""

    def __reduce__(self):
        raise AssertionError("pickled again on the driver")


def test_an_evaluation_collected_with_its_bytes_is_snapshotted_as_those_bytes(tmp_path):
    """The streaming driver gets each key's evaluation with the bytes the executor made of it: the snapshot
    takes those bytes as they are (not megabytes pickled again each batch), and they restore."""
    jobs = Pipeline(lambda: [Counting("counting")], tmp_path / "history", tmp_path / "state")
    collected = Evaluation([{"seen": 2}], [("kobs_metric", ("prod",), NotAgain())])
    as_made = Pickled(dump_state(Evaluation([{"seen": 2}])))  # what the executor pickled
    jobs.record([(COUNTING, collected)], BatchStats(1, 0, {}), 0, 1.0, {COUNTING: as_made})

    restarted = Pipeline(lambda: [Counting("counting")], tmp_path / "history", tmp_path / "state")
    assert restarted.last_batch_id == 0
    assert restarted.evaluations == {COUNTING: Evaluation([{"seen": 2}])}


class Planted:
    """What a planted snapshot would hold: unpickling it runs a command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_planted_or_cut_short_snapshot_runs_nothing_and_the_one_before_it_is_used(tmp_path, caplog):
    state = tmp_path / "state"
    jobs = Pipeline(lambda: [Counting("counting")], tmp_path / "history", state)
    for batch_id in (0, 1):
        jobs.feed([END], BatchStats(1, 0, {}), batch_id, 1.0)
    marker = tmp_path / "ran"
    (state / "batch-2.pickle").write_bytes(pickle.dumps(Planted(marker)))  # newest: a planted file
    cut = (state / "batch-1.pickle").read_bytes()
    (state / "batch-1.pickle").write_bytes(cut[: len(cut) // 2])  # then one cut short by a full disk

    restarted = Pipeline(lambda: [Counting("counting")], tmp_path / "history", state)
    assert not marker.exists()  # the planted command never ran
    assert restarted.last_batch_id == 0 and state_of(restarted, COUNTING).seen == 1  # batch 0's state
    skipped = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(skipped) == 2 and "posix.system is not part of the analyses' state" in skipped[0]

"""Restarts are exact: a replayed batch id, and `kill -9` of a `kobs stream` driver mid-batch, leave the same
Parquet history and exporter values as an uninterrupted run over the same records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from stream_run import offsets_batch, produce

from bench.reference import batch_of
from common.config import Config
from common.contract import encode
from peers import kafka_tools
from peers.process import free_port
from spark_jobs.checkpoint import CheckpointError
from spark_jobs.exposition import ExpositionPolicy
from spark_jobs.pipeline import DerivedCollector
from spark_jobs.state_placement import LAYOUT
from spark_jobs.stream import QUERY, pipeline, run_queries, start_query

pytestmark = [pytest.mark.peers, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[1]
# Wall-clock facts about the last batch: they differ between any two runs by nature.
WALL_CLOCK = {
    "kobs_pipeline_last_batch_timestamp_seconds",
    "kobs_pipeline_batch_duration_seconds",
    "kobs_pipeline_batch_lag_seconds",
}


def scrapes(n: int) -> list:
    """``n`` scrapes 10 s apart: billing consumes 70 of 100 new messages per scrape on orders-0 and -1;
    ledger sits on offset 5 of orders-1 (STALL)."""
    return [
        offsets_batch(
            10_000 * (i + 1),
            {"0": 100 * (i + 1), "1": 100 * (i + 1)},
            {("billing", "0"): 70 * (i + 1), ("billing", "1"): 70 * (i + 1), ("ledger", "1"): 5},
        )
        for i in range(n)
    ]


def write_config(tmp_path: Path, config: Config) -> Path:
    """``config`` as the YAML file ``kobs stream --config`` reads."""
    path = tmp_path / "kobs.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    return path


def config_for(
    run_dir: Path, topic: str = "unused", bootstrap: str = "127.0.0.1:9", per_batch: int = 2
) -> Config:
    return Config.model_validate(
        {
            "clusters": [{"name": "prod", "bootstrap_servers": [bootstrap], "critical_groups": ["ledger"]}],
            "metrics_topic": {"name": topic, "max_records_per_batch": per_batch},
            "sinks": {"run_dir": str(run_dir), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )


def history(run_dir: Path) -> dict[str, list[dict]]:
    """Every history row, by batch directory."""
    tables = sorted((run_dir / "history" / "lag").glob("batch_id=*"))
    return {t.name: pq.read_table(t / "part-0.parquet").to_pylist() for t in tables}


def served(jobs, config: Config) -> dict[tuple[str, tuple], float]:
    """What the exporter serves for ``jobs``, without the wall-clock gauges."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in DerivedCollector(jobs, ExpositionPolicy.from_config(config)).collect()
        for s in family.samples
        if s.name not in WALL_CLOCK
    }


def test_a_replayed_batch_id_leaves_identical_history_and_metrics(tmp_path):
    """The driver's side, on the one-process path (the streaming query's state store replays its own part:
    the kill -9 test below)."""
    config = config_for(tmp_path)
    values = [encode(b) for b in scrapes(4)]
    jobs = pipeline(config)
    first, second = batch_of(values[:2], jobs.inputs), batch_of([*values[2:], b"{broken"], jobs.inputs)
    jobs.feed(*first, 0, 0.0)
    jobs.feed(*second, 1, 0.0)
    expected_history, expected = history(tmp_path), served(jobs, config)
    assert expected[("kobs_pipeline_input_records_total", (("query", QUERY),))] == 5
    assert expected[("kobs_pipeline_dead_letters_total", (("query", QUERY),))] == 1
    assert expected[("kobs_consumergroup_critical", (("cluster", "prod"), ("group", "ledger")))] == 1

    jobs.feed(*second, 1, 0.0)  # the same batch id again in the same process
    assert (history(tmp_path), served(jobs, config)) == (expected_history, expected)

    restarted = pipeline(config)  # a new driver: it serves the newest snapshot before any batch
    assert served(restarted, config) == expected
    restarted.feed(*second, 1, 0.0)  # Spark replays the batch it had not committed when the driver died
    assert (history(tmp_path), served(restarted, config)) == (expected_history, expected)


def test_a_checkpoint_keyed_before_slots_resumes_with_its_state(spark, kafka_cluster, tmp_path, monkeypatch):
    """A checkpoint written by a version whose state was keyed ``(table, cluster)`` (``state_slot`` gave
    no slot) goes on from its state store after an upgrade; a slot now would fail Spark's schema check."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    batches = scrapes(6)
    produce(kafka_cluster.bootstrap, topic, batches)
    reference_config = config_for(tmp_path / "reference", topic, kafka_cluster.bootstrap)
    reference = pipeline(reference_config)
    _run(spark, reference_config, reference)

    upgraded_topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(kafka_cluster.bootstrap, upgraded_topic, batches[:4])
    config = config_for(tmp_path / "upgraded", upgraded_topic, kafka_cluster.bootstrap)
    with monkeypatch.context() as before_slots:
        before_slots.setattr("spark_jobs.stream.state_slot", lambda *_: None)
        _run(spark, config, pipeline(config))
    produce(kafka_cluster.bootstrap, upgraded_topic, batches[4:])
    upgraded = pipeline(config)
    _run(spark, config, upgraded)

    assert not (config.sinks.checkpoint_dir / QUERY / LAYOUT).exists()
    assert history(tmp_path / "upgraded") == history(tmp_path / "reference")
    assert served(upgraded, config) == served(reference, reference_config)


def test_records_retention_deleted_before_the_stream_read_them_are_counted_as_kafka_tells_them(
    spark, kafka_cluster, tmp_path, caplog
):
    """The stream stopped while retention moved the metrics topic's log start past what it had read (here
    Kafka's own kafka-delete-records moves it, exactly as retention does): the next run goes on from the
    first record left, and counts the records it never read, once, as kafka-get-offsets tells them."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    batches = scrapes(10)
    produce(kafka_cluster.bootstrap, topic, batches[:4])
    config = config_for(tmp_path, topic, kafka_cluster.bootstrap)
    _run(spark, config, pipeline(config))
    read = kafka_tools.end_offsets(kafka_cluster.bootstrap, topic)

    produce(kafka_cluster.bootstrap, topic, batches[4:])
    kafka_tools.delete_records(kafka_cluster.bootstrap, topic, {p: o + 3 for p, o in read.items()})
    earliest = kafka_tools.end_offsets(kafka_cluster.bootstrap, topic, time="-2")
    latest = kafka_tools.end_offsets(kafka_cluster.bootstrap, topic)
    jobs = pipeline(config)
    _run(spark, config, jobs)

    values = served(jobs, config)
    lost = sum(earliest[p] - read[p] for p in read)
    assert lost == 3
    assert values["kobs_pipeline_records_lost_total", (("query", QUERY),)] == lost
    left = sum(latest[p] - earliest[p] for p in latest)
    assert values["kobs_pipeline_input_records_total", (("query", QUERY),)] == sum(read.values()) + left
    warned = [r.getMessage() for r in caplog.records if "deleted by its retention" in r.getMessage()]
    assert sum(int(line.split()[0]) for line in warned) == lost, warned


@pytest.mark.timeout(600)
def test_a_corrupt_checkpoint_is_refused_in_one_line_and_reset_state_starts_over_keeping_the_history(
    spark, kafka_cluster, tmp_path
):
    """A planned batch's file turned to garbage, then a state store changelog cut in half (a disk that lost
    a write): each is refused in one line naming the file and the way out, never a restart loop. ``kobs
    stream --reset-state`` sets the checkpoint aside and reads the topic again from its first record; the
    history written before stays as it was, numbered before the new."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(kafka_cluster.bootstrap, topic, scrapes(4))
    run_dir = tmp_path / "run"
    config = config_for(run_dir, topic, kafka_cluster.bootstrap)
    _run(spark, config, pipeline(config))
    before = history(run_dir)
    checkpoint = run_dir / "checkpoints" / QUERY
    command = [sys.executable, "-m", "kobs.cli", "stream", "--config", str(write_config(tmp_path, config))]
    env = os.environ | {"PYTHONPATH": str(ROOT)}

    planned = checkpoint / "offsets" / "1"
    saved = planned.read_bytes()
    planned.write_bytes(b"\x8fgarbage")
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"kobs: checkpoint error: {planned}: not text (byte 0 is not UTF-8); kobs stream cannot resume "
        f"from {checkpoint}: run kobs stream --reset-state to set it aside and start over from the metrics "
        "topic's earliest record (the history is kept)"
    ]
    planned.write_bytes(saved)

    changelogs = sorted(checkpoint.glob("state/0/*/*.changelog"), key=lambda path: int(path.stem))
    cut = changelogs[-1]
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    with pytest.raises(CheckpointError) as failed:  # the state is loaded when the next batch runs
        produce(kafka_cluster.bootstrap, topic, scrapes(5)[4:])
        run_queries(spark, config, pipeline(config), None, False, threading.Event())
    assert str(failed.value).startswith("checkpoint error: its state store cannot be loaded (")
    assert f"{cut.name} " in str(failed.value) and "\n" not in str(failed.value)

    reset = subprocess.run([*command, "--available-now", "--reset-state"], env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert reset.returncode == 0, reset.stderr[-3000:]
    (aside,) = run_dir.glob(f"checkpoints/{QUERY}.set-aside-*")
    assert f"set the checkpoint aside as {aside}" in reset.stdout
    assert (aside / "offsets" / "1").read_bytes() == saved  # nothing deleted
    after = history(run_dir)
    assert {name: rows for name, rows in after.items() if name in before} == before
    newer = sorted(int(name.removeprefix("batch_id=")) for name in after.keys() - before.keys())
    assert newer and min(newer) > max(int(name.removeprefix("batch_id=")) for name in before)
    served_now = served(pipeline(config), config)
    assert served_now["kobs_pipeline_input_records_total", (("query", QUERY),)] == 5  # all read again


def _run(spark, config: Config, jobs) -> None:
    query = start_query(spark, config, jobs, available_now=True)
    query.awaitTermination(300)
    assert query.exception() is None


@pytest.mark.timeout(900)  # two `kobs stream` processes, each starting its own JVM and Spark session
def test_kill_9_mid_batch_then_restart_gives_the_uninterrupted_results(spark, kafka_cluster, tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    batches = scrapes(6)
    # Offset 2, in batch 1 (two records per batch): the batch the crash interrupts.
    produce(kafka_cluster.bootstrap, topic, [*batches[:2], b"not a contract batch", *batches[2:]])
    records = len(batches) + 1

    # The uninterrupted run: same records, same batch size, in this process.
    reference_config = config_for(tmp_path / "reference", topic, kafka_cluster.bootstrap)
    reference = pipeline(reference_config)
    _run(spark, reference_config, reference)

    # `kobs stream` in a subprocess, killed with SIGKILL (driver and its JVM) in the middle of batch 1, at
    # its most delicate point: its snapshot is written (tens of ms before Spark commits the batch), so the
    # restart must not take that state as the start of the replayed batch.
    run_dir = tmp_path / "crashed"
    config = config_for(run_dir, topic, kafka_cluster.bootstrap)
    config_file = write_config(tmp_path, config)
    command = [sys.executable, "-m", "kobs.cli", "stream", "--config", str(config_file), "--available-now"]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    checkpoint = run_dir / "checkpoints" / QUERY
    with open(tmp_path / "first.log", "wb") as log:
        driver = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not (checkpoint / "analyses" / "batch-1.pickle").exists():
            assert driver.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "batch 1 never ran"
            time.sleep(0.002)
    finally:
        jvm = _children(driver.pid)  # Spark's JVM, in a process group of its own
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    _wait_until_gone(driver.pid, jvm)
    assert not (checkpoint / "commits" / "1").exists(), "killed too late: Spark had committed batch 1"

    restarted = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    expected_history = history(tmp_path / "reference")
    assert len(expected_history) == (records + 1) // 2  # two records per micro-batch
    assert history(run_dir) == expected_history
    after_restart = served(pipeline(config), config)  # what a restarted exporter serves
    assert after_restart == served(reference, reference_config)
    # Every record counted once although batch 1 (with the dead letter) ran twice.
    assert after_restart["kobs_pipeline_input_records_total", (("query", QUERY),)] == records
    assert after_restart["kobs_pipeline_dead_letters_total", (("query", QUERY),)] == 1


@pytest.mark.timeout(600)
def test_a_batch_the_stop_cancels_ends_quietly_and_runs_again_at_the_next_start(kafka_cluster, tmp_path):
    """A stop that cannot wait for the batch under way (one longer than its grace) cancels the batch's Spark
    job. Spark took the cancelled batch's error for a failure of the query: it searched the error's text
    (the job's whole Java stack) with a regular expression that recurses per character, and its stream
    thread died printing a thousand-line StackOverflowError. The next start runs the batch again."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(kafka_cluster.bootstrap, topic, scrapes(3))
    run_dir = tmp_path / "run"
    config_file = write_config(tmp_path, config_for(run_dir, topic, kafka_cluster.bootstrap))
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    stopped = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "stop_mid_batch.py"), str(config_file)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 0, output[-3000:]
    for noise in ("StackOverflowError", "Traceback", " ERROR ", "\tat "):
        assert noise not in output, output[-3000:]
    query_dir = run_dir / "checkpoints" / QUERY
    assert (query_dir / "offsets" / "0").exists() and not (query_dir / "commits" / "0").exists()

    again = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "stream", "--config", str(config_file), "--available-now"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert (query_dir / "commits" / "0").exists()


def _children(pid: int) -> list[int]:
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def _wait_until_gone(group: int, jvm: list[int], timeout_s: float = 30) -> None:
    """Wait until no process of the killed driver's process group is left, nor its JVM (which exits when
    its driver's pipe breaks)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [pid for pid in jvm if _running(pid)]
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            if not alive:
                return
        time.sleep(0.1)
    raise AssertionError(f"processes of group {group} or its JVM survived SIGKILL")


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an exited child nobody has reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_ctrl_c_or_a_stop_signal_to_the_whole_group_stops_kobs_stream_mid_stream_without_tracebacks(
    kafka_cluster, tmp_path, signum, code
):
    """A terminal's Ctrl-C and a supervisor's stop signal every process of the group. Spark's JVM and Python
    workers died mid-batch, and pyspark's own Ctrl-C handler raised KeyboardInterrupt inside a call into
    the JVM: a page of tracebacks. Only kobs's own process may get them; it stops the query, then Spark."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(kafka_cluster.bootstrap, topic, scrapes(2))
    run_dir = tmp_path / "run"
    config_file = write_config(tmp_path, config_for(run_dir, topic, kafka_cluster.bootstrap, per_batch=1))
    command = [sys.executable, "-m", "kobs.cli", "stream", "--config", str(config_file)]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    log_path = tmp_path / "stream.log"
    with open(log_path, "wb") as log:
        driver = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        deadline, produced = time.monotonic() + 300, 2
        while not (run_dir / "checkpoints" / QUERY / "commits" / "3").exists():  # a few batches in
            assert driver.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "no third micro-batch"
            produced += 1
            produce(kafka_cluster.bootstrap, topic, scrapes(produced)[-1:])  # more keep coming
            time.sleep(0.3)
        jvm = _children(driver.pid)
        produce(kafka_cluster.bootstrap, topic, scrapes(produced + 3)[-3:])  # a batch under way
        os.killpg(driver.pid, signum)
        assert driver.wait(timeout=120) == code
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    output = log_path.read_text()
    assert "Traceback" not in output, output[-3000:]
    _wait_until_gone(driver.pid, jvm)

"""The checks on a query checkpoint's files, in the layout Spark's metadata logs have (HDFSMetadataLog: a
version line, then one JSON document a line; the Kafka source's first offsets after a NUL byte, SPARK-19517),
and the history's batch numbering across checkpoints. A checkpoint Spark itself wrote is checked in
tests/test_stream_restart.py."""

from __future__ import annotations

import json

import pytest

from spark_jobs.checkpoint import CheckpointError, check_resumable, history_base, planned_records, set_aside

OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"metrics":{"0":12}}\n'


def _checkpoint(root, files: dict[str, str | bytes]):
    checkpoint = root / "stream"
    for name, content in {"metadata": '{"id":"6c1c"}\n', "state/0/0/1.delta": b"", **files}.items():
        path = checkpoint / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return checkpoint


def test_a_checkpoint_whose_files_read_passes(tmp_path):
    files = {"offsets/9": OFFSETS, "offsets/10": OFFSETS, "commits/9": 'v1\n{"nextBatchWatermarkMs":0}\n'}
    files["sources/0/0"] = '\x00v1\n{"metrics":{"0":0}}'
    check_resumable(_checkpoint(tmp_path, files))
    check_resumable(tmp_path / "none")  # nothing yet: a new query


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("offsets/10", b"\x8f\x00garbage\xff", "not text (byte 0 is not UTF-8)"),
        ("offsets/10", OFFSETS[:40], "line 2 is not JSON"),
        ("offsets/10", "", "no version line (v1) at its start"),
        ("commits/3", "v1\n", "empty"),
        ("metadata", '{"id":', "line 1 is not JSON"),
        ("sources/0/0", "{}", "no version line (v1) at its start"),
    ],
)
def test_a_file_spark_cannot_read_is_refused_in_one_line_naming_it_and_the_way_out(
    tmp_path, name, content, why
):
    checkpoint = _checkpoint(tmp_path, {"offsets/9": OFFSETS, name: content})
    with pytest.raises(CheckpointError) as refused:
        check_resumable(checkpoint)
    assert str(refused.value) == (
        f"checkpoint error: {checkpoint / name}: {why}; kobs stream cannot resume from {checkpoint}: run "
        "kobs stream --reset-state to set it aside and start over from the metrics topic's earliest record "
        "(the history is kept)"
    )


def test_only_the_latest_batch_of_each_log_is_read_as_spark_reads_it(tmp_path):
    check_resumable(_checkpoint(tmp_path, {"offsets/9": "torn", "offsets/10": OFFSETS}))


def test_committed_batches_without_a_state_store_are_an_older_kobs(tmp_path):
    checkpoint = tmp_path / "stream"
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    with pytest.raises(CheckpointError, match="it has committed batches but no state store"):
        check_resumable(checkpoint)


def test_set_aside_renames_the_checkpoint_beside_itself(tmp_path):
    checkpoint = _checkpoint(tmp_path, {"offsets/0": OFFSETS})
    aside = set_aside(checkpoint)
    assert not checkpoint.exists() and aside.parent == tmp_path
    assert aside.name.startswith("stream.set-aside-") and (aside / "offsets" / "0").read_text() == OFFSETS
    assert set_aside(checkpoint) is None


def test_a_new_checkpoint_numbers_its_history_after_the_highest_batch_written(tmp_path):
    history = tmp_path / "history"
    for table, batch in (("lag", 7), ("lag", 41), ("replication", 40)):
        (history / table / f"batch_id={batch}").mkdir(parents=True)
    (history / "lag" / ".batch_id=99.staging").mkdir()  # a write cut short: not a batch
    assert history_base(tmp_path / "new", history) == 42
    (history / "lag" / "batch_id=42").mkdir()
    assert history_base(tmp_path / "new", history) == 42  # stored at its first start


def test_a_checkpoint_from_before_the_numbering_keeps_spark_s(tmp_path):
    history = tmp_path / "history"
    (history / "lag" / "batch_id=5").mkdir(parents=True)
    checkpoint = _checkpoint(tmp_path, {"commits/5": 'v1\n{"nextBatchWatermarkMs":0}\n'})
    assert history_base(checkpoint, history) == 0
    assert json.loads((checkpoint / "history_base.json").read_text()) == {"base": 0}
    assert history_base(tmp_path / "first", tmp_path / "no-history") == 0


def test_a_batch_plans_its_end_less_the_batch_before_s_end_and_batch_0_from_the_source_s_first_offsets(
    tmp_path,
):
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    checkpoint = _checkpoint(
        tmp_path,
        {
            "sources/0/0": '\x00v1\n{"m":{"0":5,"1":0}}',
            "offsets/0": f'v1\n{meta}\n{{"m":{{"0":9,"1":2}}}}\n',
            "offsets/1": f'v1\n{meta}\n{{"m":{{"0":9,"1":40,"2":7}}}}\n',  # partition 2 new to batch 1
        },
    )
    assert planned_records(checkpoint, 0) == 4 + 2
    assert planned_records(checkpoint, 1) == 0 + 38
    assert planned_records(checkpoint, 2) is None

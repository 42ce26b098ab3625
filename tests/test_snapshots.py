"""State snapshots per micro-batch id: what a restarted query resumes from."""

from __future__ import annotations

import os
import pickle
from collections import Counter

import pytest

from spark_jobs.snapshots import Snapshots, dump_state, load_state


def test_before_returns_the_newest_snapshot_older_than_the_batch(tmp_path):
    snapshots = Snapshots(tmp_path)
    for batch_id in range(3):
        snapshots.save(batch_id, {"after": batch_id})
    # Batch 2 replayed after a crash that came after its snapshot: resume from the state after batch 1.
    assert snapshots.before(2) == (1, {"after": 1})
    assert snapshots.before(3) == (2, {"after": 2})
    assert snapshots.before(0) is None


def test_only_the_last_two_are_kept_and_nothing_half_written_remains(tmp_path):
    snapshots = Snapshots(tmp_path)
    for batch_id in range(5):
        snapshots.save(batch_id, list(range(batch_id)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-3.pickle", "batch-4.pickle"]
    assert snapshots.before(2) is None  # older snapshots are gone: the caller starts empty and says so


def test_a_missing_directory_means_no_snapshot(tmp_path):
    assert Snapshots(tmp_path / "never-written").before(7) is None


def test_latest_is_the_newest_snapshot(tmp_path):
    snapshots = Snapshots(tmp_path)
    assert snapshots.latest() is None
    for batch_id in (4, 5):
        snapshots.save(batch_id, f"after {batch_id}")
    assert snapshots.latest() == (5, "after 5")


def test_a_state_is_stored_compressed_and_read_back_whole():
    state = Counter({(f"topic-{t}", str(p)): 1000 * t + p for t in range(50) for p in range(50)})
    stored = dump_state(state)
    assert load_state(stored) == state
    assert len(stored) < len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)) / 3


def test_a_state_stored_uncompressed_by_an_earlier_version_still_loads():
    assert load_state(pickle.dumps(Counter(a=1))) == Counter(a=1)


def test_a_compressed_state_builds_only_the_analyses_classes():
    planted = dump_state(os.system)  # what a planted state store value could hold
    with pytest.raises(pickle.UnpicklingError, match=r"posix\.system is not part of the analyses' state"):
        load_state(planted)

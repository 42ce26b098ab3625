"""How far kobs stream is behind its metrics topic, from Spark's progress reports (pure: no Spark here)."""

from __future__ import annotations

from spark_jobs.backlog import CatchUp, duration, records_behind


def report(batch_id: int, end: dict, latest: dict, rows: int = 200, took_ms: int = 2000) -> dict:
    """A progress report as ``StreamingQueryProgress.json`` reads: offsets topic -> partition -> offset."""
    source = {"endOffset": {"m": end}, "latestOffset": {"m": latest}}
    return {
        "batchId": batch_id,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": took_ms},
        "sources": [{"description": "KafkaV2[Subscribe[m]]", **source}],
    }


def test_records_behind_sums_each_partitions_distance_to_its_end():
    # Partition 0 read to 120 of 300, partition 1 to its end, partition 2 not read at all (end unknown:
    # from offset 0): 180 + 0 + 40.
    assert records_behind(report(0, {"0": 120, "1": 50}, {"0": 300, "1": 50, "2": 40})) == 220
    assert records_behind({"sources": [{"endOffset": None, "latestOffset": None}]}) is None


def test_a_backlog_is_told_when_it_starts_every_30_s_while_it_lasts_and_when_it_is_read():
    catch_up = CatchUp(batch_records=200)
    # 1,000 behind, the last batch read 200 in 2 s: 100 records/s, 10 s to go.
    first = catch_up.see(report(0, {"0": 200}, {"0": 1200}), now_s=0.0)
    assert first == (
        "catching up with the metrics topic: 1,000 records behind its end "
        "(the last micro-batch read 200 in 2.0 s: about 10 s to go at that pace)"
    )
    assert catch_up.see(report(1, {"0": 400}, {"0": 1200}), now_s=10.0) is None  # told 10 s ago
    assert catch_up.see(report(1, {"0": 400}, {"0": 1200}), now_s=40.0) is None  # the same batch again
    assert "600 records behind" in catch_up.see(report(2, {"0": 600}, {"0": 1200}), now_s=31.0)
    # One batch's worth or less waiting: caught up, said once.
    assert catch_up.see(report(3, {"0": 1000}, {"0": 1200}), now_s=32.0) == "caught up with the metrics topic"
    assert catch_up.see(report(4, {"0": 1200}, {"0": 1210}), now_s=70.0) is None


def test_keeping_up_or_reading_everything_in_one_batch_is_never_catching_up():
    keeping_up = CatchUp(batch_records=200)
    assert keeping_up.see(report(0, {"0": 17}, {"0": 20}, rows=17), now_s=0.0) is None
    unbounded = CatchUp(batch_records=None)
    assert unbounded.see(report(0, {"0": 10}, {"0": 100_000}, rows=10), now_s=0.0) is None


def test_time_left_reads_at_a_glance():
    assert [duration(s) for s in (45, 119.4, 720, 12_600)] == ["45 s", "119 s", "12 min", "3.5 h"]

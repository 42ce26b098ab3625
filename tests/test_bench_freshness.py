"""``kobs bench freshness``: its bookkeeping (``bench.visibility``) against worked answers and its errors.
A short run of the command against the demo's running stack is in ``test_demo_stack.py``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from derived_exporter import DerivedExporter

from bench.visibility import (
    Appearances,
    Arrivals,
    Batch,
    agreement,
    freshness,
    handed_over,
    lag_of,
    misses,
    newest_s,
    summarize,
)
from common import names
from peers.process import free_port

CLUSTER = "demo"
BROKER = (CLUSTER, "exporter/broker-1")
OFFSETS = (CLUSTER, "admin/offsets")


def test_a_records_newest_time_is_its_batch_time_or_a_later_events():
    assert newest_s({"ts": 1_000_500, "samples": []}) == 1000.5
    events = [{"type": "isr_change", "ts": 1_002_000}, {"type": "isr_change", "ts": 999_000}]
    assert newest_s({"ts": 1_000_500, "events": events}) == 1002.0


def test_a_scrape_is_visible_at_the_first_poll_showing_its_time_or_later():
    handle = Appearances()
    handle.observe(10.0, {BROKER: 100.0})
    handle.observe(10.2, {BROKER: 100.0, OFFSETS: 101.0})  # unchanged broker: not a new appearance
    handle.observe(10.4, {BROKER: 115.0, OFFSETS: 101.0})
    handle.observe(10.6, {BROKER: 130.0, OFFSETS: 111.0})
    assert handle.first_reaching(BROKER, 100.0) == 10.0
    assert handle.first_reaching(BROKER, 115.0) == 10.4
    assert handle.first_reaching(BROKER, 110.0) == 10.4  # an older scrape processed with the newer one
    assert handle.first_reaching(BROKER, 130.5) is None  # not processed yet
    assert handle.first_reaching((CLUSTER, "zookeeper/isr"), 1.0) is None  # never seen


def test_a_scrape_in_several_records_is_readable_at_its_last():
    arrivals = Arrivals()
    arrivals.add(OFFSETS, 100.0, produced_s=100.05, readable_s=100.10)
    arrivals.add(OFFSETS, 100.0, produced_s=100.06, readable_s=100.30)  # the second chunk
    arrivals.add(BROKER, 99.0, produced_s=99.05, readable_s=99.10)
    arrivals.add(BROKER, 115.0, produced_s=115.05, readable_s=115.10)
    scrapes = arrivals.between(99.5, 115.0)  # both ends included
    assert [(s.source, s.t_s, s.produced_s, s.readable_s) for s in scrapes] == [
        (OFFSETS, 100.0, 100.06, 100.30),
        (BROKER, 115.0, 115.05, 115.10),
    ]


def test_hand_over_times_are_grouped_by_kind_of_source_with_a_fleets_numbers_as_one():
    arrivals = Arrivals()
    arrivals.add(BROKER, 100.0, produced_s=100.5, readable_s=100.6)
    arrivals.add((CLUSTER, "exporter/broker-12"), 100.0, produced_s=101.25, readable_s=101.3)
    arrivals.add(OFFSETS, 100.0, produced_s=100.125, readable_s=100.2)
    assert handed_over(arrivals.between(0, 200)) == {
        "exporter/broker-N": [0.5, 1.25],
        "admin/offsets": [0.125],
    }


def test_freshness_of_each_stage_per_scrape_and_scrapes_never_visible():
    arrivals, handle = Arrivals(), Appearances()
    arrivals.add(BROKER, 100.0, produced_s=100.25, readable_s=100.5)
    arrivals.add(BROKER, 115.0, produced_s=115.25, readable_s=115.5)
    arrivals.add(OFFSETS, 110.0, produced_s=110.25, readable_s=110.5)
    handle.observe(103.0, {BROKER: 100.0})
    handle.observe(114.0, {BROKER: 100.0, OFFSETS: 110.0})
    # The batches that showed them ran their pipelines from 101.5 to 102.9 and from 112 to 113.8.
    batches = {103.0: Batch(102.9, 1.4), 114.0: Batch(113.8, 1.8)}
    result = freshness(arrivals.between(0, 200), handle, batches)
    assert result.produced == [0.25, 0.25]
    assert result.readable == [0.5, 0.5]
    assert result.visible == [3.0, 4.0]  # the broker at 100 (seen at 103), the offsets at 110 (at 114)
    assert result.added == [2.5, 3.5]
    assert result.waited == pytest.approx([1.0, 1.5])  # readable at 100.5 and 110.5
    assert result.pipeline == [1.4, 1.8]
    assert result.unseen == 1  # the broker's scrape at 115


def test_percentiles_are_nearest_rank():
    # The worked examples of the nearest-rank method (Wikipedia, "Percentile"): the P-th percentile of N
    # ordered values is the value at rank ceil(P / 100 * N).
    assert summarize([15, 20, 35, 40, 50]) == (35, 50, 50)
    assert summarize([3, 6, 7, 8, 8, 10, 13, 15, 16, 20]) == (8, 20, 20)
    assert summarize([float(n) for n in range(20, 0, -1)]) == (10, 19, 20)  # order does not matter
    assert str(summarize([1.234])) == "p50 1.23 s, p95 1.23 s, max 1.23 s"


def test_lag_stated_by_an_offsets_scrape_is_end_minus_committed_never_negative():
    samples = [
        [names.PARTITION_START_OFFSET, {"topic": "orders", "partition": "0"}, 0.0],
        [names.PARTITION_END_OFFSET, {"topic": "orders", "partition": "0"}, 300.0],
        [names.PARTITION_END_OFFSET, {"topic": "orders", "partition": "1"}, 50.0],
        [names.GROUP_COMMITTED_OFFSET, {"group": "billing", "topic": "orders", "partition": "0"}, 190.0],
        [names.GROUP_COMMITTED_OFFSET, {"group": "billing", "topic": "orders", "partition": "1"}, 50.0],
        [names.GROUP_COMMITTED_OFFSET, {"group": "audit", "topic": "orders", "partition": "1"}, 52.0],
        [names.GROUP_COMMITTED_OFFSET, {"group": "billing", "topic": "other", "partition": "0"}, 7.0],
    ]
    # audit committed past the end offset read just before: no lag. No end offset for other-0: no lag stated.
    assert lag_of(samples) == {
        ("billing", "orders", "0"): 110.0,
        ("billing", "orders", "1"): 0.0,
        ("audit", "orders", "1"): 0.0,
    }


def test_what_queued_by_a_time_is_each_sources_newest_scrape_readable_then():
    arrivals = Arrivals()
    arrivals.add(BROKER, 100.0, 100.4, 101.0)
    arrivals.add(BROKER, 110.0, 110.3, 111.5)
    arrivals.add(OFFSETS, 105.0, 105.2, 111.9)
    arrivals.add(OFFSETS, 105.0, 105.6, 112.0)  # the scrape's last record: readable from here
    assert arrivals.newest_read_by(100.9) == {}
    assert arrivals.newest_read_by(111.9) == {BROKER: 110.0}
    assert arrivals.newest_read_by(112.0) == {BROKER: 110.0, OFFSETS: 105.0}


def test_agreement_counts_scrapes_whose_every_stated_lag_was_shown():
    expected = {100.0: {("g", "t", "0"): 5.0, ("g", "t", "1"): 0.0}, 110.0: {("g", "t", "0"): 9.0}}
    shown = {
        100.0: {("g", "t", "0"): 5.0, ("g", "t", "1"): 0.0, ("h", "t", "0"): 3.0},  # more series: fine
        110.0: {("g", "t", "0"): 5.0},  # still the lag of the scrape before: the handle came first
        120.0: {("g", "t", "0"): 12.0},  # not read from the topic: not counted
    }
    assert agreement(shown, expected) == (1, 2)
    assert agreement({100.0: {("g", "t", "0"): 5.0}}, expected) == (0, 1)  # a stated series missing
    assert misses(shown, expected) == [(110.0, ("g", "t", "0"), 9.0, 5.0)]
    assert misses({100.0: {("g", "t", "0"): 5.0}}, expected) == [(100.0, ("g", "t", "1"), 0.0, None)]


def _freshness(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """``kobs bench freshness`` with ``args``, its output captured."""
    command = [sys.executable, "-m", "kobs.cli", "bench", "freshness", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)


def test_bad_seconds_are_refused_naming_the_option():
    result = _freshness("--seconds", "0")
    assert result.returncode == 2
    assert "--seconds: must be a positive number of seconds, not '0'" in result.stderr.splitlines()[-1]


def test_a_deployment_whose_stream_does_not_answer_is_named_in_one_line(tmp_path):
    exporter = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = tmp_path / "kobs.yaml"
    cluster = "{name: prod, bootstrap_servers: '127.0.0.1:9'}"
    config.write_text(f"clusters: [{cluster}]\nsinks: {{exporter_address: '{exporter}'}}\n")
    result = _freshness("--config", str(config))
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"kobs bench freshness: kobs stream's exporter at http://{exporter}/metrics did not"
    )
    assert "is kobs stream running?" in line


@pytest.mark.peers
def test_a_metrics_topic_kafka_does_not_have_is_named_in_one_line_before_any_wait(kafka_cluster, tmp_path):
    """The exporter answers (a stand-in for kobs stream's, one whose first micro-batch has not ended: no
    stream is needed to reach this check), but the configured metrics topic is not on the real cluster: said
    at once, not after waiting for a micro-batch."""
    config = tmp_path / "kobs.yaml"
    with DerivedExporter(series={"kobs_pipeline_last_batch_timestamp_seconds": []}) as exporter:
        config.write_text(
            f"clusters: [{{name: prod, bootstrap_servers: ['{kafka_cluster.bootstrap}']}}]\n"
            f"metrics_topic: {{name: no-such-topic}}\nsinks: {{exporter_address: '{exporter.address}'}}\n"
        )
        result = _freshness("--config", str(config), timeout_s=120)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("kobs bench freshness: the metrics topic no-such-topic cannot be read: "), line
    assert "UNKNOWN_TOPIC" in line  # Kafka's own answer


def test_a_missing_configuration_is_refused_naming_the_file(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    result = _freshness("--config", str(missing))
    assert result.returncode == 2
    assert f"file {missing} not found" in result.stderr.splitlines()[-1]

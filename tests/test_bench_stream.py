"""``kobs bench stream``'s parts: the recorded workload, the single-process baseline, the resource meter.

The benchmark itself is run by hand (``kobs bench stream``), never here: no timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import replace

import pytest
from test_lag_job import SCRAPES, produce, scrape_batch

from bench import reference, stream
from bench.resources import Usage, tree, usage
from bench.workload import MESSAGE_BYTES, Shape, Workload
from common import names
from common.contract import MAX_ITEMS_PER_RECORD, encode
from spark_jobs.lag import LagAnalysis
from spark_jobs.pipeline import Pipeline
from spark_jobs.stream import analyses, pipeline, start_query

SHAPE = Shape(brokers=3, partitions=60, groups=2, rounds=4)


def by_name(batches, name):
    return [(b.source, s.labels, s.value) for b in batches for s in b.samples if s.name == name]


def test_every_round_is_valid_contract_records_of_every_source():
    workload = Workload(SHAPE)
    for r in range(SHAPE.rounds):
        batches = workload.round(r)
        for batch in batches:
            assert len(encode(batch)) > 0  # encode validates against the contract
            assert len(batch.samples) <= MAX_ITEMS_PER_RECORD
        sources = {b.source for b in batches}
        assert sources >= {"exporter/broker-0", "exporter/broker-2", "admin/metadata", "admin/offsets"}
        # Two topics (50 + 10 partitions), replication factor 3 on 3 brokers: every broker hosts every
        # partition; each reports 14 gauges (3 of them its view of the quorum), a Produce p99, its log dir's
        # total and usable bytes, 4 meters per topic it leads, 2 per request type and a log size per replica.
        # Metadata: replicas, ISR, leader per partition. Offsets: start and end per partition, committed per
        # partition of each group's topic (50 and 10), info and members per group. 4 producers x 9 client
        # metrics.
        assert (
            sum(len(b.samples) for b in batches)
            == 3 * (14 + 1 + 2 + 4 * 2 + 2 * 3 + 60) + 3 * 60 + (2 * 60 + 50 + 10 + 2 * 2) + 4 * 9
        )


def test_a_flapping_follower_shows_in_events_isr_counts_and_broker_meters():
    workload = Workload(SHAPE)
    flapping = {(tp.topic, str(tp.partition)) for tp in workload.flapping}
    assert flapping and all(workload.flapping_broker in tp.replicas[1:] for tp in workload.flapping)
    shrunk, recovered = workload.round(1), workload.round(2)
    for batches, change, isr in ((shrunk, "shrink", 2), (recovered, "expand", 3)):
        events = [e for b in batches for e in b.events if e.type == "isr_change"]
        assert {(e.fields["topic"], str(e.fields["partition"])) for e in events} == flapping
        assert {e.fields["change"] for e in events} == {change}
        isr_counts = {(lb["topic"], lb["partition"]): v for _, lb, v in by_name(batches, names.PARTITION_ISR)}
        assert {isr_counts[tp] for tp in flapping} == {isr}
    # Under-replicated partitions are counted by their leaders while the follower is out.
    assert sum(v for _, _, v in by_name(shrunk, names.UNDER_REPLICATED_PARTITIONS)) == len(flapping)
    assert sum(v for _, _, v in by_name(recovered, names.UNDER_REPLICATED_PARTITIONS)) == 0


def test_offsets_only_grow_and_groups_never_commit_past_the_end():
    workload = Workload(SHAPE)
    ends = [
        {
            (lb["topic"], lb["partition"]): v
            for _, lb, v in by_name(workload.round(r), names.PARTITION_END_OFFSET)
        }
        for r in range(SHAPE.rounds)
    ]
    assert all(ends[r][tp] < ends[r + 1][tp] for r in range(SHAPE.rounds - 1) for tp in ends[0])
    last = workload.round(SHAPE.rounds - 1)
    committed = by_name(last, names.GROUP_COMMITTED_OFFSET)
    assert committed and all(v <= ends[-1][lb["topic"], lb["partition"]] for _, lb, v in committed)
    sizes = by_name(last, names.LOG_SIZE_BYTES)
    assert all(v == ends[-1][lb["topic"], lb["partition"]] * MESSAGE_BYTES for _, lb, v in sizes)


def test_one_controller_failover_halfway():
    workload = Workload(SHAPE)
    events = [e for r in range(SHAPE.rounds) for b in workload.round(r) for e in b.events]
    changes = [e for e in events if e.type == "controller_change"]
    assert [e.fields["controller_id"] for e in changes] == [1]


@pytest.mark.peers
def test_the_baseline_computes_the_lag_job_answers_in_the_planned_batches(kafka_cluster, tmp_path):
    """The scrapes of tests/test_lag_job.py, one record per batch: the same documented answers."""
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(kafka_cluster.bootstrap, topic, [scrape_batch(*scrape) for scrape in SCRAPES])  # 1 partition
    jobs = Pipeline(lambda: [LagAnalysis()], tmp_path / "history", tmp_path / "state")
    batches = [{0: (offset, offset + 1)} for offset in range(len(SCRAPES))]
    seconds = reference.run(kafka_cluster.bootstrap, topic, batches, jobs)
    assert len(seconds) == len(SCRAPES)
    lag = jobs.evaluations["lag", "prod"]
    rows = {row["partition"]: row for row in lag.history}
    assert (rows["0"]["lag_messages"], rows["0"]["status"]) == (300 - 190, "WARN")
    assert sorted(p.name for p in (tmp_path / "history" / "lag").iterdir()) == [
        "batch_id=0",
        "batch_id=1",
        "batch_id=2",
    ]


@pytest.mark.peers
@pytest.mark.spark
def test_the_streaming_query_derives_what_the_one_process_path_derives(spark, kafka_cluster, tmp_path):
    """Item 5 of issue 13: the recorded workload of two clusters (a flapping follower, a controller failover,
    lagging groups, producers) through the kobs stream query on Spark and through one Python process, batch
    for batch."""
    topic, clusters = f"bench-{uuid.uuid4().hex[:8]}", ("east", "west")
    workloads = [Workload(replace(SHAPE, cluster=cluster)) for cluster in clusters]
    records, *_ = stream.produce(kafka_cluster.bootstrap, topic, workloads)
    per_batch = -(-records // SHAPE.rounds)
    config = stream.bench_config(kafka_cluster.bootstrap, topic, per_batch, tmp_path / "spark", clusters)
    jobs = pipeline(config)
    query = start_query(spark, config, jobs, available_now=True)
    query.awaitTermination(300)
    assert query.exception() is None
    progress = [json.loads(p.json) for p in query.recentProgress]
    baseline = stream.one_process_pipeline(config, tmp_path / "reference")
    reference.run(kafka_cluster.bootstrap, topic, reference.batches_of(progress, topic), baseline)
    assert baseline.last_batch_id == jobs.last_batch_id >= 1
    tables = {a.table for a in analyses(config)}
    assert set(jobs.evaluations) == {(table, cluster) for table in tables for cluster in clusters}
    assert stream.results(jobs) == stream.results(baseline)


def test_the_baseline_reads_the_batches_of_the_spark_querys_progress_reports():
    """Progress reports as Spark publishes them (``StreamingQueryProgress.json``): the Kafka source's offsets
    per topic and partition, the first batch without a start, a batch without rows skipped."""
    first, second = {"m": {"0": 3, "1": 2}}, {"m": {"0": 3, "1": 3}}
    reports = [
        {"numInputRows": 5, "sources": [{"startOffset": None, "endOffset": first}]},
        {"numInputRows": 0, "sources": [{"startOffset": first, "endOffset": first}]},
        {"numInputRows": 1, "sources": [{"startOffset": first, "endOffset": second}]},
    ]
    assert reference.batches_of(reports, "m") == [{0: (0, 3), 1: (0, 2)}, {1: (2, 3)}]


def test_the_resource_meter_counts_children_and_leaves_out_excluded_ones():
    allocate = 'import sys, time; b = b"x" * (96 * 2**20); print(1, flush=True); sys.stdin.read()'
    children = [
        subprocess.Popen([sys.executable, "-c", allocate], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout.readline() == b"1\n"  # allocated
        alone, _ = usage(os.getpid(), exclude=[c.pid for c in children])
        both, cpu = usage(os.getpid())
        assert {c.pid for c in children} <= set(tree(os.getpid()))
        assert both - alone >= 2 * 96 * 2**20  # bytearray pages are written, hence resident
        assert cpu["driver"] > 0
    finally:
        for child in children:
            child.communicate(b"")


def test_the_resource_meter_leaves_out_its_own_sampling():
    began = time.process_time()
    with Usage(every_s=0.001) as used:  # this thread idles: nearly all the process's CPU is the sampling
        time.sleep(0.5)
        used.sample()
    sampling = time.process_time() - began
    assert sampling > 0.05  # reading /proc for every sample is not free
    assert used.cpu_s["driver"] < sampling / 2
    assert used.loads and min(used.loads) >= 0  # the machine's load average, sampled as it ran


@pytest.mark.parametrize(
    "option, refusal",
    [
        (["--partitions", "0"], "--partitions: must be a whole number of at least 1, not '0'"),
        (["--catch-up", "-5"], "--catch-up: must be a whole number, not '-5'"),
    ],
)
def test_bad_sizes_are_refused_naming_the_option(option, refusal):
    result = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "bench", "stream", *option],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert refusal in result.stderr.splitlines()[-1]

"""``kobs bench capacity``'s harness on the session's real 3-node cluster: Kafka's own perf tools run and
their figures are read for every row of the matrix. The benchmark itself is run by hand (its figures are in
docs/benchmarks.md); no timing is asserted here, and 1 MB per row only proves the plumbing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from sockets import descendants
from waiting import wait_for

from bench.capacity import ROWS, new_topic, signals_held
from peers.process import free_port

pytestmark = pytest.mark.peers

KEYS = {
    "name", "replication_factor", "acks", "message_bytes", "producers", "consumers", "measured_records_per_s",
    "model_records_per_s",
}  # fmt: skip  # the JSON issue 17 asks for


def test_every_row_runs_kafkas_perf_tools_and_prints_measured_beside_the_model(kafka_cluster):
    exporters = [arg for node in kafka_cluster.nodes.values() for arg in ("--exporter", node.exporter_url)]
    done = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "bench", "capacity", "--megabytes", "1", "--json",
         "--bootstrap", kafka_cluster.bootstrap, *exporters],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("machine: ") and "loopback" in lines[1] and "disk" in lines[1]
    report = json.loads(lines[-1])
    assert set(report["machine"]) == {
        "cores", "clock_ghz", "clock_source", "core_share", "ram_gb", "loopback_gbps",
        "loopback_cycles_per_byte", "disk_mbps", "disk_cycles_per_byte",
    }  # fmt: skip
    rows = report["rows"]
    assert all(set(row) == KEYS for row in rows) and len(rows) >= 6
    assert all(row["measured_records_per_s"] > 0 and row["model_records_per_s"] > 0 for row in rows)
    # the matrix: replication 1 and 3, acks 1 and all, 100 B and 1 KB, 1 to 3 producers, a consumer row
    assert {r["replication_factor"] for r in rows} == {1, 3} and {r["acks"] for r in rows} == {"1", "all"}
    assert {r["message_bytes"] for r in rows} == {100, 1024} and {r["producers"] for r in rows} == {0, 1, 3}
    assert any(r["consumers"] and not r["producers"] for r in rows)
    for row in rows:  # each printed with its ratio
        assert any(line.strip().startswith(row["name"]) and "model/measured" in line for line in lines)
    assert lines[-2].startswith("model vs measured: worst x")
    # the brokers' own request counts for each row: a producer row's records came in Produce requests, the
    # consumer row's went out in consumer fetches
    served = [line.strip() for line in lines if line.strip().startswith("requests per 1000 records")]
    assert len(served) == len(rows), served
    for row, line in zip(rows, served, strict=True):
        kind = "Produce" if row["producers"] else "FetchConsumer"
        assert float(re.search(rf"{kind} ([\d.]+)", line).group(1)) > 0, line


def test_a_rows_topic_deleted_already_ends_the_row_cleanly(kafka_cluster):
    # A delete retried after a timeout (a loaded controller) finds the topic gone: Kafka answers
    # UNKNOWN_TOPIC_OR_PARTITION, and the row must go on rather than end the run with a traceback.
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap})
    with new_topic(kafka_cluster.bootstrap, ROWS[0]) as topic:
        admin.delete_topics([topic])[topic].result(timeout=60)
    # The controller answers once the deletion is committed; each broker's metadata learns it a moment later.
    gone = wait_for(lambda: topic not in admin.list_topics(timeout=30).topics, timeout_s=30, every_s=0.5)
    assert gone, admin.list_topics(timeout=30).topics.get(topic)


def _cmdline(pid: int) -> bytes:
    """``pid``'s command line; empty once it has ended (a zombie's too)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _java_children(pid: int) -> dict[str, list[int]]:
    """``pid``'s Java children by kind: the Kafka nodes and the producer perf tools."""
    kinds = {"nodes": b"kafka.Kafka", "tools": b"ProducerPerformance"}
    return {kind: [c for c in descendants({pid}) if main in _cmdline(c)] for kind, main in kinds.items()}


def test_a_sigterm_while_a_tool_starts_is_delivered_once_it_has_started():
    """As ``kobs bench`` handles SIGTERM: exit wherever the main thread is. Held while a tool starts, the
    exit comes once the started tool is known (and so killed with the others)."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    on_sigint, started = signal.getsignal(signal.SIGINT), []
    try:
        with pytest.raises(SystemExit) as exited, signals_held(signal.SIGINT, signal.SIGTERM):
            os.kill(os.getpid(), signal.SIGTERM)  # delivered at once, to this (the main) thread
            time.sleep(0.1)
            started.append("tool")  # reached: the exit waited
        assert exited.value.code == 143 and started == ["tool"]
        assert signal.getsignal(signal.SIGINT) is on_sigint  # both handlers back
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_kill_stops_the_cluster_and_the_tools_the_benchmark_started():
    # `kill PID` once ended the benchmark at once and left its three Kafka nodes and its perf tool running
    bench = subprocess.Popen(
        [sys.executable, "-m", "kobs.cli", "bench", "capacity", "--megabytes", "100"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for line in bench.stdout:  # type: ignore[union-attr]
            if line.startswith("warming the brokers up"):
                break
        deadline = time.monotonic() + 60
        while not (started := _java_children(bench.pid))["tools"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(started["nodes"]) == 3 and started["tools"], started  # the first warm-up row runs
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=120) == 143
    finally:
        bench.kill()
    assert not [pid for pids in started.values() for pid in pids if _cmdline(pid)]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--exporter", "http://127.0.0.1:{port}/metrics"], "names the brokers of a --bootstrap cluster"),
        (["--bootstrap", "127.0.0.1:9", "--exporter", "http://127.0.0.1:{port}/metrics"], "cannot be read"),
        (["--bootstrap", "127.0.0.1:9", "--exporter", "127.0.0.1:{port}"], "cannot be read"),
    ],
)
def test_an_exporter_that_cannot_serve_is_refused_before_anything_runs(options, said):
    port = free_port()  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "bench", "capacity", *(o.format(port=port) for o in options)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("kobs bench capacity: --exporter: ") and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "as model hardware" not in done.stdout  # refused first

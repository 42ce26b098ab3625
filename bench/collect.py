"""``kobs bench collect``: one full collector cycle at scale, and the publish path's throughput.

Cycle: ``kobs collect --once`` in a child process against the simulator's JMX-exporter pages of
``--brokers`` brokers and the tansu broker holding ``--topics`` × ``--partitions`` partitions and
``--groups`` groups, each with committed offsets for every partition of one topic. The simulator renders
each page once and this process serves the pages as they are (in production each broker renders its own),
so the machine's two cores are shared by the collector and tansu only. Figures: the cycle time the summary
reports, the child's wall time and CPU time (``wait4``: its own child processes included), the peak memory
of its processes together (PSS, sampled), and tansu's CPU time meanwhile.
Baseline in the same run: the same pages downloaded without parsing. Publish: ``--samples`` samples in
batches of 1,000 through the
:class:`~collectors.publisher.Publisher` to tansu, from first submit to last delivery; baselines: a bare
confluent-kafka producer sending the same records already encoded, and encoding alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from collectors.publisher import Publisher
from collectors.spool import Spool
from common.contract import Batch, Sample, encode
from peers.tansu import TansuBroker
from simulator.runtime import Runtime
from simulator.scenario import Scenario, Simulation

CYCLE_TARGET_S = 10.0
MEMORY_TARGET_MB = 500.0  # the collector's processes together (itself and its groups child), PSS
MEMORY_SAMPLE_S = 0.05
PUBLISH_TARGET = 200_000  # samples/s
BATCH_SAMPLES = 1_000
ROOT = Path(__file__).parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=30, help="simulated brokers with exporters (30)")
    parser.add_argument(
        "--sim-partitions", type=int, default=10_000, help="partitions of the simulated cluster, RF 3 (10000)"
    )
    parser.add_argument("--topics", type=int, default=1_000, help="topics on the tansu broker (1000)")
    parser.add_argument("--partitions", type=int, default=100, help="partitions per tansu topic (100)")
    parser.add_argument("--groups", type=int, default=1_000, help="consumer groups (1000)")
    parser.add_argument("--samples", type=int, default=1_000_000, help="samples through the publisher (1e6)")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="kobs-bench-collect-") as tmp:
        run_dir = Path(tmp)
        with TansuBroker(run_dir / "kafka") as broker:
            ok = _cycle(args, broker, run_dir)
            ok = _publish(args.samples, broker.bootstrap, run_dir) and ok
    return 0 if ok else 1


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


# -- the cycle ----------------------------------------------------------------------------------------
def _populate(bootstrap: str, topics: int, partitions: int, groups: int) -> None:
    """Topics ``bench-NNNN`` and groups ``group-NNNN``, group i committing offset 0 on topic i mod topics."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, topics, 100):
        new = [NewTopic(f"bench-{i:04d}", partitions, 1) for i in range(start, min(start + 100, topics))]
        for future in admin.create_topics(new, operation_timeout=60, request_timeout=60).values():
            future.result()
    futures = []
    for g in range(groups):
        offsets = [TopicPartition(f"bench-{g % topics:04d}", p, 0) for p in range(partitions)]
        request = [ConsumerGroupTopicPartitions(f"group-{g:04d}", offsets)]
        futures += admin.alter_consumer_group_offsets(request, request_timeout=60).values()
    for future in futures:
        future.result()


def _simulation(brokers: int, partitions: int) -> Simulation:
    topics = [
        {"name": f"sim-{i:03d}", "partitions": 100, "replication_factor": 3} for i in range(partitions // 100)
    ]
    return Simulation(Scenario.from_dict({"name": "bench", "brokers": brokers, "topics": topics}))


def _cycle(args: argparse.Namespace, broker: TansuBroker, run_dir: Path) -> bool:
    total = args.topics * args.partitions
    print(
        f"collect cycle: `kobs collect --once` over {args.brokers} exporter endpoints (simulator, "
        f"{args.sim_partitions:,} partitions RF 3) + Admin API offsets of {total:,} partitions "
        f"({args.topics:,} topics x {args.partitions}) and {args.groups:,} groups (tansu broker)",
        flush=True,
    )
    started = time.monotonic()
    _populate(broker.bootstrap, args.topics, args.partitions, args.groups)
    with Runtime(_simulation(args.brokers, args.sim_partitions)) as runtime:
        runtime.advance(1.0)
        live = [url for name, url in runtime.endpoints() if name.startswith("broker-")]
        rendered_s, pages = _download(live)
    print(f"  setup (not timed): {time.monotonic() - started:.1f} s", flush=True)
    with _served(pages) as urls:
        config = _config(run_dir, broker.bootstrap, urls)
        broker_cpu_s = _cpu_s(broker.pid)
        cycle_s, samples, wall_s, cpu_s, (pss_mb, rss_mb, largest_mb), output = _collect_once(config)
        broker_cpu_s = _cpu_s(broker.pid) - broker_cpu_s
        pages_s, pages = _download(urls)
    if cycle_s is None:
        print(f"  kobs collect failed:\n{output}")
        return False
    cycle_ok, memory_ok = cycle_s < CYCLE_TARGET_S, pss_mb < MEMORY_TARGET_MB
    print(f"  cycle              {cycle_s:8.2f} s    target < {CYCLE_TARGET_S:g} s      {_verdict(cycle_ok)}")
    verdict = _verdict(memory_ok)
    print(f"  peak memory (PSS)  {pss_mb:8.0f} MB   target < {MEMORY_TARGET_MB:g} MB    {verdict}")
    print(
        f"    (the collector and its groups child, sampled every {MEMORY_SAMPLE_S:g} s; RSS summed, counting "
        f"the shared libraries twice: {rss_mb:.0f} MB; the largest process: {largest_mb:.0f} MB RSS)"
    )
    print(f"  process wall time  {wall_s:8.2f} s    (with Python start, imports, topic check, delivery)")
    print(f"  process CPU time   {cpu_s:8.2f} s    (user + system, all threads: least moved by other load)")
    print(f"  tansu CPU time     {broker_cpu_s:8.2f} s    (the broker answering, on the same two cores)")
    print(f"  samples published  {samples:8,}")
    print(
        f"  baseline: the {len(urls)} pages downloaded, not parsed: {pages_s:.2f} s, "
        f"{sum(map(len, pages)) / 1e6:.1f} MB (rendered by the simulator beforehand in {rendered_s:.2f} s)"
    )
    print("  per source (from the summary):")
    for line in _source_lines(output):
        print("  " + line)
    print(f"  load average during the run (other processes share the machine): {_load()}")
    return cycle_ok and memory_ok and "FAILED" not in output


def _source_lines(output: str) -> list[str]:
    """The summary's header, Admin API and failed lines, and the slowest exporter."""
    lines = output.splitlines()
    header = [line for line in lines if line.strip().startswith("source ")]
    exporters = [line for line in lines if "/exporter/" in line and "FAILED" not in line]
    slowest = max(exporters, key=lambda line: float(line.split()[4]), default=None)
    picked = [line for line in lines if "/admin/" in line or "FAILED" in line]
    return header + picked + ([f"{slowest}   (slowest of {len(exporters)} exporters)"] if slowest else [])


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def _config(run_dir: Path, bootstrap: str, urls: list[str]) -> Path:
    doc = {
        "clusters": [
            {
                "name": "bench",
                "bootstrap_servers": [bootstrap],
                "exporters": [{"broker_id": i, "url": url} for i, url in enumerate(urls)],
            }
        ],
        "metrics_topic": {"name": "kobs.bench.cycle"},
        "intervals": dict.fromkeys(("metrics_s", "offsets_s", "metadata_s", "producers_s"), 60),
        "sinks": {"run_dir": str(run_dir / "collect")},
    }
    path = run_dir / "kobs.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _collect_once(config: Path) -> tuple[float | None, int, float, float, tuple[float, float, float], str]:
    """(cycle s, samples, wall s, CPU s, memory, stdout) of one ``kobs collect --once`` child process; CPU
    includes its child processes (reaped); memory in MB: the peak sums of PSS and of RSS over its processes,
    and the peak RSS of the largest one."""
    command = [sys.executable, "-m", "kobs.cli", "collect", "--config", str(config), "--once"]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    peaks: dict[str, float] = {}
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env=env)
        done = threading.Event()
        sampler = threading.Thread(target=_sample_tree_memory, args=(child.pid, done, peaks), daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its resource usage
        done.set()
        sampler.join()
        wall_s = time.monotonic() - started
        out.seek(0)
        output = out.read().decode()
    cycle = re.search(r"cycle ([\d.]+) s", output)
    samples = sum(int(line.split()[2]) for line in output.splitlines() if line.startswith("  bench/"))
    cpu_s = usage.ru_utime + usage.ru_stime
    memory_mb = (peaks.get("pss", 0.0), peaks.get("rss", 0.0), usage.ru_maxrss / 1024)
    return (float(cycle.group(1)) if cycle else None), samples, wall_s, cpu_s, memory_mb, output


def _sample_tree_memory(pid: int, done: threading.Event, peaks: dict[str, float]) -> None:
    """Keep in ``peaks`` the largest sums of resident memory (``rss``) and proportional set size (``pss``:
    a page shared by n processes counts 1/n in each) over ``pid`` and its descendants (the collector's
    groups child), in MB, sampled every ``MEMORY_SAMPLE_S`` until ``done``."""
    while not done.wait(MEMORY_SAMPLE_S):
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError):
                parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        tree, grew = {pid}, True
        while grew:
            found = {p for p, parent in parents.items() if parent in tree} - tree
            tree, grew = tree | found, bool(found)
        totals = dict.fromkeys(("rss", "pss"), 0.0)
        for member in tree:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                    key, _, value = line.partition(":")
                    if key.lower() in totals:
                        totals[key.lower()] += int(value.split()[0]) / 1024
        for key, total in totals.items():
            peaks[key] = max(peaks.get(key, 0.0), total)


def _download(urls: list[str]) -> tuple[float, list[bytes]]:
    started, pages = time.monotonic(), []
    for url in urls:
        with urllib.request.urlopen(url, timeout=60) as response:
            pages.append(response.read())
    return time.monotonic() - started, pages


@contextlib.contextmanager
def _served(pages: list[bytes]) -> Iterator[list[str]]:
    """The pages over HTTP on 127.0.0.1, as they are; yields their URLs."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = pages[int(self.path.strip("/"))]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield [f"http://127.0.0.1:{server.server_address[1]}/{i}" for i in range(len(pages))]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a running process, all threads (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the publish path ---------------------------------------------------------------------------------
def _batches(samples: int) -> list[Batch]:
    """Broker-page-like batches: per-partition log sizes of one broker, 1,000 samples each."""
    batches = []
    for b in range(samples // BATCH_SAMPLES):
        rows = tuple(
            Sample(
                "kafka_log_size_bytes",
                {"broker": str(b % 30), "topic": f"t{i // 100}", "partition": str(i)},
                i,
            )
            for i in range(BATCH_SAMPLES)
        )
        batches.append(Batch("bench", f"exporter/broker-{b % 30}", 1_700_000_000_000 + b, rows))
    return batches


def _publish(samples: int, bootstrap: str, run_dir: Path) -> bool:
    batches = _batches(samples)
    samples = len(batches) * BATCH_SAMPLES
    print(
        f"publish path: {samples:,} samples in batches of {BATCH_SAMPLES:,} to the tansu broker", flush=True
    )

    started = time.monotonic()
    records = [(b.key, encode(b)) for b in batches]
    encode_rate = samples / (time.monotonic() - started)

    settings = {"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4"}
    producer = Producer(settings)
    producer.list_topics("kobs.bench.raw", timeout=10)  # tansu auto-creates it; not part of the timing
    started = time.monotonic()
    for key, value in records:
        producer.produce("kobs.bench.raw", value, key)
        producer.poll(0)
    producer.flush(120)
    raw_rate = samples / (time.monotonic() - started)

    spool = Spool(run_dir / "spool", 1 << 30)
    create = ({"bootstrap.servers": bootstrap}, 6, 1)
    publisher = Publisher(settings | {"enable.idempotence": True}, "kobs.bench.publish", spool, create=create)
    publisher.start()  # creates the topic: not part of the timing
    started = time.monotonic()
    for batch in batches:
        publisher.submit(batch)
    delivered = publisher.flush(300)
    rate = samples / (time.monotonic() - started)
    publisher.close(timeout_s=0)
    ok = delivered and rate >= PUBLISH_TARGET and publisher.stats.dropped == 0
    print(f"  publisher          {rate:10,.0f} samples/s   target >= {PUBLISH_TARGET:,}/s   {_verdict(ok)}")
    print(f"  baseline: bare producer, records encoded beforehand: {raw_rate:,.0f} samples/s")
    print(f"  baseline: encoding alone (contract.encode): {encode_rate:,.0f} samples/s")
    print(f"  load average: {_load()}")
    return ok

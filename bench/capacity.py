"""``kobs bench capacity``: the capacity model against Kafka's own perf tools on a local 3-node cluster.

Each row of :data:`ROWS` runs ``kafka-producer-perf-test`` (one process per producer, at once) or
``kafka-consumer-perf-test`` against a fresh topic of 6 partitions on a real 3-node Kafka started for the
run, and puts the measured records/s beside what the capacity model predicts for the same workload on this
machine, described as model hardware (:mod:`bench.capacity_machine`: cores, clock, loopback as the network,
the disk's measured sequential write speed). Baseline: the model's prediction, ratio model / measured.
Under each row: the CPU cycles per record it took, and the requests the brokers served per 1000 records
(their own request counts, from their JMX exporter agents).

Three things keep the measurement about Kafka: the brokers are warmed up first (unmeasured rows, so that
their JIT has compiled the produce, replication and fetch paths: cold brokers measured 2-3x slower), each
perf tool warms itself up too (its first third of records, Kafka's own ``--warmup-records`` for a
producer; the figure and the CPU are those of its steady state), and records come from a file of ready
payloads (the producer tool otherwise draws every byte of every record from a random generator, which took
half its CPU at 1 KB).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from app.capacity.model import DEFAULT_COSTS as COSTS
from app.capacity.model import Workload, throughput
from bench.capacity_machine import CpuMark, CpuUse, Machine, cpu_mark, measure
from bench.cli import at_least_one
from collectors.exposition import parse_exposition
from common import names
from peers.kafka import Reached, given_or_started
from peers.kafka_tools import tool_argv
from peers.stack import create_topic

PARTITIONS = 6
BATCH_BYTES = 16_384  # the Java producer's default batch.size, which the perf tool keeps
TARGET = (2.0, 1.3)  # every row within x2 of the measurement, the median within x1.3 (issue 17)
WARM_UP_SHARE = 3  # a perf tool's first third of records warms its JVM up (not measured)
TOOL_TIMEOUT_S = 1800
REPLICAS_KEPT = 3.3  # a row's copies on the brokers' disks at RF 3, with the logs' indexes and headers


@dataclass(frozen=True)
class Row:
    name: str
    replication_factor: int
    acks: str
    message_bytes: int
    producers: int
    consumers: int


ROWS = (
    Row("rf1 acks=1 100 B", 1, "1", 100, 1, 0),
    Row("rf3 acks=1 100 B", 3, "1", 100, 1, 0),
    Row("rf3 acks=all 100 B", 3, "all", 100, 1, 0),
    Row("rf1 acks=1 1 KB", 1, "1", 1024, 1, 0),
    Row("rf3 acks=all 1 KB", 3, "all", 1024, 1, 0),
    Row("rf3 acks=all 100 B, 3 producers", 3, "all", 100, 3, 0),
    Row("rf3 100 B, 1 consumer", 3, "1", 100, 0, 1),
)
WARM_UP = (Row("warm-up 100 B", 3, "all", 100, 1, 0), Row("warm-up 1 KB", 3, "all", 1024, 1, 0))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--megabytes",
        type=at_least_one,
        default=3000,
        help="payload each row sends or reads, in MB (default 3000: 30,000,000 messages of 100 B; a "
        "perf tool's first third warms its JVM up and is not measured); the brokers are first warmed up "
        "with two unmeasured rows of the same size. A row at RF 3 keeps 3 copies on disk until it ends: "
        "the cluster started here needs that much free space under the temporary directory (the default "
        "takes ~8 minutes on 2 cores)",
    )
    parser.add_argument(
        "--bootstrap", help="host:port of a 3-broker Kafka on this machine to use (default: start one)"
    )
    parser.add_argument(
        "--exporter",
        action="append",
        default=[],
        metavar="URL",
        help="with --bootstrap: the metrics URL of one of its brokers' JMX exporter agents (repeat for each "
        "broker), so that each row also prints the requests the brokers served per 1000 records (the "
        "cluster the benchmark starts has its own)",
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON object on the last line")


def run(args: argparse.Namespace) -> int:
    if refused := exporters_refused(args):
        print(f"kobs bench capacity: --exporter: {refused}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kobs-bench-capacity-") as tmp:
        needed = REPLICAS_KEPT * args.megabytes * 1e6
        if not args.bootstrap and (free := shutil.disk_usage(tmp).free) < needed:
            print(
                f"kobs bench capacity: a row at RF 3 keeps {needed / 1e9:.1f} GB on disk and {tmp} has "
                f"{free / 1e9:.1f} GB free: give --megabytes {int(free / REPLICAS_KEPT / 1e6)} or less, or "
                "point TMPDIR at a larger disk",
                file=sys.stderr,
            )
            return 2
        machine = measure(Path(tmp))
        print(f"as model hardware: {machine.text()}", flush=True)
        if not args.bootstrap:
            print("starting a 3-node Kafka on 127.0.0.1 ...", flush=True)
        payloads = {size: payload_file(Path(tmp), size) for size in {row.message_bytes for row in ROWS}}
        with given_or_started(args.bootstrap, Path(tmp), 3, tuple(args.exporter)) as cluster:
            print("warming the brokers up (not measured) ...", flush=True)
            for row in WARM_UP:
                with new_topic(cluster.bootstrap, row) as topic:
                    produce(cluster.bootstrap, topic, row, payloads, records(row, args.megabytes))
            results = [measure_row(cluster, row, args.megabytes, machine, payloads) for row in ROWS]
    print(verdict(results))
    if args.json:
        print(json.dumps({"machine": asdict(machine), "rows": results}))
    return 0


def exporters_refused(args: argparse.Namespace) -> str:
    """Why the ``--exporter`` URLs given cannot serve, or "" (none given, or each one answers)."""
    if args.exporter and not args.bootstrap:
        return "names the brokers of a --bootstrap cluster; the cluster started here has its own"
    for url in args.exporter:
        try:
            request_counts((url,))
        except (OSError, ValueError) as exc:
            return (
                f"{url} cannot be read ({exc}) — give the metrics URL of a broker's JMX exporter agent, "
                "like http://HOST:PORT/metrics"
            )
    return ""


def payload_file(directory: Path, size: int, count: int = 1000) -> Path:
    """``count`` payloads of ``size`` random capital letters, one per line, as the perf tool would draw."""
    path = directory / f"payloads-{size}.txt"
    rng = random.Random(size)
    path.write_text("\n".join("".join(rng.choices(string.ascii_uppercase, k=size)) for _ in range(count)))
    return path


def records(row: Row, megabytes: int) -> int:
    return max(1, megabytes * 1_000_000 // row.message_bytes)


@contextmanager
def new_topic(bootstrap: str, row: Row) -> Iterator[str]:
    """A fresh topic of :data:`PARTITIONS` for ``row``, deleted after it (rows write gigabytes)."""
    topic = f"capacity-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS, row.replication_factor)
    try:
        yield topic
    finally:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
        try:
            admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
        except KafkaException as exc:  # a retried delete finds the topic gone: the first one did it
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise


def measure_row(
    cluster: Reached, row: Row, megabytes: int, machine: Machine, payloads: dict[int, Path]
) -> dict:
    """Run one row on a fresh topic and print measured, predicted and their ratio, and the requests the
    brokers served for it."""
    count, bootstrap = records(row, megabytes), cluster.bootstrap
    with new_topic(bootstrap, row) as topic:
        if not row.producers:  # a consumer row reads what a producer wrote first (not timed)
            produce(bootstrap, topic, replace(row, acks="1", producers=1, consumers=0), payloads, count)
        before = request_counts(cluster.exporter_urls)
        measured, cpu = (
            produce(bootstrap, topic, row, payloads, count)
            if row.producers
            else consume(bootstrap, topic, count)
        )
        served = request_counts(cluster.exporter_urls) - before if cluster.exporter_urls else None
    workload = Workload(
        message_bytes=row.message_bytes,
        batch_bytes=BATCH_BYTES,
        acks=row.acks,  # type: ignore[arg-type]
        replication_factor=row.replication_factor,
        partitions=PARTITIONS,
        producers=row.producers,
        consumers=row.consumers,
    )
    answer = throughput(machine.hardware(), workload)
    bound = answer.produce if row.producers else answer.consume
    ratio = bound.records_per_s / measured if measured else float("inf")
    print(
        f"  {row.name:<34} measured {measured:>11,.0f} records/s   model {bound.records_per_s:>11,.0f} "
        f"({bound.name})   model/measured {ratio:.2f}\n  {'':<34} {cycles(cpu, machine, workload)}"
        f"\n  {'':<34} {requests_served(served, count)}",
        flush=True,
    )
    return {
        **asdict(row),
        "measured_records_per_s": round(measured),
        "model_records_per_s": round(bound.records_per_s),
    }


def cycles(cpu: CpuUse | None, machine: Machine, workload: Workload) -> str:
    """CPU cycles per record the row took, the perf tools apart from the brokers, beside the model's (the
    brokers' with the kernel's work for every replica's copy, which the tools' send starts), and how many of
    the machine's cores were busy meanwhile."""
    if cpu is None:
        return "CPU cycles per record: not measured (the tools were never in steady state together)"
    hz = machine.clock_ghz * 1e9
    if workload.producers:
        tools = COSTS.producer_caller(workload) + COSTS.producer_sender(workload)
        kernel = machine.hardware().kernel_cycles(workload.stored_bytes, workload.replication_factor)
        brokers = f"{COSTS.brokers(workload) + kernel:,.0f}"
    else:
        tools, brokers = COSTS.consumer(workload), "none: served by sendfile"
    return (
        f"CPU cycles per record: perf tools {cpu.tools_s * hz / cpu.records:,.0f} (model {tools:,.0f}), "
        f"brokers and the rest {cpu.rest_s * hz / cpu.records:,.0f} (model {brokers}); "
        f"cores busy {cpu.cores_busy:.2f} of {machine.cores}"
    )


SERVED = ("Produce", "FetchFollower", "FetchConsumer")  # the requests a row's records cost the brokers


def request_counts(exporter_urls: tuple[str, ...]) -> Counter[str]:
    """The requests of each kind in :data:`SERVED` the brokers behind ``exporter_urls`` have served so far
    (Kafka's RequestsPerSec meters' counts, as the JMX exporter's agent serves them)."""
    counts: Counter[str] = Counter()
    for url in exporter_urls:
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode()
        for sample in parse_exposition(page, REQUESTS, {}):
            if sample.labels.get("request") in SERVED:
                counts[sample.labels["request"]] += sample.value
    return counts


REQUESTS = {"kafka_network_requestmetrics_requests_total": names.REQUESTS}  # the exporter's series, ours


def requests_served(served: Counter[str] | None, records: int) -> str:
    """The requests of each kind the brokers served per 1000 of a row's records, over its whole run (None:
    the brokers' metrics are not known)."""
    if served is None:
        return "requests per 1000 records: not measured (give --exporter with --bootstrap)"
    kinds = ", ".join(f"{kind} {served[kind] * 1000 / records:.2f}" for kind in SERVED if served[kind])
    return f"requests per 1000 records (the whole run, warm-up included): {kinds}"


STEADY = "In steady state."  # the producer tool's line at its first report (each second) after its warm-up
STEADY_RESULT = re.compile(r"(\d+) steady state records sent, ([\d.]+) records/sec")


def produce(
    bootstrap: str, topic: str, row: Row, payloads: dict[int, Path], count: int
) -> tuple[float, CpuUse | None]:
    """Steady-state records/s of ``row.producers`` perf-test producers started at once, sending ``count``
    records between them: the sum of each tool's own steady-state figure (its first third of records warm it
    up). The CPU is measured from when all of them say they are in steady state (within a second of it) to
    when the first one ends (None if one ended before the last said so), on the records they sent meanwhile
    at that rate."""
    each = max(2, count // row.producers)
    argv = tool_argv(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", str(each), "--warmup-records",
        str(max(1, each // WARM_UP_SHARE)), "--payload-file", str(payloads[row.message_bytes]),
        "--throughput", "-1", "--reporting-interval", "1000", "--producer-props",
        f"bootstrap.servers={bootstrap}", f"acks={row.acks}", heap="512m", quick=False,
    )  # fmt: skip
    run = run_tools("kafka-producer-perf-test", [argv] * row.producers, lambda line: line.startswith(STEADY))
    rates = []
    for out in run.outputs:
        final = STEADY_RESULT.findall(out)
        if not final:
            raise RuntimeError(f"kafka-producer-perf-test printed no steady-state figure: {out[-2000:]}")
        rates.append(float(final[-1][1]))
    rate, steady, end = sum(rates), run.steady, run.end
    return rate, CpuUse.between(steady, end, rate * (end.at_s - steady.at_s)) if steady else None


# kafka-consumer-perf-test's report (--show-detailed-stats): time, thread, MB so far, MB/s, records so far
CONSUMER_REPORT = re.compile(r"\d{4}-\d\d-\d\d [\d:]+, \d+, [\d.]+, [\d.]+, (\d+),")
CONSUMER_SHORT = "WARNING: Exiting before consuming the expected number of messages"


def consume(bootstrap: str, topic: str, records: int) -> tuple[float, CpuUse]:
    """Steady-state records/s of kafka-consumer-perf-test reading ``records``, and its CPU: from its first
    report (one a second) past its first third of records, which warm its JVM up as a producer's do, to its
    last report (its close and exit left out), on the records read in between. A read too short to be
    reported twice past its first third counts from the tool's start to its end (JVM start, the group's
    join and the exit included)."""
    argv = tool_argv(
        "kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, "--num-records",
        str(records), "--timeout", "60000", "--show-detailed-stats", "--reporting-interval", "1000",
        heap="512m", quick=False,
    )  # fmt: skip
    warm = records // WARM_UP_SHARE
    run = run_tools("kafka-consumer-perf-test", [argv], lambda line: records_read(line) >= warm)
    if CONSUMER_SHORT in run.outputs[0]:
        raise RuntimeError(
            f"kafka-consumer-perf-test read fewer than {records} records: {run.outputs[0][-2000:]}"
        )
    if len(run.marked) < 2:
        cpu = CpuUse.between(run.start, run.end, records)
    else:
        (first_line, first), (last_line, last) = run.marked[0], run.marked[-1]
        cpu = CpuUse.between(first, last, records_read(last_line) - records_read(first_line))
    return cpu.records / cpu.seconds, cpu


def records_read(line: str) -> int:
    """The records read so far in a report line of kafka-consumer-perf-test, -1 in any other line."""
    report = CONSUMER_REPORT.match(line)
    return int(report.group(1)) if report else -1


@dataclass(frozen=True)
class ToolRun:
    """Perf tools run at once: their outputs, and CPU marks at their start, when every one of them had
    printed a steady-state line (None if one ended first), when the first one ended, and at every
    steady-state line (``marked``, in the order read, with the line)."""

    outputs: list[str]
    start: CpuMark
    steady: CpuMark | None
    end: CpuMark
    marked: list[tuple[str, CpuMark]]


@contextmanager
def signals_held(*signums: int) -> Iterator[None]:
    """The signals received inside are delivered again on the way out (main thread only: elsewhere
    Python delivers none). ``kobs bench`` exits on SIGTERM wherever it is: inside ``Popen``, after the
    fork, the tool started would be known to no one and outlive the benchmark (a CI run saw one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: got.append(signum)) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for s in got:
            signal.raise_signal(s)


def run_tools(name: str, argvs: list[list[str]], steady: Callable[[str], bool]) -> ToolRun:
    """Run the perf tools ``argvs`` (Kafka's ``name``) at once to their end; a line for which ``steady``
    holds says a tool is in steady state."""
    with tempfile.TemporaryFile("w+") as errors:
        tools: list[subprocess.Popen] = []
        try:
            for argv in argvs:
                with signals_held(signal.SIGINT, signal.SIGTERM):
                    tools.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True))
            run = _read(tools, steady)
        except BaseException:  # interrupted (`kill PID`) or failed: no tool outlives its row
            for tool in tools:
                tool.kill()
            for tool in tools:
                tool.wait()  # gone, not dying, when the benchmark goes on or ends
            raise
        codes = [tool.wait(60) for tool in tools]
        if any(codes):
            errors.seek(0)
            said = errors.read() or run.outputs[next(i for i, c in enumerate(codes) if c)]
            raise RuntimeError(f"{name} failed ({codes}): {said[-2000:]}")
    return run


def _read(tools: list[subprocess.Popen], steady: Callable[[str], bool]) -> ToolRun:
    """The running ``tools``' outputs to their end, with the CPU marks of :class:`ToolRun`; raises
    TimeoutError when one runs past :data:`TOOL_TIMEOUT_S`."""
    pids = [tool.pid for tool in tools]
    lock, marks, waiting = threading.Lock(), {"start": cpu_mark(pids)}, len(tools)
    outputs: list[list[str]] = [[] for _ in tools]
    marked: list[tuple[str, CpuMark]] = []

    def read(tool: subprocess.Popen, lines: list[str]) -> None:
        nonlocal waiting
        seen = False
        for line in tool.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if not steady(line):
                continue
            with lock:
                marked.append((line, cpu_mark(pids)))
                if not seen:
                    seen, waiting = True, waiting - 1
                    if not waiting and "end" not in marks:
                        marks["steady"] = marked[-1][1]
        with lock:
            marks.setdefault("end", cpu_mark(pids))  # before the tool is waited for: /proc still has it

    readers = [threading.Thread(target=read, args=pair) for pair in zip(tools, outputs, strict=True)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(TOOL_TIMEOUT_S)
    if any(reader.is_alive() for reader in readers):
        raise TimeoutError(f"a perf tool ran past {TOOL_TIMEOUT_S} s: {''.join(outputs[0])[-2000:]}")
    texts = ["".join(lines) for lines in outputs]
    return ToolRun(texts, marks["start"], marks.get("steady"), marks["end"], marked)


def verdict(results: list[dict]) -> str:
    ratios = [r["model_records_per_s"] / r["measured_records_per_s"] for r in results]
    factors = [max(x, 1 / x) for x in ratios]
    median = sorted(factors)[len(factors) // 2]
    worst, want_worst, want_median = max(factors), *TARGET
    met = worst <= want_worst and median <= want_median
    return (
        f"model vs measured: worst x{worst:.2f} (target x{want_worst}), median x{median:.2f} (target "
        f"x{want_median}): {'met' if met else 'NOT met'}"
    )

"""``kobs bench capacity``'s way of running perf tools (``bench.capacity.run_tools``), on small Python
processes standing in for Kafka's tools: which moment counts as the steady state and whose CPU is counted
there. Kafka's own tools run it in tests/test_bench_capacity.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from bench import capacity
from bench.capacity import run_tools
from bench.capacity_machine import CpuUse

STEADY = "In steady state."


def tool(before_s: float, after_s: float, code: int = 0) -> list[str]:
    """A process that keeps a core busy ``before_s``, says it is in steady state, then busy ``after_s``."""
    script = (
        "import sys, time\n"
        "def spin(s):\n"
        "    end = time.process_time() + s\n"
        "    while time.process_time() < end: pass\n"
        f"print('warming up', flush=True); spin({before_s})\n"
        f"print({STEADY!r}, flush=True); spin({after_s})\n"
        f"print('done', flush=True); sys.exit({code})\n"
    )
    return [sys.executable, "-c", script]


def steady(line: str) -> bool:
    return line.startswith(STEADY)


def test_the_steady_state_starts_when_the_last_tool_says_so_and_ends_with_the_first_to_end():
    run = run_tools("tool", [tool(0.1, 0.8), tool(0.4, 0.3)], steady)
    start, end = run.steady, run.end
    assert [out.splitlines() for out in run.outputs] == [["warming up", STEADY, "done"]] * 2
    assert start is not None
    assert start.tools_s >= 0.5  # marked when the second said so: its 0.4 s spun, the first's 0.1 s at least
    # the end comes when the second tool has spun its 0.7 s, the first at least its 0.1 s warm-up
    assert end.tools_s >= 0.8
    counted = CpuUse.between(start, end, records=1000)
    # from the second tool's steady line to its end: its own last 0.3 s, and what the first ran meanwhile
    assert 0.3 <= counted.tools_s <= 1.2
    assert counted.records == 1000


def test_no_steady_state_when_a_tool_ends_before_the_last_says_so():
    run = run_tools("tool", [tool(0.0, 0.0), tool(0.6, 0.0)], steady)
    assert run.steady is None and run.end.tools_s > 0


def test_a_failing_tool_is_named_with_what_it_said():
    with pytest.raises(RuntimeError, match=r"kafka-producer-perf-test failed \(\[0, 3\]\).*warming up"):
        run_tools("kafka-producer-perf-test", [tool(0.0, 0.0), tool(0.0, 0.0, code=3)], steady)


def test_a_row_too_large_for_the_disk_is_refused_before_any_kafka_starts():
    done = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "bench", "capacity", "--megabytes", "100000000000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "keeps 330000000.0 GB on disk" in done.stderr
    fits = int(re.search(r"give --megabytes (\d+) or less", done.stderr).group(1))
    assert 0 < fits * 3e6 <= shutil.disk_usage(tempfile.gettempdir()).free  # three copies fit
    assert "starting a 3-node Kafka" not in done.stdout


def consumer_tool(reports: list[tuple[int, float]], last: str = "") -> list[str]:
    """Stands in for kafka-consumer-perf-test --show-detailed-stats: for each (records so far, seconds),
    a report line in the tool's format (Kafka 4.3.1's header and line, as it printed them here), then that
    many seconds of a busy core; ``last``, a line printed before it ends."""
    header = (
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
        "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    report = (
        "2026-11-29 03:43:27:357, 0, 849.2115, 364.7556, {}, 3824740.0000, 0, 1000, 364.7556, 3824740.0000"
    )
    script = (
        "import time\n"
        "def spin(s):\n"
        "    end = time.process_time() + s\n"
        "    while time.process_time() < end: pass\n"
        f"print({header!r}, flush=True)\n"
        + "".join(f"print({report.format(n)!r}, flush=True); spin({s})\n" for n, s in reports)
        + f"print({last!r})\n"
    )
    return [sys.executable, "-c", script]


def test_the_consumer_counts_from_its_first_report_past_a_third_of_its_records_to_its_last(monkeypatch):
    reports = [(100, 0.3), (400, 0.5), (800, 0.6)]
    monkeypatch.setattr(capacity, "tool_argv", lambda *a, **k: consumer_tool(reports))
    rate, cpu = capacity.consume("unused:9092", "topic", 900)
    # 300 of 900 warm it up: from the report of 400 to that of 800, 0.5 CPU seconds apart (not the last 0.6
    # s). The wall-clock span is only bounded below: a loaded machine stretched it to 1.69 s in a full run.
    assert cpu.records == 400 and cpu.seconds >= 0.45 and 0.45 <= cpu.tools_s < 0.9
    assert rate == pytest.approx(400 / cpu.seconds)


def test_a_consumer_read_too_short_to_be_reported_twice_past_its_first_third_counts_whole(monkeypatch):
    monkeypatch.setattr(capacity, "tool_argv", lambda *a, **k: consumer_tool([(100, 0.2), (400, 0.3)]))
    _, cpu = capacity.consume("unused:9092", "topic", 900)
    assert cpu.records == 900 and cpu.tools_s >= 0.45


def test_a_consumer_that_read_fewer_records_than_asked_fails_the_row(monkeypatch):
    warning = (
        "WARNING: Exiting before consuming the expected number of messages: timeout (60000 ms) exceeded."
    )
    monkeypatch.setattr(capacity, "tool_argv", lambda *a, **k: consumer_tool([(100, 0.0)], warning))
    with pytest.raises(RuntimeError, match="read fewer than 900 records"):
        capacity.consume("unused:9092", "topic", 900)

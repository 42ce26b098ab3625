"""What ``kobs stream``'s JVM writes to its log: Spark's warnings and errors in kobs's own line format, and
none of the lines Spark and Hadoop printed at every start, or at every retried offset fetch, that ask
nothing of anyone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
# Starts kobs stream's Spark session, then logs through Spark's own loggers as Spark would.
SCRIPT = """
from spark_jobs.stream import spark_session
jvm = spark_session("local[1]").sparkContext._jvm
logger = jvm.org.apache.logging.log4j.LogManager.getLogger
logger("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution").warn(
    "Disabling AQE since AQE is not supported in stateful workloads.")
logger("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution").warn("a batch fell behind")
logger("org.apache.spark.scheduler.DAGScheduler").info("a job finished")
logger("org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin").warn("Error in attempt 1 getting offsets")
logger("org.apache.kafka.clients.NetworkClient").warn("Connection to node -1 could not be established")
logger("org.apache.spark.scheduler.TaskSetManager").error("a task failed")
"""

# Lines that ask nothing of anyone: an INFO line, a retried offset fetch, a refused connection, the AQE
# notice, Spark's default profile announcing itself, Hadoop's native library missing.
CHATTER = (
    "a job finished",
    "Error in attempt",
    "could not be established",
    "Disabling AQE",
    "log4j profile",
    "default log level",
    "NativeCodeLoader",
)


def test_spark_warnings_and_errors_reach_the_log_in_kobs_format_without_start_up_chatter():
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stderr.splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert any(
        re.fullmatch(rf"{stamp} WARN MicroBatchExecution: a batch fell behind", line) for line in lines
    )
    assert any(re.fullmatch(rf"{stamp} ERROR TaskSetManager: a task failed", line) for line in lines)
    for chatter in CHATTER:
        assert not any(chatter in line for line in lines), run.stderr

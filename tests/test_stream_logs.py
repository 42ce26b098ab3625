"""What ``kobs stream``'s JVM writes to its log: Spark's warnings and errors in kobs's own line format, one
line each, and none of the lines Spark and Hadoop printed at every start, or at every retried offset fetch,
that ask nothing of anyone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.logs import PY4J_PROXY_ERROR
from spark_jobs.stream import failure_reason

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
logger("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution").error(
    "Query stream [id = 1, runId = 2] terminated with error", jvm.java.lang.RuntimeException("Traceback"))
fetch = jvm.java.util.concurrent.TimeoutException("Cannot fetch record for offset 24 in 120000 milliseconds")
logger("org.apache.spark.executor.Executor").error("Exception in task 1.0 in stage 2.0 (TID 5)", fetch)
logger("org.apache.spark.scheduler.TaskSetManager").warn("Lost task 1.0: a reason\\n\\tat a.b(C.java:1)")
"""

# Lines that ask nothing of anyone: an INFO line, a retried offset fetch, a refused connection, the AQE
# notice, Spark's default profile announcing itself, Hadoop's native library missing; and the end of a failed
# query, which kobs stream logs itself with its cause.
CHATTER = (
    "terminated with error",
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
    # One line each: a logged exception's first line in brackets, a message's first line; no Java stack.
    assert any(
        re.fullmatch(
            rf"{stamp} ERROR Executor: Exception in task 1.0 in stage 2.0 \(TID 5\) \(java.util.concurrent."
            r"TimeoutException: Cannot fetch record for offset 24 in 120000 milliseconds\)",
            line,
        )
        for line in lines
    ), run.stderr
    assert any(re.fullmatch(rf"{stamp} WARN TaskSetManager: Lost task 1.0: a reason", line) for line in lines)
    assert "\tat " not in run.stderr, run.stderr
    for chatter in CHATTER:
        assert not any(chatter in line for line in lines), run.stderr


# Spark 4.2's text of a query that a Kafka fetch timeout failed mid-batch, from kobs stream's log during a
# metrics-cluster outage (tests/test_outage.py): its opening, and the line that names the task's error; the
# Python traceback and the Java stacks between and after them left out.
FAILED_MID_BATCH = (
    "[STREAM_FAILED] Query [id = 2f41e364-954c-4313-97cd-98dda7a09b61, runId = "
    "0b94aed2-18ee-46e8-bb46-94ec3a121a1a] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An "
    "error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by "
    "the Python Proxy.\n"
    "Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 2.0 "
    "failed 1 times, most recent failure: Lost task 1.0 in stage 2.0 (TID 5) (localhost executor driver): "
    "java.util.concurrent.TimeoutException: Cannot fetch record for offset 24 in 120000 milliseconds\n"
    "\tat org.apache.spark.sql.kafka010.consumer.InternalKafkaConsumer.fetch(KafkaDataConsumer.scala:107)\n"
)


def test_a_failed_query_is_told_by_the_task_error_that_failed_it():
    assert failure_reason(Exception(FAILED_MID_BATCH)) == (
        "java.util.concurrent.TimeoutException: Cannot fetch record for offset 24 in 120000 milliseconds"
    )
    planning = "[STREAM_FAILED] Query terminated: Timed out waiting for a node assignment.\n\tat x"
    assert failure_reason(Exception(planning)) == planning.splitlines()[0]  # no task failed: its first line
    assert failure_reason(TimeoutError()) == "TimeoutError"


def test_py4j_s_log_of_a_failed_callback_is_left_to_the_query_failure_line():
    """py4j logs an exception raised in kobs stream's foreachBatch with its traceback (hundreds of lines in a
    metrics-cluster outage); the query's failure, logged by kobs in one line, says it. py4j's other errors
    stay."""
    script = (
        "import logging; from common.logs import PY4J_PROXY_ERROR, configure_logging; configure_logging(); "
        "py4j = logging.getLogger('py4j.clientserver'); "
        "py4j.error(PY4J_PROXY_ERROR + ' on the Python Side.'); py4j.error('Error while sending.')"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert PY4J_PROXY_ERROR not in run.stderr
    assert run.stderr.endswith("ERROR py4j.clientserver: Error while sending.\n"), run.stderr

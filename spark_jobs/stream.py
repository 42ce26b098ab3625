"""The streaming query behind ``kobs stream``: metrics topic → dead letters and the analyses → sinks.

One query reads the metrics topic with Spark's Kafka source, decoded on the executors
(``spark_jobs.kafka_source``), and advances each analysis of each cluster on the executors with its state
in Spark's state store (``spark_jobs.stateful``); its ``foreachBatch`` collects the small outcome rows and
hands them to the driver's sinks (``spark_jobs.pipeline``): history, exporter, dead letters (each batch's
records are read from Kafka once). The derived metrics are served from a dedicated ``CollectorRegistry``
on the configured exporter address.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from prometheus_client import CollectorRegistry
from py4j.protocol import Py4JError, Py4JJavaError
from pyspark import SparkConf, SparkContext
from pyspark.errors import StreamingQueryException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.java_gateway import launch_gateway
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener
from pyspark.sql.streaming.listener import StreamingQueryProgress

from common import jars
from common.config import Config, ConfigError, Spark, secret
from common.serving import serve_metrics
from spark_jobs.analysis import Analysis
from spark_jobs.backlog import CatchUp
from spark_jobs.brokers import BrokerResourceAnalysis
from spark_jobs.burrow import BurrowApi
from spark_jobs.checkpoint import (
    STATE_STORE_FAILED,
    CheckpointError,
    check_resumable,
    history_base,
    planned_records,
)
from spark_jobs.dead_letters import write_dead_letters
from spark_jobs.disks import DiskAnalysis
from spark_jobs.exposition import ExpositionPolicy
from spark_jobs.flapping import FlappingAnalysis
from spark_jobs.kafka_source import read_metrics, source_options, unreadable
from spark_jobs.keyed import PIPELINE, tune_gc
from spark_jobs.lag import LagAnalysis
from spark_jobs.pipeline import DerivedCollector, Pipeline
from spark_jobs.producers import ProducerAnalysis
from spark_jobs.quorum import QuorumAnalysis
from spark_jobs.replication import ReplicationAnalysis
from spark_jobs.state_placement import layout, slot
from spark_jobs.stateful import analyzed, outcomes
from spark_jobs.throughput import ThroughputAnalysis

log = logging.getLogger(__name__)
QUERY = "stream"
SECRET_OPTIONS = r"(?i)url|password|jaas|keystore\.key"  # Spark's default is "(?i)url"
STOP_POLL_S = 1.0  # how often a running query looks at the stop signal
# The analyses' keys spread over this many state partitions on a cluster master (fixed when a checkpoint is
# created). A local master gets one per core: each partition is a task, a Python worker round trip and a
# state-store commit every micro-batch, ~60 ms each even without data (measured on small batches).
STATE_PARTITIONS = 4
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STOP_TIMEOUT_S = 10  # a query still planning (a hung broker) is left behind after this long
BATCH_GRACE_S = 5.0  # how long a stop waits for the batch under way before it cancels it
# The checkpoint is a local (or locally mounted) directory. Spark's default manager for it goes through
# Hadoop's FileContext, which without Hadoop's native library runs a `readlink` process for every file it
# renames (measured: ~19 processes per micro-batch, a third of the JVM's CPU on small batches); the
# FileSystem-based one renames with java.io.File (rename(2): atomic on a POSIX filesystem).
CHECKPOINT_FILES = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
# Java's C1 compiler only: C2 kept compiling Spark's generated code for the whole run (a third of the
# JVM's CPU after 160 micro-batches) with no faster batches to show for it. The parallel collector: G1's
# concurrent marking took ~2.4 s more of the JVM's CPU in a 30-batch benchmark, on cores the query needs.
# Prepended to Spark's extraJavaOptions, so a user's own JVM options there still win.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")  # the driver JVM's log: warnings, kobs's format
# How long the query waits before asking Kafka for new offsets again when the last ask found none (Spark's
# default, 10 ms, asked the metrics topic's leaders up to 100 times a second between batches: 2 of the
# JVM's 10 CPU s a minute in the demo). A record waits 50 ms longer on average.
POLLING_DELAY = "100ms"
SECRET = "spark.authenticate.secret"  # a spark:// cluster's shared secret (RPC authentication)


def analyses(config: Config) -> list[Analysis]:
    """Every analysis the query runs, fresh."""
    flapping, intervals, lag = config.analytics.flapping, config.intervals, config.analytics.lag
    return [
        LagAnalysis(
            offsets_interval_s=intervals.offsets_s,
            allowed_lag=lag.allowed_lag,
            allowed_lag_by_group=tuple(lag.allowed_lag_by_group.items()),
        ),
        ReplicationAnalysis(
            stale_after_s=3 * intervals.metrics_s,
            forget_after_s=3 * intervals.metadata_s,
            maintenance_grace_s=config.alerts.maintenance_grace_s,
        ),
        FlappingAnalysis(flapping.flaps, flapping.window_s, flapping.clear_after_s),
        ThroughputAnalysis({c.name: c.broker_disk_bytes for c in config.clusters if c.broker_disk_bytes}),
        ProducerAnalysis(
            {(c.name, p.client_id): p.topics for c in config.clusters for p in c.producers},
            client_stale_s=3 * intervals.producers_s,
        ),
        BrokerResourceAnalysis(stale_s=3 * intervals.metrics_s),
        QuorumAnalysis(stale_s=3 * intervals.metrics_s),
        DiskAnalysis(stale_s=3 * intervals.metadata_s),
    ]


def pipeline(config: Config) -> Pipeline:
    """The analyses with their history under ``sinks.history_dir`` and state under the query's checkpoint."""
    state = config.sinks.checkpoint_dir / QUERY
    return Pipeline(
        lambda: analyses(config),
        config.sinks.history_dir,
        state / "analyses",
        query=QUERY,
        history_base=history_base(state, config.sinks.history_dir),
    )


def burrow_api(config: Config, jobs: Pipeline) -> BurrowApi:
    """Burrow's HTTP API over the configured clusters and the lag analysis's latest rows."""
    return BurrowApi([c.name for c in config.clusters], lambda: jobs.latest_history(LagAnalysis.table))


def spark_session(
    master: str, ui_port: int | None = None, app: str = "kobs-stream", cluster: Spark | None = None
) -> SparkSession:
    """The session of ``kobs stream``, with Spark's Kafka source (``spark.jars``, resolved by setup: Spark
    ships them to the executors). With a local master nothing of it is for other hosts: the driver, its
    block manager and the UI bind 127.0.0.1 (``SPARK_LOCAL_IP``, unless set). With a cluster master, the
    configuration's ``cluster`` settings (:func:`cluster_settings`): where the driver listens, the address
    its executors reach it at, and RPC authentication. The web UI, which has no authentication, is off
    unless ``ui_port`` is given. Options that carry secrets
    (the Kafka login, the client key) are redacted wherever Spark shows a plan. The analyses' state
    partitions are one per core of a local master, else ``STATE_PARTITIONS``, unless
    ``spark.sql.shuffle.partitions`` is set in Spark's own configuration (``spark-defaults.conf``,
    ``PYSPARK_SUBMIT_ARGS``).

    Spark's JVM (and the Python workers it starts) run in a process group of their own, and Ctrl-C keeps
    the handler it had: a stop signal to the whole group (Ctrl-C in a terminal, a supervisor stopping the
    group) reaches only this process, which stops the query between two calls into Spark and then Spark
    (``kobs stream``), instead of Spark dying mid-batch with a page of tracebacks. The JVM still exits with
    this process (it watches its standard input)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    on_cluster = cluster_settings(master, cluster or Spark())
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName(app)
        .set("spark.jars", ",".join(str(jar) for jar in jars.jars("spark-kafka")))
        .set("spark.sql.redaction.options.regex", SECRET_OPTIONS)
        .set("spark.sql.streaming.stopTimeout", f"{STOP_TIMEOUT_S}s")
        .set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .set("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILES)
        .set("spark.sql.streaming.pollingDelay", POLLING_DELAY)
        .set("spark.driver.defaultJavaOptions", f'{JVM_OPTIONS} -Dlog4j2.configurationFile="{LOG_CONFIG}"')
        .set("spark.executor.defaultJavaOptions", JVM_OPTIONS)
        .set("spark.ui.enabled", str(ui_port is not None).lower())
        .set("spark.ui.showConsoleProgress", "false")  # a progress bar redrawn into the service's log
        .set("spark.sql.adaptive.enabled", "false")  # a streaming query cannot use it (Spark warned so)
    )
    if ui_port is not None:
        conf.set("spark.ui.port", str(ui_port))
    shared_secret = on_cluster.pop(SECRET, None)
    for key, value in on_cluster.items():
        conf.set(key, value)
    on_ctrl_c = signal.getsignal(signal.SIGINT)
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    if shared_secret is not None:  # set once the JVM runs: not on its command line, where ps shows it
        conf.set(SECRET, shared_secret)
    session = SparkSession(SparkContext(conf=conf, gateway=gateway))
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_ctrl_c)  # SparkContext's own raises KeyboardInterrupt mid-call
    if log.isEnabledFor(logging.DEBUG):  # kobs -v: Spark's own INFO lines and the warnings turned down
        log4j = session.sparkContext._jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setAllLevels(log4j.LogManager.ROOT_LOGGER_NAME, log4j.Level.INFO)
    if not session.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):  # unless set for Spark
        session.conf.set("spark.sql.shuffle.partitions", local_cores(session) or STATE_PARTITIONS)
    return session


def cluster_settings(master: str, cluster: Spark) -> dict[str, str]:
    """Spark's settings for a cluster ``master`` (none for a local one): the driver binds
    ``cluster.bind_address`` and is reached at ``cluster.driver_host`` (127.0.0.1 unless configured: set an
    address the executors can reach), with RPC authentication unless ``cluster.authenticate`` is off. YARN
    and Kubernetes make each application its own secret; a ``spark://`` master's daemons share one, which
    the driver reads from ``cluster.auth_secret_env``: ConfigError without it."""
    if master.startswith("local"):
        return {}
    settings = {
        "spark.driver.host": cluster.driver_host,
        "spark.driver.bindAddress": cluster.bind_address or cluster.driver_host,
    }
    if not cluster.authenticate:
        return settings
    settings["spark.authenticate"] = "true"
    if master.startswith("spark://"):
        if cluster.auth_secret_env is None:
            raise ConfigError(
                "config error: spark.auth_secret_env is required with a spark:// master — name the "
                "environment variable holding the secret its master and workers share (their "
                "spark.authenticate.secret), or set spark.authenticate: false to run without authentication"
            )
        settings[SECRET] = secret(cluster.auth_secret_env, "spark.auth_secret_env")
    return settings


def local_cores(spark: SparkSession) -> int | None:
    """The cores of a local master (``local``, ``local[N]``, ``local[*]``); None for a cluster master, whose
    executors may register after the query starts."""
    master = spark.sparkContext.master
    return spark.sparkContext.defaultParallelism if master == "local" or master.startswith("local[") else None


def quiet_stop(spark: SparkSession) -> None:
    """Keep out of the log what a deliberate stop makes Spark and py4j say: Spark cancels the query's job
    group twice and warns each time it finds no job running; Hadoop warns with a Java stack when the stop
    interrupts the ``chmod`` it runs for each checkpoint file it writes (the file is still written); the
    state store's maintenance thread, running on for a moment after Spark stops, warns with a Java stack
    that Spark is gone; py4j logs the Python traceback of a batch the stop cancels
    (:class:`StoppedMidBatch`)."""
    jvm = spark.sparkContext._jvm
    for name in (
        "org.apache.spark.scheduler.DAGScheduler",
        "org.apache.hadoop.util.Shell",
        "org.apache.spark.sql.execution.streaming.state.StateStore",
    ):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            name, jvm.org.apache.logging.log4j.Level.ERROR
        )
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


def start_query(
    spark: SparkSession,
    config: Config,
    jobs: Pipeline,
    trigger_s: float | None = None,
    available_now=False,
    handler: BatchHandler | None = None,
) -> StreamingQuery:
    """Start the query; checkpoints under ``sinks.checkpoint_dir/stream`` (default trigger: back to back),
    each micro-batch handed to ``handler`` (default: one that is never stopped). Only the samples and
    events some analysis reads are decoded into rows; a local master reads them in one task per core."""
    rows = read_metrics(spark, source_options(config), jobs.tables, tasks=local_cores(spark))
    checkpoint = config.sinks.checkpoint_dir / QUERY
    writer = (
        analyzed(rows, jobs.make_analyses, state_slot(spark, checkpoint, config, [*jobs.schemas, PIPELINE]))
        .writeStream.queryName(QUERY)
        .foreachBatch(handler or BatchHandler(config, jobs))
        .option("checkpointLocation", str(checkpoint))
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_s:
        writer = writer.trigger(processingTime=f"{trigger_s} seconds")
    return writer.start()


def state_slot(spark: SparkSession, checkpoint: Path, config: Config, tables: list[str]) -> Column | None:
    """The ``slot`` that places each key's state (``spark_jobs.state_placement``) by the checkpoint's
    layout. None for a checkpoint whose state was keyed before slots: it keeps Spark's hash placement
    (start a new checkpoint to have it balanced)."""
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    found = layout(checkpoint, tables, [c.name for c in config.clusters], partitions)
    if found is None:
        log.info("%s: state placed by Spark's hash (keyed before slots)", checkpoint)
        return None
    return slot(found)


class StoppedMidBatch(Exception):
    """A micro-batch whose Spark job kobs stream's stop cancelled; it runs again at the next start.

    Spark takes a ``foreachBatch`` error for an interruption by ``query.stop()`` only when its text holds a
    Py4J call ending in an ``InterruptedException`` (``StreamExecution.isInterruptionException``); any
    other text ends the query "with error". It searches that text with a regular expression that recurses
    once per character: the Py4J error of a cancelled job (its whole Java stack) overflowed the stream
    thread's stack, printing a thousand-line ``StackOverflowError``. So this error is short and in that
    form."""

    def __init__(self, batch_id: int):
        super().__init__(
            f"batch {batch_id} stopped: py4j.protocol.Py4JJavaError: An error occurred while calling its "
            "job\n: java.lang.InterruptedException"
        )


class BatchHandler:
    """The query's ``foreachBatch``: collects a micro-batch's outcome rows and hands them to the driver's
    sinks (each batch's records are read from Kafka once). Once ``stop`` is set a stop waits for the batch
    under way (:meth:`wait`) before it stops the query; a batch it cancels anyway raises
    :class:`StoppedMidBatch`."""

    def __init__(self, config: Config, jobs: Pipeline, stop: threading.Event | None = None):
        self.config, self.jobs, self.stop = config, jobs, stop or threading.Event()
        self._running = threading.Lock()

    def __call__(self, rows: DataFrame, batch_id: int) -> None:
        with self._running:
            try:
                self._hand_over(rows, batch_id)
            except (Py4JJavaError, CapturedException):
                if self.stop.is_set():
                    raise StoppedMidBatch(batch_id) from None
                raise

    def _hand_over(self, rows: DataFrame, batch_id: int) -> None:
        started_s = time.time()  # the batch runs when its outcomes are collected
        results, pickles, stats, dead = outcomes(rows.toArrow())
        stats = stats._replace(lost=self._lost(batch_id, stats.records))
        self.jobs.record(results, stats, batch_id, started_s, pickles)
        if dead is not None:  # rare: written by Spark from the rows already collected
            write_dead_letters(
                rows.sparkSession.createDataFrame(dead), batch_id, self.config.sinks.dead_letter_dir
            )

    def _lost(self, batch_id: int, records: int) -> int:
        """Records the batch was planned to read and did not: retention deleted them first (Spark's Kafka
        source skips them, ``failOnDataLoss`` false)."""
        planned = planned_records(self.config.sinks.checkpoint_dir / QUERY, batch_id)
        lost = max(0, planned - records) if planned is not None else 0
        if lost:
            log.warning(
                "%d records of the metrics topic were deleted by its retention before the stream read them "
                "(micro-batch %d): the analyses miss what they said",
                lost,
                batch_id,
            )
        return lost

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the batch under way, if any, to be handed over; whether it was."""
        if not self._running.acquire(timeout=timeout_s):
            return False
        self._running.release()
        return True


@contextmanager
def exporter(address: str, served: DerivedCollector, api: BurrowApi | None = None) -> Iterator[None]:
    """Serve ``served`` on ``host:port`` (its own registry, not the process-wide one), rendered once per
    change of its pipeline, and ``api`` beside it on Burrow's paths, until exit."""
    registry = CollectorRegistry()
    registry.register(served)
    mounts = dict.fromkeys(api.prefixes, api) if api else {}
    server, thread = serve_metrics(address, registry, "sinks.exporter_address", mounts, served.version)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


RESTART_BACKOFF_S = (5.0, 60.0)  # first wait before starting a failed query again, and the longest


def run_stream(
    config: Config,
    master: str,
    trigger_s: float | None,
    available_now: bool,
    ui_port: int | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Run until the query ends (``available_now``) or ``stop`` is set (kobs stream sets it on SIGTERM and
    Ctrl-C); stop the query, Spark and the exporter either way.

    The query starts once the metrics topic can be read (:func:`wait_until_readable`). A query that fails
    (its cluster unreachable for long, a read task that failed, a crashed planner) is started again from
    its checkpoint after a wait that doubles up to a minute, the exporter serving the last state meanwhile;
    ``kobs_pipeline_query_restarts_total`` counts the restarts. With ``available_now`` an unreadable topic
    or a failure ends the run with exit code 1.
    """
    tune_gc()  # the driver: the one-process path and the exporter's rows
    check_resumable(config.sinks.checkpoint_dir / QUERY)
    cluster_settings(master, config.spark)  # a missing Spark secret fails before anything starts
    stop = stop or threading.Event()
    jobs = pipeline(config)
    served = DerivedCollector(jobs, ExpositionPolicy.from_config(config))
    address = config.sinks.exporter_address
    with exporter(address, served, api=burrow_api(config, jobs)):  # a taken address fails before Spark
        where = f"metrics on http://{address}/metrics, Burrow's API on http://{address}/v3/kafka"
        print(f"kobs stream: {where}", flush=True)
        spark = spark_session(master, ui_port, cluster=config.spark)
        try:
            return run_queries(spark, config, jobs, trigger_s, available_now, stop)
        except (Py4JError, ConnectionError):
            if not stop.is_set():
                raise
            return 0  # the JVM got the stop signal too (a service manager signals every process) and is gone
        finally:
            with suppress(Py4JError, ConnectionError):
                quiet_stop(spark)
                spark.stop()


def run_queries(
    spark: SparkSession,
    config: Config,
    jobs: Pipeline,
    trigger_s: float | None,
    available_now: bool,
    stop: threading.Event,
) -> int:
    """Start the query, and again after each failure, until it ends or ``stop`` is set (see
    :func:`run_stream`). The signal only sets ``stop``: the query is stopped from here, never interrupted
    in the middle of a call into Spark's JVM, once the batch under way is handed over (up to
    ``BATCH_GRACE_S``; a longer one is cancelled and runs again at the next start)."""
    wait_s = RESTART_BACKOFF_S[0]
    handler = BatchHandler(config, jobs, stop)
    progress = ProgressLog(config.metrics_topic.max_records_per_batch)
    with listening(spark, progress):
        while not stop.is_set():
            if available_now:
                reason = unreadable(config)
                if reason is not None:
                    print(f"kobs stream: {reason}", file=sys.stderr)
                    return 1
            elif not wait_until_readable(config, stop):
                return 0
            query = start_query(spark, config, jobs, trigger_s, available_now, handler)
            started_s = time.monotonic()
            try:
                while not query.awaitTermination(STOP_POLL_S):
                    if stop.is_set():
                        return 0
                progress.see(query.lastProgress)  # the listener may not have had the last report yet
                return 0
            except StreamingQueryException as exc:
                if STATE_STORE_FAILED in str(exc):  # it fails the same way at every start
                    why = f"its state store cannot be loaded ({failure_reason(exc)})"
                    raise CheckpointError(config.sinks.checkpoint_dir / QUERY, why) from None
                if available_now:
                    print(f"kobs stream: the query failed: {failure_reason(exc)}", file=sys.stderr)
                    return 1
                if time.monotonic() - started_s > 10 * RESTART_BACKOFF_S[1]:  # it had been running well
                    wait_s = RESTART_BACKOFF_S[0]
                log.error("the query failed (%s); starting it again in %.0f s", failure_reason(exc), wait_s)
            finally:
                if stop.is_set():
                    quiet_stop(spark)
                    if not handler.wait(BATCH_GRACE_S):
                        log.warning(
                            "stopping: cancelling the batch under way (it runs again at the next start)"
                        )
                _stop(query)
            jobs.health.query_restarts += 1
            stop.wait(wait_s)
            wait_s = min(2 * wait_s, RESTART_BACKOFF_S[1])
        return 0


@contextmanager
def listening(spark: SparkSession, listener: StreamingQueryListener) -> Iterator[None]:
    spark.streams.addListener(listener)
    try:
        yield
    finally:
        with suppress(Py4JError, ConnectionError):  # the JVM gone with a stop signal: run_stream decides
            spark.streams.removeListener(listener)


class ProgressLog(StreamingQueryListener):
    """Logs how a backlog goes (:class:`spark_jobs.backlog.CatchUp`) from the query's progress reports, which
    Spark's listener bus hands over after each micro-batch."""

    def __init__(self, batch_records: int | None):
        self.catch_up = CatchUp(batch_records)
        self._lock = threading.Lock()

    def see(self, progress: StreamingQueryProgress | None) -> None:
        if progress is None:
            return
        with self._lock:
            line = self.catch_up.see(json.loads(progress.json), time.monotonic())
        if line:
            log.info(line)

    def onQueryProgress(self, event) -> None:
        self.see(event.progress)

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


TOPIC_POLL_S = 5.0  # how often kobs stream looks for a metrics topic it cannot read
TOPIC_RETELL_S = 60.0  # how often it says so again while nothing changes


def wait_until_readable(config: Config, stop: threading.Event) -> bool:
    """Look for the metrics topic every ``TOPIC_POLL_S`` until it can be read (True) or ``stop`` is set
    (False), with a warning when what is missing changes and once a minute while it lasts. A cheap question
    (one metadata request), so the query starts within seconds of the topic's cluster coming back."""
    told, told_s = None, -math.inf
    while not stop.is_set():
        reason = unreadable(config)
        if reason is None:
            if told is not None:
                log.info("the metrics topic can be read now: starting the query")
            return True
        if reason != told or time.monotonic() - told_s >= TOPIC_RETELL_S:
            log.warning("%s; looking again every %.0f s", reason, TOPIC_POLL_S)
            told, told_s = reason, time.monotonic()
        stop.wait(TOPIC_POLL_S)
    return False


def _stop(query: StreamingQuery) -> None:
    """Stop ``query``; one that does not stop within ``STOP_TIMEOUT_S`` (its micro-batch waiting on a broker
    that does not answer) is left behind with a warning, so stopping kobs stream takes seconds, whatever
    the peers do."""
    try:
        query.stop()
    except Py4JJavaError as exc:  # a Java exception (Spark's TimeoutException): the JVM is alive
        log.warning(
            "the query did not stop within %d s (%s); leaving it", STOP_TIMEOUT_S, failure_reason(exc)
        )
    except (Py4JError, ConnectionError):
        raise  # the JVM is gone: run_stream decides


# Spark's words for the task error that failed a job, and a Java exception's cause; a failed query's text
# carries them deep inside (after Spark's wrappers, and for a failed foreachBatch a Python traceback).
_TASK_ERROR = re.compile(r"most recent failure: Lost task .*?\): (.+)")
_CAUSE = re.compile(r"^Caused by: (.+)$", re.MULTILINE)


def failure_reason(exc: Exception) -> str:
    """Why the query failed, in one line: the task error that failed its job, else the deepest cause
    Java gives, else the first line."""
    text = str(exc).strip()
    task, causes = _TASK_ERROR.search(text), _CAUSE.findall(text)
    line = task[1] if task else causes[-1] if causes else text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:299] + "…"

"""Run every configured source on its interval and hand the batches to the publisher, never waiting on one.

Per cluster: Admin API offsets (``intervals.offsets_s``) and metadata (``metadata_s``), one JMX source per
``jmx`` entry and one exposition source per ``exporters`` entry (``metrics_s``), the ZooKeeper source
when ``zookeeper`` is set and ``mode`` is not ``kraft`` (``metadata_s``; it is then the authority for
partition state and the metadata source reports only min ISR, so each state and change is reported once)
and one source per producer, JMX or exposition (``producers_s``). JMX and exposition sources map names
with the built-in table plus the cluster's ``exporter_names``; all JMX sources share ``JMX_SLOTS`` query
slots (each query is a JVM), and hung endpoints one more slot apart (:class:`~collectors.jmx.QuerySlots`).

Sources are due on a fixed grid of their intervals from the start (:func:`next_due`), so sources of the
same or multiple intervals start together: the offsets and metadata sources of a cluster then share one
metadata request (:func:`collectors.admin.topics`).

Each scrape runs in a worker thread, at most one in flight per source, under a deadline of one interval: a
scrape past it is counted as a ``timeout`` error and the source is not run again until it returns (a late
batch is still published). Errors are counted per source by reason, the first word of the error line
(``fetch``, ``list_topics``, ...), and logged once per scrape.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from collectors.admin import REFUSED, admin_client
from collectors.exposition import ExpositionSource
from collectors.futures import forget_frames
from collectors.jmx import BROKER_QUERIES, PRODUCER_QUERIES, JmxSource, QuerySlots
from collectors.log_dirs import LogDirSource
from collectors.mapping import DEFAULT_MAPPING
from collectors.metadata import MetadataSource
from collectors.offsets import OffsetsSource
from collectors.publisher import Publisher
from collectors.self_metrics import SelfMetrics
from collectors.source import Scrape, now_ms
from collectors.zookeeper_isr import ZooKeeperIsrSource
from common.config import Cluster, Config, secret
from common.contract import Batch

log = logging.getLogger(__name__)

TICK_S = 0.05
REFUSED_WAIT_MAX_S = 300.0
JMX_SLOTS = 4  # JMX queries (JVMs of ~50 MB, 0.3-0.6 s each) running at once


class Source(Protocol):
    name: str

    def collect(self) -> Scrape: ...


class _Connected:
    """A source that must connect first (ZooKeeper): connects on its first scrape, retrying until it does."""

    def __init__(self, source: ZooKeeperIsrSource):
        self.source, self.name, self.started = source, source.name, False

    def collect(self) -> Scrape:
        if not self.started:
            try:
                self.source.start()
            except Exception as exc:  # kazoo's timeout or connection errors
                return Scrape(Batch(self.source.cluster, self.name, now_ms()), [f"connect: {exc!r}"])
            self.started = True
        return self.source.collect()

    def stop(self) -> None:
        if self.started:
            self.source.stop()


@dataclass
class Job:
    """One source of one cluster, its interval, and what its scrapes have produced so far."""

    cluster: str
    source: Source
    interval_s: float
    scrapes: int = 0
    succeeded: int = 0
    samples: int = 0
    events: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # by reason
    last_errors: list[str] = field(default_factory=list)
    future: Future[Scrape] | None = None
    started: float = 0.0
    due: float = 0.0
    timed_out: bool = False
    seconds: float = 0.0  # wall time of the last scrape that returned
    failing: frozenset[str] = frozenset()  # the reasons its scrapes fail for, as last logged
    refused_wait_s: float = 0.0  # while the cluster refuses the login: the wait before asking again

    @property
    def label(self) -> str:
        return f"{self.cluster}/{self.source.name}"


# A source gives up at this fraction of its interval, so its own error (with the real reason) arrives
# before the scheduler's guard counts the scrape as a bare timeout.
SOURCE_TIMEOUT_FRACTION = 0.8


def build_jobs(config: Config) -> list[Job]:
    """The jobs for every configured source."""
    intervals = config.intervals
    jmx_slots = QuerySlots(JMX_SLOTS)

    def own(interval_s: float) -> float:
        return SOURCE_TIMEOUT_FRACTION * interval_s

    jobs: list[Job] = []
    for cluster in config.clusters:
        if cluster.bootstrap_servers:
            admin = admin_client(cluster)  # shared by the cluster's Admin API sources
            offsets = OffsetsSource(cluster, own(intervals.offsets_s), admin)
            jobs.append(Job(cluster.name, offsets, intervals.offsets_s))
            # partition state and ISR changes: one source, ZooKeeper's znodes when it is there, else metadata
            metadata = MetadataSource(
                cluster, own(intervals.metadata_s), admin, partition_state=not cluster.isr_from_zookeeper
            )
            jobs.append(Job(cluster.name, metadata, intervals.metadata_s))
            log_dirs = LogDirSource(cluster, own(intervals.metadata_s), admin)
            jobs.append(Job(cluster.name, log_dirs, intervals.metadata_s))
        if cluster.zookeeper and cluster.isr_from_zookeeper:
            zk = ZooKeeperIsrSource(cluster.name, cluster.zookeeper, full_diff_s=intervals.metadata_s)
            jobs.append(Job(cluster.name, _Connected(zk), intervals.metadata_s))
        # endpoints: (source name, labels, JMX address or None, exporter URL or None)
        brokers = [
            (f"jmx/broker-{e.broker_id}", {"broker": str(e.broker_id)}, e.address, None) for e in cluster.jmx
        ]
        brokers += [
            (f"exporter/broker-{e.broker_id}", {"broker": str(e.broker_id)}, None, e.url)
            for e in cluster.exporters
        ]
        producers = [
            (f"producer/{p.client_id}", {"client_id": p.client_id}, p.jmx, p.url) for p in cluster.producers
        ]
        mapping = DEFAULT_MAPPING | cluster.exporter_names
        credentials = _jmx_credentials(cluster)
        for endpoints, interval_s, queries in (
            (brokers, intervals.metrics_s, BROKER_QUERIES),
            (producers, intervals.producers_s, PRODUCER_QUERIES),
        ):
            for name, labels, address, url in endpoints:
                source: Source = (
                    JmxSource(
                        cluster.name,
                        name,
                        address,
                        queries,
                        labels,
                        mapping,
                        own(interval_s),
                        jmx_slots,
                        credentials,
                    )
                    if address is not None
                    else ExpositionSource(cluster.name, name, url, labels, mapping, own(interval_s))
                )
                jobs.append(Job(cluster.name, source, interval_s))
    return jobs


def _jmx_credentials(cluster: Cluster) -> tuple[str, str] | None:
    """(user, password) for the cluster's JMX endpoints; a clear error when the password variable is unset."""
    auth = cluster.jmx_auth
    if auth is None:
        return None
    return auth.username, secret(auth.password_env, f"clusters[{cluster.name}].jmx_auth.password_env")


def next_due(due: float, interval_s: float, now: float) -> float:
    """When a source starting now (due at ``due``, 0 the first time) is due next: on a fixed grid of
    intervals, so that sources of equal or multiple intervals stay due together; a new grid from ``now``
    after a scrape overran a whole interval."""
    following = due + interval_s
    return following if due and following > now else now + interval_s


def reason_of(error: str) -> str:
    """The label value for an error line: its first word (``fetch``, ``list_offsets``, ``malformed``)."""
    return re.split(r"[\s:]", error.strip(), maxsplit=1)[0] or "unknown"


class Scheduler:
    def __init__(self, jobs: list[Job], publisher: Publisher, metrics: SelfMetrics):
        self.jobs, self.publisher, self.metrics = jobs, publisher, metrics
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(jobs)), thread_name_prefix="kobs-scrape")

    def run(self, stop: threading.Event, once: bool = False) -> None:
        """Scrape on the intervals until ``stop`` is set; with ``once``, until every source ran once."""
        try:
            while not stop.is_set():
                now = time.monotonic()
                for job in self.jobs:
                    self._step(job, now, once)
                if once and all(job.future is None and job.scrapes for job in self.jobs):
                    return
                stop.wait(TICK_S)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            for job in self.jobs:
                if hasattr(job.source, "stop"):  # a ZooKeeper session, the offsets source's child process
                    job.source.stop()

    def _step(self, job: Job, now: float, once: bool) -> None:
        if job.future is not None and job.future.done():
            self._finish(job, job.future, now)
        elif job.future is not None and not job.timed_out and now >= job.started + job.interval_s:
            job.timed_out = True
            self._count(job, [f"timeout: no result within {job.interval_s:g} s"])
            if once:
                job.future = None  # give up on it: the run must end
        if job.future is None and now >= job.due and not (once and job.scrapes):
            job.scrapes += 1
            job.started, job.due, job.timed_out = now, next_due(job.due, job.interval_s, now), False
            job.future = self._pool.submit(job.source.collect)

    def _finish(self, job: Job, future: Future[Scrape], now: float) -> None:
        job.future, job.seconds = None, now - job.started
        self.metrics.duration.labels(job.label).observe(job.seconds)
        try:
            scrape = future.result()
        except Exception as exc:  # a bug in a source must not end the loop
            # The traceback as text: the exception's own holds this frame, and this frame its future (a
            # cycle), and a log record keeps what it is given (pytest's capture, a buffering handler).
            log.error("%s: scrape raised\n%s", job.label, "".join(traceback.format_exception(exc)).rstrip())
            forget_frames(exc)
            self._count(job, [f"exception: {exc!r}"])
            return
        job.samples += len(scrape.batch.samples)
        job.events += len(scrape.batch.events)
        if scrape.errors:
            self._count(job, scrape.errors)
            self._back_off(job, now)
        elif not job.timed_out:
            job.succeeded += 1
            if job.failing:
                log.info("%s: scraped again", job.label)
                job.failing, job.refused_wait_s = frozenset(), 0.0
        if scrape.batch.samples or scrape.batch.events:
            self.publisher.submit(scrape.batch)

    @staticmethod
    def _back_off(job: Job, now: float) -> None:
        """A cluster that refuses the login or the certificates is asked less often (each ask is a failed
        login on its brokers): the wait doubles from the interval up to :data:`REFUSED_WAIT_MAX_S`."""
        if job.failing != {REFUSED}:
            job.refused_wait_s = 0.0
            return
        job.refused_wait_s = min(2 * (job.refused_wait_s or job.interval_s / 2), REFUSED_WAIT_MAX_S)
        job.due = max(job.due, now + job.refused_wait_s)

    def _count(self, job: Job, errors: list[str]) -> None:
        job.last_errors = errors
        counts = Counter(map(reason_of, errors))
        job.errors.update(counts)
        for reason, n in counts.items():
            self.metrics.errors.labels(job.label, reason).inc(n)
        if job.failing != set(counts):  # once per change: kobs_collector_errors_total counts each
            log.warning("%s: %s", job.label, "; ".join(errors))
            job.failing = frozenset(counts)

"""``kobs collect``: run every source until SIGTERM or Ctrl-C, or one cycle with ``--once``; then flush.

``--once`` prints a one-screen summary and exits 0 when at least one source succeeded, 1 when none did;
2 when the metrics topic is missing and the cluster refuses to create it. Either mode first connects once
to the metrics topic's cluster and to every watched cluster: one that refuses the login or the TLS
handshake (a wrong password, an untrusted certificate) is a configuration error, reported in one line
with exit code 2; one that is down is an outage, ridden out as usual.
The long-running mode serves the self-metrics on ``sinks.self_metrics_address``.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time

from collectors.jmx import tune_query_jvms
from collectors.publisher import Publisher, PublisherStats
from collectors.scheduler import Job, Scheduler, build_jobs
from collectors.self_metrics import SelfMetrics
from collectors.topic import TopicError
from common.config import Config
from common.kafka_clients import AccessError, check_config_access

log = logging.getLogger(__name__)

FLUSH_S = 10.0  # how long the exit waits for Kafka before leaving the rest in the spool
ERROR_WIDTH = 120
# A scrape allocates hundreds of thousands of samples, dicts and client objects that live until published;
# Python's default (a young-generation collection every 700 allocations) spent about a quarter of the
# collector's CPU traversing them. Reference cycles are still collected, less often.
GC_THRESHOLD = 20_000


def run_collect(config: Config, once: bool) -> int:
    gc.set_threshold(GC_THRESHOLD)
    tune_query_jvms()
    try:
        check_config_access(config)
        publisher = Publisher.from_config(config).start()
    except (AccessError, TopicError) as exc:
        print(f"kobs collect: {exc}", file=sys.stderr)
        return 2
    jobs = build_jobs(config)
    metrics = SelfMetrics(publisher, [job.label for job in jobs])
    scheduler = Scheduler(jobs, publisher, metrics)
    stop = threading.Event()
    if once:
        started = time.monotonic()
        scheduler.run(stop, once=True)
        cycle_s = time.monotonic() - started
        delivered = _flush(publisher, FLUSH_S)
        publisher.close(timeout_s=0)
        print(summary(jobs, publisher.stats, delivered, cycle_s))
        return 0 if any(job.succeeded for job in jobs) else 1
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = metrics.serve(config.sinks.self_metrics_address)
    log.info("collecting %d sources; self-metrics on %s", len(jobs), config.sinks.self_metrics_address)
    try:
        scheduler.run(stop)
    finally:
        server.shutdown()
        delivered = publisher.close(FLUSH_S)
    log.info("stopped; %s", _totals(publisher.stats, delivered))
    return 0


def _flush(publisher: Publisher, timeout_s: float) -> bool:
    """Wait for delivery; give up early once the topic is unreachable (the rest goes to the spool)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if publisher.flush(0.1):
            return True
        if not publisher.healthy and publisher.queue_depth == 0:
            return False
    return False


def summary(jobs: list[Job], stats: PublisherStats, delivered: bool, cycle_s: float) -> str:
    failed = sum(1 for job in jobs if not job.succeeded)
    width = max(len(job.label) for job in jobs)
    lines = [
        f"kobs collect: {len(jobs)} sources, {len(jobs) - failed} succeeded, {failed} failed, "
        f"cycle {cycle_s:.2f} s",
        f"  {'source':<{width}}  {'result':<7}  {'samples':>7}  {'events':>6}  {'seconds':>7}  errors",
    ]
    for job in jobs:
        result = "ok" if job.succeeded else "FAILED"
        errors = ", ".join(f"{reason} x{n}" for reason, n in sorted(job.errors.items()))
        if job.last_errors:
            errors += f" ({job.last_errors[0][:ERROR_WIDTH]})"
        lines.append(
            f"  {job.label:<{width}}  {result:<7}  {job.samples:>7}  {job.events:>6}  {job.seconds:>7.2f}  "
            f"{errors}".rstrip()
        )
    lines.append(_totals(stats, delivered))
    return "\n".join(lines)


def _totals(stats: PublisherStats, delivered: bool) -> str:
    outcome = "all delivered" if delivered else "not all delivered: the rest is kept in the spool"
    return (
        f"published samples+events: sent {stats.sent}, spooled {stats.spooled}, replayed {stats.replayed}, "
        f"dropped {stats.dropped} ({outcome})"
    )

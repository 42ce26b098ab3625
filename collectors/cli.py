"""``kobs collect``: run every source until SIGTERM or Ctrl-C, or one cycle with ``--once``; then flush.

``--once`` prints a one-screen summary and exits 0 when at least one source succeeded, 1 when none did;
2 when the metrics topic is missing and the cluster refuses to create it. Either mode first connects once
to the metrics topic's cluster and to every watched cluster. A metrics topic's cluster that refuses the
login or the TLS handshake (a wrong password, an untrusted certificate) is a configuration error, reported
in one line with exit code 2; a watched cluster that does is reported in one line and the others are
watched (with ``strict_access``, exit code 2 too); its sources keep asking, less often, and name the
refusal once per change. A cluster that is down is an outage, ridden out as usual.
The long-running mode serves the self-metrics on ``sinks.self_metrics_address``. It runs the collector in a
child process and starts it again when it dies of a crash rather than an exit (librdkafka aborts the whole
process on a failed internal assertion in some Admin API calls while a broker goes away: issue 4605 of
librdkafka): after 5 s, doubling up to a minute. What the spool holds survives; a crash loses the few
seconds of scrapes in memory. ``kobs_collector_restarts_total`` counts the restarts.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time

from collectors.canary import start_canaries
from collectors.jmx import tune_query_jvms
from collectors.publisher import Publisher, PublisherStats
from collectors.scheduler import Job, Scheduler, build_jobs
from collectors.self_metrics import SelfMetrics
from collectors.topic import TopicError
from common.config import Config, ConfigError, require_secrets
from common.kafka_clients import AccessError, check_config_access
from common.logs import configure_logging
from common.serving import check_free

log = logging.getLogger(__name__)

FLUSH_S = 10.0  # how long the exit waits for Kafka before leaving the rest in the spool
CANARY_STOP_S = 2.0  # how long the exit waits for each canary to close its clients
ERROR_WIDTH = 120
# A scrape allocates hundreds of thousands of samples, dicts and client objects that live until published;
# Python's default (a young-generation collection every 700 allocations) spent about a quarter of the
# collector's CPU traversing them. Reference cycles are still collected, less often.
GC_THRESHOLD = 20_000


RESTART_BACKOFF_S = (5.0, 60.0)  # first wait before starting a crashed collector again, and the longest


def run_collect(config: Config, once: bool, strict_access: bool = False) -> int:
    require_secrets(config)  # every secret the sources need, before any of them connects
    try:
        refused = check_config_access(config)
    except AccessError as exc:  # the metrics topic refused, or settings librdkafka refuses
        print(f"kobs collect: {exc}", file=sys.stderr)
        return 2
    for error in refused:
        going_on = "" if strict_access else "; watching the others, and asking it again less often"
        print(f"kobs collect: {error}{going_on}", file=sys.stderr)
    if refused and strict_access:
        return 2
    if once:
        return _collect(config, once=True)
    check_free(config.sinks.self_metrics_address, "sinks.self_metrics_address")  # before any child starts
    return supervise(config)


def supervise(config: Config) -> int:
    """Run the collector in a child process until SIGTERM or Ctrl-C, starting it again after a crash."""
    stop, child = threading.Event(), None

    def forward(signum: int, _frame: object) -> None:
        stop.set()
        if child is not None and child.pid:
            os.kill(child.pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no librdkafka state is inherited
    restarts, wait_s = 0, RESTART_BACKOFF_S[0]
    while True:
        args = (config, restarts, logging.getLogger().level)
        child = spawn.Process(target=_child, args=args, name="kobs-collector")
        started_s = time.monotonic()
        child.start()
        child.join()
        code = child.exitcode
        if stop.is_set() or (code is not None and code >= 0):
            return 0 if stop.is_set() else code
        if time.monotonic() - started_s > 10 * RESTART_BACKOFF_S[1]:  # it had been running well
            wait_s = RESTART_BACKOFF_S[0]
        cause = signal.Signals(-code).name if code is not None else "unknown"
        log.error("the collector died (%s); starting it again in %.0f s", cause, wait_s)
        if stop.wait(wait_s):
            return 0
        restarts, wait_s = restarts + 1, min(2 * wait_s, RESTART_BACKOFF_S[1])


def _child(config: Config, restarts: int, level: int) -> None:
    """The supervisor's child: collects until SIGTERM, or until the supervisor is gone (killed with
    SIGKILL, it cannot pass a stop on; an orphaned collector would scrape on unseen)."""
    configure_logging(level <= logging.DEBUG)
    stop = threading.Event()

    def stop_with_parent() -> None:
        multiprocessing.connection.wait([multiprocessing.parent_process().sentinel])
        log.warning("the supervisor is gone: stopping")
        stop.set()

    threading.Thread(target=stop_with_parent, name="parent-watch", daemon=True).start()
    sys.exit(_collect(config, False, restarts, stop))


def _collect(config: Config, once: bool, restarts: int = 0, stop: threading.Event | None = None) -> int:
    """The collector itself: one cycle (``once``), or until SIGTERM or ``stop`` (the supervisor's child)."""
    gc.set_threshold(GC_THRESHOLD)
    tune_query_jvms()
    try:
        publisher = Publisher.from_config(config).start()
    except TopicError as exc:
        print(f"kobs collect: {exc}", file=sys.stderr)
        return 2
    jobs = build_jobs(config)
    metrics = SelfMetrics(publisher, [job.label for job in jobs], restarts)
    scheduler = Scheduler(jobs, publisher, metrics)
    stop = stop or threading.Event()
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
    try:
        server = metrics.serve(config.sinks.self_metrics_address)
    except ConfigError as exc:  # the address is taken since the supervisor checked it
        publisher.close(timeout_s=0)
        print(f"kobs collect: {exc}", file=sys.stderr)
        return 2
    log.info("collecting %d sources; self-metrics on %s", len(jobs), config.sinks.self_metrics_address)
    canaries = start_canaries(config.clusters, metrics.registry, stop)
    try:
        scheduler.run(stop)
    finally:
        for canary in canaries:
            canary.thread.join(CANARY_STOP_S)
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

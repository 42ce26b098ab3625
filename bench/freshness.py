"""``kobs bench freshness``: in the demo, or in a running deployment (``--config``), how long after a
collector's sample time its data is visible on the derived exporter of ``kobs stream``, against the part of
that before Spark.

By default it starts the demo's embedded stack (``peers.stack.EmbeddedStack``: the real three-node Kafka
cluster with real traffic and Kafka's Java producer, the simulated fleet in real time with its ZooKeeper,
``kobs collect`` and ``kobs stream`` with their defaults) without the parts that only read the exporter
(Prometheus, Alertmanager, the app), and without incidents. Spark's warm-up is left out: the measurement
starts once the first micro-batch is done and the stream has worked off what queued meanwhile (every
source's newest scrape read from the topic by the first micro-batch is visible). Then, for ``--seconds``, it
- polls the derived exporter every ``POLL_S`` for ``kobs_source_last_seen_timestamp_seconds{cluster,
  source}``, which the pipeline sets in the same ``Pipeline.record`` as the analyses' metrics, just after
  them: a scrape is visible once its source's gauge reaches its sample time (``bench.visibility``);
- checks that handle against an analysis: at the first poll showing an offsets scrape's time, the lag
  gauges must show the lag that scrape states (end offset minus committed offset), so they were updated in
  the same micro-batch, no later than the handle;
- reads the metrics topic with a plain confluent-kafka consumer, the baseline: when each scrape's records
  are readable, and their Kafka timestamps (when the publisher produced them).
Scrapes from the last seconds get ``DRAIN_S`` more to become visible. It prints freshness p50/p95/max of
both, the collectors' part (sample time -> handed to the producer) per kind of source, what the stream adds
(split at the start of the pipeline of the micro-batch that showed each scrape, from
``kobs_pipeline_last_batch_timestamp_seconds`` and ``..._batch_duration_seconds``) and, in the demo, the
verdicts against the targets (issue 5: p95 <= 10 s, issue 13: <= 5 s). With ``--config`` it starts nothing:
it reads the deployment's metrics topic from its end and polls its exporter, so the window starts once a
micro-batch is done and the scrapes read from then on are visible.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import queue
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from bench.visibility import (
    Appearances,
    Arrivals,
    Batch,
    Freshness,
    Source,
    agreement,
    freshness,
    handed_over,
    lag_of,
    misses,
    newest_s,
    summarize,
)
from collectors.offsets import SOURCE as OFFSETS
from common import jars
from common.config import Config, load_config
from common.contract import ContractError, parse
from common.kafka_clients import metrics_topic_settings
from peers.stack import EmbeddedStack

DEMO_STACK = (
    f"the demo stack (three Kafka {jars.version('kafka')} nodes with real traffic and a Java producer, the "
    "simulated fleet in real time with ZooKeeper, kobs collect, kobs stream on local[2] with its default "
    "trigger, each micro-batch as soon as the previous one ends; not started: Prometheus, Alertmanager and "
    "the app, which only read the exporter)"
)
TARGETS_S = {"issue 5": 10.0, "issue 13": 5.0}  # p95 freshness in the demo
POLL_S = 0.2  # exporter polls: the resolution of a visible time
DRAIN_S = 30.0  # after --seconds, how long the last scrapes may take to become visible
WARM_UP_S = 420.0  # for the first micro-batch (a busy 2-core machine: 260 s)
HANDLE = "kobs_source_last_seen_timestamp_seconds"
LAST_BATCH = "kobs_pipeline_last_batch_timestamp_seconds"
DURATION = "kobs_pipeline_batch_duration_seconds"
DERIVED = "kobs_consumergroup_lag_messages"  # from every offsets scrape: the demo's lagging group grows
FETCH_WAIT_MS = 20  # the baseline consumer's longest fetch wait: the resolution of a readable time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seconds",
        type=_positive,
        default=150.0,
        help="how long to measure, once the stream has caught up after its first micro-batch "
        "(default: %(default)g)",
    )
    parser.add_argument(
        "--catch-up-seconds",
        type=_positive,
        default=300.0,
        help="how long the stream may take, after its first micro-batch, to work off what queued before it "
        "(the measurement starts then; a busy machine or a deployment just restarted needs longer; "
        "default: %(default)g)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="measure a deployment that is already running instead: the configuration its kobs collect "
        "and kobs stream run with (kobs demo prints the path of its own). The metrics topic is read from "
        "its end and nothing is started or stopped; the demo's targets are not applied",
    )


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    load_before = os.getloadavg()
    try:
        if args.config:
            measured = _measure_deployment(load_config(args.config), args.seconds, args.catch_up_seconds)
        else:
            measured = _measure_demo(args.seconds, args.catch_up_seconds)
    except NotMeasured as exc:
        print(f"kobs bench freshness: {exc}; load average now {os.getloadavg()[0]:.1f}", file=sys.stderr)
        return 1
    _report(measured, args.seconds, load_before, targets=TARGETS_S if args.config is None else {})
    return 0 if measured.freshness.visible else 1


def _measure_demo(seconds: float, catch_up_s: float) -> _Measured:
    """Start the demo's stack (no observers, no incidents), measure, stop it."""
    with tempfile.TemporaryDirectory(prefix="kobs-bench-freshness-") as tmp:
        stack, done, simulating = EmbeddedStack(Path(tmp), observers=False), threading.Event(), None
        try:
            began = time.monotonic()
            stack.start(progress=lambda _step: None)
            simulating = _thread(_simulate, stack, done)
            _print_settings(stack.config, f"{DEMO_STACK} started in {time.monotonic() - began:.1f} s")
            return _observe(stack.config, OFFSET_BEGINNING, seconds, catch_up_s)
        finally:
            done.set()
            if simulating:
                simulating.join(timeout=30)
            stack.stop()


def _measure_deployment(config: Config, seconds: float, catch_up_s: float) -> _Measured:
    """Measure the running ``kobs collect`` and ``kobs stream`` of ``config``: scrapes produced from now."""
    _print_settings(
        config, f"a running deployment, its metrics topic {config.metrics_topic.name} read from its end"
    )
    return _observe(config, OFFSET_END, seconds, catch_up_s)


def _observe(config: Config, start_offset: int, seconds: float, catch_up_s: float) -> _Measured:
    """Read the metrics topic from ``start_offset`` (the baseline) while polling the exporter: wait for a
    micro-batch, then measure."""
    done, records = threading.Event(), queue.SimpleQueue()
    url = f"http://{config.sinks.exporter_address}/metrics"
    _poll(url)  # says so at once if nothing answers there
    reading = _thread(_read_topic, _topic_reader(config, start_offset), records, done)
    try:
        began = time.monotonic()
        first_batch_s = _first_batch(url)
        print(f"first micro-batch seen done {time.monotonic() - began:.1f} s later", flush=True)
        measured = _measure(url, records, first_batch_s, seconds, catch_up_s)
        print(f"caught up {measured.started_s - first_batch_s:.1f} s after the first micro-batch")
        return measured
    finally:
        done.set()
        reading.join(timeout=30)


class NotMeasured(Exception):
    """The stack never reached the state the measurement needs; ``str()`` says which."""


def _thread(target: Callable, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name=f"bench-{target.__name__}", daemon=True)
    thread.start()
    return thread


class _Stop(Exception):
    pass


def _simulate(stack: EmbeddedStack, done: threading.Event) -> None:
    """Play the scenario in real time, as ``kobs demo`` does, until ``done``."""

    def stop_when_done() -> None:
        if done.is_set():
            raise _Stop

    with contextlib.suppress(_Stop):
        stack.simulation.run(speed=1.0, duration_s=None, on_tick=stop_when_done)


def _topic_reader(config: Config, start: int) -> Consumer:
    """A consumer of every partition of the metrics topic from offset ``start`` (the baseline), or a
    ``NotMeasured`` saying why the topic cannot be read."""
    consumer = Consumer(
        metrics_topic_settings(config)
        | {
            "group.id": "kobs-bench-freshness",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
        }
    )
    topic = config.metrics_topic.name
    try:
        listed = consumer.list_topics(topic, timeout=10).topics[topic]
        partitions, error = listed.partitions, listed.error
    except KafkaException as exc:
        partitions, error = {}, exc.args[0]
    if not partitions:
        consumer.close()
        raise NotMeasured(f"the metrics topic {topic} cannot be read: {error}")
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    return consumer


def _read_topic(consumer: Consumer, records: queue.SimpleQueue, done: threading.Event) -> None:
    """Put (source, sample time, produced, readable, offsets samples) on ``records`` for each valid record
    ``consumer`` reads, the wall time it was read as readable, until ``done``; then close it."""
    try:
        while not done.is_set():
            message = consumer.poll(0.1)  # returns as soon as a message is there
            readable_s = time.time()
            if message is None or message.error():
                continue
            try:
                doc = parse(message.value())
            except ContractError:
                continue  # a dead letter: no scrape to measure
            source, samples = (doc["cluster"], doc["source"]), doc.get("samples", [])
            offsets = samples if doc["source"] == OFFSETS else []
            records.put((source, newest_s(doc), message.timestamp()[1] / 1000, readable_s, offsets))
    finally:
        consumer.close()


class _Page(NamedTuple):
    """What one exporter poll showed."""

    handle: dict[Source, float]  # the last-seen gauge per (cluster, source)
    lag: dict[tuple[str, str, str], float]  # the lag gauges by (group, topic, partition)
    batch: Batch | None  # the last micro-batch completed


def _poll(url: str) -> _Page:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # a loaded machine answers late
            lines = response.read().decode().splitlines()
    except OSError as exc:
        why = getattr(exc, "reason", exc)  # a URLError's own
        raise NotMeasured(
            f"kobs stream's exporter at {url} did not answer ({why}): is kobs stream running?"
        ) from None
    text = "\n".join(line for line in lines if line.startswith((HANDLE, DERIVED, LAST_BATCH, DURATION)))
    handle, lag, last = {}, {}, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == HANDLE:
                handle[sample.labels["cluster"], sample.labels["source"]] = sample.value
            elif sample.name == DERIVED:
                labels = sample.labels
                lag[labels["group"], labels["topic"], labels["partition"]] = sample.value
            else:
                last[sample.name] = sample.value
    return _Page(handle, lag, Batch(last[LAST_BATCH], last[DURATION]) if LAST_BATCH in last else None)


def _first_batch(url: str) -> float:
    """Wall time the first micro-batch was seen done."""
    deadline = time.monotonic() + WARM_UP_S
    while time.monotonic() < deadline:
        if _poll(url).batch is not None:
            return time.time()
        time.sleep(POLL_S)
    raise NotMeasured(f"no micro-batch completed within {WARM_UP_S:g} s")


class _Measured(NamedTuple):
    freshness: Freshness
    lag_agrees: tuple[int, int]  # offsets scrapes whose lag the gauges showed with the handle, of how many
    lag_misses: list[tuple]  # what they did not show (bench.visibility.misses)
    sources: int
    batches: list[float]  # the pipeline's time of each micro-batch completed in the window
    handed: dict[str, list[float]]  # sample time -> handed to the producer, by kind of source
    started_s: float  # wall time the window started: the stream had caught up


def _measure(
    url: str, records: queue.SimpleQueue, first_s: float, seconds: float, catch_up_s: float
) -> _Measured:
    """Poll until the stream has caught up after the first micro-batch (done at ``first_s``, wall clock;
    up to ``catch_up_s``), then for ``seconds``, then up to ``DRAIN_S`` more while a scrape of the window
    is not visible yet."""
    handle, arrivals = Appearances(), Arrivals()
    offsets: dict[float, list] = {}  # offsets samples by sample time, from the topic
    shown: dict[float, dict] = {}  # lag gauges at the first poll showing each offsets scrape
    batches: dict[float, Batch] = {}  # the last micro-batch completed, by poll time
    queued: dict[Source, float] | None = None  # each source's newest scrape read by the first micro-batch
    start_s, last_s = math.inf, math.inf
    while True:
        began = time.monotonic()
        page = _poll(url)
        at_s = time.time()
        handle.observe(at_s, page.handle)
        for (_cluster, source), t_s in page.handle.items():
            if source == OFFSETS and t_s not in shown:
                shown[t_s] = page.lag
        batches[at_s] = page.batch
        while not records.empty():
            source, t_s, produced_s, readable_s, samples = records.get()
            arrivals.add(source, t_s, produced_s, readable_s)
            if samples:
                offsets.setdefault(t_s, []).extend(samples)
        if start_s == math.inf:
            queued = arrivals.newest_read_by(first_s) if queued is None else queued
            if all(page.handle.get(source, -math.inf) >= t_s for source, t_s in queued.items()):
                start_s, last_s = at_s, at_s + seconds
            elif at_s > first_s + catch_up_s:
                raise NotMeasured(
                    f"the stream did not catch up within {catch_up_s:g} s of its first micro-batch (too "
                    f"busy a machine, or too far behind: --catch-up-seconds allows longer)"
                )
        window = arrivals.between(start_s, min(at_s, last_s))
        if at_s >= last_s and (at_s >= last_s + DRAIN_S or not freshness(window, handle, batches).unseen):
            break
        time.sleep(max(0.0, POLL_S - (time.monotonic() - began)))
    expected = {t_s: lag_of(samples) for t_s, samples in offsets.items()}
    sources = len({s.source for s in window})
    pipelines = [b.pipeline_s for b in set(batches.values()) if b.completed_s > start_s]
    return _Measured(
        freshness(window, handle, batches),
        agreement(shown, expected),
        misses(shown, expected),
        sources,
        pipelines,
        handed_over(window),
        start_s,
    )


def _print_settings(config: Config, measuring: str) -> None:
    intervals, batch = config.intervals, config.metrics_topic.max_records_per_batch
    print(
        f"measuring {measuring}\n"
        f"kobs stream records per batch (metrics_topic.max_records_per_batch): {batch or 'unlimited'}\n"
        f"collector intervals: metrics {intervals.metrics_s:g} s, offsets {intervals.offsets_s:g} s, "
        f"metadata and ZooKeeper ISR {intervals.metadata_s:g} s, producers {intervals.producers_s:g} s",
        flush=True,
    )


def _slowest(kinds: dict[str, list[float]]) -> str:
    """Each kind's p95 and scrapes, the slowest first."""
    p95 = {kind: summarize(seconds).p95 for kind, seconds in kinds.items()}
    return ", ".join(
        f"{kind} {p95[kind]:.2f} s ({len(kinds[kind])})" for kind in sorted(p95, key=p95.get)[::-1]
    )


def _report(
    measured: _Measured, seconds: float, load_before: tuple[float, float, float], targets: dict[str, float]
) -> None:
    """Print the figures, and the verdict against each of ``targets`` (p95 seconds by issue)."""
    result, (held, known) = measured.freshness, measured.lag_agrees
    load = "/".join(f"{x:.1f}" for x in load_before), "/".join(f"{x:.1f}" for x in os.getloadavg())
    unseen = f", {result.unseen} read but not visible {DRAIN_S:g} s after the end" if result.unseen else ""
    print(
        f"load average (1/5/15 min): {load[0]} before, {load[1]} after\n"
        f"measured {seconds:g} s once caught up: {len(result.visible)} scrapes of "
        f"{measured.sources} sources{unseen}; exporter polled every {POLL_S:g} s, the topic read with "
        f"{FETCH_WAIT_MS} ms fetch waits (the resolution of each time)"
    )
    if not result.visible:
        print("no scrape became visible on the exporter: nothing to report")
        return
    visible = summarize(result.visible)
    print(
        f"baseline, sample time -> record readable on the metrics topic (a confluent-kafka consumer): "
        f"{summarize(result.readable)}\n"
        f"  of which sample time -> handed to the Kafka producer (the records' timestamps): "
        f"{summarize(result.produced)}\n"
        f"    p95 per kind of source: {_slowest(measured.handed)}\n"
        f"kobs stream, sample time -> visible on the derived exporter: {visible}\n"
        f"  added by the stream (visible - readable, per scrape): {summarize(result.added)}\n"
        f"    readable -> start of the pipeline of the micro-batch that showed it: "
        f"{summarize(result.waited)}\n"
        f"    that pipeline (Spark's read and decoding, the analyses' state store step, history): "
        f"{summarize(result.pipeline)}\n"
        f"  {len(measured.batches)} micro-batches completed, the pipeline's time of each ({DURATION}): "
        f"{summarize(measured.batches)}\n"
        f"same batch: the lag gauges ({DERIVED}) showed the lag of {held} of {known} offsets scrapes at "
        f"the first poll showing the scrape's time on {HANDLE}\n"
        + "".join(
            f"  scrape at {t:.3f}: {'/'.join(key)} stated lag {value:g}, the gauge showed {seen}\n"
            for t, key, value, seen in measured.lag_misses[:5]
        )
        + "\n".join(
            f"target ({issue}): p95 freshness <= {target:g} s in the demo: {visible.p95:.2f} s — "
            f"{'pass' if visible.p95 <= target else 'missed'}"
            for issue, target in targets.items()
        )
    )

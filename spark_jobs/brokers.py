"""Broker resources and requests: CPU, heap, GC, thread pools' idle time and request rates per broker.

Pure (no Spark). Reads a broker's JVM series (``jvm_process_cpu_seconds_total``, heap
``jvm_memory_{used,max}_bytes{area="heap"}``, ``jvm_gc_collection_seconds_total{gc}``), its thread pools'
idle ratios (request handlers, network processors), its request meters (``kafka_request_total`` per
request and version, ``kafka_request_errors_total`` per request and error), its request time percentiles
per request type and stage (in seconds), queue sizes, traffic meters (the broker's totals: samples of one
topic or one network thread are not the broker's and are left out), offline log directories, partitions at
min ISR, its followers' largest lag and its metadata's age. Counters become per-second rates
over the last minute (:mod:`spark_jobs.rates`, resets counted); CPU seconds per second is CPU cores used,
GC seconds per second the share of time in GC. A request's rate sums its versions; its error rate sums
every error code but ``NONE`` (Kafka counts successful responses as ``error="NONE"``), so a request type
that answered at all has an error rate, 0 while it succeeds. The request handlers' idle share is a meter's
one-minute rate, which reads exactly 0 until its first tick 5 s after the broker starts: such a 0 is no
measurement (a busy pool reads a small fraction, never exactly 0) and is left out. A broker not scraped for
``stale_s`` is
forgotten: a dead broker has no current CPU or rate. Samples without a ``broker`` label (a producer's JVM)
are not a broker's and are left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import pyarrow as pa

from common import names
from spark_jobs.analysis import Derived, Evaluation, Observation
from spark_jobs.rates import CounterRates

# The broker's traffic, all topics (the beans without a topic key): bytes from producers, to consumers, and
# fetched from and served to other brokers' followers.
NETWORK = {
    names.BYTES_IN: "bytes_in_per_second",
    names.BYTES_OUT: "bytes_out_per_second",
    names.REPLICATION_BYTES_IN: "replication_bytes_in_per_second",
    names.REPLICATION_BYTES_OUT: "replication_bytes_out_per_second",
}
COUNTERS = {names.PROCESS_CPU_SECONDS, names.JVM_GC_SECONDS, names.REQUESTS, names.REQUEST_ERRORS, *NETWORK}
GAUGES = {
    names.JVM_MEMORY_USED_BYTES: "heap_used_bytes",
    names.JVM_MEMORY_MAX_BYTES: "heap_max_bytes",
    names.REQUEST_HANDLER_IDLE: "request_handler_idle_ratio",
    names.NETWORK_PROCESSOR_IDLE: "network_processor_idle_ratio",
    names.REQUEST_QUEUE_SIZE: "request_queue_size",
    names.RESPONSE_QUEUE_SIZE: "response_queue_size",
    names.AT_MIN_ISR_PARTITIONS: "at_min_isr_partitions",
    names.REPLICA_MAX_LAG: "replica_max_lag_messages",
    names.OFFLINE_LOG_DIRS: "offline_log_dirs",
    names.METADATA_LAG_MS: "metadata_lag_seconds",
}
SCALE = {names.METADATA_LAG_MS: 1e-3}  # Kafka's milliseconds as seconds
# The stages of a request's time (each a histogram per request type, read as percentiles)
LATENCIES = {
    names.REQUEST_TOTAL_MS: "total",
    names.REQUEST_QUEUE_MS: "request_queue",
    names.REQUEST_LOCAL_MS: "local",
    names.REQUEST_REMOTE_MS: "remote",
    names.RESPONSE_QUEUE_MS: "response_queue",
    names.RESPONSE_SEND_MS: "response_send",
}
LATENCY = "kobs_broker_request_latency_seconds"  # labels cluster, broker, request, stage, quantile
# history column -> derived gauge (labels cluster, broker)
BROKER_GAUGES = {
    "cpu_cores": "kobs_broker_cpu_cores",
    "gc_time_ratio": "kobs_broker_gc_time_ratio",
    **{column: f"kobs_broker_{column}" for column in (*GAUGES.values(), *NETWORK.values())},
}
HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("broker", pa.string()),
        ("at_s", pa.float64()),
        *((column, pa.float64()) for column in BROKER_GAUGES),
        ("requests_per_s", pa.float64()),
        ("request_errors_per_s", pa.float64()),
        ("produce_p99_seconds", pa.float64()),  # Produce's total time, 99th percentile
    ]
)


def _counter_key(o: Observation) -> tuple[str, str]:
    """The series a counter sample belongs to: (name, request and version or error) for requests, (name,
    collector) for GC, (name, "") for CPU."""
    if o.name == names.REQUEST_ERRORS:
        return o.name, f"{o.labels.get('request', '')}\0{o.labels.get('error', '')}"
    if o.name == names.JVM_GC_SECONDS:
        return o.name, o.labels.get("gc", "")
    if o.name == names.REQUESTS:
        return o.name, f"{o.labels.get('request', '')}\0{o.labels.get('version', '')}"
    return o.name, ""


def _own(o: Observation) -> bool:
    """Whether a sample is the broker's own figure: not one topic's traffic (the beans without a topic key
    are the broker's total) nor one network thread's response queue (the beans without a processor key)."""
    return not (o.name in NETWORK and "topic" in o.labels) and "processor" not in o.labels


class BrokerResourceAnalysis:
    """Per broker: CPU cores used, heap, GC time share, thread pools' idle ratios, requests per second,
    request latency percentiles by stage, queues, traffic, log dirs offline, replication and metadata lag."""

    table = "brokers"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset(COUNTERS | set(GAUGES) | set(LATENCIES))
    settings = ("stale_s",)
    chunked: frozenset[str] = frozenset()

    def __init__(self, stale_s: float = 300.0):
        self.stale_s = stale_s
        self.rates: dict[tuple[str, str], CounterRates] = {}  # (cluster, broker) -> counter rates
        self.gauges: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}  # -> column -> (t, value)
        # -> (request, stage, quantile) -> (t, seconds)
        self.latencies: dict[tuple[str, str], dict[tuple[str, str, str], tuple[float, float]]] = {}
        self.seen: dict[tuple[str, str], float] = {}  # (cluster, broker) -> newest scrape
        self.now_s = -math.inf

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"latencies": {}} | state)  # stored before request latencies were kept

    def observe(self, observations: Iterable[Observation]) -> None:
        for o in sorted(observations, key=lambda o: o.t_s):
            broker = o.labels.get("broker")
            if broker is None or o.value is None or not math.isfinite(o.value) or not _own(o):
                continue
            key = (o.cluster, broker)
            self.seen[key] = max(self.seen.get(key, -math.inf), o.t_s)
            self.now_s = max(self.now_s, o.t_s)
            if o.name in COUNTERS:
                rates = self.rates.get(key)
                if rates is None:
                    rates = self.rates[key] = CounterRates(window_s=60.0)
                rates.add(_counter_key(o), o.t_s, o.value)
            elif o.name in LATENCIES:
                what = (o.labels.get("request", ""), LATENCIES[o.name], o.labels.get("quantile", ""))
                self.latencies.setdefault(key, {})[what] = (o.t_s, o.value / 1e3)
            elif o.name == names.REQUEST_HANDLER_IDLE and o.value == 0:
                continue  # a meter's one-minute rate before its first tick, 5 s after the broker started
            elif o.labels.get("area", "heap") == "heap":
                self.gauges.setdefault(key, {})[GAUGES[o.name]] = (o.t_s, o.value * SCALE.get(o.name, 1))
        self._forget_stale()

    def _forget_stale(self) -> None:
        since = self.now_s - self.stale_s
        for key in [k for k, t in self.seen.items() if t < since]:
            del self.seen[key]
            self.rates.pop(key, None)
            self.gauges.pop(key, None)
            self.latencies.pop(key, None)
        for figures in (self.gauges, self.latencies):
            for key, by_column in figures.items():
                figures[key] = {column: tv for column, tv in by_column.items() if tv[0] >= since}
        for rates in self.rates.values():
            rates.stale_s = self.stale_s  # the setting as configured now, never a restored state's
            rates.forget_stale(self.now_s)

    def evaluate(self) -> Evaluation:
        history, metrics = [], []
        for cluster, broker in sorted(self.seen):
            figures = {column: value for column, (_, value) in self.gauges.get((cluster, broker), {}).items()}
            requests: dict[str, float] = defaultdict(float)
            errors: dict[str, float] = defaultdict(float)
            rates = self.rates.get((cluster, broker))
            for (name, detail), rate in rates.rates() if rates else ():
                if name == names.PROCESS_CPU_SECONDS:
                    figures["cpu_cores"] = rate
                elif name == names.JVM_GC_SECONDS:
                    figures["gc_time_ratio"] = figures.get("gc_time_ratio", 0.0) + rate
                elif name in NETWORK:
                    figures[NETWORK[name]] = rate
                else:
                    request, code = detail.split("\0")
                    if name == names.REQUESTS:
                        requests[request] += rate
                    else:
                        errors[request] += 0.0 if code == "NONE" else rate
            labels = (cluster, broker)
            metrics += [Derived(BROKER_GAUGES[c], labels, v) for c, v in sorted(figures.items())]
            for kind, by_request in (("requests", requests), ("request_errors", errors)):
                metric = f"kobs_broker_{kind}_per_second"
                metrics += [Derived(metric, (*labels, r), v) for r, v in by_request.items()]
            latencies = self.latencies.get((cluster, broker), {})
            metrics += [Derived(LATENCY, (*labels, *what), v) for what, (_, v) in sorted(latencies.items())]
            produce_p99 = latencies.get(("Produce", "total", "0.99"))
            history.append(
                {
                    "cluster": cluster,
                    "broker": broker,
                    "at_s": self.now_s,
                    **figures,
                    "requests_per_s": math.fsum(requests.values()) if requests else None,
                    "request_errors_per_s": math.fsum(errors.values()) if errors else None,
                    "produce_p99_seconds": produce_p99[1] if produce_p99 else None,
                }
            )
        return Evaluation(history, metrics)

"""Broker and producer metrics over JMX with jmxquery: every bean of one endpoint in one query.

jmxquery starts a JVM per query (0.3-0.6 s), so one query per scrape asks for all the bean patterns at once
(``BROKER_QUERIES``, narrowed to the beans the mapping reads, or ``PRODUCER_QUERIES``), and a bounded number
of queries run at a time across the process however many brokers there are (:class:`QuerySlots`): an
endpoint whose last query got no answer queues in a lane of its own, so hung endpoints can only hold up
each other, never the brokers that answer. Each bean attribute is named the
way the exporter rule sets name it (:func:`series_name`, e.g.
``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`` ``Count`` →
``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``) and mapped through the same table as the
exposition source (:mod:`collectors.mapping`). A refused connection, a JMX error or no answer within the
timeout is an error line whose first word is the reason (``connection-error``, ``timeout``, ...).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from jmxquery import JAR_PATH, JMXQuery

from collectors.mapping import DEFAULT_MAPPING, Series, canonical_samples
from collectors.source import Scrape, now_ms
from common.contract import Batch
from common.java import quoted

# The request types whose time percentiles are read, the stages of a request's time and the percentiles
# (each an attribute of every RequestMetrics ...TimeMs histogram), and the KRaft quorum's raft-metrics.
TIMED_REQUESTS = (
    "Produce", "FetchConsumer", "FetchFollower", "Metadata", "OffsetCommit", "JoinGroup",
    "ConsumerGroupHeartbeat",
)  # fmt: skip
REQUEST_STAGES = (
    "TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
)  # fmt: skip
TOPIC_METERS = (
    "MessagesInPerSec", "BytesInPerSec", "BytesOutPerSec", "FailedProduceRequestsPerSec",
    "ReplicationBytesInPerSec", "ReplicationBytesOutPerSec",
)  # fmt: skip
PERCENTILES = ("50thPercentile", "99thPercentile", "999thPercentile")
RAFT_ATTRIBUTES = (
    "current-leader", "current-epoch", "high-watermark", "log-end-offset", "commit-latency-avg",
    "commit-latency-max", "number-of-voters",
)  # fmt: skip
# Bean patterns and the attribute read from each: gauges' Value, meters' and timers' Count, the request
# timers' Mean. jmxquery makes two RMI calls per matching bean and attribute, so the families that grow with
# request types and partitions (RequestMetrics, Log, per-topic BrokerTopicMetrics) are asked only for the
# names the table maps: a Kafka 4.3 node registers 11 RequestMetrics timers for each of 93 request types and
# 5 Log beans per partition replica, and asking every one for Value, Count and Mean took 20-30 s a scrape on
# a busy host (4-5 s this way). The small fixed families are asked whole, so ``exporter_names`` can map their
# other beans.
BROKER_QUERIES = (
    "kafka.server:type=ReplicaManager,*/Value",
    "kafka.server:type=ReplicaManager,*/Count",
    "kafka.controller:type=KafkaController,*/Value",
    "kafka.controller:type=ControllerStats,*/Count",
    *(f"kafka.server:type=BrokerTopicMetrics,name={name},*/Count" for name in TOPIC_METERS),
    *(f"kafka.log:type=Log,name={name},*/Value" for name in ("Size", "LogStartOffset", "LogEndOffset")),
    "kafka.log:type=LogManager,*/Value",
    "kafka.network:type=RequestMetrics,name=RequestsPerSec,*/Count",
    "kafka.network:type=RequestMetrics,name=ErrorsPerSec,*/Count",
    "kafka.network:type=RequestMetrics,name=TotalTimeMs,*/Mean",
    *(
        f"kafka.network:type=RequestMetrics,name={stage},request={request}/{quantile}"
        for request in TIMED_REQUESTS
        for stage in REQUEST_STAGES
        for quantile in PERCENTILES
    ),
    "kafka.network:type=RequestChannel,name=RequestQueueSize/Value",
    "kafka.network:type=RequestChannel,name=ResponseQueueSize/Value",
    "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica/Value",
    "kafka.server:type=broker-metadata-metrics/last-applied-record-lag-ms",
    *(f"kafka.server:type=raft-metrics/{attribute}" for attribute in RAFT_ATTRIBUTES),
    "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent/OneMinuteRate",
    "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent/Value",
    "java.lang:type=OperatingSystem/ProcessCpuTime",
    "java.lang:type=Memory/HeapMemoryUsage",
    "java.lang:type=GarbageCollector,*/CollectionCount",
    "java.lang:type=GarbageCollector,*/CollectionTime",
)
PRODUCER_QUERIES = ("kafka.producer:type=producer-metrics,*",)  # every attribute

# jmxquery starts a JVM per query; a JVM that lives a second needs neither the optimizing compiler nor G1,
# and one compiler thread is enough. With the first two a broker scrape took 0.68 s of CPU instead of 1.06 s
# (Kafka 4.3 node, 148 values); one compiler thread then cut 0.29 s to 0.25 s (129 values; 6 scrapes each).
QUERY_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC"


def tune_query_jvms() -> None:
    """Give the JVMs jmxquery starts from this process :data:`QUERY_JVM_OPTIONS` (the ``java`` launcher
    reads ``JDK_JAVA_OPTIONS``); options a user set there are kept."""
    os.environ.setdefault("JDK_JAVA_OPTIONS", QUERY_JVM_OPTIONS)


_KEY = re.compile(r'([^,=]+)=("(?:[^"\\]|\\.)*"|[^,]*)')
_NOT_NAME = re.compile(r"[^a-z0-9_]")
_PERCENTILE = re.compile(r"(\d+)thPercentile")


def parse_object_name(name: str) -> tuple[str, dict[str, str]]:
    """``domain:k=v,...`` → (domain, keys); quoted values (``ObjectName.quote``) are unquoted."""
    domain, _, keys = name.partition(":")
    parsed = {}
    for key, value in _KEY.findall(keys):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        parsed[key] = value
    return domain, parsed


def series_name(object_name: str, attribute: str) -> tuple[str, dict[str, str]]:
    """The exporter series name and labels of one bean attribute, as the common rule sets write them.

    ``Value`` → ``domain_type_name``; ``Count`` → ``..._total`` for a ``...PerSec`` meter (the suffix
    dropped), else ``..._count``; ``NNthPercentile`` → ``domain_type_name`` with label ``quantile="0.NN"``;
    any other attribute → ``..._<attribute>``; beans without a ``name`` key
    (Kafka's client metrics) → ``domain_type_<attribute>``. Lower case, non-alphanumerics as ``_``; the
    remaining keys become labels (``client-id`` → ``client_id``).
    """
    domain, keys = parse_object_name(object_name)
    kind, name = keys.pop("type", ""), keys.pop("name", None)
    percentile = _PERCENTILE.fullmatch(attribute)
    if name is None:
        raw = f"{domain}_{kind}_{attribute}"
    elif attribute == "Value":
        raw = f"{domain}_{kind}_{name}"
    elif percentile:
        raw, keys["quantile"] = f"{domain}_{kind}_{name}", f"0.{percentile[1]}"
    elif attribute == "Count" and name.endswith("PerSec"):
        raw = f"{domain}_{kind}_{name.removesuffix('PerSec')}_total"
    else:
        raw = f"{domain}_{kind}_{name}_{attribute}"
    labels = {key.replace("-", "_"): value for key, value in keys.items()}
    return _NOT_NAME.sub("_", raw.lower()), labels


class Reading(NamedTuple):
    """One bean attribute's value as the query JVM reports it (``attribute_key``: a composite's key)."""

    bean: str
    attribute: str
    attribute_key: str | None
    value: object


def jvm_series(reading: Reading, value: float) -> Series | None:
    """A ``java.lang`` reading as the JMX exporter's JVM collectors serve it: CPU time in seconds, heap
    used and max in bytes (``area="heap"``), GC collections and their time in seconds (``gc``); None for
    the rest (a heap without a maximum reports -1)."""
    _, keys = parse_object_name(reading.bean)
    kind, attribute, key = keys.get("type"), reading.attribute, reading.attribute_key
    if kind == "OperatingSystem" and attribute == "ProcessCpuTime":
        return "process_cpu_seconds_total", {}, value / 1e9
    if kind == "Memory" and attribute == "HeapMemoryUsage" and key in ("used", "max") and value >= 0:
        return f"jvm_memory_bytes_{key}", {"area": "heap"}, value
    if kind == "GarbageCollector" and attribute == "CollectionCount":
        return "jvm_gc_collection_seconds_count", {"gc": keys.get("name", "")}, value
    if kind == "GarbageCollector" and attribute == "CollectionTime":
        return "jvm_gc_collection_seconds_sum", {"gc": keys.get("name", "")}, value / 1e3
    return None


def jmx_series(readings: Iterable[Reading]) -> list[Series]:
    """Exporter-style series of query readings; non-numeric attributes (``RateUnit``, ...) are left out."""
    series = []
    for reading in readings:
        value = reading.value
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if reading.bean.startswith("java.lang:"):
            jvm = jvm_series(reading, float(value))
            if jvm is not None:
                series.append(jvm)
            continue
        attribute = reading.attribute + (f"_{reading.attribute_key}" if reading.attribute_key else "")
        name, labels = series_name(reading.bean, attribute)
        series.append((name, labels, float(value)))
    return series


class JmxError(Exception):
    """One failed query; ``str()`` starts with the reason."""


def query(
    address: str, queries: Iterable[str], timeout_s: float, credentials: tuple[str, str] | None = None
) -> list[Reading]:
    """Run the queries against ``host:port`` in one run of jmxquery's query JVM, logged in with
    ``credentials`` (user, password) when given; JmxError with the reason on failure.

    The JVM's arguments go in an argument file only this user can read (the ``java`` launcher's
    ``@file``, deleted after the run), so the JMX password never shows on a command line (``ps``).
    """
    args = ["-jar", JAR_PATH, "-url", f"service:jmx:rmi:///jndi/rmi://{address}/jmxrmi", "-json"]
    if credentials:
        args += ["-u", credentials[0], "-p", credentials[1]]
    args += ["-q", "".join(f"{JMXQuery(q).to_query_string()};" for q in queries)]
    with tempfile.NamedTemporaryFile("w", prefix="kobs-jmx-", suffix=".args") as argfile:  # mode 0600
        argfile.write("\n".join(quoted(arg) for arg in args))
        argfile.flush()
        try:
            done = subprocess.run(
                ["java", f"@{argfile.name}"], capture_output=True, timeout=timeout_s, check=True
            )
        except subprocess.TimeoutExpired:
            raise JmxError(f"timeout: no answer within {timeout_s:.1f} s") from None
        except subprocess.CalledProcessError as exc:  # the query JVM reports {"error": ..., "message": ...}
            raise JmxError(_jar_error(exc.stdout or b"", exc.stderr or b"")) from None
        except OSError as exc:
            raise JmxError(f"java: cannot run the JMX query JVM: {exc}") from None
    try:
        found = json.loads(done.stdout, strict=False)
        return [Reading(r["mBeanName"], r["attribute"], r.get("attributeKey"), r.get("value")) for r in found]
    except (ValueError, KeyError, TypeError):
        raise JmxError(f"query-failed: unreadable answer {done.stdout[:200]!r}") from None


def _jar_error(output: bytes, stderr: bytes) -> str:
    """The reason of a failed query JVM: its JSON error, else its uncaught exception (a refused login)."""
    text = output.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text, strict=False)  # the query JVM leaves newlines of stack traces unescaped
        return f"{doc['error']}: {' '.join(str(doc['message']).split())}"
    except (ValueError, KeyError, TypeError):
        pass
    uncaught = re.match(r'Exception in thread "main" ([\w.$]+): (.*)', stderr.decode("utf-8", "replace"))
    if uncaught and uncaught[1] == "java.lang.SecurityException":
        return f"auth-failed: {uncaught[2]} (check jmx_auth)"
    first_line = (text or stderr.decode("utf-8", "replace").strip()).split("\n", 1)[0]
    return f"query-failed: {first_line[:300] or 'no output'}"


class QuerySlots:
    """Query JVMs allowed at once, shared by every JMX source of the process: ``size`` for endpoints that
    answered their last query (or were never asked), one more for those whose last query timed out."""

    def __init__(self, size: int):
        self.answering = threading.BoundedSemaphore(size)
        self.silent = threading.BoundedSemaphore(1)


class JmxSource:
    """One JMX endpoint: ``jmx/broker-<id>`` (``BROKER_QUERIES``) or ``producer/<client-id>``."""

    def __init__(
        self,
        cluster: str,
        name: str,
        address: str,
        queries: Iterable[str],
        labels: Mapping[str, str],
        mapping: Mapping[str, str] = DEFAULT_MAPPING,
        timeout_s: float = 5.0,
        slots: QuerySlots | None = None,
        credentials: tuple[str, str] | None = None,
    ):
        self.cluster, self.name, self.address, self.queries = cluster, name, address, tuple(queries)
        self.labels, self.mapping, self.timeout_s = dict(labels), mapping, timeout_s
        self.slots = slots or QuerySlots(1)
        self.credentials = credentials
        self.silent = False  # its last query timed out: it waits in the silent lane

    def collect(self) -> Scrape:
        deadline = time.monotonic() + self.timeout_s
        lane = self.slots.silent if self.silent else self.slots.answering
        if not lane.acquire(timeout=self.timeout_s):
            error = f"timeout: no free JMX query slot within {self.timeout_s:.1f} s (other queries are slow)"
            return Scrape(Batch(self.cluster, self.name, now_ms()), [error])
        try:
            found = query(self.address, self.queries, max(0.1, deadline - time.monotonic()), self.credentials)
        except JmxError as exc:
            self.silent = str(exc).startswith("timeout")
            return Scrape(Batch(self.cluster, self.name, now_ms()), [f"{exc} (at {self.address})"])
        finally:
            lane.release()
        # The query JVM reads the beans just before it answers, after its start-up (0.2 s on a quiet machine,
        # seconds on a busy one): the answer's time, not the start's, keeps rates of counters true.
        ts = now_ms()
        self.silent = False
        samples = canonical_samples(jmx_series(found), self.mapping, self.labels)
        return Scrape(Batch(self.cluster, self.name, ts, tuple(samples)))

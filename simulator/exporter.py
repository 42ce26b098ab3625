"""Prometheus JMX-exporter text for each broker and producer client, served over HTTP on 127.0.0.1.

Names follow the widely used Strimzi JMX-exporter rules: ``kafka.<domain><type=T, name=N><>Value`` becomes
the gauge ``kafka_<domain>_<t>_<n>``, a meter's ``Count`` the counter ``kafka_<domain>_<t>_<n-without-PerSec>
_total``, a timer's ``Count`` ``..._count``, a histogram's ``NNthPercentile`` the gauge ``..._<n>`` with label
``quantile="0.NN"``; extra bean keys (topic, partition, request, clientId) become labels; client beans
``kafka.producer<type=producer-metrics, client-id=C><>attr`` become ``kafka_producer_producer_metrics_<attr>``
with label ``client_id``. The full mapping is in ``docs/simulator.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from simulator import request_metrics
from simulator.cluster import Cluster
from simulator.producer import Producer

HOST = "127.0.0.1"
LOG_DIR = "/var/lib/kafka/data"  # the mount point in the node exporter's filesystem series
LOG_LABELS = ["topic", "partition"]


def _gauge(name: str, value: float, doc: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _per_topic(name: str, meter: dict[str, int], doc: str) -> CounterMetricFamily:
    """A ``BrokerTopicMetrics`` meter: one series per topic plus the broker-wide bean (no topic label)."""
    family = CounterMetricFamily(name, doc, labels=["topic"])
    for topic, count in sorted(meter.items()):
        family.add_metric([topic], count)
    family.samples.append(Sample(f"{name}_total", {}, sum(meter.values())))
    return family


class BrokerCollector:
    """What one broker's JMX exporter agent shows; reads the model under ``lock``."""

    def __init__(self, cluster: Cluster, broker_id: int, lock: threading.Lock):
        self.cluster, self.broker_id, self.lock = cluster, broker_id, lock

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            return iter(list(self._families()))

    def _families(self) -> Iterator[Metric]:
        c, b = self.cluster, self.broker_id
        hosted = c.partitions_of(b)
        led = [p for p in hosted if p.leader == b and c.brokers[b].alive]
        is_controller = c.controller == b
        counters = c.counters[b]
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            sum(len(p.isr) < len(p.replicas) for p in led),
            "Partitions led here with fewer in-sync replicas than replicas",
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            sum(len(p.isr) < c.topics[p.topic].min_insync_replicas for p in led),
            "Partitions led here with fewer in-sync replicas than min.insync.replicas",
        )
        yield _gauge(
            "kafka_server_replicamanager_atminisrpartitioncount",
            sum(len(p.isr) == c.topics[p.topic].min_insync_replicas for p in led),
            "Partitions led here with exactly min.insync.replicas in-sync replicas",
        )
        yield _gauge("kafka_server_replicamanager_partitioncount", len(hosted), "Replicas on this broker")
        yield _gauge("kafka_server_replicamanager_leadercount", len(led), "Partitions led by this broker")
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks (IsrShrinksPerSec Count)",
            counters.isr_shrinks,
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR expands (IsrExpandsPerSec Count)",
            counters.isr_expands,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            int(is_controller),
            "1 on the controller",
        )
        offline = sum(not c.has_live_leader(p) for p in c.partitions) if is_controller else 0
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount", offline, "Partitions without a leader"
        )
        active = sum(broker.alive for broker in c.brokers.values()) if is_controller else 0
        yield _gauge("kafka_controller_kafkacontroller_activebrokercount", active, "Live brokers")
        yield _gauge("kafka_controller_kafkacontroller_fencedbrokercount", 0, "Always 0 in ZooKeeper mode")
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections (UncleanLeaderElectionsPerSec Count)",
            counters.unclean_elections,
        )
        elections = Metric(
            "kafka_controller_controllerstats_leaderelectionrateandtimems_count", "Elections", "unknown"
        )
        elections.add_sample(elections.name, {}, counters.leader_elections)
        yield elections
        yield _per_topic(
            "kafka_server_brokertopicmetrics_messagesin", c.topic_meter("messages_in", b), "Messages in"
        )
        yield _per_topic(
            "kafka_server_brokertopicmetrics_bytesin", c.topic_meter("bytes_in", b), "Bytes in from producers"
        )
        yield _per_topic(
            "kafka_server_brokertopicmetrics_bytesout",
            c.topic_meter("bytes_out", b),
            "Bytes out to consumers",
        )
        yield _per_topic(
            "kafka_server_brokertopicmetrics_failedproducerequests",
            c.topic_meter("failed_produce", b),
            "Failed produce requests",
        )
        yield _gauge("kafka_log_logmanager_offlinelogdirectorycount", 0, "Offline log directories")
        lag = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag", "Largest lag of a follower here", labels=["clientId"]
        )
        lag.add_metric(["Replica"], c.follower_max_lag(b))
        yield lag
        yield from self._requests()
        yield from self._logs()
        if c.settings.disk_bytes is not None:  # the node exporter's view of the log directory
            free = c.settings.disk_bytes - int(c.storage.broker_bytes()[b])
            for name, value in (("size", c.settings.disk_bytes), ("avail", free)):
                family = GaugeMetricFamily(
                    f"node_filesystem_{name}_bytes", f"Log directory {name} bytes", labels=["mountpoint"]
                )
                family.add_metric([LOG_DIR], value)
                yield family

    def _requests(self) -> Iterator[Metric]:
        """Produce's stand-in time percentiles (``simulator.request_metrics``); the request channel's
        queues, empty: the model serves every request within its tick."""
        for stage, values in request_metrics.produce_ms(self.cluster, self.broker_id).items():
            family = GaugeMetricFamily(
                f"kafka_network_requestmetrics_{stage}",
                f"{stage} percentiles (stand-in)",
                labels=["request", "quantile"],
            )
            for quantile, value in zip(request_metrics.QUANTILES, values, strict=True):
                family.add_metric(["Produce", quantile], value)
            yield family
        for queue in ("request", "response"):
            yield _gauge(f"kafka_network_requestchannel_{queue}queuesize", 0, f"{queue.title()}s queued")

    def _logs(self) -> Iterator[Metric]:
        """``kafka.log:type=Log`` beans of every replica on this broker."""
        c, b, st = self.cluster, self.broker_id, self.cluster.state
        families = {
            "size": GaugeMetricFamily("kafka_log_log_size", "Bytes of the replica's log", labels=LOG_LABELS),
            "logendoffset": GaugeMetricFamily(
                "kafka_log_log_logendoffset", "Log end offset", labels=LOG_LABELS
            ),
            "logstartoffset": GaugeMetricFamily(
                "kafka_log_log_logstartoffset", "Log start offset", labels=LOG_LABELS
            ),
            "numlogsegments": GaugeMetricFamily(
                "kafka_log_log_numlogsegments", "Segments of the replica's log", labels=LOG_LABELS
            ),
        }
        stored = c.storage.stored_bytes()
        for name, topic in c.topics.items():
            rows, segments = topic.rows, c.storage.segments(topic)
            on_broker = st.broker[:, rows] == b
            slots = on_broker.argmax(axis=0)
            for i in np.flatnonzero(on_broker.any(axis=0)):
                slot, row, labels = slots[i], rows.start + i, [name, str(i)]
                families["size"].add_metric(labels, stored[slot, row])
                families["logendoffset"].add_metric(labels, st.leo[slot, row])
                families["logstartoffset"].add_metric(labels, st.log_start[row])
                families["numlogsegments"].add_metric(labels, segments[slot, i])
        yield from families.values()


# attribute name after the exporter's sanitising -> (JMX attribute, how to read it)
PRODUCER_ATTRIBUTES = {
    "buffer_total_bytes": ("buffer-total-bytes", lambda p: p.spec.buffer_memory),
    "buffer_available_bytes": ("buffer-available-bytes", lambda p: p.available_bytes),
    "waiting_threads": ("waiting-threads", lambda p: p.waiting_threads),
    "bufferpool_wait_ratio": ("bufferpool-wait-ratio", lambda p: p.wait_ratio.rate()),
    "bufferpool_wait_time_ns_total": (
        "bufferpool-wait-time-ns-total",
        lambda p: int(p.wait_s_total * 1e9),
    ),
    "record_send_rate": ("record-send-rate", lambda p: p.send_rate.rate()),
    "record_send_total": ("record-send-total", lambda p: p.sent_total),
    "record_error_rate": ("record-error-rate", lambda p: p.error_rate.rate()),
    "record_error_total": ("record-error-total", lambda p: p.error_total),
}


class ProducerCollector:
    """A producer application's JMX exporter: ``producer-metrics`` of one client id."""

    def __init__(self, producer: Producer, lock: threading.Lock):
        self.producer, self.lock = producer, lock

    def collect(self) -> Iterator[Metric]:
        families = []
        with self.lock:
            for attr, (jmx_name, read) in PRODUCER_ATTRIBUTES.items():
                family = GaugeMetricFamily(
                    f"kafka_producer_producer_metrics_{attr}",
                    f"producer-metrics {jmx_name}",
                    labels=["client_id"],
                )
                family.add_metric([self.producer.spec.client_id], read(self.producer))
                families.append(family)
        return iter(families)


class Endpoint:
    """One ``/metrics`` HTTP server on 127.0.0.1; can be stopped and started again on the same port."""

    def __init__(self, name: str, collector: object, port: int = 0):
        self.name = name
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/metrics"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        if self._server is None:
            self._server, self._thread = start_http_server(self.port, HOST, self.registry)
            self.port = self._server.server_port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = self._thread = None

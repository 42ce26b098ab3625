"""Broker and producer metrics from Prometheus JMX-exporter endpoints (Strimzi, Confluent, MSK style).

A page is parsed with prometheus_client's parser; each exporter series whose name is in the mapping table
becomes a canonical sample (``common/names.py``); everything else (JVM, other beans) is ignored. The default
table covers the common rule sets, which lower-case and join ``domain_type_name`` and add ``_total`` to
meter counts (``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` →
``kafka_server_replicamanager_underreplicatedpartitions``); pass ``mapping`` to extend or override it.
A malformed page or a failed request is an error with the reason and yields no samples for that scrape.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from collectors.source import Scrape, now_ms
from common import names
from common.contract import Batch, Sample

DEFAULT_MAPPING: dict[str, str] = {
    "kafka_server_replicamanager_underreplicatedpartitions": names.UNDER_REPLICATED_PARTITIONS,
    "kafka_server_replicamanager_underminisrpartitioncount": names.UNDER_MIN_ISR_PARTITIONS,
    "kafka_server_replicamanager_partitioncount": names.PARTITION_COUNT,
    "kafka_server_replicamanager_leadercount": names.LEADER_COUNT,
    "kafka_server_replicamanager_isrshrinks_total": names.ISR_SHRINKS,
    "kafka_server_replicamanager_isrexpands_total": names.ISR_EXPANDS,
    "kafka_controller_kafkacontroller_activecontrollercount": names.ACTIVE_CONTROLLER,
    "kafka_controller_kafkacontroller_offlinepartitionscount": names.OFFLINE_PARTITIONS,
    "kafka_controller_controllerstats_uncleanleaderelections_total": names.UNCLEAN_ELECTIONS,
    "kafka_controller_controllerstats_leaderelectionrateandtimems_count": names.LEADER_ELECTIONS,
    "kafka_server_brokertopicmetrics_messagesin_total": names.MESSAGES_IN,
    "kafka_server_brokertopicmetrics_bytesin_total": names.BYTES_IN,
    "kafka_server_brokertopicmetrics_bytesout_total": names.BYTES_OUT,
    "kafka_server_brokertopicmetrics_failedproducerequests_total": names.FAILED_PRODUCE_REQUESTS,
    "kafka_log_logmanager_offlinelogdirectorycount": names.OFFLINE_LOG_DIRS,
    "kafka_log_log_size": names.LOG_SIZE_BYTES,
    "kafka_log_log_logstartoffset": names.PARTITION_START_OFFSET,
    "kafka_log_log_logendoffset": names.PARTITION_END_OFFSET,
    "kafka_network_requestmetrics_requests_total": names.REQUESTS,
    "kafka_network_requestmetrics_errors_total": names.REQUEST_ERRORS,
    "kafka_producer_producer_metrics_buffer_available_bytes": names.PRODUCER_BUFFER_AVAILABLE_BYTES,
    "kafka_producer_producer_metrics_buffer_total_bytes": names.PRODUCER_BUFFER_TOTAL_BYTES,
    "kafka_producer_producer_metrics_bufferpool_wait_ratio": names.PRODUCER_BUFFERPOOL_WAIT_RATIO,
    "kafka_producer_producer_metrics_bufferpool_wait_time_ns_total": names.PRODUCER_BUFFERPOOL_WAIT_NS,
    "kafka_producer_producer_metrics_bufferpool_wait_time_total": names.PRODUCER_BUFFERPOOL_WAIT_NS,  # older
    "kafka_producer_producer_metrics_waiting_threads": names.PRODUCER_WAITING_THREADS,
    "kafka_producer_producer_metrics_record_send_rate": names.PRODUCER_RECORD_SEND_RATE,
    "kafka_producer_producer_metrics_record_error_rate": names.PRODUCER_RECORD_ERROR_RATE,
    "kafka_producer_producer_metrics_record_error_total": names.PRODUCER_RECORD_ERRORS,
    "kafka_producer_producer_metrics_request_latency_avg": names.PRODUCER_REQUEST_LATENCY_MS,
}

# Exporter labels kept on canonical samples, under their canonical spelling.
LABELS = {
    "topic": "topic",
    "partition": "partition",
    "request": "request",
    "error": "error",
    "client_id": "client_id",
    "clientId": "client_id",
}


def parse_exposition(text: str, mapping: Mapping[str, str], labels: Mapping[str, str]) -> list[Sample]:
    """Canonical samples of one exposition page; ``labels`` (e.g. ``broker``) win over the page's.

    Raises ValueError when the page is not valid exposition text.
    """
    samples = []
    for family in text_string_to_metric_families(text):
        for series in family.samples:
            canonical = mapping.get(series.name)
            if canonical is None:
                continue
            kept = {LABELS[k]: v for k, v in series.labels.items() if k in LABELS}
            samples.append(Sample(canonical, kept | dict(labels), series.value))
    return samples


class ExpositionSource:
    """One JMX-exporter endpoint: ``exporter/broker-<id>`` or ``producer/<client-id>``."""

    def __init__(
        self,
        cluster: str,
        name: str,
        url: str,
        labels: Mapping[str, str],
        mapping: Mapping[str, str] = DEFAULT_MAPPING,
        timeout_s: float = 5.0,
    ):
        self.cluster, self.name, self.url = cluster, name, url
        self.labels, self.mapping, self.timeout_s = dict(labels), mapping, timeout_s

    def collect(self) -> Scrape:
        ts = now_ms()
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as response:
                text = response.read().decode("utf-8")
            samples = parse_exposition(text, self.mapping, self.labels)
        except OSError as exc:
            return Scrape(Batch(self.cluster, self.name, ts), [f"fetch {self.url}: {exc}"])
        except ValueError as exc:
            return Scrape(Batch(self.cluster, self.name, ts), [f"malformed page at {self.url}: {exc}"])
        return Scrape(Batch(self.cluster, self.name, ts, tuple(samples)))

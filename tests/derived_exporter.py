"""A stand-in for the Spark jobs' exporter: serves every derived metric (``DERIVED_METRICS``) with settable
values, through the exporter's own serving (``common.serving``). Raw broker metrics come from the
simulator's JMX-exporter endpoints instead."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from common.metrics import DERIVED_METRICS
from common.serving import serve_metrics
from peers.process import HOST, free_port

SERVED = {m.name: m for m in DERIVED_METRICS}

LABEL_VALUES = {
    "cluster": "c1",
    "topic": "orders",
    "partition": "0",
    "group": "billing",
    "broker": "1",
    "client_id": "web",
    "change": "shrink",
    "query": "lag",
    "source": "jmx/broker-1",
    "bound": "max_series",
    "state": "stable",
    "host": "/127.0.0.1",
    "request": "Produce",
    "stage": "total",
    "quantile": "0.99",
    "log_dir": "/var/lib/kafka",
    "cause_broker": "",  # the series of trouble no broker explains, always there
}

# A healthy cluster: no alert rule may fire on these values.
HEALTHY: dict[str, float | Callable[[], float]] = {
    "kobs_consumergroup_critical": 1,
    "kobs_topic_replication_factor": 3,
    "kobs_broker_up": 1,
    "kobs_maintenance_grace_seconds": 600,
    "kobs_partition_replicas": 3,
    "kobs_partition_in_sync_replicas": 3,
    "kobs_partition_leader": 1,
    "kobs_partition_leader_is_preferred": 1,
    "kobs_partition_current_offset": 1200,
    "kobs_partition_oldest_offset": 200,
    "kobs_broker_leader_partitions": 4,
    "kobs_consumergroup_members": 2,
    "kobs_consumergroup_state": 1,
    "kobs_consumergroup_partition_member": 1,
    "kobs_cluster_active_controllers": 1,
    "kobs_broker_disk_runway_days": math.inf,
    "kobs_producer_time_to_block_seconds": math.inf,
    "kobs_topic_bytes_in_per_second": 1e6,
    "kobs_topic_bytes_out_per_second": 2e6,
    "kobs_topic_stored_bytes": 5e10,
    "kobs_broker_stored_bytes": 1.7e10,
    "kobs_producer_buffer_utilization_ratio": 0.1,
    "kobs_pipeline_last_batch_timestamp_seconds": time.time,
    "kobs_source_last_seen_timestamp_seconds": time.time,
    "kobs_pipeline_batch_lag_seconds": 3,
    "kobs_pipeline_batch_duration_seconds": 1.5,
    "kobs_broker_cpu_cores": 0.4,
    "kobs_broker_heap_used_bytes": 3e8,
    "kobs_broker_heap_max_bytes": 1e9,
    "kobs_broker_request_handler_idle_ratio": 0.9,
    "kobs_broker_network_processor_idle_ratio": 0.95,
    "kobs_broker_requests_per_second": 120,
    "kobs_broker_request_latency_seconds": 0.004,
    "kobs_quorum_leader": 1,
    "kobs_quorum_epoch": 4,
    "kobs_quorum_voters": 3,
    "kobs_quorum_commit_latency_seconds": 0.002,
    "kobs_log_dir_free_ratio": 0.6,
    "kobs_log_dir_free_bytes": 3e11,
    "kobs_log_dir_runway_days": 40,
    "kobs_log_dir_fill_bytes_per_second": 1e5,
}


Value = float | Callable[[], float]


class DerivedExporter:
    """One series per metric (labels from LABEL_VALUES) on 127.0.0.1; ``values`` may change at any time.

    ``series`` replaces a metric's one series by several: a list of (label overrides, value) each.
    """

    def __init__(
        self,
        values: dict[str, Value] | None = None,
        series: dict[str, list[tuple[dict[str, str], Value]]] | None = None,
    ):
        self.values = {name: 0.0 for name in SERVED} | HEALTHY | (values or {})
        self.series = series or {}
        self.port = free_port()
        self._server = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def collect(self) -> Iterator[Metric]:
        for name, metric in SERVED.items():
            family = CounterMetricFamily if metric.type == "counter" else GaugeMetricFamily
            sample = family(name, metric.help, labels=metric.labels)
            for overrides, value in self.series.get(name, [({}, self.values[name])]):
                labels = LABEL_VALUES | overrides
                sample.add_metric(
                    [labels[label] for label in metric.labels], value() if callable(value) else value
                )
            yield sample

    def __enter__(self) -> DerivedExporter:
        registry = CollectorRegistry()
        registry.register(self)
        # served as kobs stream serves its page (with its rendering times), rendered anew each second
        self._server, _thread = serve_metrics(self.address, registry, "test", version=_this_second)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _this_second() -> int:
    return int(time.time())

"""Exporter series names → canonical names (``common/names.py``): one table for exposition and JMX sources.

The default table covers the common JMX-exporter rule sets (Strimzi, Confluent, MSK's open monitoring), which
lower-case and join ``domain_type_name``, turn a meter's ``Count`` into ``..._total`` (dropping ``PerSec``),
a timer's ``Count`` into ``..._count``, and client metrics into ``kafka_producer_<type>_<attribute>``:
``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` →
``kafka_server_replicamanager_underreplicatedpartitions``. The JMX source names beans the same way before
looking them up, so one table (extended per cluster by ``exporter_names`` in the configuration) serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from common import names
from common.contract import Sample

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
    "kafka_controller_kafkacontroller_controlledshutdownbrokercount": names.CONTROLLED_SHUTDOWN_BROKERS,
    "kafka_controller_controllerstats_controlledshutdownrateandtimems_count": names.CONTROLLED_SHUTDOWNS,
    "kafka_server_brokertopicmetrics_messagesin_total": names.MESSAGES_IN,
    "kafka_server_brokertopicmetrics_bytesin_total": names.BYTES_IN,
    "kafka_server_brokertopicmetrics_bytesout_total": names.BYTES_OUT,
    "kafka_server_brokertopicmetrics_failedproducerequests_total": names.FAILED_PRODUCE_REQUESTS,
    "kafka_log_logmanager_offlinelogdirectorycount": names.OFFLINE_LOG_DIRS,
    "kafka_log_log_size": names.LOG_SIZE_BYTES,
    "kafka_log_log_logstartoffset": names.REPLICA_START_OFFSET,
    "kafka_log_log_logendoffset": names.REPLICA_END_OFFSET,
    "kafka_network_requestmetrics_requests_total": names.REQUESTS,
    "kafka_network_requestmetrics_errors_total": names.REQUEST_ERRORS,
    "kafka_network_requestmetrics_totaltimems_mean": names.REQUEST_TIME_MS,
    # request time percentiles: a histogram's NNthPercentile as label quantile="0.NN" (Strimzi's rules)
    "kafka_network_requestmetrics_totaltimems": names.REQUEST_TOTAL_MS,
    "kafka_network_requestmetrics_requestqueuetimems": names.REQUEST_QUEUE_MS,
    "kafka_network_requestmetrics_localtimems": names.REQUEST_LOCAL_MS,
    "kafka_network_requestmetrics_remotetimems": names.REQUEST_REMOTE_MS,
    "kafka_network_requestmetrics_responsequeuetimems": names.RESPONSE_QUEUE_MS,
    "kafka_network_requestmetrics_responsesendtimems": names.RESPONSE_SEND_MS,
    "kafka_network_requestchannel_requestqueuesize": names.REQUEST_QUEUE_SIZE,
    "kafka_network_requestchannel_responsequeuesize": names.RESPONSE_QUEUE_SIZE,
    "kafka_server_replicamanager_atminisrpartitioncount": names.AT_MIN_ISR_PARTITIONS,
    "kafka_server_replicafetchermanager_maxlag": names.REPLICA_MAX_LAG,
    "kafka_server_brokertopicmetrics_replicationbytesin_total": names.REPLICATION_BYTES_IN,
    "kafka_server_brokertopicmetrics_replicationbytesout_total": names.REPLICATION_BYTES_OUT,
    "kafka_log_logmanager_logdirectoryoffline": names.LOG_DIR_OFFLINE,
    "kafka_controller_kafkacontroller_fencedbrokercount": names.FENCED_BROKERS,
    "kafka_controller_kafkacontroller_activebrokercount": names.ACTIVE_BROKERS,
    # metrics-library beans (no name key): domain_type_attribute, hyphens as underscores
    "kafka_server_broker_metadata_metrics_last_applied_record_lag_ms": names.METADATA_LAG_MS,
    "kafka_server_raft_metrics_current_leader": names.RAFT_LEADER,
    "kafka_server_raft_metrics_current_epoch": names.RAFT_EPOCH,
    "kafka_server_raft_metrics_high_watermark": names.RAFT_HIGH_WATERMARK,
    "kafka_server_raft_metrics_log_end_offset": names.RAFT_LOG_END_OFFSET,
    "kafka_server_raft_metrics_commit_latency_avg": names.RAFT_COMMIT_LATENCY_AVG_MS,
    "kafka_server_raft_metrics_commit_latency_max": names.RAFT_COMMIT_LATENCY_MAX_MS,
    "kafka_server_raft_metrics_number_of_voters": names.RAFT_VOTERS,
    "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_oneminuterate": (
        names.REQUEST_HANDLER_IDLE
    ),
    "kafka_network_socketserver_networkprocessoravgidlepercent": names.NETWORK_PROCESSOR_IDLE,
    # the JMX exporter's JVM collectors (0.x names, then 1.x where they differ)
    "process_cpu_seconds_total": names.PROCESS_CPU_SECONDS,
    "jvm_memory_bytes_used": names.JVM_MEMORY_USED_BYTES,
    "jvm_memory_used_bytes": names.JVM_MEMORY_USED_BYTES,
    "jvm_memory_bytes_max": names.JVM_MEMORY_MAX_BYTES,
    "jvm_memory_max_bytes": names.JVM_MEMORY_MAX_BYTES,
    "jvm_gc_collection_seconds_sum": names.JVM_GC_SECONDS,
    "jvm_gc_collection_seconds_count": names.JVM_GC_COLLECTIONS,
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
    "version": "version",  # RequestsPerSec is per request version: keep them apart, readers sum
    "client_id": "client_id",
    "clientId": "client_id",
    "area": "area",  # JVM memory: heap or nonheap
    "gc": "gc",  # the garbage collector's name
    "quantile": "quantile",  # a histogram's percentile: "0.50", "0.99", "0.999"
    "processor": "processor",  # a network thread's own response queue (the broker's total has none)
    "logDirectory": "log_dir",
}


Series = tuple[str, Mapping[str, str], float]  # exporter series name, its labels, value


def canonical_samples(
    series: Iterable[Series], mapping: Mapping[str, str], labels: Mapping[str, str]
) -> list[Sample]:
    """Samples of the series whose name ``mapping`` knows; ``labels`` (e.g. ``broker``) win over theirs."""
    samples, fixed = [], dict(labels)
    for name, series_labels, value in series:
        canonical = mapping.get(name)
        if canonical is not None:
            kept = {LABELS[k]: v for k, v in series_labels.items() if k in LABELS}
            kept.update(fixed)
            samples.append(Sample(canonical, kept, value))
    return samples

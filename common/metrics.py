"""The derived-state exporter's metrics: the names the Spark jobs serve and the alerts and dashboards read.

One entry per metric (name, Prometheus type, labels, meaning). ``docs/metrics.md`` documents the same list
for people; a test keeps the two, the rule files and the dashboards in agreement. Raw broker metrics that
some rules read straight from JMX exporters (Strimzi-style names) are listed in ``RAW_BROKER_METRICS``, and
the collectors' own health (``kobs collect``'s self-metrics registry) in ``COLLECTOR_METRICS``, the
exporter's own serving in ``EXPORTER_METRICS``.
"""

from __future__ import annotations

from dataclasses import dataclass

# Consumer-group status codes: Burrow's StatusConstant minus one (its NOTFOUND has no series), so they keep
# Burrow's severity order and max() is the worst. Partitions are OK, WARN, STOP, STALL or REWIND
# (``kobs_consumergroup_partition_status``); a group is OK, WARN or ERR (``kobs_consumergroup_status``),
# ERR when any partition is STOP, STALL or REWIND, as Burrow caps a group's status at ERR.
GROUP_STATUS = {"OK": 0, "WARN": 1, "ERR": 2, "STOP": 3, "STALL": 4, "REWIND": 5}
# How dashboards and the app colour those statuses: WARN is a lag that keeps growing; the rest is trouble.
GROUP_STATUS_COLOURS = {
    "OK": "green", "WARN": "orange", "ERR": "red", "STOP": "red", "STALL": "red", "REWIND": "red",
}  # fmt: skip
# Why ISRs flap (``kobs_cluster_isr_flapping_cause``): nothing flaps, one broker behind most flaps, many.
FLAPPING_CAUSE = {"none": 0, "one_broker": 1, "many_brokers": 2}


@dataclass(frozen=True)
class Metric:
    name: str
    type: str  # "gauge", "counter" or "histogram"
    labels: tuple[str, ...]
    help: str


def _m(name: str, type_: str, labels: str, help_: str) -> Metric:
    return Metric(name, type_, tuple(labels.split()), help_)


DERIVED_METRICS: tuple[Metric, ...] = (
    # Consumer lag (Burrow-style evaluation over the last commits).
    _m(
        "kobs_consumergroup_lag_messages",
        "gauge",
        "cluster group topic partition",
        "Partition end offset minus the group's committed offset.",
    ),
    _m(
        "kobs_consumergroup_lag_seconds",
        "gauge",
        "cluster group topic partition",
        "Age of the first unconsumed message, interpolated over recent (time, end offset) observations.",
    ),
    _m(
        "kobs_consumergroup_partition_status",
        "gauge",
        "cluster group topic partition",
        "Burrow status of one partition of the group: 0 OK, 1 WARN, 3 STOP, 4 STALL, 5 REWIND.",
    ),
    _m(
        "kobs_consumergroup_lost_messages",
        "gauge",
        "cluster group topic partition",
        "Messages the group lost to retention: log start minus committed offset when below it, else 0.",
    ),
    _m(
        "kobs_consumergroup_committed_offset",
        "gauge",
        "cluster group topic partition",
        "The group's last committed offset on the partition (the next message it will read).",
    ),
    _m(
        "kobs_consumergroup_status",
        "gauge",
        "cluster group",
        "Burrow status of the group: 0 OK, 1 WARN, 2 ERR (a partition is STOP, STALL or REWIND).",
    ),
    _m(
        "kobs_consumergroup_critical",
        "gauge",
        "cluster group",
        "1 when the group is marked critical in the configuration (its trouble pages), else 0.",
    ),
    _m(
        "kobs_consumergroup_catchup_eta_seconds",
        "gauge",
        "cluster group",
        "Estimated time to reach zero lag at the current consume and produce rates; +Inf: never.",
    ),
    _m("kobs_consumergroup_members", "gauge", "cluster group", "Group members, as the coordinator reports."),
    _m(
        "kobs_consumergroup_partition_member",
        "gauge",
        "cluster group topic partition client_id host",
        "1 for the member a partition is assigned to (its client id and host).",
    ),
    _m(
        "kobs_consumergroup_state",
        "gauge",
        "cluster group state",
        "1 for the group's state as its coordinator reports it (stable, empty, preparingrebalance, ...).",
    ),
    # Partitions (kafka_exporter's per-partition series; docs/migrating.md).
    _m("kobs_partition_current_offset", "gauge", "cluster topic partition", "End offset (high watermark)."),
    _m("kobs_partition_oldest_offset", "gauge", "cluster topic partition", "Log start offset."),
    _m("kobs_partition_leader", "gauge", "cluster topic partition", "Leader broker id; -1 when offline."),
    _m("kobs_partition_replicas", "gauge", "cluster topic partition", "Assigned replicas."),
    _m("kobs_partition_in_sync_replicas", "gauge", "cluster topic partition", "Replicas in the ISR."),
    _m(
        "kobs_partition_under_replicated",
        "gauge",
        "cluster topic partition",
        "1 while the ISR is smaller than the replica set, else 0.",
    ),
    _m(
        "kobs_partition_leader_is_preferred",
        "gauge",
        "cluster topic partition",
        "1 while the leader is the preferred replica (the first assigned), else 0.",
    ),
    # Replication health, per topic and cause broker (the broker whose absence explains the state, "" when
    # unknown; the "" series is always there, 0 when nothing is wrong).
    _m(
        "kobs_topic_under_replicated_partitions",
        "gauge",
        "cluster topic cause_broker",
        "Partitions whose ISR is smaller than their replica set, reassignments adding replicas excepted.",
    ),
    _m(
        "kobs_topic_under_replicated_seconds",
        "gauge",
        "cluster topic cause_broker",
        "Longest time any partition of the topic has been under-replicated without interruption; 0 if none.",
    ),
    _m(
        "kobs_topic_under_min_isr_partitions",
        "gauge",
        "cluster topic cause_broker",
        "Partitions whose ISR is smaller than min.insync.replicas (acks=all producers fail).",
    ),
    _m(
        "kobs_topic_under_min_isr_seconds",
        "gauge",
        "cluster topic cause_broker",
        "Longest time any partition of the topic has been under min ISR without interruption; 0 if none.",
    ),
    _m(
        "kobs_topic_offline_partitions",
        "gauge",
        "cluster topic cause_broker",
        "Partitions without a live leader.",
    ),
    _m(
        "kobs_topic_offline_seconds",
        "gauge",
        "cluster topic cause_broker",
        "Longest time any partition of the topic has been offline without interruption; 0 if none.",
    ),
    _m(
        "kobs_topic_shrunk_to_min_isr_partitions",
        "gauge",
        "cluster topic cause_broker",
        "Under-replicated partitions whose ISR is down to min.insync.replicas: one more replica out and "
        "acks=all producers fail.",
    ),
    _m(
        "kobs_topic_shrunk_to_min_isr_seconds",
        "gauge",
        "cluster topic cause_broker",
        "Longest time any partition of the topic has been shrunk to min ISR without interruption; 0 if none.",
    ),
    _m(
        "kobs_topic_reassigning_partitions",
        "gauge",
        "cluster topic",
        "Partitions adding replicas (a reassignment or a replication factor increase) that have not all "
        "joined the ISR yet.",
    ),
    _m("kobs_topic_replication_factor", "gauge", "cluster topic", "Smallest replica count of the topic."),
    _m(
        "kobs_isr_changes_total",
        "counter",
        "cluster topic change",
        "ISR change events seen; change is shrink, expand, replace or leader_change.",
    ),
    _m(
        "kobs_isr_flapping_partitions",
        "gauge",
        "cluster broker",
        "Partitions the broker left and rejoined the ISR of at least 3 times in the last 10 minutes "
        "(analytics.flapping), until 15 minutes pass without a rejoin.",
    ),
    _m(
        "kobs_isr_flap_share_ratio",
        "gauge",
        "cluster broker",
        "The broker's share (0..1) of the cluster's ISR rejoins in the last 15 minutes; 0 if none.",
    ),
    _m(
        "kobs_cluster_isr_flapping_cause",
        "gauge",
        "cluster",
        "Why ISRs flap, as a code of FLAPPING_CAUSE: 0 none, 1 one broker behind most flaps, "
        "2 many brokers at once.",
    ),
    # Brokers and controller.
    _m(
        "kobs_broker_up", "gauge", "cluster broker", "1 while the broker is registered and reporting, else 0."
    ),
    _m(
        "kobs_broker_out_of_isr_partitions",
        "gauge",
        "cluster broker",
        "Partitions whose ISR the broker was seen leaving and has not rejoined.",
    ),
    _m(
        "kobs_broker_maintenance",
        "gauge",
        "cluster broker",
        "1 while the broker is in a planned restart (it left by controlled shutdown and is away or back "
        "but not in every ISR it left), 2 when that has lasted past alerts.maintenance_grace_s, else 0.",
    ),
    _m(
        "kobs_broker_departure_unexplained",
        "gauge",
        "cluster broker",
        "1 from the scrape that saw the broker leave until a controller reading says whether it asked to "
        "leave (at most 30 s; never where no controller is read), else 0: the pages it causes wait for it.",
    ),
    _m(
        "kobs_broker_maintenance_seconds",
        "gauge",
        "cluster broker",
        "Seconds since the broker left for its planned restart; 0 when it is in none.",
    ),
    _m(
        "kobs_maintenance_grace_seconds",
        "gauge",
        "cluster",
        "How long a planned restart may last before it pages (alerts.maintenance_grace_s).",
    ),
    _m("kobs_broker_leader_partitions", "gauge", "cluster broker", "Partitions the broker leads."),
    _m(
        "kobs_broker_leader_imbalance_ratio",
        "gauge",
        "cluster broker",
        "Of the partitions whose preferred leader is the broker, the share it does not lead (Kafka's "
        "leader.imbalance.per.broker.percentage check, 10% by default).",
    ),
    _m(
        "kobs_cluster_active_controllers",
        "gauge",
        "cluster",
        "Brokers that claim to be the active controller.",
    ),
    _m(
        "kobs_unclean_leader_elections_total",
        "counter",
        "cluster",
        "Unclean leader elections: Kafka's own count where a controller serves it, else those the ISR "
        "events prove.",
    ),
    # Broker resources and requests (1-minute rates of the broker's JVM and request meters).
    _m("kobs_broker_cpu_cores", "gauge", "cluster broker", "CPU cores the broker's process used."),
    _m("kobs_broker_heap_used_bytes", "gauge", "cluster broker", "JVM heap in use."),
    _m("kobs_broker_heap_max_bytes", "gauge", "cluster broker", "JVM heap maximum (-Xmx)."),
    _m(
        "kobs_broker_gc_time_ratio",
        "gauge",
        "cluster broker",
        "Share of time the JVM's garbage collectors ran (all collectors summed).",
    ),
    _m(
        "kobs_broker_request_handler_idle_ratio",
        "gauge",
        "cluster broker",
        "Share of time the request handler threads waited for work (1-minute average); near 0 saturated.",
    ),
    _m(
        "kobs_broker_network_processor_idle_ratio",
        "gauge",
        "cluster broker",
        "Share of time the network processor threads waited for work; near 0 saturated.",
    ),
    _m(
        "kobs_broker_requests_per_second",
        "gauge",
        "cluster broker request",
        "Requests of each type the broker received per second (all versions).",
    ),
    _m(
        "kobs_broker_request_errors_per_second",
        "gauge",
        "cluster broker request",
        "Responses of each request type with an error code other than NONE, per second.",
    ),
    _m(
        "kobs_broker_request_latency_seconds",
        "gauge",
        "cluster broker request stage quantile",
        "A percentile (quantile 0.50, 0.99, 0.999) of the time the broker took for requests of one type, "
        "in total or in one stage (request_queue, local, remote, response_queue, response_send).",
    ),
    _m(
        "kobs_broker_request_queue_size",
        "gauge",
        "cluster broker",
        "Requests received and waiting for a request handler thread.",
    ),
    _m(
        "kobs_broker_response_queue_size",
        "gauge",
        "cluster broker",
        "Responses ready and waiting for a network thread to send them.",
    ),
    *(
        _m(f"kobs_broker_{what}_per_second", "gauge", "cluster broker", meaning)
        for what, meaning in (
            ("bytes_in", "Bytes producers sent to the broker per second (all topics)."),
            ("bytes_out", "Bytes the broker sent to consumers per second (all topics)."),
            ("replication_bytes_in", "Bytes the broker fetched as a follower per second."),
            ("replication_bytes_out", "Bytes the broker served to other brokers' followers per second."),
        )
    ),
    _m(
        "kobs_broker_at_min_isr_partitions",
        "gauge",
        "cluster broker",
        "Partitions the broker leads whose ISR is exactly min.insync.replicas: one more loss fails acks=all.",
    ),
    _m(
        "kobs_broker_replica_max_lag_messages",
        "gauge",
        "cluster broker",
        "The largest lag, in messages, of the broker's followers behind their leaders.",
    ),
    _m(
        "kobs_broker_offline_log_dirs",
        "gauge",
        "cluster broker",
        "The broker's log directories that failed (an I/O error took them offline).",
    ),
    _m(
        "kobs_broker_metadata_lag_seconds",
        "gauge",
        "cluster broker",
        "Age of the newest cluster metadata record the broker applied (KRaft).",
    ),
    # Log directories' disk space (the Admin API's DescribeLogDirs).
    _m(
        "kobs_log_dir_free_bytes",
        "gauge",
        "cluster broker log_dir",
        "Bytes free for Kafka on the log directory's filesystem.",
    ),
    _m(
        "kobs_log_dir_free_ratio",
        "gauge",
        "cluster broker log_dir",
        "Share of the log directory's filesystem free for Kafka.",
    ),
    _m(
        "kobs_log_dir_fill_bytes_per_second",
        "gauge",
        "cluster broker log_dir",
        "How fast the free space shrinks, over the last day (negative while retention frees more).",
    ),
    _m(
        "kobs_log_dir_runway_days",
        "gauge",
        "cluster broker log_dir",
        "Days until the log directory's filesystem is full at its fill rate; +Inf while not filling.",
    ),
    # The KRaft controller quorum.
    _m(
        "kobs_quorum_leader",
        "gauge",
        "cluster",
        "Node id of the quorum's leader, the active controller (the last one named, kept during an "
        "election).",
    ),
    _m("kobs_quorum_epoch", "gauge", "cluster", "The quorum's epoch; every election raises it."),
    _m(
        "kobs_quorum_leaderless_seconds",
        "gauge",
        "cluster",
        "Seconds the quorum has been without a leader (no controller can change metadata); 0 with one.",
    ),
    _m("kobs_quorum_voters", "gauge", "cluster", "Voters in the quorum."),
    _m(
        "kobs_quorum_commit_latency_seconds",
        "gauge",
        "cluster",
        "The leader's average time to commit a metadata record (a majority of voters have it).",
    ),
    _m(
        "kobs_quorum_commit_latency_max_seconds",
        "gauge",
        "cluster",
        "The leader's longest time to commit a metadata record, recent window.",
    ),
    _m("kobs_cluster_fenced_brokers", "gauge", "cluster", "Registered brokers the controller has fenced."),
    # Throughput versus stored data, capacity.
    _m(
        "kobs_topic_bytes_in_per_second",
        "gauge",
        "cluster topic",
        "Bytes produced per second (1-min window).",
    ),
    _m("kobs_topic_bytes_out_per_second", "gauge", "cluster topic", "Bytes fetched by consumers per second."),
    _m("kobs_topic_stored_bytes", "gauge", "cluster topic", "Bytes stored for the topic, all replicas."),
    _m(
        "kobs_topic_bytes_in_total",
        "counter",
        "cluster topic",
        "Bytes produced to the topic since first seen: its brokers' counter increases, resets counted.",
    ),
    _m(
        "kobs_topic_bytes_out_total",
        "counter",
        "cluster topic",
        "Bytes fetched from the topic since first seen: its brokers' counter increases, resets counted.",
    ),
    _m(
        "kobs_topic_messages_in_total",
        "counter",
        "cluster topic",
        "Messages produced to the topic since first seen: its brokers' counter increases, resets counted.",
    ),
    _m(
        "kobs_broker_stored_bytes", "gauge", "cluster broker", "Bytes stored on the broker's log directories."
    ),
    _m(
        "kobs_broker_disk_runway_days",
        "gauge",
        "cluster broker",
        "Days until the broker's disks are full at the last day's growth; +Inf when not growing.",
    ),
    _m(
        "kobs_cluster_throughput_stored_correlation",
        "gauge",
        "cluster",
        "Correlation (-1..1) of produce throughput per broker with stored bytes over the last 6 hours; "
        "strongly negative means throughput falls as data grows.",
    ),
    # Producers.
    _m(
        "kobs_producer_blocked",
        "gauge",
        "cluster client_id cause_broker",
        "1 while the producer's send() blocks (buffer exhausted or waiting threads), else 0.",
    ),
    _m(
        "kobs_producer_time_to_block_seconds",
        "gauge",
        "cluster client_id cause_broker",
        "Estimated seconds until the producer's buffer is full at its current fill rate; +Inf when draining.",
    ),
    _m(
        "kobs_producer_buffer_utilization_ratio",
        "gauge",
        "cluster client_id",
        "Used share (0..1) of the producer's buffer.memory.",
    ),
    # The pipeline's own health; label query = the Spark streaming query's name.
    _m(
        "kobs_pipeline_last_batch_timestamp_seconds",
        "gauge",
        "query",
        "Wall-clock time the query's last micro-batch completed (Unix seconds).",
    ),
    _m(
        "kobs_pipeline_batch_lag_seconds",
        "gauge",
        "query",
        "When the last micro-batch completed minus the newest sample or event time processed so far.",
    ),
    _m(
        "kobs_pipeline_batch_duration_seconds",
        "gauge",
        "query",
        "Wall time the analyses' pipeline spent on the last micro-batch.",
    ),
    _m(
        "kobs_pipeline_input_records_total",
        "counter",
        "query",
        "Metrics-topic records read (dead letters included; exact across restarts).",
    ),
    _m(
        "kobs_pipeline_dead_letters_total",
        "counter",
        "query",
        "Records that failed validation (dead letters).",
    ),
    _m(
        "kobs_pipeline_query_restarts_total",
        "counter",
        "query",
        "Times the streaming query failed and kobs stream started it again from its checkpoint.",
    ),
    _m(
        "kobs_pipeline_records_lost_total",
        "counter",
        "query",
        "Metrics-topic records retention deleted before the streaming query read them (exact across "
        "restarts).",
    ),
    _m(
        "kobs_pipeline_series_dropped",
        "gauge",
        "query bound",
        "Derived series the exporter left out at the last scrape to stay within a cardinality bound "
        "(partitions_per_group or max_series).",
    ),
    _m(
        "kobs_source_last_seen_timestamp_seconds",
        "gauge",
        "cluster source",
        "Time of the newest batch of a collector source seen on the metrics topic (Unix seconds).",
    ),
)

# How ``kobs stream``'s exporter serves (common/serving.py), on the same page as the derived metrics.
EXPORTER_METRICS: tuple[Metric, ...] = (
    _m(
        "kobs_exporter_render_seconds",
        "histogram",
        "",
        "Time to render one kind of /metrics page (once per micro-batch and kind; every other scrape is "
        "served the rendering).",
    ),
)

# Broker metrics as the Prometheus JMX exporter names them with Strimzi's rules (lower-cased, counters for
# meters end in _total); the scrape config must add a ``cluster`` label to every broker target.
RAW_BROKER_METRICS: tuple[Metric, ...] = (
    _m(
        "kafka_controller_kafkacontroller_activecontrollercount",
        "gauge",
        "cluster",
        "kafka.controller:type=KafkaController,name=ActiveControllerCount (1 on the controller, else 0).",
    ),
    _m(
        "kafka_controller_controllerstats_uncleanleaderelections_total",
        "counter",
        "cluster",
        "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec, Count.",
    ),
    _m(
        "kafka_server_replicamanager_isrshrinks_total",
        "counter",
        "cluster",
        "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec, Count.",
    ),
    _m(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "gauge",
        "cluster",
        "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions (per broker).",
    ),
)

# What ``kobs collect`` serves about itself on ``sinks.self_metrics_address``; source is "<cluster>/<source>".
COLLECTOR_METRICS: tuple[Metric, ...] = (
    _m(
        "kobs_collector_scrape_duration_seconds",
        "histogram",
        "source",
        "Wall time of each scrape that returned (a timed-out scrape is observed when it finally returns).",
    ),
    _m("kobs_collector_scrape_errors_total", "counter", "source reason", "Problems per source, by reason."),
    _m("kobs_collector_queue_depth", "gauge", "", "Records waiting in the publisher's in-memory queue."),
    _m("kobs_collector_spool_bytes", "gauge", "", "Bytes held in the on-disk spool."),
    _m(
        "kobs_collector_samples_total",
        "counter",
        "outcome",
        "Samples plus events by what became of them: sent, spooled, replayed or dropped.",
    ),
    _m(
        "kobs_collector_restarts_total",
        "counter",
        "",
        "Times the collector died of a crash and kobs collect started it again.",
    ),
    # The end-to-end canary (collectors/canary.py); broker: the partition's preferred leader.
    _m("kobs_canary_messages_sent_total", "counter", "cluster partition broker", "Canary messages produced."),
    _m(
        "kobs_canary_messages_acked_total",
        "counter",
        "cluster partition broker",
        "Canary messages acknowledged by all in-sync replicas (acks=all).",
    ),
    _m(
        "kobs_canary_messages_received_total",
        "counter",
        "cluster partition broker",
        "Canary messages read back within timeout_s.",
    ),
    _m(
        "kobs_canary_messages_lost_total",
        "counter",
        "cluster partition broker",
        "Canary messages not read back within timeout_s.",
    ),
    _m(
        "kobs_canary_produce_latency_seconds",
        "histogram",
        "cluster partition broker",
        "From produce to the acknowledgement of all in-sync replicas.",
    ),
    _m(
        "kobs_canary_end_to_end_latency_seconds",
        "histogram",
        "cluster partition broker",
        "From produce to the message read back by the canary's consumer.",
    ),
    _m("kobs_canary_errors_total", "counter", "cluster reason", "Canary problems (topic setup, clients)."),
    _m(
        "kobs_canary_availability_slo_ratio",
        "gauge",
        "cluster",
        "The cluster's canary availability SLO (clusters[].canary.availability_slo).",
    ),
    _m(
        "kobs_canary_latency_slo_seconds",
        "gauge",
        "cluster",
        "The cluster's canary latency SLO (clusters[].canary.latency_slo_s).",
    ),
)

ALL_METRICS = {m.name: m for m in DERIVED_METRICS + EXPORTER_METRICS + RAW_BROKER_METRICS + COLLECTOR_METRICS}

HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def metric_of(series: str) -> str:
    """The documented metric a series name belongs to: a histogram's ``_bucket``, ``_count`` and ``_sum``
    series belong to the histogram."""
    for suffix in HISTOGRAM_SUFFIXES:
        base = series.removesuffix(suffix)
        if base != series and getattr(ALL_METRICS.get(base), "type", None) == "histogram":
            return base
    return series

"""What the dashboards show, as data: one ``DashboardSpec`` per dashboard, panels as (title, PromQL, unit).

Queries read the derived metrics of ``docs/metrics.md`` and filter on the dashboard's template variables
(``$cluster``, ``$topic``, ...); ``dashboards.build`` turns these specs into Grafana JSON with grafanalib.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.metrics import FLAPPING_CAUSE, GROUP_STATUS


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    unit: str = "short"
    legend: str = ""
    stat: bool = False  # a single-value stat instead of a time series
    mappings: dict[str, int] = field(default_factory=dict)  # value text -> code, for stat panels


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    variables: tuple[str, ...]  # label names, each a multi-value template variable
    rows: tuple[tuple[str, tuple[Panel, ...]], ...]


# Template variable -> metric whose label values populate it (filtered by the variables before it).
VARIABLE_SOURCES = {
    "cluster": "kobs_topic_stored_bytes",
    "topic": "kobs_topic_stored_bytes",
    "group": "kobs_consumergroup_status",
    "client_id": "kobs_producer_blocked",
    "query": "kobs_pipeline_batch_duration_seconds",
}


def sel(metric: str, *variables: str) -> str:
    """``metric{label=~"$label",...}`` for the given template variables (the bare name for none)."""
    return metric + ("{" + ",".join(f'{v}=~"${v}"' for v in variables) + "}" if variables else "")


def by(labels: str, func: str, metric: str, *variables: str) -> str:
    return f"{func} by ({labels}) ({sel(metric, *variables)})"


def rate(labels: str, metric: str, *variables: str) -> str:
    return f"sum by ({labels}) (rate({sel(metric, *variables)}[$__rate_interval]))"


# Partition states the jobs time per topic: metric infix, words for the panel title.
PARTITION_STATES = (
    ("under_replicated", "under-replicated"),
    ("under_min_isr", "under min ISR"),
    ("offline", "offline"),
)

# Collector sources are labelled "<cluster>/<source>": filter them on the cluster variable.
SOURCE = '{source=~"$cluster/.*"}'

C, CT, CG, CP = ("cluster",), ("cluster", "topic"), ("cluster", "group", "topic"), ("cluster", "client_id")

CLUSTER_HEALTH = DashboardSpec(
    "kobs-cluster-health",
    "Kafka cluster health",
    CT,
    (
        (
            "Now",
            (
                Panel(
                    "Active controllers",
                    by("cluster", "sum", "kobs_cluster_active_controllers", *C),
                    stat=True,
                ),
                Panel("Brokers up", by("cluster", "sum", "kobs_broker_up", *C), stat=True),
                Panel(
                    "Offline partitions",
                    by("cluster", "sum", "kobs_topic_offline_partitions", *CT),
                    stat=True,
                ),
                Panel(
                    "Under min ISR",
                    by("cluster", "sum", "kobs_topic_under_min_isr_partitions", *CT),
                    stat=True,
                ),
            ),
        ),
        (
            "Replication",
            (
                Panel(
                    "Under-replicated partitions by topic",
                    by("cluster, topic", "sum", "kobs_topic_under_replicated_partitions", *CT),
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Under-replicated partitions as brokers report them (JMX)",
                    by("cluster", "sum", "kafka_server_replicamanager_underreplicatedpartitions", *C),
                    legend="{{cluster}}",
                ),
                *(
                    Panel(
                        f"Longest time {what}",
                        by("cluster, topic", "max", f"kobs_topic_{state}_seconds", *CT),
                        unit="s",
                        legend="{{cluster}}/{{topic}}",
                    )
                    for state, what in PARTITION_STATES
                ),
                Panel(
                    "Partitions each broker is out of the ISR of",
                    by("cluster, broker", "sum", "kobs_broker_out_of_isr_partitions", *C),
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Replication factor by topic",
                    by("cluster, topic", "min", "kobs_topic_replication_factor", *CT),
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Unclean leader elections (last hour)",
                    f"sum by (cluster) (increase({sel('kobs_unclean_leader_elections_total', *C)}[1h]))",
                    legend="{{cluster}}",
                ),
            ),
        ),
        (
            "ISR changes and flapping",
            (
                Panel(
                    "ISR changes per second",
                    rate("cluster, change", "kobs_isr_changes_total", *CT),
                    unit="ops",
                    legend="{{cluster}} {{change}}",
                ),
                Panel(
                    "Flapping partitions by broker",
                    by("cluster, broker", "sum", "kobs_isr_flapping_partitions", *C),
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Why ISRs flap",
                    by("cluster", "max", "kobs_cluster_isr_flapping_cause", *C),
                    stat=True,
                    mappings=FLAPPING_CAUSE,
                ),
                Panel(
                    "Share of ISR flaps by broker",
                    by("cluster, broker", "max", "kobs_isr_flap_share_ratio", *C),
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
            ),
        ),
    ),
)

CONSUMER_LAG = DashboardSpec(
    "kobs-consumer-lag",
    "Kafka consumer lag",
    CG,
    (
        (
            "Groups",
            (
                Panel(
                    "Worst group status",
                    by("cluster", "max", "kobs_consumergroup_status", "cluster", "group"),
                    stat=True,
                    mappings=GROUP_STATUS,
                ),
                Panel(
                    "Catch-up ETA",
                    by("cluster, group", "max", "kobs_consumergroup_catchup_eta_seconds", "cluster", "group"),
                    unit="s",
                    legend="{{cluster}}/{{group}}",
                ),
            ),
        ),
        (
            "Lag",
            (
                Panel(
                    "Lag in messages by topic",
                    by("cluster, group, topic", "sum", "kobs_consumergroup_lag_messages", *CG),
                    legend="{{group}} {{topic}}",
                ),
                Panel(
                    "Lag in seconds, worst partition",
                    by("cluster, group, topic", "max", "kobs_consumergroup_lag_seconds", *CG),
                    unit="s",
                    legend="{{group}} {{topic}}",
                ),
                Panel(
                    "Partition status (0 OK, 1 WARN, 3 STOP, 4 STALL, 5 REWIND)",
                    by("cluster, group, topic, partition", "max", "kobs_consumergroup_partition_status", *CG),
                    legend="{{group}} {{topic}}-{{partition}}",
                ),
                Panel(
                    "Messages lost to retention",
                    by("cluster, group, topic", "sum", "kobs_consumergroup_lost_messages", *CG),
                    legend="{{group}} {{topic}}",
                ),
            ),
        ),
    ),
)

THROUGHPUT_STORAGE = DashboardSpec(
    "kobs-throughput-storage",
    "Kafka throughput vs stored data",
    CT,
    (
        (
            "Throughput",
            (
                Panel(
                    "Bytes in per second",
                    by("cluster, topic", "sum", "kobs_topic_bytes_in_per_second", *CT),
                    unit="Bps",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Bytes out per second",
                    by("cluster, topic", "sum", "kobs_topic_bytes_out_per_second", *CT),
                    unit="Bps",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Produce throughput per stored GiB",
                    f"{by('cluster', 'sum', 'kobs_topic_bytes_in_per_second', *CT)}"
                    f" / ({by('cluster', 'sum', 'kobs_topic_stored_bytes', *CT)} / 2^30)",
                    unit="Bps",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Throughput vs stored data correlation (6 h)",
                    by("cluster", "max", "kobs_cluster_throughput_stored_correlation", *C),
                    stat=True,
                ),
            ),
        ),
        (
            "Storage",
            (
                Panel(
                    "Stored bytes by topic",
                    by("cluster, topic", "sum", "kobs_topic_stored_bytes", *CT),
                    unit="bytes",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Stored bytes by broker",
                    by("cluster, broker", "sum", "kobs_broker_stored_bytes", *C),
                    unit="bytes",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Disk runway by broker",
                    by("cluster, broker", "min", "kobs_broker_disk_runway_days", *C),
                    unit="d",
                    legend="{{cluster}} broker {{broker}}",
                ),
            ),
        ),
    ),
)

PRODUCERS = DashboardSpec(
    "kobs-producers",
    "Kafka producers",
    CP,
    (
        (
            "Producers",
            (
                Panel("Blocked producers", by("cluster", "sum", "kobs_producer_blocked", *CP), stat=True),
                Panel(
                    "Blocked (1) by client",
                    by("cluster, client_id", "max", "kobs_producer_blocked", *CP),
                    legend="{{cluster}} {{client_id}}",
                ),
                Panel(
                    "Time until send() blocks",
                    by("cluster, client_id", "min", "kobs_producer_time_to_block_seconds", *CP),
                    unit="s",
                    legend="{{cluster}} {{client_id}}",
                ),
                Panel(
                    "Buffer used",
                    by("cluster, client_id", "max", "kobs_producer_buffer_utilization_ratio", *CP),
                    unit="percentunit",
                    legend="{{cluster}} {{client_id}}",
                ),
            ),
        ),
    ),
)

PIPELINE = DashboardSpec(
    "kobs-pipeline",
    "Kafka Observatory pipeline health",
    ("cluster", "query"),
    (
        (
            "Streaming queries",
            (
                Panel(
                    "Seconds since last batch",
                    f"time() - {by('query', 'max', 'kobs_pipeline_last_batch_timestamp_seconds', 'query')}",
                    unit="s",
                    legend="{{query}}",
                ),
                Panel(
                    "Batch lag",
                    by("query", "max", "kobs_pipeline_batch_lag_seconds", "query"),
                    unit="s",
                    legend="{{query}}",
                ),
                Panel(
                    "Batch duration",
                    by("query", "max", "kobs_pipeline_batch_duration_seconds", "query"),
                    unit="s",
                    legend="{{query}}",
                ),
                Panel(
                    "Input records per second",
                    rate("query", "kobs_pipeline_input_records_total", "query"),
                    unit="rps",
                    legend="{{query}}",
                ),
                Panel(
                    "Series left out by the cardinality bounds",
                    by("query, bound", "max", "kobs_pipeline_series_dropped", "query"),
                    legend="{{query}} {{bound}}",
                ),
                Panel(
                    "Dead letters (last 15 min)",
                    f"sum by (query) (increase({sel('kobs_pipeline_dead_letters_total', 'query')}[15m]))",
                    legend="{{query}}",
                ),
                Panel(
                    "Query restarts (last hour)",
                    f"sum by (query) (increase({sel('kobs_pipeline_query_restarts_total', 'query')}[1h]))",
                    legend="{{query}}",
                ),
            ),
        ),
        (
            "Sources and exporter",
            (
                Panel(
                    "Age of newest batch by collector source",
                    f"time() - {by('cluster, source', 'max', 'kobs_source_last_seen_timestamp_seconds', *C)}",
                    unit="s",
                    legend="{{cluster}} {{source}}",
                ),
                Panel("Exporter up", 'up{job="kobs-exporter"}', legend="{{instance}}"),
            ),
        ),
        (
            "Collectors",
            (
                Panel(
                    "Scrape duration p90 by source",
                    "histogram_quantile(0.9, sum by (source, le) "
                    f"(rate(kobs_collector_scrape_duration_seconds_bucket{SOURCE}[$__rate_interval])))",
                    unit="s",
                    legend="{{source}}",
                ),
                Panel(
                    "Scrape errors per second by source and reason",
                    "sum by (source, reason) "
                    f"(rate(kobs_collector_scrape_errors_total{SOURCE}[$__rate_interval]))",
                    unit="ops",
                    legend="{{source}} {{reason}}",
                ),
                Panel(
                    "Samples per second by outcome",
                    rate("outcome", "kobs_collector_samples_total"),
                    unit="ops",
                    legend="{{outcome}}",
                ),
                Panel(
                    "Publisher queue depth",
                    by("instance", "max", "kobs_collector_queue_depth"),
                    legend="{{instance}}",
                ),
                Panel(
                    "Spool bytes",
                    by("instance", "max", "kobs_collector_spool_bytes"),
                    unit="bytes",
                    legend="{{instance}}",
                ),
                Panel(
                    "Collector restarts after a crash (last hour)",
                    "sum by (instance) (increase(kobs_collector_restarts_total[1h]))",
                    legend="{{instance}}",
                ),
            ),
        ),
    ),
)

DASHBOARDS = (CLUSTER_HEALTH, CONSUMER_LAG, THROUGHPUT_STORAGE, PRODUCERS, PIPELINE)

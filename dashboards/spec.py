"""What the dashboards show, as data: one ``DashboardSpec`` per dashboard, its panels and its variables.

Queries read the derived metrics of ``docs/metrics.md`` and filter on the dashboard's template variables
(``$cluster``, ``$topic``, ...). A panel names the alert rules behind it: their lines colour it (thresholds
come from the rule files, ``alerts.thresholds``) and their runbooks are its links. ``dashboards.build`` turns
these specs into Grafana JSON with grafanalib.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.metrics import FLAPPING_CAUSE, GROUP_STATUS, GROUP_STATUS_COLOURS


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    description: str  # what the panel shows and what a healthy value looks like
    unit: str = "short"
    legend: str = ""
    kind: str = "timeseries"  # "stat" (the latest value), "timeline" (a state over time) or "timeseries"
    alerts: tuple[str, ...] = ()  # rules whose lines on the panel's metrics colour it; their runbooks link
    mappings: dict[str, int] = field(default_factory=dict)  # value text -> code
    colours: dict[str, str] = field(default_factory=dict)  # value text -> colour, where no rule draws a line


@dataclass(frozen=True)
class Variable:
    """A multi-value template variable: the values of label ``name`` on ``metric``, filtered by the earlier
    variables whose labels the metric carries, so choosing a cluster narrows the topics to that cluster's."""

    name: str
    metric: str


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    variables: tuple[Variable, ...]
    rows: tuple[tuple[str, tuple[Panel, ...]], ...]


def sel(metric: str, *variables: str) -> str:
    """``metric{label=~"$label",...}`` for the given template variables (the bare name for none)."""
    return metric + ("{" + ",".join(f'{v}=~"${v}"' for v in variables) + "}" if variables else "")


def by(labels: str, func: str, metric: str, *variables: str) -> str:
    return f"{func} by ({labels}) ({sel(metric, *variables)})"


def rate(labels: str, metric: str, *variables: str) -> str:
    return f"sum by ({labels}) (rate({sel(metric, *variables)}[$__rate_interval]))"


def increase(labels: str, metric: str, window: str, *variables: str) -> str:
    return f"sum by ({labels}) (increase({sel(metric, *variables)}[{window}]))"


def latency(request: str, stage: str, quantile: str) -> str:
    """The brokers' request time percentiles of the matching request types and stages, on the chosen
    clusters and brokers."""
    return (
        f'kobs_broker_request_latency_seconds{{request=~"{request}",stage=~"{stage}",'
        f'quantile="{quantile}",cluster=~"$cluster",broker=~"$broker"}}'
    )


# Partition states the jobs count and time per topic: metric infix, words for panel titles, the rule that
# reads the count (None: the rule reads the time), the rule that reads the time (None: none does).
PARTITION_STATES = (
    ("offline", "offline", "KafkaOfflinePartitions", None),
    ("under_min_isr", "under min ISR", "KafkaUnderMinIsrPartitions", None),
    ("shrunk_to_min_isr", "one replica from under min ISR", "KafkaPartitionsAtMinIsr", None),
    ("under_replicated", "under-replicated", None, "KafkaUnderReplicatedPartitions"),
)
# A broker's planned restart (kobs_broker_maintenance): its codes and colours.
MAINTENANCE = {"none": 0, "planned restart": 1, "overdue": 2}
MAINTENANCE_COLOURS = {"none": "green", "planned restart": "blue", "overdue": "red"}

# Burrow's partition statuses (ERR is a group's only): STOP, STALL and REWIND are stuck consumers.
PARTITION_STATUS_COLOURS = {s: c for s, c in GROUP_STATUS_COLOURS.items() if s != "ERR"}

# Collector sources are labelled "<cluster>/<source>": filter them on the cluster variable.
SOURCE = '{source=~"$cluster/.*"}'

C, CT, CG, CP = ("cluster",), ("cluster", "topic"), ("cluster", "group", "topic"), ("cluster", "client_id")
CB = ("cluster", "broker")

# Every watched cluster has sources, whatever it is watched through (JMX, an exporter or the Admin API only).
CLUSTERS = Variable("cluster", "kobs_source_last_seen_timestamp_seconds")
TOPICS = Variable("topic", "kobs_topic_replication_factor")  # from metadata: every topic of every cluster
BROKERS = Variable("broker", "kobs_broker_up")  # every broker the metadata lists, of the chosen clusters

# The canary's messages read back and lost per broker over KafkaCanaryUnavailable's window.
CANARY_RECEIVED = increase("cluster, broker", "kobs_canary_messages_received_total", "2m", *C)
CANARY_LOST = increase("cluster, broker", "kobs_canary_messages_lost_total", "2m", *C)


def canary_slo(metric: str) -> str:
    """A cluster's canary SLO, its last value over 10 minutes: a failed scrape of the collector (its series
    stale) blanks no panel, as it clears no page of the rules."""
    return f"max by (cluster) (last_over_time({sel(metric, *C)}[10m]))"


CANARY_P99 = (  # the end-to-end latency's, over KafkaCanaryLatencyOverSlo's rate window
    "histogram_quantile(0.99, sum by (cluster, broker, le) "
    f"(rate({sel('kobs_canary_end_to_end_latency_seconds_bucket', *C)}[5m])))"
)

CLUSTER_HEALTH = DashboardSpec(
    "kobs-cluster-health",
    "Kafka cluster health",
    (CLUSTERS, TOPICS, BROKERS),
    (
        (
            "Now",
            (
                Panel(
                    "Active controllers",
                    by("cluster", "sum", "kobs_cluster_active_controllers", *C),
                    "Brokers (or KRaft controllers) that hold the active controller role. Exactly 1 is "
                    "healthy: 0 means no leader elections or ISR updates, 2 a zombie controller.",
                    kind="stat",
                    alerts=("KafkaActiveControllerCount",),
                ),
                Panel(
                    "Brokers",
                    by("cluster", "min", "kobs_broker_up", *C),
                    "Whether every registered broker is up and reporting; the timeline below says which is "
                    "down and since when.",
                    kind="stat",
                    alerts=("KafkaBrokerDown",),
                    mappings={"a broker is down": 0, "all up": 1},
                ),
                *(
                    Panel(
                        f"Partitions {what}",
                        by("cluster", "sum", f"kobs_topic_{state}_partitions", *CT),
                        f"Partitions {what}, whatever broke them; anything above 0 pages (a planned restart "
                        "of their only replicas too: that is an outage).",
                        kind="stat",
                        alerts=(alert,),
                    )
                    for state, what, alert, _ in PARTITION_STATES
                    if alert
                ),
                Panel(
                    "Longest under-replicated",
                    by("cluster", "max", "kobs_topic_under_replicated_seconds", *CT),
                    "How long the longest under-replicated partition has been so (0 when none is); past the "
                    "line it opens a ticket unless a planned restart explains it, and it pages past "
                    "alerts.maintenance_grace_s whatever the cause.",
                    unit="s",
                    kind="stat",
                    alerts=("KafkaUnderReplicatedPartitions",),
                ),
            ),
        ),
        (
            "Brokers",
            (
                Panel(
                    "Broker up",
                    by("cluster, broker", "min", "kobs_broker_up", *CB),
                    "Each broker's state over time: down is a broker that left the cluster's metadata or "
                    "stopped reporting.",
                    legend="{{cluster}} broker {{broker}}",
                    kind="timeline",
                    alerts=("KafkaBrokerDown",),
                    mappings={"down": 0, "up": 1},
                ),
                Panel(
                    "Planned restarts",
                    by("cluster, broker", "max", "kobs_broker_maintenance", *CB),
                    "Brokers in a planned restart: they left by controlled shutdown (SIGTERM; the "
                    "controllers count them) and are away or back but not in every ISR yet. No replication "
                    "risk pages while it lasts; overdue is one that outlasted alerts.maintenance_grace_s, "
                    "which pages.",
                    legend="{{cluster}} broker {{broker}}",
                    kind="timeline",
                    mappings=MAINTENANCE,
                    colours=MAINTENANCE_COLOURS,
                ),
                Panel(
                    "Departures not yet explained",
                    by("cluster, broker", "max", "kobs_broker_departure_unexplained", *CB),
                    "A broker that has just left, until a controller reading says whether it asked to leave "
                    "(at most 30 s): the offline and under-min-ISR pages it causes wait for that word, so "
                    "as to name a planned restart.",
                    legend="{{cluster}} broker {{broker}}",
                    kind="timeline",
                    mappings={"explained": 0, "waiting for the controllers": 1},
                    colours={"explained": "green", "waiting for the controllers": "blue"},
                ),
                Panel(
                    "Planned restart, share of its grace",
                    f"{by('cluster, broker', 'max', 'kobs_broker_maintenance_seconds', *CB)} / on (cluster) "
                    f"group_left () {by('cluster', 'max', 'kobs_maintenance_grace_seconds', *C)}",
                    "How far each broker's planned restart is into alerts.maintenance_grace_s: at 100% it "
                    "pages as a broker down (or under-replicated for too long).",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Partitions each broker is out of the ISR of",
                    by("cluster, broker", "sum", "kobs_broker_out_of_isr_partitions", *CB),
                    "Partitions whose ISR lacks the broker although it is a replica: the broker whose "
                    "followers fell behind. One broker high while the others are 0 points at that broker.",
                    legend="{{cluster}} broker {{broker}}",
                ),
            ),
        ),
        (
            "Broker resources and requests",
            (
                Panel(
                    "CPU cores used",
                    by("cluster, broker", "max", "kobs_broker_cpu_cores", *CB),
                    "CPU the broker's process used, in cores (1 = one core busy all the time). A broker "
                    "near its machine's core count is CPU-bound: compression, TLS or too many small "
                    "requests.",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Heap used",
                    f"{by('cluster, broker', 'max', 'kobs_broker_heap_used_bytes', *CB)}"
                    f" / {by('cluster, broker', 'max', 'kobs_broker_heap_max_bytes', *CB)}",
                    "JVM heap in use as a share of -Xmx. It saws up and down with each collection; only a "
                    "floor that keeps rising after old-generation collections is a problem.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Time in garbage collection",
                    by("cluster, broker", "max", "kobs_broker_gc_time_ratio", *CB),
                    "Share of the last minute the JVM's collectors ran. A few percent is normal; long "
                    "pauses show as ISR shrinks and request latency at the same time.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Request handler threads idle",
                    by("cluster, broker", "min", "kobs_broker_request_handler_idle_ratio", *CB),
                    "Share of time the request handlers (num.io.threads) waited for work. Near 1 is idle; "
                    "below about 20-30% the broker is short of handler threads, disk or CPU, and requests "
                    "queue.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Network processor threads idle",
                    by("cluster, broker", "min", "kobs_broker_network_processor_idle_ratio", *CB),
                    "Share of time the network threads (num.network.threads) waited for work; low values "
                    "mean sockets wait to be read or written.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Requests per second by type",
                    by("cluster, request", "sum", "kobs_broker_requests_per_second", *C),
                    "Requests the brokers received per second, by API (Produce, Fetch, Metadata, ...), "
                    "followers' fetches included.",
                    unit="reqps",
                    legend="{{cluster}} {{request}}",
                ),
                Panel(
                    "Request errors per second by type",
                    by("cluster, request", "sum", "kobs_broker_request_errors_per_second", *C),
                    "Responses with an error code, by API: 0 while everything succeeds. NOT_LEADER_OR_"
                    "FOLLOWER bursts follow leadership moves; steady errors are clients or brokers in "
                    "trouble.",
                    unit="reqps",
                    legend="{{cluster}} {{request}}",
                ),
            ),
        ),
        (
            "Requests",
            (
                Panel(
                    "Produce time, 99th percentile, by broker",
                    f"max by (cluster, broker) ({latency('Produce', 'total', '0.99')})",
                    "How long the slowest 1% of Produce requests took on each broker, from arrival to the "
                    "response sent (Kafka's histogram, weighted to the last 5 minutes). With acks=all it "
                    "includes waiting for the followers. The dashed line is the least a broker must reach "
                    "for a ticket, which also needs 3 times its own 7-day median.",
                    unit="s",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaProduceLatencyAboveBaseline",),
                ),
                Panel(
                    "Where Produce time goes (99th percentile by stage)",
                    f"max by (cluster, stage) ({latency('Produce', '.+', '0.99')})",
                    "The 99th percentile of each stage of a Produce request, worst broker: request_queue "
                    "(waiting for a handler thread), local (the leader's disk), remote (waiting for the "
                    "followers, acks=all), response_queue (waiting for a network thread), response_send "
                    "(the network or a slow client); total for reference.",
                    unit="s",
                    legend="{{cluster}} {{stage}}",
                ),
                Panel(
                    "Time by API, 99th percentile",
                    f"max by (cluster, request) ({latency('.+', 'total', '0.99')})",
                    "The 99th percentile of the total time of each request type, worst broker. "
                    "FetchConsumer waits up to fetch.max.wait.ms (500 ms) for data when a consumer is "
                    "caught up: long there is normal; FetchFollower waits up to replica.fetch.wait.max.ms.",
                    unit="s",
                    legend="{{cluster}} {{request}}",
                ),
                Panel(
                    "Request queue by broker",
                    by("cluster, broker", "max", "kobs_broker_request_queue_size", *CB),
                    "Requests waiting for a request handler thread (queued.max.requests bounds it, 500 by "
                    "default). Near 0 is healthy; a standing queue means the handlers cannot keep up.",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Response queue by broker",
                    by("cluster, broker", "max", "kobs_broker_response_queue_size", *CB),
                    "Responses waiting for a network thread to send them. Near 0 is healthy.",
                    legend="{{cluster}} broker {{broker}}",
                ),
            ),
        ),
        (
            "Controller and quorum",
            (
                Panel(
                    "Active controller (quorum leader)",
                    by("cluster", "max", "kobs_quorum_leader", *C),
                    "Node id of the KRaft quorum's leader, the active controller: the last one named, kept "
                    "during an election. Each step is a move.",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Active controller moves (10 minutes)",
                    f"max by (cluster) (changes({sel('kobs_quorum_leader', *C)}[10m]))",
                    "How many times the active controller moved in the last 10 minutes: 0 is healthy, a "
                    "move now and then is a restart or a failover; more than 3 opens a ticket.",
                    legend="{{cluster}}",
                    alerts=("KafkaControllerMovingOften",),
                ),
                Panel(
                    "Time without a quorum leader",
                    by("cluster", "max", "kobs_quorum_leaderless_seconds", *C),
                    "Seconds since the controllers last named a leader: 0 is healthy, an election takes "
                    "seconds. While it lasts no metadata changes (no leader elections for failed brokers).",
                    unit="s",
                    legend="{{cluster}}",
                    alerts=("KafkaQuorumLeaderless",),
                ),
                Panel(
                    "Quorum epoch",
                    by("cluster", "max", "kobs_quorum_epoch", *C),
                    "The quorum's epoch: every election raises it, so its steps count elections, failed "
                    "ones included.",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Metadata commit latency",
                    by("cluster", "max", "kobs_quorum_commit_latency_seconds", *C),
                    "The leader's average time to commit a metadata record to a majority of the voters. "
                    "Milliseconds are healthy; growth points at a voter's slow disk or network.",
                    unit="s",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Longest metadata commit",
                    by("cluster", "max", "kobs_quorum_commit_latency_max_seconds", *C),
                    "The leader's longest commit of a metadata record in its recent window: spikes show "
                    "a voter that paused (GC) or a disk that stalled.",
                    unit="s",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Quorum voters",
                    by("cluster", "max", "kobs_quorum_voters", *C),
                    "Voters in the KRaft quorum: a majority of them must be up for it to have a leader (2 of "
                    "3, 3 of 5).",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Fenced brokers",
                    by("cluster", "max", "kobs_cluster_fenced_brokers", *C),
                    "Registered brokers the controller fenced: silent past broker.session.timeout.ms, or "
                    "starting and not yet caught up with the metadata. 0 is healthy.",
                    legend="{{cluster}}",
                ),
                Panel(
                    "Metadata age by broker",
                    by("cluster, broker", "max", "kobs_broker_metadata_lag_seconds", *CB),
                    "Age of the newest metadata record each broker applied. The quorum writes one at least "
                    "every 500 ms, so under a second is healthy; a growing age is a broker behind.",
                    unit="s",
                    legend="{{cluster}} broker {{broker}}",
                ),
            ),
        ),
        (
            "Disk and network",
            (
                Panel(
                    "Offline log directories",
                    by("cluster", "max", "kobs_broker_offline_log_dirs", *C),
                    "Log directories a broker took offline after an I/O error (the worst broker). 0 is "
                    "healthy; anything else pages.",
                    kind="stat",
                    alerts=("KafkaOfflineLogDirectory",),
                ),
                Panel(
                    "Disk free by broker (fullest log dir)",
                    by("cluster, broker", "min", "kobs_log_dir_free_ratio", *CB),
                    "The free share of each broker's fullest log directory filesystem (the brokers' own "
                    "answer to DescribeLogDirs). Under 25% opens a ticket, under 10% pages.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaDiskSpaceLow", "KafkaDiskSpaceCritical"),
                ),
                Panel(
                    "Disk free bytes by log dir",
                    by("cluster, broker, log_dir", "min", "kobs_log_dir_free_bytes", *CB),
                    "Bytes free on each log directory's filesystem.",
                    unit="bytes",
                    legend="{{cluster}} broker {{broker}} {{log_dir}}",
                ),
                Panel(
                    "Disk runway by log dir",
                    by("cluster, broker, log_dir", "min", "kobs_log_dir_runway_days", *CB),
                    "Days until each log directory's filesystem is full at the last day's fill rate; no "
                    "line while it is not filling. Under a day pages.",
                    unit="d",
                    legend="{{cluster}} broker {{broker}} {{log_dir}}",
                    alerts=("KafkaDiskSpaceCritical",),
                ),
                Panel(
                    "Disk fill rate by log dir",
                    by("cluster, broker, log_dir", "max", "kobs_log_dir_fill_bytes_per_second", *CB),
                    "How fast each log directory's free space shrinks over the last day; below 0 while "
                    "retention frees more than producers write.",
                    unit="Bps",
                    legend="{{cluster}} broker {{broker}} {{log_dir}}",
                ),
                *(
                    Panel(
                        title,
                        by("cluster, broker", "max", f"kobs_broker_{what}_per_second", *CB),
                        meaning,
                        unit="Bps",
                        legend="{{cluster}} broker {{broker}}",
                    )
                    for what, title, meaning in (
                        ("bytes_in", "Bytes in from producers", "Bytes producers sent to each broker."),
                        ("bytes_out", "Bytes out to consumers", "Bytes each broker sent to consumers."),
                        (
                            "replication_bytes_in",
                            "Replication bytes in",
                            "Bytes each broker fetched as a follower: its share of keeping replicas in sync.",
                        ),
                        (
                            "replication_bytes_out",
                            "Replication bytes out",
                            "Bytes each broker served to other brokers' followers, on top of its consumers.",
                        ),
                    )
                ),
                Panel(
                    "Partitions at min ISR by broker",
                    by("cluster, broker", "max", "kobs_broker_at_min_isr_partitions", *CB),
                    "Partitions each broker leads whose ISR is exactly min.insync.replicas: one more "
                    "replica lost and acks=all producers fail.",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Followers' largest lag by broker",
                    by("cluster, broker", "max", "kobs_broker_replica_max_lag_messages", *CB),
                    "The most messages any of each broker's followers is behind its leader. It rises with "
                    "bursts and falls back; a steady climb is a follower that cannot keep up.",
                    legend="{{cluster}} broker {{broker}}",
                ),
            ),
        ),
        (
            "Replication",
            (
                Panel(
                    "Under-replicated partitions by topic",
                    by("cluster, topic", "sum", "kobs_topic_under_replicated_partitions", *CT),
                    "Partitions with fewer in-sync replicas than replicas, from the cluster's metadata. "
                    "0 is healthy; a short blip during a restart is normal.",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Partitions under min ISR by topic",
                    by("cluster, topic", "sum", "kobs_topic_under_min_isr_partitions", *CT),
                    "Partitions with fewer in-sync replicas than the topic's min.insync.replicas: producers "
                    "with acks=all get NOT_ENOUGH_REPLICAS for them.",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Under-replicated partitions as brokers report them (JMX)",
                    by("cluster", "sum", "kafka_server_replicamanager_underreplicatedpartitions", *C),
                    "The brokers' own UnderReplicatedPartitions gauge summed per cluster: it should agree "
                    "with the metadata view above.",
                    legend="{{cluster}}",
                ),
                *(
                    Panel(
                        f"Longest time {what}",
                        by("cluster, topic", "max", f"kobs_topic_{state}_seconds", *CT),
                        f"Per topic, how long its longest {what} partition has been so"
                        + ("; the dashed line is where it opens a ticket." if alert else "."),
                        unit="s",
                        legend="{{cluster}}/{{topic}}",
                        alerts=(alert,) if alert else (),
                    )
                    for state, what, _, alert in PARTITION_STATES
                ),
                Panel(
                    "Partitions being reassigned, by topic",
                    by("cluster, topic", "sum", "kobs_topic_reassigning_partitions", *CT),
                    "Partitions adding replicas (kafka-reassign-partitions, a replication factor increase) "
                    "that have not all joined the ISR: not under-replicated, and no page, while they catch "
                    "up.",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Replication factor by topic",
                    by("cluster, topic", "min", "kobs_topic_replication_factor", *CT),
                    "The smallest replica count of the topic's partitions. A live topic at 1 loses "
                    "partitions with any one broker.",
                    legend="{{cluster}}/{{topic}}",
                    alerts=("KafkaReplicationFactorOneWithTraffic",),
                ),
                Panel(
                    "Unclean leader elections (last hour)",
                    f"sum by (cluster) (increase({sel('kobs_unclean_leader_elections_total', *C)}[1h]))",
                    "Leaders elected from out-of-sync replicas: each may have lost acknowledged writes. "
                    "Anything above 0 pages.",
                    legend="{{cluster}}",
                    alerts=("KafkaUncleanLeaderElection",),
                ),
            ),
        ),
        (
            "Partitions and leadership",
            (
                Panel(
                    "Leaders per broker",
                    by("cluster, broker", "sum", "kobs_broker_leader_partitions", *CB),
                    "Partitions each broker leads. Leaders carry the produce and fetch traffic, so a broker "
                    "with many more than the others is the busy one.",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Leader imbalance by broker",
                    by("cluster, broker", "max", "kobs_broker_leader_imbalance_ratio", *CB),
                    "Of the partitions whose preferred leader is the broker, the share led elsewhere. "
                    "Kafka's controller moves leaders back when this passes "
                    "leader.imbalance.per.broker.percentage (10%) and auto.leader.rebalance.enable is on; "
                    "high after a restart until it does.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Partitions not led by their preferred replica, by topic",
                    f"sum by (cluster, topic) (1 - {sel('kobs_partition_leader_is_preferred', *CT)})",
                    "Partitions whose leader is not the first assigned replica: leadership moved after a "
                    "broker restart or failure. 0 once a preferred leader election has run.",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Replicas out of sync, by topic",
                    f"sum by (cluster, topic) ({sel('kobs_partition_replicas', *CT)} - "
                    f"{sel('kobs_partition_in_sync_replicas', *CT)})",
                    "Assigned replicas missing from their partition's ISR, summed over the topic. 0 is "
                    "healthy.",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Under-replicated, by partition",
                    by("cluster, topic, partition", "max", "kobs_partition_under_replicated", *CT),
                    "Each partition's state over time, to see which partitions of a topic are "
                    "under-replicated and since when.",
                    legend="{{cluster}}/{{topic}}-{{partition}}",
                    kind="timeline",
                    mappings={"in sync": 0, "under-replicated": 1},
                    colours={"in sync": "green", "under-replicated": "orange"},
                ),
                Panel(
                    "Leader of each partition",
                    by("cluster, topic, partition", "max", "kobs_partition_leader", *CT),
                    "The broker id leading each partition: a step is a leader change, -1 is offline.",
                    legend="{{cluster}}/{{topic}}-{{partition}}",
                ),
                Panel(
                    "Messages retained by topic",
                    f"sum by (cluster, topic) ({sel('kobs_partition_current_offset', *CT)} - "
                    f"{sel('kobs_partition_oldest_offset', *CT)})",
                    "End offset minus log start offset, summed over the topic's partitions: the messages "
                    "retention still keeps (compacted topics keep fewer than this).",
                    legend="{{cluster}}/{{topic}}",
                ),
            ),
        ),
        (
            "End-to-end canary",
            (
                Panel(
                    "Canary availability by broker",
                    f"{CANARY_RECEIVED} / ({CANARY_RECEIVED} + {CANARY_LOST})",
                    "Share of the canary's messages to the partition each broker should lead that were read "
                    "back in time, over 2 minutes: what a client of that broker sees. Under 99% pages.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaCanaryUnavailable",),
                ),
                Panel(
                    "Canary error budget used, by broker",
                    f"({CANARY_LOST} / ({CANARY_RECEIVED} + {CANARY_LOST})) / on (cluster) group_left () "
                    f"(1 - {canary_slo('kobs_canary_availability_slo_ratio')})",
                    "Messages lost over 2 minutes as a share of what the cluster's availability SLO allows "
                    "(clusters[].canary.availability_slo): over 100% pages.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaCanaryUnavailable",),
                ),
                Panel(
                    "Canary latency against its SLO, by broker",
                    f"{CANARY_P99} / on (cluster) group_left () "
                    f"{canary_slo('kobs_canary_latency_slo_seconds')}",
                    "The 99th percentile end-to-end latency as a share of the cluster's latency SLO "
                    "(clusters[].canary.latency_slo_s): over 100% for 10 minutes raises a ticket.",
                    unit="percentunit",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaCanaryLatencyOverSlo",),
                ),
                Panel(
                    "Canary end-to-end latency (99th percentile) by broker",
                    CANARY_P99,
                    "From produce (acks=all) to the message read back, per broker's partition. Over 1 s for "
                    "10 minutes raises a ticket.",
                    unit="s",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaCanaryLatencyOverSlo",),
                ),
                Panel(
                    "Canary produce latency (99th percentile) by broker",
                    "histogram_quantile(0.99, sum by (cluster, broker, le) (rate("
                    f"{sel('kobs_canary_produce_latency_seconds_bucket', *C)}[$__rate_interval])))",
                    "From produce to the acknowledgement of every in-sync replica: high here and not in the "
                    "end-to-end panel points at replication (a slow follower).",
                    unit="s",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Canary messages not acknowledged per second",
                    f"sum by (cluster, broker) (rate({sel('kobs_canary_messages_sent_total', *C)}"
                    "[$__rate_interval])) - sum by (cluster, broker) "
                    f"(rate({sel('kobs_canary_messages_acked_total', *C)}[$__rate_interval]))",
                    "Messages produced minus messages acknowledged: above 0 while a leader or its ISR cannot "
                    "take writes.",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Canary errors (last hour)",
                    increase("cluster, reason", "kobs_canary_errors_total", "1h", *C),
                    "The canary's own problems: topic (creating or checking its topic), session (a client "
                    "failed and started again), consume.",
                    legend="{{cluster}} {{reason}}",
                ),
            ),
        ),
        (
            "ISR changes and flapping",
            (
                Panel(
                    "ISR changes per second",
                    rate("cluster, change", "kobs_isr_changes_total", *CT),
                    "ISR shrinks and expands seen in the metadata. A shrink without a matching expand is a "
                    "follower that stays behind.",
                    unit="ops",
                    legend="{{cluster}} {{change}}",
                    alerts=("KafkaIsrShrinkRateAboveBaseline",),
                ),
                Panel(
                    "Flapping partitions by broker",
                    by("cluster, broker", "sum", "kobs_isr_flapping_partitions", *CB),
                    "Partitions the broker left and rejoined the ISR of at least 3 times in 10 minutes.",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaIsrFlapping",),
                ),
                Panel(
                    "Why ISRs flap",
                    by("cluster", "max", "kobs_cluster_isr_flapping_cause", *C),
                    "none; one_broker: one broker is behind most flaps (look at that broker); many_brokers: "
                    "flaps spread over brokers (network, controller or settings).",
                    kind="timeline",
                    legend="{{cluster}}",
                    mappings=FLAPPING_CAUSE,
                    colours={"none": "green", "one_broker": "orange", "many_brokers": "orange"},
                ),
                Panel(
                    "Share of ISR flaps by broker",
                    by("cluster, broker", "max", "kobs_isr_flap_share_ratio", *CB),
                    "Each broker's share of the cluster's ISR flaps in the window.",
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
    (
        Variable("cluster", "kobs_consumergroup_status"),
        Variable("group", "kobs_consumergroup_status"),
        Variable("topic", "kobs_consumergroup_lag_messages"),
    ),
    (
        (
            "Groups",
            (
                Panel(
                    "Worst group status",
                    by("cluster", "max", "kobs_consumergroup_status", "cluster", "group"),
                    "Burrow's evaluation of the worst group: OK; WARN, lag growing over the window; ERR, a "
                    "partition stopped, stalled or rewound.",
                    kind="stat",
                    alerts=("KafkaConsumerGroupUnhealthy", "KafkaConsumerGroupCritical"),
                    mappings={k: v for k, v in GROUP_STATUS.items() if k in ("OK", "WARN", "ERR")},
                ),
                Panel(
                    "Worst lag",
                    by("cluster", "max", "kobs_consumergroup_lag_seconds", *CG),
                    "Age of the oldest unconsumed message of the worst group; past the lag SLO it raises a "
                    "ticket.",
                    unit="s",
                    kind="stat",
                    alerts=("KafkaConsumerLagOverSlo",),
                ),
                Panel(
                    "Group status",
                    by("cluster, group", "max", "kobs_consumergroup_status", "cluster", "group"),
                    "Each group's status over time, to see since when it has been unhealthy.",
                    legend="{{cluster}}/{{group}}",
                    kind="timeline",
                    alerts=("KafkaConsumerGroupUnhealthy", "KafkaConsumerGroupCritical"),
                    mappings={k: v for k, v in GROUP_STATUS.items() if k in ("OK", "WARN", "ERR")},
                ),
                Panel(
                    "Members by group",
                    by("cluster, group", "max", "kobs_consumergroup_members", "cluster", "group"),
                    "Consumers in each group, as its coordinator reports. A group with lag and 0 members "
                    "has nobody consuming; a count that keeps changing is a group that keeps rebalancing.",
                    legend="{{cluster}}/{{group}}",
                ),
                Panel(
                    "Messages consumed per second by group",
                    f"sum by (cluster, group) (deriv({sel('kobs_consumergroup_committed_offset', *CG)}[5m]))",
                    "How fast each group's committed offsets move forward, summed over its partitions: its "
                    "consume rate (a negative dip is a group that reset its offsets backwards).",
                    unit="ops",
                    legend="{{cluster}}/{{group}}",
                ),
                Panel(
                    "Partitions per member",
                    "count by (cluster, group, client_id, host) "
                    f"({sel('kobs_consumergroup_partition_member', 'cluster', 'group')})",
                    "How many partitions each member of a group consumes: a member with many more than the "
                    "others is the group's bottleneck (more partitions than members spread unevenly).",
                    legend="{{group}} {{client_id}} {{host}}",
                ),
                Panel(
                    "Groups by state",
                    f"count by (cluster, state) ({sel('kobs_consumergroup_state', 'cluster', 'group')})",
                    "How many groups are in each coordinator state: Stable consumes; Empty has no members; "
                    "PreparingRebalance and CompletingRebalance are rebalancing (no partition consumed).",
                    legend="{{cluster}} {{state}}",
                ),
                Panel(
                    "Catch-up ETA",
                    by("cluster, group", "max", "kobs_consumergroup_catchup_eta_seconds", "cluster", "group"),
                    "Time for the group to consume its lag at its recent rate net of production; no "
                    "point is drawn while it never catches up (infinite).",
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
                    "End offset minus committed offset, summed over the topic's partitions.",
                    legend="{{group}} {{topic}}",
                ),
                Panel(
                    "Lag in seconds, worst partition",
                    by("cluster, group, topic", "max", "kobs_consumergroup_lag_seconds", *CG),
                    "Age of the oldest unconsumed message; the dashed line is the lag SLO.",
                    unit="s",
                    legend="{{group}} {{topic}}",
                    alerts=("KafkaConsumerLagOverSlo",),
                ),
                Panel(
                    "Partition status",
                    by("cluster, group, topic, partition", "max", "kobs_consumergroup_partition_status", *CG),
                    "Burrow's status of each partition over time: OK, WARN (lag growing), STOP (commits "
                    "stopped), STALL (commits repeat while lag grows), REWIND (offset went back).",
                    legend="{{group}} {{topic}}-{{partition}}",
                    kind="timeline",
                    mappings={k: v for k, v in GROUP_STATUS.items() if k != "ERR"},
                    colours=PARTITION_STATUS_COLOURS,
                ),
                Panel(
                    "Messages lost to retention",
                    by("cluster, group, topic", "sum", "kobs_consumergroup_lost_messages", *CG),
                    "Messages deleted by retention before the group read them: log start offset past the "
                    "committed offset. Anything above 0 is data the group never saw.",
                    legend="{{group}} {{topic}}",
                    alerts=("KafkaConsumerGroupUnhealthy",),
                ),
            ),
        ),
    ),
)

THROUGHPUT_STORAGE = DashboardSpec(
    "kobs-throughput-storage",
    "Kafka throughput vs stored data",
    (CLUSTERS, TOPICS, BROKERS),
    (
        (
            "Throughput",
            (
                Panel(
                    "Throughput vs stored data correlation (6 h)",
                    by("cluster", "max", "kobs_cluster_throughput_stored_correlation", *C),
                    "Pearson correlation of produce throughput per broker with stored bytes over 6 hours. "
                    "Kafka's throughput should not fall as it stores more; strongly negative is a ticket.",
                    kind="stat",
                    alerts=("KafkaThroughputDegradingWithStoredData",),
                ),
                Panel(
                    "Bytes in per second",
                    by("cluster, topic", "sum", "kobs_topic_bytes_in_per_second", *CT),
                    "Produced bytes per second per topic (leaders' BytesInPerSec, replication excluded).",
                    unit="Bps",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Bytes out per second",
                    by("cluster, topic", "sum", "kobs_topic_bytes_out_per_second", *CT),
                    "Bytes fetched by consumers per second per topic (replication excluded).",
                    unit="Bps",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Bytes in and out per hour, by topic",
                    f"{increase('cluster, topic', 'kobs_topic_bytes_in_total', '1h', *CT)} + "
                    f"{increase('cluster, topic', 'kobs_topic_bytes_out_total', '1h', *CT)}",
                    "Bytes produced plus bytes fetched in the last hour, from the topic counters (rate() "
                    "over any window works on them): the traffic a topic costs its brokers' network.",
                    unit="bytes",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Messages in per second",
                    rate("cluster, topic", "kobs_topic_messages_in_total", *CT),
                    "Messages produced per second per topic (leaders' MessagesInPerSec).",
                    unit="ops",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Produce throughput per stored GiB",
                    f"{by('cluster', 'sum', 'kobs_topic_bytes_in_per_second', *CT)}"
                    f" / ({by('cluster', 'sum', 'kobs_topic_stored_bytes', *CT)} / 2^30)",
                    "Produce bytes per second for each GiB the cluster stores; a steady fall while data "
                    "grows is what the correlation ticket looks for.",
                    unit="Bps",
                    legend="{{cluster}}",
                ),
            ),
        ),
        (
            "Storage",
            (
                Panel(
                    "Stored bytes by topic",
                    by("cluster, topic", "sum", "kobs_topic_stored_bytes", *CT),
                    "Bytes of all the topic's replicas on disk: a topic with 3 replicas counts each "
                    "byte 3 times, as the disks hold it.",
                    unit="bytes",
                    legend="{{cluster}}/{{topic}}",
                ),
                Panel(
                    "Stored bytes by broker",
                    by("cluster, broker", "sum", "kobs_broker_stored_bytes", *CB),
                    "Bytes of every replica each broker holds: an uneven spread is a placement to fix.",
                    unit="bytes",
                    legend="{{cluster}} broker {{broker}}",
                ),
                Panel(
                    "Disk runway by broker",
                    by("cluster, broker", "min", "kobs_broker_disk_runway_days", *CB),
                    "Days until the broker's disks fill at the last day's growth (needs the disk size in "
                    "the cluster's config; no point while the disk is not growing).",
                    unit="d",
                    legend="{{cluster}} broker {{broker}}",
                    alerts=("KafkaDiskRunwayLow",),
                ),
            ),
        ),
    ),
)

PRODUCERS = DashboardSpec(
    "kobs-producers",
    "Kafka producers",
    (Variable("cluster", "kobs_producer_blocked"), Variable("client_id", "kobs_producer_blocked")),
    (
        (
            "Producers",
            (
                Panel(
                    "Blocked producers",
                    by("cluster", "sum", "kobs_producer_blocked", *CP),
                    "Producers whose send() blocks now: buffer exhausted or threads waiting for buffer "
                    "space. Anything above 0 pages.",
                    kind="stat",
                    alerts=("KafkaProducerBlocked",),
                ),
                Panel(
                    "Soonest block",
                    by("cluster", "min", "kobs_producer_time_to_block_seconds", *CP),
                    "Time until the first producer's buffer fills at its current net fill rate (infinite "
                    "while buffers drain); under the threshold it pages.",
                    unit="s",
                    kind="stat",
                    alerts=("KafkaProducerAtRisk",),
                ),
                Panel(
                    "Blocked by client",
                    by("cluster, client_id", "max", "kobs_producer_blocked", *CP),
                    "Each producer's state over time, to see since when it blocks.",
                    legend="{{cluster}} {{client_id}}",
                    kind="timeline",
                    alerts=("KafkaProducerBlocked",),
                    mappings={"sending": 0, "blocked": 1},
                ),
                Panel(
                    "Time until send() blocks",
                    by("cluster, client_id", "min", "kobs_producer_time_to_block_seconds", *CP),
                    "Per producer; no point is drawn while its buffer drains (never blocks).",
                    unit="s",
                    legend="{{cluster}} {{client_id}}",
                    alerts=("KafkaProducerAtRisk",),
                ),
                Panel(
                    "Buffer used",
                    by("cluster, client_id", "max", "kobs_producer_buffer_utilization_ratio", *CP),
                    "Share of buffer.memory holding records not yet sent; near 100% send() soon blocks.",
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
    (CLUSTERS, Variable("query", "kobs_pipeline_batch_duration_seconds")),
    (
        (
            "Streaming queries",
            (
                Panel(
                    "Seconds since last batch",
                    f"time() - {by('query', 'max', 'kobs_pipeline_last_batch_timestamp_seconds', 'query')}",
                    "Time since the query last finished a micro-batch; every page depends on this staying "
                    "low.",
                    unit="s",
                    legend="{{query}}",
                    alerts=("KobsPipelineStalled",),
                ),
                Panel(
                    "Batch lag",
                    by("query", "max", "kobs_pipeline_batch_lag_seconds", "query"),
                    "Age of the newest record of the last batch when the batch finished: how far behind "
                    "the topic the derived state is.",
                    unit="s",
                    legend="{{query}}",
                    alerts=("KobsPipelineBehind",),
                ),
                Panel(
                    "Batch duration",
                    by("query", "max", "kobs_pipeline_batch_duration_seconds", "query"),
                    "Wall time of the last micro-batch.",
                    unit="s",
                    legend="{{query}}",
                ),
                Panel(
                    "Exporter rendering, p99",
                    "histogram_quantile(0.99, sum by (le) "
                    "(rate(kobs_exporter_render_seconds_bucket[$__rate_interval])))",
                    "Time to render one kind of /metrics page: once per micro-batch and kind, every other "
                    "scrape is served that rendering (kobs bench scrapers measures the serving).",
                    unit="s",
                ),
                Panel(
                    "Input records per second",
                    rate("query", "kobs_pipeline_input_records_total", "query"),
                    "Records read from the metrics topic per second.",
                    unit="rps",
                    legend="{{query}}",
                ),
                Panel(
                    "Series left out by the cardinality bounds",
                    by("query, bound", "max", "kobs_pipeline_series_dropped", "query"),
                    "Series the exporter did not serve: partitions_per_group by design (a group's worst "
                    "partitions are kept), max_series when the cap cuts in.",
                    legend="{{query}} {{bound}}",
                    alerts=("KobsExporterDroppingSeries",),
                ),
                Panel(
                    "Dead letters (last 15 min)",
                    f"sum by (query) (increase({sel('kobs_pipeline_dead_letters_total', 'query')}[15m]))",
                    "Records the pipeline could not read, written with their reason under the dead-letter "
                    "directory.",
                    legend="{{query}}",
                    alerts=("KobsDeadLetters",),
                ),
                Panel(
                    "Records lost to retention (last hour)",
                    f"sum by (query) (increase({sel('kobs_pipeline_records_lost_total', 'query')}[1h]))",
                    "Metrics-topic records retention deleted before the streaming query read them.",
                    legend="{{query}}",
                    alerts=("KobsRecordsLost",),
                ),
                Panel(
                    "Query restarts (last hour)",
                    f"sum by (query) (increase({sel('kobs_pipeline_query_restarts_total', 'query')}[1h]))",
                    "Times the streaming query failed and restarted from its checkpoint.",
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
                    "Time since each collector source's newest batch reached the pipeline.",
                    unit="s",
                    legend="{{cluster}} {{source}}",
                    alerts=("KobsSourceSilent",),
                ),
                Panel(
                    "Exporter up",
                    'up{job="kobs-exporter"}',
                    "Prometheus's view of the derived exporter: 1 when its scrape succeeds.",
                    legend="{{instance}}",
                    kind="timeline",
                    alerts=("KobsExporterDown",),
                    mappings={"down": 0, "up": 1},
                    colours={"down": "red", "up": "green"},  # the rule compares up itself, not an aggregate
                ),
            ),
        ),
        (
            "Collectors",
            (
                Panel(
                    "Scrape duration p90 by source",
                    "histogram_quantile(0.9, sum by (source, le) "
                    f"(rate(kobs_collector_scrape_duration_seconds_bucket{SOURCE}[$__rate_interval])))",
                    "How long scrapes take; near the source's interval they start to overlap.",
                    unit="s",
                    legend="{{source}}",
                ),
                Panel(
                    "Scrape errors per second by source and reason",
                    "sum by (source, reason) "
                    f"(rate(kobs_collector_scrape_errors_total{SOURCE}[$__rate_interval]))",
                    "Failed scrapes by reason (timeout, refused, parse, ...).",
                    unit="ops",
                    legend="{{source}} {{reason}}",
                    alerts=("KobsCollectorScrapeFailing",),
                ),
                Panel(
                    "Samples per second by outcome",
                    rate("outcome", "kobs_collector_samples_total"),
                    "Samples sent to the metrics topic, spooled to disk while it is unreachable, replayed "
                    "from the spool, or dropped (spool full).",
                    unit="ops",
                    legend="{{outcome}}",
                    alerts=("KobsCollectorDroppingSamples",),
                ),
                Panel(
                    "Publisher queue depth",
                    by("instance", "max", "kobs_collector_queue_depth"),
                    "Records waiting in the collector's memory to be published.",
                    legend="{{instance}}",
                ),
                Panel(
                    "Spool bytes",
                    by("instance", "max", "kobs_collector_spool_bytes"),
                    "Bytes spooled on disk while the metrics topic is unreachable; replayed when it is back.",
                    unit="bytes",
                    legend="{{instance}}",
                    alerts=("KobsCollectorSpoolGrowing",),
                ),
                Panel(
                    "Collector restarts after a crash (last hour)",
                    "sum by (instance) (increase(kobs_collector_restarts_total[1h]))",
                    "Times kobs collect restarted its collector after a crash.",
                    legend="{{instance}}",
                ),
            ),
        ),
    ),
)

DASHBOARDS = (CLUSTER_HEALTH, CONSUMER_LAG, THROUGHPUT_STORAGE, PRODUCERS, PIPELINE)

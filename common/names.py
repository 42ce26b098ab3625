"""Canonical metric names on the metrics topic: the vocabulary collectors write and jobs read.

Collectors map whatever a source calls a metric (a JMX bean, a JMX-exporter series) onto these names, so
the jobs never depend on how a cluster is scraped. Counters end in ``_total`` and carry the cumulative
``Count`` of a Kafka meter; rates are derived downstream. Each name's labels are given beside it here;
``docs/collectors.md`` says which source sends which.
"""

# Broker gauges and meters; label ``broker`` (broker id), plus ``topic`` where the bean has one.
UNDER_REPLICATED_PARTITIONS = "kafka_broker_under_replicated_partitions"
UNDER_MIN_ISR_PARTITIONS = "kafka_broker_under_min_isr_partitions"
PARTITION_COUNT = "kafka_broker_partitions"
LEADER_COUNT = "kafka_broker_leaders"
ISR_SHRINKS = "kafka_broker_isr_shrinks_total"
ISR_EXPANDS = "kafka_broker_isr_expands_total"
ACTIVE_CONTROLLER = "kafka_controller_active"
OFFLINE_PARTITIONS = "kafka_controller_offline_partitions"
UNCLEAN_ELECTIONS = "kafka_controller_unclean_leader_elections_total"
LEADER_ELECTIONS = "kafka_controller_leader_elections_total"
# Planned restarts, as the controllers see them. KRaft: the brokers registered as in controlled shutdown, a
# gauge every controller serves; a broker counts from its shutdown request until it registers again, so it
# stays counted while it is away. ZooKeeper mode: the controlled-shutdown requests the active controller
# handled (a timer's count).
CONTROLLED_SHUTDOWN_BROKERS = "kafka_controller_controlled_shutdown_brokers"
CONTROLLED_SHUTDOWNS = "kafka_controller_controlled_shutdowns_total"
MESSAGES_IN = "kafka_broker_messages_in_total"
BYTES_IN = "kafka_broker_bytes_in_total"
BYTES_OUT = "kafka_broker_bytes_out_total"
FAILED_PRODUCE_REQUESTS = "kafka_broker_failed_produce_requests_total"
OFFLINE_LOG_DIRS = "kafka_broker_offline_log_dirs"
REQUESTS = "kafka_request_total"  # labels: request, version (Kafka counts per request version)
REQUEST_ERRORS = "kafka_request_errors_total"  # labels: request, error
REQUEST_TIME_MS = "kafka_request_time_ms_mean"  # labels: request
# Request latency percentiles in ms, one name per stage of a request's time (RequestMetrics' ...TimeMs
# histograms, Yammer samples weighted to the last 5 minutes); labels ``request`` and ``quantile`` ("0.50",
# "0.99", "0.999"). Total = request queue + local + remote (waiting for followers or a fetch's data) +
# response queue + response send.
REQUEST_TOTAL_MS = "kafka_request_total_time_ms"
REQUEST_QUEUE_MS = "kafka_request_queue_time_ms"
REQUEST_LOCAL_MS = "kafka_request_local_time_ms"
REQUEST_REMOTE_MS = "kafka_request_remote_time_ms"
RESPONSE_QUEUE_MS = "kafka_response_queue_time_ms"
RESPONSE_SEND_MS = "kafka_response_send_time_ms"
# Requests waiting for a handler thread, responses waiting for a network thread (RequestChannel)
REQUEST_QUEUE_SIZE = "kafka_broker_request_queue_size"
RESPONSE_QUEUE_SIZE = "kafka_broker_response_queue_size"
AT_MIN_ISR_PARTITIONS = "kafka_broker_at_min_isr_partitions"  # ISR size equals min.insync.replicas
REPLICA_MAX_LAG = "kafka_broker_replica_max_lag_messages"  # the broker's followers' largest lag behind
REPLICATION_BYTES_IN = "kafka_broker_replication_bytes_in_total"  # fetched as a follower
REPLICATION_BYTES_OUT = "kafka_broker_replication_bytes_out_total"  # served to followers
LOG_DIR_OFFLINE = "kafka_log_dir_offline"  # label ``log_dir``: 1 when the directory failed (I/O error)
# A log directory's filesystem, from the Admin API (DescribeLogDirs); labels ``broker``, ``log_dir``
LOG_DIR_TOTAL_BYTES = "kafka_log_dir_total_bytes"
LOG_DIR_USABLE_BYTES = "kafka_log_dir_usable_bytes"
METADATA_LAG_MS = "kafka_broker_metadata_lag_ms"  # age of the newest metadata record the broker applied
FENCED_BROKERS = "kafka_controller_fenced_brokers"  # KRaft: registered brokers the controller fenced
ACTIVE_BROKERS = "kafka_controller_active_brokers"  # KRaft: registered, unfenced brokers
# The KRaft quorum as each node sees it (raft-metrics): the leader's node id (-1 during an election), the
# epoch, the metadata log's committed (high watermark) and last offsets, commit latency (the leader's).
RAFT_LEADER = "kafka_raft_current_leader"
RAFT_EPOCH = "kafka_raft_current_epoch"
RAFT_HIGH_WATERMARK = "kafka_raft_high_watermark"
RAFT_LOG_END_OFFSET = "kafka_raft_log_end_offset"
RAFT_COMMIT_LATENCY_AVG_MS = "kafka_raft_commit_latency_avg_ms"
RAFT_COMMIT_LATENCY_MAX_MS = "kafka_raft_commit_latency_max_ms"
RAFT_VOTERS = "kafka_raft_voters"
# Shares of time the broker's request handler threads (KafkaRequestHandlerPool, last minute) and network
# processor threads (SocketServer) spent waiting for work: 1 is idle, near 0 saturated.
REQUEST_HANDLER_IDLE = "kafka_broker_request_handler_idle_ratio"
NETWORK_PROCESSOR_IDLE = "kafka_broker_network_processor_idle_ratio"

# A JVM's own beans (``java.lang``) under the names the JMX exporter's JVM collectors use, in seconds and
# bytes; label ``broker`` on a broker's, plus ``area`` ("heap") on memory and ``gc`` (the collector) on GC.
PROCESS_CPU_SECONDS = "jvm_process_cpu_seconds_total"
JVM_MEMORY_USED_BYTES = "jvm_memory_used_bytes"
JVM_MEMORY_MAX_BYTES = "jvm_memory_max_bytes"
JVM_GC_SECONDS = "jvm_gc_collection_seconds_total"
JVM_GC_COLLECTIONS = "jvm_gc_collections_total"

# Per replica, from the broker's log beans; labels ``broker``, ``topic``, ``partition``. A replica's log end
# offset is not the partition's end offset consumers read to: a leader's runs ahead of the high watermark
# until the followers have fetched, and a follower's trails it.
LOG_SIZE_BYTES = "kafka_log_size_bytes"
REPLICA_START_OFFSET = "kafka_replica_log_start_offset"
REPLICA_END_OFFSET = "kafka_replica_log_end_offset"

# Per partition, from the Admin API (ListOffsets: earliest, and latest = the high watermark); labels
# ``topic``, ``partition``. Consumer lag is measured against these only.
PARTITION_START_OFFSET = "kafka_partition_start_offset"
PARTITION_END_OFFSET = "kafka_partition_end_offset"
PARTITION_REPLICAS = "kafka_partition_replicas"
PARTITION_ISR = "kafka_partition_in_sync_replicas"
PARTITION_LEADER = "kafka_partition_leader"  # broker id; -1 when offline
PARTITION_PREFERRED_LEADER = "kafka_partition_preferred_leader"  # broker id: the first assigned replica
TOPIC_MIN_ISR = "kafka_topic_min_insync_replicas"  # label: topic
BROKER_REGISTERED = "kafka_broker_registered"  # label: broker; 1 for each broker the metadata lists

# Consumer groups; labels ``group`` (and ``topic``, ``partition`` for offsets, ``state`` for info).
GROUP_COMMITTED_OFFSET = "kafka_consumergroup_committed_offset"
GROUP_MEMBERS = "kafka_consumergroup_members"
GROUP_INFO = "kafka_consumergroup_info"  # value 1; label ``state``
# value 1 per partition assigned to a member: ``group``, ``topic``, ``partition``, ``client_id``, ``host``
GROUP_PARTITION_MEMBER = "kafka_consumergroup_partition_member"

# Producer clients; label ``client_id``.
PRODUCER_BUFFER_AVAILABLE_BYTES = "kafka_producer_buffer_available_bytes"
PRODUCER_BUFFER_TOTAL_BYTES = "kafka_producer_buffer_total_bytes"
PRODUCER_BUFFERPOOL_WAIT_RATIO = "kafka_producer_bufferpool_wait_ratio"
PRODUCER_BUFFERPOOL_WAIT_NS = "kafka_producer_bufferpool_wait_time_ns_total"
PRODUCER_WAITING_THREADS = "kafka_producer_waiting_threads"
PRODUCER_RECORD_SEND_RATE = "kafka_producer_record_send_rate"
PRODUCER_RECORD_ERROR_RATE = "kafka_producer_record_error_rate"
PRODUCER_RECORD_ERRORS = "kafka_producer_record_errors_total"
PRODUCER_REQUEST_LATENCY_MS = "kafka_producer_request_latency_avg_ms"

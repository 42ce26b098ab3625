"""Broker resources and requests, pure: rates of the JVM and request counters and the latest gauges against
hand-computed answers (a rate is the counter's increase over the window, a drop a reset as in Prometheus)."""

from __future__ import annotations

import pytest

from collectors.jmx import Reading, jmx_series
from common import names
from spark_jobs.analysis import Observation
from spark_jobs.brokers import BrokerResourceAnalysis


def sample(name: str, t_s: float, value: float, **labels: str) -> Observation:
    return Observation(name, "prod", "jmx/broker-1", {"broker": "1", **labels}, t_s, value, None)


def metrics_of(analysis: BrokerResourceAnalysis) -> dict[tuple, float]:
    return {(m.name, *m.labels): m.value for m in analysis.evaluate().metrics}


def scrape(t_s: float, cpu_s: float, young_gc_s: float, old_gc_s: float, produce: tuple, errors: float):
    """One broker scrape: Produce counted in two versions, its NONE and one real error code."""
    return [
        sample(names.PROCESS_CPU_SECONDS, t_s, cpu_s),
        sample(names.JVM_GC_SECONDS, t_s, young_gc_s, gc="G1 Young Generation"),
        sample(names.JVM_GC_SECONDS, t_s, old_gc_s, gc="G1 Old Generation"),
        sample(names.REQUESTS, t_s, produce[0], request="Produce", version="9"),
        sample(names.REQUESTS, t_s, produce[1], request="Produce", version="11"),
        sample(names.REQUEST_ERRORS, t_s, sum(produce) - errors, request="Produce", error="NONE"),
        sample(names.REQUEST_ERRORS, t_s, errors, request="Produce", error="NOT_ENOUGH_REPLICAS"),
        sample(names.JVM_MEMORY_USED_BYTES, t_s, 300e6 + t_s, area="heap"),
        sample(names.JVM_MEMORY_MAX_BYTES, t_s, 1024e6, area="heap"),
        sample(names.REQUEST_HANDLER_IDLE, t_s, 0.9 - t_s / 1000),
        sample(names.NETWORK_PROCESSOR_IDLE, t_s, 0.8),
    ]


def test_cpu_gc_and_request_rates_by_hand_with_the_latest_gauges():
    analysis = BrokerResourceAnalysis()
    analysis.observe(scrape(0, 100.0, 2.0, 0.0, (1000, 0), 0))
    analysis.observe(scrape(30, 115.0, 2.3, 0.0, (1600, 600), 30))
    analysis.observe(scrape(60, 130.0, 2.6, 0.3, (2200, 1200), 60))
    got = metrics_of(analysis)
    b = ("prod", "1")
    assert got["kobs_broker_cpu_cores", *b] == pytest.approx(0.5)  # 30 CPU-seconds in 60 s
    assert got["kobs_broker_gc_time_ratio", *b] == pytest.approx((0.6 + 0.3) / 60)  # both collectors
    # Produce: (2200 - 1000) + (1200 - 0) requests over 60 s, both versions; 60 failed of them
    assert got["kobs_broker_requests_per_second", *b, "Produce"] == pytest.approx(40.0)
    assert got["kobs_broker_request_errors_per_second", *b, "Produce"] == pytest.approx(1.0)
    assert got["kobs_broker_heap_used_bytes", *b] == 300e6 + 60  # the latest, heap only
    assert got["kobs_broker_heap_max_bytes", *b] == 1024e6
    assert got["kobs_broker_request_handler_idle_ratio", *b] == pytest.approx(0.84)
    assert got["kobs_broker_network_processor_idle_ratio", *b] == 0.8
    (row,) = analysis.evaluate().history
    assert row["requests_per_s"] == pytest.approx(40.0) and row["at_s"] == 60


def test_a_request_type_that_only_succeeds_has_an_error_rate_of_zero():
    analysis = BrokerResourceAnalysis()
    analysis.observe(scrape(0, 0, 0, 0, (10, 0), 0))
    analysis.observe(scrape(60, 0, 0, 0, (70, 0), 0))
    assert metrics_of(analysis)["kobs_broker_request_errors_per_second", "prod", "1", "Produce"] == 0.0


def test_a_broker_restart_is_a_counter_reset_not_a_negative_rate():
    analysis = BrokerResourceAnalysis()
    analysis.observe([sample(names.PROCESS_CPU_SECONDS, 0, 500.0)])
    analysis.observe([sample(names.PROCESS_CPU_SECONDS, 30, 5.0)])  # restarted: 5 s since
    analysis.observe([sample(names.PROCESS_CPU_SECONDS, 60, 20.0)])
    assert metrics_of(analysis)["kobs_broker_cpu_cores", "prod", "1"] == pytest.approx(20 / 60)


def test_non_heap_memory_a_producers_jvm_and_a_silent_broker_are_left_out():
    analysis = BrokerResourceAnalysis(stale_s=300)
    analysis.observe(
        [
            sample(names.JVM_MEMORY_USED_BYTES, 0, 5e6, area="nonheap"),
            Observation(names.PROCESS_CPU_SECONDS, "prod", "exporter/p", {"client_id": "p"}, 0, 1.0, None),
            sample(names.JVM_MEMORY_USED_BYTES, 0, 7e6, area="heap"),
        ]
    )
    assert metrics_of(analysis) == {("kobs_broker_heap_used_bytes", "prod", "1"): 7e6}
    other = Observation(names.JVM_MEMORY_USED_BYTES, "prod", "jmx/broker-2", {"broker": "2"}, 301, 1.0, None)
    analysis.observe([other])  # broker 1 said nothing for more than 300 s: no current figures
    assert metrics_of(analysis) == {("kobs_broker_heap_used_bytes", "prod", "2"): 1.0}


def test_jvm_beans_are_named_and_scaled_as_the_jmx_exporters_jvm_collectors_serve_them():
    readings = [
        Reading("java.lang:type=OperatingSystem", "ProcessCpuTime", None, 2_500_000_000),
        Reading("java.lang:type=Memory", "HeapMemoryUsage", "used", 1000),
        Reading("java.lang:type=Memory", "HeapMemoryUsage", "max", -1),  # no -Xmx: no maximum
        Reading("java.lang:type=Memory", "HeapMemoryUsage", "committed", 2000),
        Reading("java.lang:type=GarbageCollector,name=G1 Young Generation", "CollectionTime", None, 1500),
        Reading("java.lang:type=GarbageCollector,name=G1 Young Generation", "CollectionCount", None, 7),
    ]
    assert jmx_series(readings) == [
        ("process_cpu_seconds_total", {}, 2.5),
        ("jvm_memory_bytes_used", {"area": "heap"}, 1000.0),
        ("jvm_gc_collection_seconds_sum", {"gc": "G1 Young Generation"}, 1.5),
        ("jvm_gc_collection_seconds_count", {"gc": "G1 Young Generation"}, 7.0),
    ]


def test_a_request_handler_idle_of_exactly_zero_is_a_meter_not_yet_ticked_not_a_saturated_pool():
    analysis = BrokerResourceAnalysis()
    analysis.observe([sample(names.REQUEST_HANDLER_IDLE, 0, 0.97)])
    analysis.observe([sample(names.REQUEST_HANDLER_IDLE, 30, 0.0)])  # restarted: no tick yet
    assert metrics_of(analysis)["kobs_broker_request_handler_idle_ratio", "prod", "1"] == 0.97
    analysis.observe([sample(names.REQUEST_HANDLER_IDLE, 60, 0.02)])  # a busy pool: a small fraction
    assert metrics_of(analysis)["kobs_broker_request_handler_idle_ratio", "prod", "1"] == 0.02


def test_request_time_percentiles_are_seconds_by_request_stage_and_quantile():
    analysis = BrokerResourceAnalysis()
    analysis.observe(
        [
            sample(names.REQUEST_TOTAL_MS, 0, 812.0, request="Produce", quantile="0.99"),
            sample(names.REQUEST_REMOTE_MS, 0, 790.0, request="Produce", quantile="0.99"),
            sample(names.REQUEST_QUEUE_MS, 0, 1.5, request="FetchConsumer", quantile="0.999"),
        ]
    )
    got = metrics_of(analysis)
    latency = "kobs_broker_request_latency_seconds"
    assert got == {
        (latency, "prod", "1", "FetchConsumer", "request_queue", "0.999"): 0.0015,
        (latency, "prod", "1", "Produce", "remote", "0.99"): 0.79,  # waiting for the followers
        (latency, "prod", "1", "Produce", "total", "0.99"): 0.812,
    }
    (row,) = analysis.evaluate().history
    assert row["produce_p99_seconds"] == 0.812


def test_traffic_is_the_brokers_total_and_queues_the_brokers_not_one_topics_or_one_threads():
    analysis = BrokerResourceAnalysis()
    for t_s, total, one_topic, fetched in ((0, 1000.0, 400.0, 0.0), (60, 61000.0, 30400.0, 120000.0)):
        analysis.observe(
            [
                sample(names.BYTES_IN, t_s, total),
                sample(names.BYTES_IN, t_s, one_topic, topic="orders"),
                sample(names.REPLICATION_BYTES_IN, t_s, fetched),
                sample(names.RESPONSE_QUEUE_SIZE, t_s, 3.0),
                sample(names.RESPONSE_QUEUE_SIZE, t_s, 2.0, processor="0"),
                sample(names.METADATA_LAG_MS, t_s, 250.0),
                sample(names.OFFLINE_LOG_DIRS, t_s, 1.0),
            ]
        )
    got = metrics_of(analysis)
    b = ("prod", "1")
    assert got["kobs_broker_bytes_in_per_second", *b] == pytest.approx(1000.0)  # 60,000 bytes in 60 s
    assert got["kobs_broker_replication_bytes_in_per_second", *b] == pytest.approx(2000.0)
    assert got["kobs_broker_response_queue_size", *b] == 3.0
    assert got["kobs_broker_metadata_lag_seconds", *b] == 0.25
    assert got["kobs_broker_offline_log_dirs", *b] == 1.0


def test_a_state_stored_before_latencies_were_kept_restores_and_learns_them():
    analysis = BrokerResourceAnalysis()
    analysis.observe([sample(names.PROCESS_CPU_SECONDS, 0, 1.0)])
    state = dict(analysis.__dict__)
    del state["latencies"]
    restored = BrokerResourceAnalysis.__new__(BrokerResourceAnalysis)
    restored.__setstate__(state)
    restored.observe([sample(names.REQUEST_TOTAL_MS, 30, 5.0, request="Metadata", quantile="0.50")])
    latency = ("kobs_broker_request_latency_seconds", "prod", "1", "Metadata", "total", "0.50")
    assert metrics_of(restored)[latency] == 0.005

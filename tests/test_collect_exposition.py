"""JMX-exporter endpoints over real HTTP on 127.0.0.1: canonical names, faults as errors with a reason."""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from collectors.exposition import ExpositionSource
from collectors.mapping import DEFAULT_MAPPING
from collectors.scheduler import build_jobs
from common import names
from common.config import Config
from common.contract import decode, encode
from peers.process import free_port

# What a broker behind the Strimzi rule set serves (kafka-metrics.yaml: lowercaseOutputName, meters as
# `_total` counters from `Count`, gauges from `Value`), plus the agent's JVM series: the heap's is ours, the
# non-heap one keeps its area label (the brokers analysis reads the heap only), the threads' is not ours.
BROKER_PAGE = """\
# HELP kafka_server_replicamanager_underreplicatedpartitions Attribute exposed for management
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 2.0
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount 1.0
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="orders",} 1234.0
kafka_server_brokertopicmetrics_messagesin_total 5000.0
# TYPE kafka_log_log_size gauge
kafka_log_log_size{topic="orders",partition="0",} 1.048576E7
# TYPE kafka_network_requestmetrics_errors_total counter
kafka_network_requestmetrics_errors_total{request="Produce",error="NOT_ENOUGH_REPLICAS",} 7.0
# TYPE jvm_memory_bytes_used gauge
jvm_memory_bytes_used{area="heap",} 2.5E8
jvm_memory_bytes_used{area="nonheap",} 6.0E7
# TYPE jvm_threads_current gauge
jvm_threads_current 88.0
"""

PRODUCER_PAGE = """\
# TYPE kafka_producer_producer_metrics_buffer_available_bytes gauge
kafka_producer_producer_metrics_buffer_available_bytes{client_id="checkout",} 0.0
# TYPE kafka_producer_producer_metrics_waiting_threads gauge
kafka_producer_producer_metrics_waiting_threads{client_id="checkout",} 12.0
# TYPE kafka_producer_producer_metrics_bufferpool_wait_ratio gauge
kafka_producer_producer_metrics_bufferpool_wait_ratio{client_id="checkout",} 0.85
"""

# Series a broker's page carries that are not ours, around ours: names that extend a mapped name, a
# malformed line of an unmapped series, tabs as separators, a timestamp.
NOISY_PAGE = """\
# TYPE jvm_threads_state gauge
jvm_threads_state{state="RUNNABLE",} 12.0
# TYPE kafka_log_log_size gauge
kafka_log_log_size{topic="orders",partition="0",} 100.0
kafka_log_log_size_extra{topic="orders",partition="0",} 999.0
kafka_log_log_numlogsegments{topic="orders",partition="0",} 2.0
jvm_gc_pause_seconds{gc="G1 Young" 0.5
kafka_server_replicamanager_leadercount\t7.0
kafka_server_replicamanager_partitioncount 9.0 1700000000000
"""

PAGES = {
    "/broker": BROKER_PAGE,
    "/noisy": NOISY_PAGE,
    "/producer": PRODUCER_PAGE,
    "/malformed": 'kafka_server_replicamanager_underreplicatedpartitions{broker="1" 2\n',
    "/custom": "my_urp 4\n",
}


SLOW_S = 1.0
ANSWERED_MS: list[int] = []  # when the slow page's answer began


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/drip":  # a page a byte at a time, every 0.2 s, for a minute: never stalls a read
            self.send_response(200)
            self.end_headers()
            with contextlib.suppress(ConnectionError):  # until the collector hangs up
                for byte in BROKER_PAGE.encode()[:300]:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            return
        if self.path == "/slow":  # an exporter busy with other scrapes: it answers a second later
            time.sleep(SLOW_S)
            ANSWERED_MS.append(time.time_ns() // 1_000_000)
            self.path = "/broker"
        page = PAGES.get(self.path)
        self.send_response(200 if page is not None else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write((page or "not found").encode())

    def log_message(self, *_args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _by_name(samples):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


def test_broker_page_maps_to_canonical_names(server):
    scrape = ExpositionSource("prod", "exporter/broker-1", f"{server}/broker", {"broker": "1"}).collect()
    assert scrape.errors == []
    assert scrape.batch.source == "exporter/broker-1"
    b = (("broker", "1"),)
    assert _by_name(decode(encode(scrape.batch)).samples) == {
        (names.UNDER_REPLICATED_PARTITIONS, b): 2.0,
        (names.ACTIVE_CONTROLLER, b): 1.0,
        (names.MESSAGES_IN, (*b, ("topic", "orders"))): 1234.0,
        (names.MESSAGES_IN, b): 5000.0,
        (names.LOG_SIZE_BYTES, (*b, ("partition", "0"), ("topic", "orders"))): 10485760.0,
        (names.REQUEST_ERRORS, (*b, ("error", "NOT_ENOUGH_REPLICAS"), ("request", "Produce"))): 7.0,
        (names.JVM_MEMORY_USED_BYTES, (("area", "heap"), *b)): 2.5e8,
        (names.JVM_MEMORY_USED_BYTES, (("area", "nonheap"), *b)): 6.0e7,
    }  # jvm_threads_current is not ours: left out


def test_producer_page_maps_buffer_and_waiting_threads(server):
    scrape = ExpositionSource("prod", "producer/checkout", f"{server}/producer", {}).collect()
    c = (("client_id", "checkout"),)
    assert _by_name(scrape.batch.samples) == {
        (names.PRODUCER_BUFFER_AVAILABLE_BYTES, c): 0.0,
        (names.PRODUCER_WAITING_THREADS, c): 12.0,
        (names.PRODUCER_BUFFERPOOL_WAIT_RATIO, c): 0.85,
    }


def test_malformed_page_is_an_error_with_reason_and_the_next_scrape_still_works(server):
    bad = ExpositionSource("prod", "exporter/broker-2", f"{server}/malformed", {"broker": "2"}).collect()
    assert bad.batch.samples == ()
    assert len(bad.errors) == 1 and bad.errors[0].startswith("malformed page at")
    good = ExpositionSource("prod", "exporter/broker-2", f"{server}/broker", {"broker": "2"}).collect()
    assert good.errors == [] and len(good.batch.samples) == 8


def test_only_mapped_series_are_read_so_a_malformed_unmapped_line_is_no_error(server):
    scrape = ExpositionSource("prod", "exporter/broker-6", f"{server}/noisy", {"broker": "6"}).collect()
    b = (("broker", "6"),)
    assert scrape.errors == []
    assert _by_name(scrape.batch.samples) == {
        (names.LOG_SIZE_BYTES, (*b, ("partition", "0"), ("topic", "orders"))): 100.0,
        (names.LEADER_COUNT, b): 7.0,
        (names.PARTITION_COUNT, b): 9.0,
    }


def test_http_error_and_closed_port_are_errors_not_exceptions(server):
    for url in (f"{server}/missing", f"http://127.0.0.1:{free_port()}/metrics"):
        scrape = ExpositionSource("prod", "exporter/broker-3", url, {"broker": "3"}, timeout_s=2).collect()
        assert scrape.batch.samples == ()
        assert len(scrape.errors) == 1 and scrape.errors[0].startswith(f"fetch {url}")


def test_mapping_is_overridable(server):
    mapping = DEFAULT_MAPPING | {"my_urp": names.UNDER_REPLICATED_PARTITIONS}
    scrape = ExpositionSource(
        "prod", "exporter/broker-4", f"{server}/custom", {"broker": "4"}, mapping
    ).collect()
    assert _by_name(scrape.batch.samples) == {(names.UNDER_REPLICATED_PARTITIONS, (("broker", "4"),)): 4.0}


def test_exporter_names_of_the_config_extend_the_table_for_that_cluster(server):
    """A cluster whose exporter rules call the URP gauge ``my_urp`` maps it; another cluster does not."""
    exporters = [{"broker_id": 5, "url": f"{server}/custom"}]
    config = Config.model_validate(
        {
            "clusters": [
                {
                    "name": "custom",
                    "bootstrap_servers": ["127.0.0.1:9"],
                    "exporters": exporters,
                    "exporter_names": {"my_urp": names.UNDER_REPLICATED_PARTITIONS},
                },
                {"name": "plain", "bootstrap_servers": ["127.0.0.1:9"], "exporters": exporters},
            ]
        }
    )
    scrapes = {job.cluster: job.source.collect() for job in build_jobs(config) if "exporter/" in job.label}
    assert _by_name(scrapes["custom"].batch.samples) == {
        (names.UNDER_REPLICATED_PARTITIONS, (("broker", "5"),)): 4.0
    }
    assert scrapes["plain"].errors == [] and scrapes["plain"].batch.samples == ()


def test_a_scrape_carries_the_time_its_page_answered_not_the_time_it_was_asked_for(server):
    """Rates are counters' changes over scrape times: a request that waited must not move the page's
    values back to when it was sent."""
    asked_ms = time.time_ns() // 1_000_000
    scrape = ExpositionSource("prod", "exporter/broker-1", f"{server}/slow", {"broker": "1"}).collect()
    assert scrape.errors == [] and scrape.batch.samples
    assert scrape.batch.ts_ms >= ANSWERED_MS[-1] >= asked_ms + SLOW_S * 1000


def test_an_endpoint_that_drips_costs_its_own_scrape_its_timeout_and_no_more(server):
    source = ExpositionSource("prod", "exporter/broker-9", f"{server}/drip", {"broker": "9"}, timeout_s=1.0)
    started = time.monotonic()
    scrape = source.collect()
    assert time.monotonic() - started < 30  # not the drip's 60 s: each read came well within the 1 s timeout
    assert scrape.batch.samples == ()
    assert scrape.errors == [f"fetch {server}/drip: the page did not arrive whole within 1 s"]

"""The collector's own health as Prometheus metrics, on a dedicated registry (documented in docs/metrics.md).

Scrape durations and errors are recorded by the scheduler as scrapes finish; queue depth, spool bytes and
the publisher's sample counters are read from the publisher when Prometheus scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collectors.publisher import Publisher
from common.serving import serve_metrics

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _PublisherCollector(Collector):
    def __init__(self, publisher: Publisher):
        self._publisher = publisher

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "kobs_collector_queue_depth",
            "Records waiting in the publisher's queue.",
            self._publisher.queue_depth,
        )
        yield GaugeMetricFamily(
            "kobs_collector_spool_bytes", "Bytes held in the on-disk spool.", self._publisher.spool_bytes
        )
        samples = CounterMetricFamily(
            "kobs_collector_samples", "Samples plus events by publishing outcome.", labels=["outcome"]
        )
        stats = self._publisher.stats
        for outcome in ("sent", "spooled", "replayed", "dropped"):
            samples.add_metric([outcome], getattr(stats, outcome))
        yield samples


class SelfMetrics:
    def __init__(self, publisher: Publisher, sources: list[str], restarts: int = 0):
        """``restarts``: how often the supervisor of ``kobs collect`` started the collector again."""
        self.registry = CollectorRegistry()
        Counter(
            "kobs_collector_restarts",
            "Times the collector died (a crash in a native client library) and was started again.",
            registry=self.registry,
        ).inc(restarts)
        self.duration = Histogram(
            "kobs_collector_scrape_duration_seconds",
            "Wall time of one scrape of a source.",
            ["source"],
            registry=self.registry,
            buckets=DURATION_BUCKETS,
        )
        self.errors = Counter(
            "kobs_collector_scrape_errors",
            "Scrape problems by source and reason.",
            ["source", "reason"],
            registry=self.registry,
        )
        for source in sources:  # a series per source from the start, not only once it was scraped
            self.duration.labels(source)
        self.registry.register(_PublisherCollector(publisher))

    def serve(self, address: str):
        """Serve ``/metrics`` on ``host:port``; returns the server (``shutdown()`` stops it)."""
        server, _thread = serve_metrics(address, self.registry, "sinks.self_metrics_address")
        return server

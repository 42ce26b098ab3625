"""Test helper: the streaming query over everything on the metrics topic, then the exporter's page."""

from __future__ import annotations

from exposition import scrape

from common.config import Config
from spark_jobs.pipeline import DerivedCollector
from spark_jobs.stream import exporter, pipeline, start_query


def run_available_now(spark, config: Config) -> dict[tuple[str, tuple], float]:
    jobs = pipeline(config)
    with exporter(config.sinks.exporter_address, DerivedCollector(jobs)):
        query = start_query(spark, config, jobs, available_now=True)
        query.awaitTermination(120)
        assert query.exception() is None
        return scrape(f"http://{config.sinks.exporter_address}/metrics")

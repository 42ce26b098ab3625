"""``kobs stream`` rides out an outage of every broker of the metrics topic: it keeps running and serving its
last state, and once the broker is back it reads on, with nothing lost and nothing read twice (issue 14)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml
from exposition import scrape
from stream_run import produce
from test_stream_restart import ROOT, config_for, history, scrapes

from peers.kafka import KafkaCluster
from spark_jobs.stream import QUERY, pipeline, start_query

pytestmark = [pytest.mark.peers, pytest.mark.spark]

OUTAGE_S = 60.0  # longer than librdkafka's longest reconnect backoff (10 s) and the source's timeouts
RECORDS = ("kobs_pipeline_input_records_total", (("query", QUERY),))


def _records_served(url: str) -> float | None:
    with contextlib.suppress(OSError):
        return scrape(url).get(RECORDS)
    return None


def _wait_for_records(url: str, count: int, driver: subprocess.Popen, log, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while _records_served(url) != count:
        assert driver.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{_records_served(url)} records read, not {count}"
        time.sleep(0.5)


@pytest.mark.timeout(900)
def test_a_broker_outage_stops_nothing_and_loses_and_repeats_nothing(spark, tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    batches = scrapes(6)
    # A cluster of its own, of one node: every broker of the metrics topic goes away.
    with KafkaCluster(tmp_path / "kafka", nodes=1) as cluster:
        produce(cluster.bootstrap, topic, batches[:3])
        config = config_for(tmp_path / "run", topic, cluster.bootstrap, per_batch=1)  # comparable histories
        config_file = tmp_path / "kobs.yaml"
        config_file.write_text(yaml.safe_dump(config.model_dump(mode="json")))
        url = f"http://{config.sinks.exporter_address}/metrics"
        log = tmp_path / "stream.log"
        command = [sys.executable, "-m", "kobs.cli", "stream", "--config", str(config_file)]
        with open(log, "wb") as out:
            driver = subprocess.Popen(
                command, env=os.environ | {"PYTHONPATH": str(ROOT)}, stdout=out, stderr=out
            )
        try:
            _wait_for_records(url, 3, driver, log)
            cluster.kill(1)
            time.sleep(OUTAGE_S)
            assert driver.poll() is None, log.read_text()[-3000:]
            assert _records_served(url) == 3  # still serving what it had
            cluster.restart(1)
            produce(cluster.bootstrap, topic, batches[3:])
            _wait_for_records(url, 6, driver, log)
        finally:
            driver.send_signal(signal.SIGTERM)
            assert driver.wait(timeout=60) == 0, log.read_text()[-3000:]  # SIGTERM: a clean stop, exit 0

        # The same six records read without an outage, in this process, one per batch.
        reference_config = config_for(tmp_path / "reference", topic, cluster.bootstrap, per_batch=1)
        query = start_query(spark, reference_config, pipeline(reference_config), available_now=True)
        query.awaitTermination(300)
        assert query.exception() is None
    assert history(tmp_path / "run") == history(tmp_path / "reference")
    assert len(history(tmp_path / "run")) == 6

"""A 2-minute outage of every broker of the metrics topic under a running ``kobs collect`` and ``kobs stream``
(issue 14): both keep running, the collector spools what it scrapes and replays it when the broker is back,
the stream reads on; nothing is lost and nothing arrives twice.

The metrics topic lives on a real one-node Kafka cluster of its own, killed with SIGKILL and restarted on its
ports with its data, as after a crash. The collector scrapes a simulated cluster's JMX-exporter pages
(``simulator``), which stay up through the outage: the scrapes taken meanwhile must all reach the topic.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections import Counter

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from exposition import scrape

from common.contract import decode
from peers.kafka import KafkaCluster
from peers.process import free_port
from peers.stack import KobsCommand
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario

pytestmark = pytest.mark.peers

OUTAGE_S = 120.0
INTERVAL_S = 3  # the collector's metrics interval: a scrape of each exporter page every 3 s
RECORDS = ("kobs_pipeline_input_records_total", (("query", "stream"),))
SPOOLED, REPLAYED, DROPPED = (
    ("kobs_collector_samples_total", (("outcome", outcome),))
    for outcome in ("spooled", "replayed", "dropped")
)


def _served(url: str) -> dict:
    with contextlib.suppress(OSError):
        return scrape(url)
    return {}


def _wait(what: str, until, processes: dict[str, KobsCommand], timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    while not (found := until()):
        for name, process in processes.items():
            assert process.running, f"{name} exited: {process.log_tail(40)}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.5)
    return found


def _records(bootstrap: str, topic: str) -> list:
    """The value of every record on the topic."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "outage-check", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records, deadline = [], time.monotonic() + 60
        left = sum(ends.values())
        while left and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=1):
                if message.error() is None and message.offset() < ends[message.partition()]:
                    records.append(message.value())
                    left -= 1
        assert left == 0, f"{left} records not read back"
        return records
    finally:
        consumer.close()


@pytest.mark.timeout(900)
def test_a_two_minute_outage_of_every_broker_loses_and_repeats_nothing(tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    with (
        KafkaCluster(tmp_path / "kafka", nodes=1) as kafka,
        Runtime(Simulation(load_scenario("consumer-groups"))) as simulated,
    ):
        exporters = [{"broker_id": b, "url": e.url} for b, e in simulated.brokers.items()]
        ports = {"collect": free_port(), "stream": free_port()}  # its own metrics; the derived exporter
        doc = {
            "clusters": [{"name": "sim", "exporters": exporters}],
            "metrics_topic": {"name": topic, "bootstrap_servers": [kafka.bootstrap]},
            "intervals": {"metrics_s": INTERVAL_S},
            "sinks": {
                "run_dir": str(tmp_path / "run"),
                "self_metrics_address": f"127.0.0.1:{ports['collect']}",
                "exporter_address": f"127.0.0.1:{ports['stream']}",
            },
        }
        config = tmp_path / "kobs.yaml"
        config.write_text(yaml.safe_dump(doc))
        urls = {name: f"http://127.0.0.1:{port}/metrics" for name, port in ports.items()}
        collector_url, stream_url = urls["collect"], urls["stream"]
        # Each in a process group of its own, ended by the test's lifeline if pytest dies (peers.process).
        processes = {
            name: KobsCommand(tmp_path, [name, "--config", str(config)], urls[name], port)
            for name, port in ports.items()
        }
        try:
            for process in processes.values():
                process.launch()
            read_before = _wait(
                "the stream reads", lambda: _served(stream_url).get(RECORDS, 0) >= 5, processes
            )
            kafka.kill(1)
            time.sleep(OUTAGE_S)
            for name, process in processes.items():
                assert process.running, f"{name} exited during the outage: {process.log_tail(40)}"
            during = _served(collector_url)
            assert during[SPOOLED] > 0  # the scrapes of the outage wait in the spool
            assert _served(stream_url)[RECORDS] >= read_before  # the stream still serves its last state

            kafka.restart(1)
            _wait(
                "the spool is replayed",
                lambda: (
                    (m := _served(collector_url))
                    and m[REPLAYED] == m[SPOOLED]
                    and m[("kobs_collector_spool_bytes", ())] == 0
                ),
                processes,
            )
            processes["collect"].stop(timeout_s=60)  # SIGTERM: it flushes and exits
            assert processes["collect"].returncode == 0
            records = _records(kafka.bootstrap, topic)
            _wait(
                "the stream reads every record",
                lambda: _served(stream_url).get(RECORDS) == len(records),
                {"stream": processes["stream"]},
            )
            dead_letters = _served(stream_url)[("kobs_pipeline_dead_letters_total", (("query", "stream"),))]
        finally:
            for process in processes.values():
                process.stop(timeout_s=60)
            codes = {name: process.returncode for name, process in processes.items()}
        assert codes == {"collect": 0, "stream": 0}
        # The outage failed the stream's query, a batch under way (its fetch waits Spark's 120 s poll
        # timeout) or the next one's planning (3 offset questions of 15 s): kobs says so in one line with
        # Kafka's error, and no stack of Spark's or py4j's (once ~900 lines of them).
        stream_log = processes["stream"].log_path.read_text()
        assert "ERROR spark_jobs.stream: the query failed (" in stream_log, stream_log[-3000:]
        for stack in ("Traceback", "\tat "):
            assert stack not in stream_log, stream_log[-3000:]
    # Nothing twice: no record arrived more than once (a replayed duplicate has the same bytes). Nothing lost:
    # each page was scraped every interval all through the outage, and every scrape is on the topic.
    assert max(Counter(records).values()) == 1
    scrapes = {(batch.source, batch.ts_ms) for batch in map(decode, records)}
    for source in {f"exporter/broker-{b}" for b in simulated.brokers}:
        times = sorted(ts for s, ts in scrapes if s == source)
        gaps = [(later - earlier) / 1000 for earlier, later in itertools.pairwise(times)]
        assert times and max(gaps) <= 3 * INTERVAL_S, (source, max(gaps))
        assert (times[-1] - times[0]) / 1000 > OUTAGE_S  # the scrapes span the outage
    assert dead_letters == 0

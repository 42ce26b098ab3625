"""Burrow's HTTP API served by kobs stream: Burrow's shapes and roll-ups, then a Burrow client run unchanged
against the real query, its numbers checked against Kafka's own kafka-consumer-groups."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from prometheus_client import CollectorRegistry
from stream_run import offsets_batch, produce, served_after_run

from collectors.offsets import OffsetsSource
from common.config import Cluster, Config
from common.serving import serve_metrics
from peers import kafka_tools
from peers.process import free_port
from peers.stack import create_topic
from spark_jobs.burrow import BurrowApi, respond

RECORDED = Path(__file__).parent / "data" / "burrow"
CLIENT = Path(__file__).parent / "burrow_client.py"


def row(topic: str, partition: int, status: str, lag: int, complete: float = 1.0, group: str = "g") -> dict:
    """A lag row as the lag analysis gives it: its window from offset 100 at 1 s to 100 + lag at 2 s."""
    return {
        "group": group, "topic": topic, "partition": str(partition), "status": status, "lag_messages": lag,
        "start": (100, 1000, 0), "end": (100 + lag, 2000, lag), "complete": complete,
    }  # fmt: skip


def shape(value):
    """Keys at every level with JSON types (numbers as one type: Burrow's float32 1.0 marshals as 1)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return "number" if isinstance(value, int | float) else type(value).__name__


def recorded(name: str) -> dict:
    return json.loads((RECORDED / f"{name}.json").read_text())


ROWS = {"clustername": [row("topicA", 0, "WARN", 25)]}


@pytest.mark.parametrize(
    ("path", "name", "code"),
    [
        ("/v3/kafka", "cluster-list", 200),
        ("/v3/kafka/clustername/consumer", "consumer-list", 200),
        ("/v3/kafka/clustername/consumer/g/status", "consumer-status", 200),
        ("/v3/kafka/clustername/consumer/g/lag", "consumer-status", 200),
        ("/v3/kafka/clustername/consumer/nosuchgroup/status", "consumer-not-found", 404),
        ("/v3/kafka/nosuchcluster/consumer", "cluster-not-found", 404),
    ],
)
def test_each_answer_has_burrows_shape_and_status_code(path, name, code):
    got_code, body = respond(path, ["clustername"], ROWS, "here")
    assert got_code == code
    assert shape(body) == shape(recorded(name))
    assert body["request"] == {"url": path, "host": "here"}


def test_a_groups_status_rolls_up_its_partitions_as_burrows_evaluator_does():
    rows = {"c": [row("t", 1, "WARN", 30), row("t", 0, "OK", 0), row("u", 0, "OK", 0),
                  row("t", 2, "STALL", 50, complete=0.5), row("t", 0, "OK", 7, group="other")]}  # fmt: skip
    _, status = respond("/v3/kafka/c/consumer/g/status", ["c"], rows, "here")
    _, lag = respond("/v3/kafka/c/consumer/g/lag", ["c"], rows, "here")
    group = status["status"]
    assert group["status"] == "ERR"  # a STALL partition makes the group ERR (Burrow caps STOP/STALL/REWIND)
    assert [(p["topic"], p["partition"]) for p in group["partitions"]] == [("t", 1), ("t", 2)]  # not OK only
    assert [(p["topic"], p["partition"]) for p in lag["status"]["partitions"]] == [
        ("t", 0), ("t", 1), ("t", 2), ("u", 0)
    ]  # /lag: every partition  # fmt: skip
    assert group["partition_count"] == 4 and group["totallag"] == 30 + 50
    assert (group["maxlag"]["topic"], group["maxlag"]["partition"]) == ("t", 2)
    assert group["complete"] == 3 / 4  # the share of partitions whose window is full
    assert group["maxlag"]["end"] == {"offset": 150, "timestamp": 2000, "observedAt": 2000, "lag": 50}
    _, consumers = respond("/v3/kafka/c/consumer", ["c"], rows, "here")
    assert consumers["consumers"] == ["g", "other"]


def test_other_paths_and_methods_say_what_is_not_served():
    assert respond("/v3/kafka/c/topic", ["c"], {}, "h") == (
        404, {"error": True, "message": "invalid request type", "result": {}}
    )  # fmt: skip
    assert respond("/burrow/admin", ["c"], {}, "h") == (200, "GOOD")
    answers = []
    api = BurrowApi(["c"], lambda: {})
    body = api(
        {"REQUEST_METHOD": "DELETE", "PATH_INFO": "/v3/kafka/c/consumer/g"}, lambda s, h: answers.append(s)
    )
    assert answers == ["405 Method Not Allowed"] and json.loads(b"".join(body))["error"] is True


@pytest.mark.parametrize("group", ["grün-组", "team/a", "a b%"])
def test_any_group_name_is_one_path_segment_served_as_sent(group):
    """Kafka allows any group name: escaped as clients escape a path segment (UTF-8, ``/`` as ``%2F``), it is
    read back whole through the exporter's real HTTP server, listed and its status found."""
    rows = {"c": [row("t", 0, "OK", 0, group=group)]}
    server, _ = serve_metrics(f"127.0.0.1:{free_port()}", CollectorRegistry(), "k", _mounted(rows))
    base = f"http://127.0.0.1:{server.server_port}/v3/kafka/c/consumer"
    try:
        with urllib.request.urlopen(base, timeout=10) as listing:
            assert json.loads(listing.read())["consumers"] == [group]
        with urllib.request.urlopen(f"{base}/{urllib.parse.quote(group, safe='')}/status", timeout=10) as got:
            status = json.loads(got.read())["status"]
        assert (status["group"], status["status"]) == (group, "OK")
    finally:
        server.shutdown()
        server.server_close()


def _mounted(rows) -> dict:
    api = BurrowApi(["c"], lambda: rows)
    return dict.fromkeys(api.prefixes, api)


# What a commit gets while the group's coordinator is not ready yet (right after the cluster started, the
# offsets topic's partitions still loading); Kafka's clients retry these.
COORDINATOR_NOT_READY = {
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
}  # fmt: skip


def commit_as_group(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` for ``group`` without joining it, retrying for 30 s while its coordinator is not
    ready."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
                )
                return
            except KafkaException as exc:
                if exc.args[0].code() not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def run_client(url: str) -> list[str]:
    done = subprocess.run([sys.executable, str(CLIENT), url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.peers
@pytest.mark.spark
def test_a_burrow_client_reads_the_query_unchanged_and_kafka_agrees(spark, kafka_cluster, tmp_path):
    """Two clusters through one run of the query. ``prod``: three offsets scrapes worked by hand from Burrow's
    rules. ``live``: a real group's commits on the session cluster, scraped by the offsets collector; its
    lag per partition must be what kafka-consumer-groups --describe says."""
    bootstrap = kafka_cluster.bootstrap
    topic, group = f"burrow-{uuid.uuid4().hex[:6]}", f"burrow-group-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in {0: 9, 1: 4, 2: 6}.items():
        for i in range(count):
            producer.produce(topic, f"m{i}".encode(), partition=partition)
    assert producer.flush(10) == 0
    commit_as_group(bootstrap, topic, group, {0: 2, 1: 4, 2: 5})
    scrape = OffsetsSource(Cluster(name="live", bootstrap_servers=[bootstrap])).collect()
    assert scrape.errors == []
    # prod's orders-0, (scrape time ms, end offset, committed): lags at the commits 50, 80, 110 never fall
    # while the offsets move: WARN. The window (10 commits, Burrow's default intervals too) holds 3: 0.3.
    scrapes = [offsets_batch(ms, {"0": end}, {("billing", "0"): c}) for ms, end, c in
               [(10_000, 100, 50), (20_000, 200, 120), (30_000, 300, 190)]]  # fmt: skip
    metrics_topic = f"metrics-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, metrics_topic, [*scrapes, scrape.batch])
    config = Config.model_validate(
        {
            "clusters": [
                {"name": "prod", "bootstrap_servers": [bootstrap]},
                {"name": "live", "bootstrap_servers": [bootstrap]},
            ],
            "metrics_topic": {"name": metrics_topic},
            "sinks": {"run_dir": str(tmp_path), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )
    with served_after_run(spark, config) as url:
        lines = run_client(url)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{url}/v3/kafka/prod/consumer/nobody/status", timeout=10)
        assert missing.value.code == 404  # Burrow's NOTFOUND
    assert 'burrow_group,cluster=prod,group=billing status="WARN",complete=0.0,partition_count=1i,' \
           "totallag=110i,maxlag_partition=0i" in lines  # fmt: skip
    assert (
        'burrow_partition,cluster=prod,group=billing,topic=orders,partition=0 status="WARN",current_lag=110i,'
        "complete=0.3,start_offset=50i,start_timestamp=10000i,start_lag=50i,end_offset=190i,"
        "end_timestamp=30000i,end_lag=110i"
    ) in lines
    told = {r.partition: r.lag for r in kafka_tools.describe_group(bootstrap, group)}
    served = {
        int(line.split(",partition=")[1].split(" ")[0]): int(line.split("current_lag=")[1].split("i")[0])
        for line in lines
        if line.startswith(f"burrow_partition,cluster=live,group={group},")
    }
    assert served == told == {0: 7, 1: 0, 2: 1}
    assert f"burrow_group,cluster=live,group={group} " in "\n".join(lines)

"""Security for real: collectors, publisher, Spark source and app through SASL/SCRAM and TLS listeners.

One secure Kafka node for the module (``KafkaCluster(secure=True)``): security is a property of each
listener, not of replication, and inter-broker traffic stays PLAINTEXT, so more nodes would only cost start
time and memory. Test data is written and checked through the PLAINTEXT listener with plain clients and
Kafka's own tools (the truth side); the product only ever gets the config's ``security`` keys, with the
SCRAM password and the client key's password in environment variables.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

from app.cluster import live_placement
from collectors.publisher import Publisher
from common import names
from common.config import Cluster, Config, Security
from common.contract import Batch, Sample, decode
from common.errors import InputError
from common.kafka_clients import AccessError, check_access, client_settings
from peers import kafka_tools
from peers.kafka import KafkaCluster
from peers.process import free_port
from peers.stack import create_topic
from spark_jobs.kafka_source import read_metrics, source_options
from spark_jobs.records import observations

pytestmark = pytest.mark.peers

ROOT = Path(__file__).parents[1]
PASSWORD_ENV = "KOBS_TEST_SCRAM_PASSWORD"
KEY_PASSWORD_ENV = "KOBS_TEST_KEY_PASSWORD"
TOPIC, GROUP = "secure-orders", "secure-billing"
PRODUCED = {0: 4, 1: 2, 2: 0}  # messages per partition
COMMITTED = {0: 3, 1: 1}
LISTENERS = ("scram-sha-512", "mutual-tls", "scram-sha-256-over-tls")


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """The secure node, its passwords in the environment, and a topic with a group's commits on it."""
    with (
        KafkaCluster(tmp_path_factory.mktemp("kafka-secure"), nodes=1, secure=True) as cluster,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv(PASSWORD_ENV, cluster.scram_password)
        env.setenv(KEY_PASSWORD_ENV, cluster.pki.key_password)
        create_topic(cluster.bootstrap, TOPIC, len(PRODUCED))
        _produce_and_commit(cluster.bootstrap)
        yield cluster


@pytest.fixture(scope="module")
def truth(secure) -> dict:
    """What Kafka's own tools say, once: TOPIC's placement and GROUP's committed and end offsets."""
    placement = kafka_tools.describe_topics(secure.bootstrap, topic=TOPIC)
    group = kafka_tools.describe_group(secure.bootstrap, GROUP)
    return {
        "placement": {r.partition: list(r.replicas) for r in placement},
        "group": {
            r.partition: (r.current_offset, r.log_end_offset) for r in group if r.partition in COMMITTED
        },
    }


def _produce_and_commit(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, f"m{i}".encode(), partition=partition)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the group never assigned partitions"
        offsets = [TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def listener(cluster: KafkaCluster, name: str) -> tuple[str, dict]:
    """(bootstrap, ``security`` section of the config) for one of the secure listeners."""
    ca = str(cluster.pki.ca)
    scram = {"sasl_username": cluster.scram_user, "sasl_password_env": PASSWORD_ENV}
    if name == "scram-sha-512":
        return cluster.sasl_bootstrap, {
            "protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            **scram,
        }
    if name == "mutual-tls":
        return cluster.ssl_bootstrap, {
            "protocol": "SSL",
            "ssl_ca_location": ca,
            "ssl_certificate_location": str(cluster.pki.client_cert),
            "ssl_key_location": str(cluster.pki.client_key),
            "ssl_key_password_env": KEY_PASSWORD_ENV,
        }
    assert name == "scram-sha-256-over-tls"
    return cluster.sasl_ssl_bootstrap, {
        "protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "ssl_ca_location": ca,
        **scram,
    }


def config_doc(bootstrap: str, security: dict, metrics_topic: str, run_dir: Path) -> dict:
    """One cluster and the metrics topic, both reached through the same listener."""
    return {
        "clusters": [{"name": "sec", "bootstrap_servers": [bootstrap], "security": security}],
        "metrics_topic": {"name": metrics_topic, "partitions": 2, "security": security},
        "sinks": {"run_dir": str(run_dir), "self_metrics_address": f"127.0.0.1:{free_port()}"},
    }


def watched(bootstrap: str, security: dict) -> Cluster:
    return Config.model_validate(config_doc(bootstrap, security, "unused", Path("var"))).clusters[0]


def collect_once(doc: dict, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``kobs collect --once`` as a user runs it: a config file, the passwords in the environment."""
    return kobs(doc, tmp_path, "collect", "--once")


def kobs(doc: dict, tmp_path: Path, command: str, *options: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "kobs.yaml"
    path.write_text(yaml.safe_dump(doc))
    argv = [sys.executable, "-m", "kobs.cli", command, "--config", str(path), *options]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=90)


def offsets_on_metrics_topic(bootstrap: str, metrics_topic: str) -> tuple[dict, dict]:
    """End offsets of TOPIC and GROUP's commits in the offsets batches on the metrics topic (read in
    PLAINTEXT: the truth side)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "secure-reader"})
    ends: dict[int, float] = {}
    committed: dict[int, float] = {}
    try:
        partitions = consumer.list_topics(metrics_topic, timeout=10).topics[metrics_topic].partitions
        consumer.assign([TopicPartition(metrics_topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + 20
        while (len(ends) < len(PRODUCED) or len(committed) < len(COMMITTED)) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            batch = decode(message.value())
            for s in batch.samples if batch.source == "admin/offsets" else ():
                if s.labels.get("topic") != TOPIC:
                    continue
                if s.name == names.PARTITION_END_OFFSET:
                    ends[int(s.labels["partition"])] = s.value
                elif s.name == names.GROUP_COMMITTED_OFFSET and s.labels["group"] == GROUP:
                    committed[int(s.labels["partition"])] = s.value
    finally:
        consumer.close()
    return ends, committed


@pytest.mark.parametrize("name", LISTENERS)
def test_collect_once_reads_offsets_and_metadata_and_publishes_through(secure, truth, name, tmp_path):
    bootstrap, security = listener(secure, name)
    metrics_topic = f"secure-metrics-{name}"
    create_topic(secure.bootstrap, metrics_topic, 2)  # leaders ready before the one cycle
    result = collect_once(config_doc(bootstrap, security, metrics_topic, tmp_path / "run"), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for source in ("sec/admin/offsets", "sec/admin/metadata", "sec/admin/log_dirs"):  # kafka-python's login
        (line,) = [line for line in result.stdout.splitlines() if line.split()[:1] == [source]]
        assert line.split()[1] == "ok", result.stdout
    assert "(all delivered)" in result.stdout
    ends, committed = offsets_on_metrics_topic(secure.bootstrap, metrics_topic)
    assert ends == PRODUCED and committed == COMMITTED
    assert truth["group"] == {p: (committed[p], ends[p]) for p in COMMITTED}  # as kafka-consumer-groups says


@pytest.mark.parametrize("name", LISTENERS)
def test_the_apps_live_placement_reads_through(secure, truth, name):
    bootstrap, security = listener(secure, name)
    assert live_placement(watched(bootstrap, security))[TOPIC] == truth["placement"]  # as kafka-topics says


@pytest.mark.spark
@pytest.mark.parametrize("name", ["scram-sha-256-over-tls", "mutual-tls"])
def test_spark_source_reads_what_the_publisher_wrote_through(secure, spark, name, tmp_path, capsys):
    bootstrap, security = listener(secure, name)
    metrics_topic = f"secure-stream-{name}"
    config = Config.model_validate(config_doc(bootstrap, security, metrics_topic, tmp_path / "run"))
    batches = [
        Batch("sec", f"jmx/broker-{i}", 1000 * i, (Sample("kafka_x", {"i": str(i)}, float(i)),))
        for i in range(1, 6)
    ]
    publisher = Publisher.from_config(config).start()  # creates the topic through the listener
    try:
        assert all(publisher.submit(batch) for batch in batches)
    finally:
        assert publisher.close(20)
    assert publisher.stats.sent == len(batches) and publisher.stats.spooled == 0

    rows: list = []
    options = source_options(config)  # what kobs stream passes: bootstrap and kafka.* security settings
    assert options["kafka.security.protocol"] == security["protocol"]
    query = (
        read_metrics(spark, options, {"kafka_x": ("t",)})
        .writeStream.foreachBatch(lambda df, _id: rows.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    samples = sorted(
        (o.source, o.value) for r in rows if r.observed for o in observations(r.cluster, r.source, r.observed)
    )
    assert samples == [(f"jmx/broker-{i}", float(i)) for i in range(1, 6)]
    secret = secure.scram_password if "scram" in name else secure.pki.key_password
    query.explain(extended=True)
    shown = str(query.lastProgress) + capsys.readouterr().out
    assert secret not in shown  # what Spark shows of the source leaves the password out
    assert "PRIVATE KEY" not in shown  # and the client key, which Java's client takes as a value


def test_a_wrong_scram_password_is_one_line_naming_the_cause(secure, tmp_path, monkeypatch):
    bootstrap, security = listener(secure, "scram-sha-512")
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    result = collect_once(config_doc(bootstrap, security, "secure-metrics-refused", tmp_path), tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()  # no librdkafka log lines either
    assert line.startswith(f"kobs collect: metrics_topic: cannot connect to {bootstrap}: SASL authentication")
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in line
    assert line.endswith("— check metrics_topic.security")
    stream = kobs(config_doc(bootstrap, security, "secure-metrics-refused", tmp_path), tmp_path, "stream")
    assert stream.returncode == 2 and stream.stdout == ""  # before Spark starts
    assert stream.stderr.splitlines() == [line.replace("kobs collect:", "kobs:", 1)]
    with pytest.raises(InputError, match="invalid credentials"):
        live_placement(watched(bootstrap, security))  # the what-if page shows the same cause


def test_a_watched_cluster_that_refuses_the_login_is_named_and_the_others_are_watched(
    secure, truth, tmp_path, monkeypatch
):
    """A wrong password for one watched cluster, the metrics topic and another cluster reachable: one line
    names the refusal and the collector watches the healthy cluster; the refused cluster's sources fail
    as ``refused`` with the cause, not a timeout. ``--strict-access`` keeps the fail-fast (exit code 2)."""
    bootstrap, security = listener(secure, "scram-sha-512")
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    metrics_topic = "secure-metrics-beside-a-refusal"
    create_topic(secure.bootstrap, metrics_topic, 2)
    doc = config_doc(secure.bootstrap, {}, metrics_topic, tmp_path / "run")  # PLAINTEXT: the healthy side
    doc["clusters"].append({"name": "refusing", "bootstrap_servers": [bootstrap], "security": security})
    result = collect_once(doc, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # the healthy cluster's sources succeeded
    line, *logged = result.stderr.splitlines()  # the start's line, then each refused source's once
    assert line.startswith(
        f"kobs collect: clusters[refusing]: cannot connect to {bootstrap}: SASL authentication"
    )
    assert line.endswith(
        "— check clusters[refusing].security; watching the others, and asking it again less often"
    )
    rows = {row.split()[0]: row.split(None, 2)[1:] for row in result.stdout.splitlines()[2:-1]}
    for source in ("sec/admin/offsets", "sec/admin/metadata", "sec/admin/log_dirs"):
        assert rows[source][0] == "ok", result.stdout
    for source in ("refusing/admin/offsets", "refusing/admin/metadata", "refusing/admin/log_dirs"):
        assert rows[source][0] == "FAILED", result.stdout
        assert "refused x1 (refused: SASL authentication" in rows[source][1], result.stdout
        (named,) = [entry for entry in logged if f" {source}: refused: SASL authentication" in entry]
        assert named.endswith(
            "invalid credentials with SASL mechanism SCRAM-SHA-512 — check clusters[refusing].security"
        )
    assert len(logged) == 3, result.stderr
    ends, committed = offsets_on_metrics_topic(secure.bootstrap, metrics_topic)
    assert ends == PRODUCED and committed == COMMITTED  # the healthy cluster's, as Kafka's tools say
    assert truth["group"] == {p: (committed[p], ends[p]) for p in COMMITTED}

    strict = kobs(doc, tmp_path, "collect", "--once", "--strict-access")
    assert strict.returncode == 2 and strict.stdout == ""
    assert strict.stderr.splitlines() == [line.split("; watching the others")[0]]


def test_tls_without_the_ca_or_without_a_client_certificate_fails_with_the_reason(secure, tmp_path):
    bootstrap, security = listener(secure, "mutual-tls")
    untrusted = {k: v for k, v in security.items() if k != "ssl_ca_location"}
    result = collect_once(config_doc(bootstrap, untrusted, "secure-metrics-untrusted", tmp_path), tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kobs collect: metrics_topic: cannot connect to {bootstrap}: ")
    assert "certificate verify failed" in line and "Traceback" not in result.stderr

    anonymous = Security(protocol="SSL", ssl_ca_location=security["ssl_ca_location"])  # no client cert
    with pytest.raises(AccessError, match="alert bad certificate"):
        check_access(
            client_settings([bootstrap], anonymous), "clusters[sec]"
        )  # the broker refused us: it requires a client certificate


def test_a_down_cluster_is_not_an_access_error():
    started = time.monotonic()
    check_access({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, "clusters[down]")  # an outage: passes
    assert time.monotonic() - started < 5


@pytest.mark.timeout(420)
def test_a_password_rotated_under_a_running_collector_is_named_once_and_asked_less_often(secure, tmp_path):
    """A user's SCRAM password changed on the brokers (``kafka-configs``) and the node restarted, so every
    connection logs in again: the running collector's sources of that cluster say ``refused`` with Kafka's
    cause, logged once per source while it lasts, counted at each scrape and asked less often (before: "Local:
    Timed out" at every scrape, the cause never named). Runs last in the module: it restarts the node."""
    user, old, new = "rotating", "first-password", "second-password"
    scram = ("--entity-type", "users", "--entity-name", user)
    kafka_tools.run_tool("kafka-configs", "--bootstrap-server", secure.bootstrap, "--alter", *scram,
                         "--add-config", f"SCRAM-SHA-512=[password={old}]")  # fmt: skip
    metrics_topic = "secure-metrics-rotation"
    create_topic(secure.bootstrap, metrics_topic, 2)
    doc = config_doc(secure.bootstrap, {}, metrics_topic, tmp_path / "run")
    security = {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": user,
                "sasl_password_env": "KOBS_TEST_ROTATING_PASSWORD"}  # fmt: skip
    doc["clusters"].append(
        {"name": "rotating", "bootstrap_servers": [secure.sasl_bootstrap], "security": security}
    )
    doc["intervals"] = {"offsets_s": 2, "metadata_s": 2}
    path = tmp_path / "kobs.yaml"
    path.write_text(yaml.safe_dump(doc))
    env = os.environ | {"PYTHONPATH": str(ROOT), "KOBS_TEST_ROTATING_PASSWORD": old}
    argv = [sys.executable, "-m", "kobs.cli", "collect", "--config", str(path)]
    log = tmp_path / "collect.log"
    with open(log, "wb") as out:
        collector = subprocess.Popen(argv, env=env, stdout=out, stderr=out)
    address = doc["sinks"]["self_metrics_address"]
    scraped = ("kobs_collector_scrape_duration_seconds_count", "rotating/admin/offsets", "")
    refused = ("kobs_collector_scrape_errors_total", "rotating/admin/offsets", "refused")
    try:
        assert wait_for(lambda: _self_metrics(address).get(scraped, 0) >= 2, 60), log.read_text()
        assert _self_metrics(address).get(refused, 0) == 0  # logged in with the first password
        kafka_tools.run_tool("kafka-configs", "--bootstrap-server", secure.bootstrap, "--alter", *scram,
                             "--add-config", f"SCRAM-SHA-512=[password={new}]")  # fmt: skip
        secure.restart(next(iter(secure.nodes)))
        assert wait_for(lambda: _self_metrics(address).get(refused, 0) >= 3, 180), log.read_text()
        healthy = ("kobs_collector_scrape_errors_total", "sec/admin/offsets", "refused")
        assert _self_metrics(address).get(healthy, 0) == 0
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(60)
    lines = log.read_text().splitlines()
    for source in ("rotating/admin/offsets", "rotating/admin/metadata"):
        named = [line for line in lines if f"{source}: refused: SASL authentication" in line]
        assert len(named) == 1, "\n".join(lines)
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in named[0]
        assert named[0].endswith("— check clusters[rotating].security")


def _self_metrics(address: str) -> dict[tuple[str, str, str], float]:
    """The collector's self-metrics by (sample name, source, reason); empty while they are not served."""
    try:
        page = urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {
        (s.name, s.labels.get("source", ""), s.labels.get("reason", "")): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }

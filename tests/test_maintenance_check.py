"""``kobs maintenance check``: the findings on hand-built partition states with known answers, then the
command on the real cluster, its answer checked against what Kafka's own ``kafka-topics --describe`` lists
(never against the code under test), and its one-line refusals of input it cannot use."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from waiting import until

from collectors.isr import PartitionState
from kobs.cli import main
from kobs.maintenance import ProducerFinding, TopicFinding, partition_fate, restart_impact
from peers import kafka_tools
from peers.process import free_port
from peers.stack import create_topic

BROKER = 2
SEVERITY = ["offline", "producer blocks", "under min ISR", "blocks if acks=all", "at min ISR", "leadership"]


def state(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader=leader, isr=isr, replicas=replicas)


# orders: RF 1, partitions 0 and 3 on broker 2. payments: RF 2, min ISR 2. events: RF 3, min ISR 2, full ISR.
# audit: RF 3 whose partition 1 has shrunk to broker 2 alone. logs: RF 3, min ISR 1 (the default: unlisted).
PARTITIONS = {
    ("orders", 0): state(2, (2,), (2,)),
    ("orders", 1): state(1, (1,), (1,)),
    ("orders", 2): state(3, (3,), (3,)),
    ("orders", 3): state(2, (2,), (2,)),
    ("payments", 0): state(2, (2, 3), (2, 3)),
    ("payments", 1): state(1, (1, 3), (1, 3)),
    ("payments", 2): state(3, (3, 2), (3, 2)),
    ("events", 0): state(1, (1, 2, 3), (1, 2, 3)),
    ("events", 1): state(2, (2, 3, 1), (2, 3, 1)),
    ("audit", 0): state(1, (1, 3), (1, 2, 3)),  # broker 2 already out of the ISR: nothing changes
    ("audit", 1): state(2, (2,), (2, 3, 1)),
    ("logs", 0): state(3, (3, 1, 2), (3, 1, 2)),
}
MIN_ISR = {"orders": 1, "payments": 2, "events": 2, "audit": 2}
PRODUCERS = {"web": {"orders", "clicks"}, "billing": {"payments"}, "tracker": {"events"}, "idle": set()}


def test_partitions_whose_only_in_sync_replica_is_the_broker_go_offline():
    impact = restart_impact(BROKER, PARTITIONS, MIN_ISR, PRODUCERS)
    assert impact.offline == (
        TopicFinding("audit", (1,), 3, 2),  # an ISR already shrunk to the broker alone
        TopicFinding("orders", (0, 3), 1, 1),
    )


def test_partitions_left_below_min_isr_are_under_it_and_those_left_at_it_are_at_it():
    impact = restart_impact(BROKER, PARTITIONS, MIN_ISR, PRODUCERS)
    assert impact.under_min_isr == (TopicFinding("payments", (0, 2), 2, 2),)  # RF 2, min ISR 2
    # RF 3, min ISR 2, full ISR: 2 left is at min ISR, not under; logs (min ISR 1) keeps 2, above it
    assert impact.at_min_isr == (TopicFinding("events", (0, 1), 3, 2),)
    assert not impact.safe


def test_producers_are_mapped_to_the_topics_they_write():
    impact = restart_impact(BROKER, PARTITIONS, MIN_ISR, PRODUCERS)
    assert impact.producers_blocked == (ProducerFinding("web", ("orders",)),)
    assert impact.producers_blocked_if_acks_all == (ProducerFinding("billing", ("payments",)),)


def test_leadership_and_verdict():
    impact = restart_impact(BROKER, PARTITIONS, MIN_ISR, PRODUCERS)
    assert impact.leads == 5  # orders 0 and 3, payments 0, events 1, audit 1
    assert impact.verdict == (
        "restart of broker 2 takes 3 partitions of 2 topics offline and puts 2 partitions of payments "
        "under min ISR; blocks producers web"
    )


@pytest.mark.parametrize(
    ("isr", "min_isr", "fate"),
    [
        ((2,), 1, "offline"),  # replication factor 1
        ((2,), 2, "offline"),  # offline, not also counted under min ISR
        ((2, 3), 2, "under min ISR"),
        ((1, 2, 3), 2, "at min ISR"),
        ((1, 2, 3), 1, None),
        ((1, 3), 2, None),  # the broker is not in the ISR
    ],
)
def test_partition_fate(isr, min_isr, fate):
    assert partition_fate(BROKER, isr, min_isr) == fate


def test_a_restart_that_breaks_nothing_is_safe():
    partitions = {("events", 0): state(2, (1, 2, 3), (1, 2, 3))}
    impact = restart_impact(BROKER, partitions, {"events": 1}, PRODUCERS)
    assert impact.safe and impact.offline == impact.under_min_isr == impact.at_min_isr == ()
    assert impact.verdict == "restart of broker 2 is safe: no partition goes offline or under min ISR"


def write_config(tmp_path, cluster: dict, **keys: object) -> str:
    path = tmp_path / "kobs.yaml"
    path.write_text(yaml.safe_dump({"clusters": [cluster], **keys}))
    return str(path)


def check(config: str, cluster: str, broker: int, *options: str) -> int:
    return main(
        ["maintenance", "check", "--config", config, "--cluster", cluster, "--broker", str(broker), *options]
    )


@pytest.mark.peers
def test_the_check_names_what_kafka_lists_on_that_broker(kafka_cluster, tmp_path, capsys):
    bootstrap, prefix = kafka_cluster.bootstrap, f"maintenance-{uuid.uuid4().hex[:8]}"
    rf1, rf2, rf3 = (f"{prefix}-rf{n}" for n in (1, 2, 3))
    create_topic(bootstrap, rf1, 6)
    create_topic(bootstrap, rf2, 6, replication_factor=2, config={"min.insync.replicas": "2"})
    create_topic(bootstrap, rf3, 3, replication_factor=3, config={"min.insync.replicas": "2"})

    def settled():
        rows = kafka_tools.describe_topics(bootstrap, topic=f"{prefix}-.*")
        done = len(rows) == 15 and all(r.leader >= 0 and set(r.isr) == set(r.replicas) for r in rows)
        return done and rows

    rows = until(settled, timeout_s=60)
    broker = next(r.leader for r in rows if r.topic == rf1)
    producers = [
        {"client_id": "orders-writer", "url": "http://127.0.0.1:1/metrics", "topics": [rf1]},
        {"client_id": "ledger-writer", "url": "http://127.0.0.1:1/metrics", "topics": [rf2]},
    ]
    config = write_config(
        tmp_path, {"name": "live", "bootstrap_servers": [bootstrap], "producers": producers}
    )

    assert check(config, "live", broker) == 1
    text = capsys.readouterr().out
    assert check(config, "live", broker, "--json") == 1
    found = json.loads(capsys.readouterr().out)

    # Kafka's tool is the truth: which partitions of ours list the broker in their ISR, and with whom.
    def partitions(topic, remaining):
        return sorted(
            r.partition for r in rows if r.topic == topic and broker in r.isr and len(r.isr) - 1 == remaining
        )

    def ours(kind):
        return {f["topic"]: f["partitions"] for f in found[kind] if f["topic"].startswith(prefix)}

    offline = sorted(r.partition for r in rows if r.topic == rf1 and r.isr == (broker,))
    assert offline and ours("offline") == {rf1: offline}
    assert partitions(rf2, 1) and ours("under_min_isr") == {rf2: partitions(rf2, 1)}
    assert ours("at_min_isr") == {rf3: partitions(rf3, 2)} == {rf3: [0, 1, 2]}
    assert found["producers_blocked"] == [{"client_id": "orders-writer", "topics": [rf1]}]
    assert found["producers_blocked_if_acks_all"] == [{"client_id": "ledger-writer", "topics": [rf2]}]
    assert found["broker"] == broker and found["safe"] is False
    everything = kafka_tools.describe_topics(bootstrap)
    assert found["leads"] == sum(r.leader == broker for r in everything if not r.topic.startswith("__"))
    *findings, verdict = text.splitlines()
    assert verdict == found["verdict"] and verdict.startswith(f"restart of broker {broker} takes ")
    labels = [line[:20].strip() for line in findings]  # most severe first
    assert labels == sorted(labels, key=SEVERITY.index) and labels[-1] == "leadership"
    assert (
        f"orders-writer: writes {rf1}" in text and f"{rf1}: partitions {', '.join(map(str, offline))}" in text
    )


@pytest.mark.peers
def test_a_broker_the_cluster_does_not_list_is_refused_naming_broker(kafka_cluster, tmp_path, capsys):
    config = write_config(tmp_path, {"name": "live", "bootstrap_servers": [kafka_cluster.bootstrap]})
    assert check(config, "live", 99) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--broker 99" in err and "lists brokers 1, 2, 3" in err


def test_an_unknown_cluster_is_refused_naming_cluster(tmp_path, capsys):
    config = write_config(tmp_path, {"name": "live", "bootstrap_servers": ["127.0.0.1:9092"]})
    assert check(config, "prod", 1) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cluster prod" in err and "live" in err


def test_a_cluster_without_bootstrap_servers_is_refused_naming_the_key(tmp_path, capsys):
    exporters = [{"broker_id": 1, "url": "http://127.0.0.1:1/metrics"}]
    metrics_topic = {"bootstrap_servers": ["127.0.0.1:9092"]}
    config = write_config(tmp_path, {"name": "fleet", "exporters": exporters}, metrics_topic=metrics_topic)
    assert check(config, "fleet", 1) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "clusters[fleet].bootstrap_servers" in err


def test_an_unreachable_cluster_is_one_line(tmp_path, capsys):
    config = write_config(tmp_path, {"name": "down", "bootstrap_servers": [f"127.0.0.1:{free_port()}"]})
    assert check(config, "down", 1) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach cluster down" in err

"""Replication health and flapping ISR end to end: a scripted incident as contract batches on the real Kafka
cluster → local Spark → the derived exporter and the Parquet history."""

from __future__ import annotations

import pytest
from stream_run import run_once

from common import names
from common.contract import Batch, Event, Sample
from common.metrics import FLAPPING_CAUSE

pytestmark = [pytest.mark.peers, pytest.mark.spark]


def metadata(t_s: int, p1_isr: int) -> Batch:
    """Topic orders, 2 partitions of replication factor 3 and min.insync.replicas 2; p0 always whole."""
    samples = [Sample(names.TOPIC_MIN_ISR, {"topic": "orders"}, 2)]
    for partition, isr, leader in (("0", 3, 0), ("1", p1_isr, 1)):
        labels = {"topic": "orders", "partition": partition}
        samples += [
            Sample(names.PARTITION_REPLICAS, labels, 3),
            Sample(names.PARTITION_ISR, labels, isr),
            Sample(names.PARTITION_LEADER, labels, leader),
        ]
    return Batch("prod", "admin/metadata", t_s * 1000, tuple(samples))


def broker(t_s: int, broker_id: int, unclean: int = 0) -> Batch:
    labels = {"broker": str(broker_id)}
    samples = (
        Sample(names.PARTITION_COUNT, labels, 2),
        Sample(names.ACTIVE_CONTROLLER, labels, int(broker_id == 0)),
        Sample(names.UNCLEAN_ELECTIONS, labels, unclean),
    )
    return Batch("prod", f"exporter/broker-{broker_id}", t_s * 1000, samples)


def isr(t_s: int, partition: int, old: list[int], new: list[int], change: str) -> Event:
    fields = {"topic": "orders", "partition": partition, "old_isr": old, "new_isr": new}
    return Event("isr_change", t_s * 1000, fields | {"leader": new[0], "leader_epoch": 7, "change": change})


def incident() -> list[Batch]:
    """Broker 2 drops out of orders-0's ISR and back three times between metadata scrapes (flapping), then
    leaves orders-1 for good at 32 s; broker 1 stops reporting after 0 s; the controller (broker 0) counts
    one unclean election at 50 s."""
    flaps = [
        event
        for t in (11, 21, 31)
        for event in (isr(t, 0, [0, 1, 2], [0, 1], "shrink"), isr(t + 3, 0, [0, 1], [0, 1, 2], "expand"))
    ]
    zookeeper = Batch(
        "prod",
        "zookeeper/isr",
        35_000,
        events=(
            Event("controller_change", 5_000, {"controller_id": 0, "controller_epoch": 1}),
            *flaps,
            isr(32, 1, [1, 2, 0], [1, 0], "shrink"),
        ),
    )
    return [
        broker(0, 1),
        *[broker(t, b, unclean=int(t == 50 and b == 0)) for t in (10, 25, 40, 50) for b in (0, 2)],
        *[metadata(t, 3) for t in (10, 20, 30)],
        zookeeper,
        metadata(40, 2),
        metadata(50, 2),
    ]


def test_an_incident_reaches_the_exporter_and_the_history(spark, kafka_cluster, tmp_path):
    metrics = run_once(spark, kafka_cluster.bootstrap, incident(), tmp_path)

    orders = (("cluster", "prod"), ("topic", "orders"))

    def of(broker_id: int) -> tuple:
        return (("broker", str(broker_id)), ("cluster", "prod"))

    # orders-1 has had 2 of 3 replicas in sync since the 40 s scrape; now is 50 s. min ISR 2 still holds.
    # Broker 2 left its ISR (the 32 s shrink): the series of the partitions it explains carry its id; the
    # series of those no event explains (cause_broker="") are always there, at 0 here.
    by_2, unexplained = (("cause_broker", "2"), *orders), (("cause_broker", ""), *orders)
    assert metrics["kobs_topic_under_replicated_partitions", by_2] == 1
    assert metrics["kobs_topic_under_replicated_seconds", by_2] == 10
    assert metrics["kobs_topic_under_replicated_partitions", unexplained] == 0
    assert metrics["kobs_topic_under_min_isr_partitions", unexplained] == 0
    assert metrics["kobs_topic_offline_partitions", unexplained] == 0
    assert metrics["kobs_topic_replication_factor", orders] == 3
    assert metrics["kobs_isr_changes_total", (("change", "shrink"), *orders)] == 4
    assert metrics["kobs_isr_changes_total", (("change", "expand"), *orders)] == 3
    # Broker 1 last reported at 0 s, more than 3 scrape intervals (45 s) before now.
    assert [metrics["kobs_broker_up", of(b)] for b in (0, 1, 2)] == [1, 0, 1]
    assert metrics["kobs_broker_out_of_isr_partitions", of(2)] == 1
    assert metrics["kobs_cluster_active_controllers", (("cluster", "prod"),)] == 1
    assert metrics["kobs_unclean_leader_elections_total", (("cluster", "prod"),)] == 1
    # Three rejoins of broker 2 within 10 minutes: flapping, and broker 2 is behind every flap.
    assert metrics["kobs_isr_flapping_partitions", of(2)] == 1
    assert metrics["kobs_isr_flapping_partitions", of(0)] == 0
    assert metrics["kobs_isr_flap_share_ratio", of(2)] == 1
    assert metrics["kobs_cluster_isr_flapping_cause", (("cluster", "prod"),)] == FLAPPING_CAUSE["one_broker"]

    replication = spark.read.parquet(str(tmp_path / "history" / "replication")).collect()
    last = max(row.batch_id for row in replication)
    rows = {(r.scope, r.topic, r.partition, r.broker): r for r in replication if r.batch_id == last}
    assert rows["partition", "orders", "1", None].under_replicated_s == 10
    assert rows["topic", "orders", None, None].under_replicated == 1
    assert rows["broker", None, None, "1"].up is False
    flapping = spark.read.parquet(str(tmp_path / "history" / "isr_flapping")).collect()
    [row] = [r for r in flapping if r.batch_id == max(r.batch_id for r in flapping)]
    assert (row.topic, row.partition, row.broker, row.flaps, row.flapping, row.cause) == (
        "orders", "0", "2", 3, True, "one_broker"
    )  # fmt: skip

"""The KRaft ISR source (metadata diffs, ``collectors.metadata``) on the real cluster: the partitions of a
SIGSTOPped follower shrink and, once it is continued, expand again, as ``isr_change`` events the source emits
within the bounds stated here, each ISR equal to what Kafka's own ``kafka-topics --describe`` prints; a real
unclean election, counted by the replication analysis as Kafka's controllers count it."""

from __future__ import annotations

import time
import uuid

import pytest
from test_collect_zookeeper import _observations
from waiting import until

from collectors.exposition import ExpositionSource
from collectors.metadata import MetadataSource
from common.config import Cluster
from peers import kafka_tools
from peers.stack import create_topic
from spark_jobs.replication import ReplicationAnalysis

pytestmark = pytest.mark.peers

TOPIC = "kraft-isr"
PAUSED = 3
# A stopped follower leaves the ISR after replica.lag.time.max.ms (5 s on the test cluster); a leader that
# stops is fenced after broker.session.timeout.ms (6 s). The bounds leave room for a loaded two-core host.
SHRINK_WITHIN_S = 30.0
EXPAND_WITHIN_S = 60.0


def _isr_until(source: MetadataSource, done, timeout_s: float, errors: list) -> dict[int, set[int]]:
    """Scrape every second, applying each ``isr_change`` event of the topic to the ISR last seen per
    partition, until ``done(isr)``; the ISRs as the events left them. Scrape errors go to ``errors``."""
    isr: dict[int, set[int]] = {}
    deadline = time.monotonic() + timeout_s
    while not done(isr) and time.monotonic() < deadline:
        scrape = source.collect()
        errors += scrape.errors
        for event in scrape.batch.events:
            if event.type == "isr_change" and event.fields["topic"] == TOPIC:
                isr[event.fields["partition"]] = set(event.fields["new_isr"])
        time.sleep(1.0)
    return isr


def _kafka_isr(bootstrap: str) -> dict[int, set[int]]:
    return {r.partition: set(r.isr) for r in kafka_tools.describe_topics(bootstrap, topic=TOPIC)}


def test_a_paused_followers_shrink_and_expand_are_events_kafka_agrees_with(kafka_cluster):
    create_topic(kafka_cluster.bootstrap, TOPIC, 3, replication_factor=3)
    everyone = {1, 2, 3}
    deadline = time.monotonic() + 30
    while set(map(frozenset, _kafka_isr(kafka_cluster.bootstrap).values())) != {frozenset(everyone)}:
        assert time.monotonic() < deadline, "the new topic's ISRs never filled"
        time.sleep(1)
    source = MetadataSource(Cluster(name="test", bootstrap_servers=[kafka_cluster.bootstrap]))
    assert not source.collect().batch.events  # the baseline
    kafka_cluster.pause(PAUSED)
    try:
        shrunk = _isr_until(
            source,
            lambda isr: len(isr) == 3 and all(PAUSED not in s for s in isr.values()),
            SHRINK_WITHIN_S,
            errors := [],
        )
        kafka_says = _kafka_isr(kafka_cluster.live_bootstrap)
    finally:
        kafka_cluster.resume(PAUSED)
    assert shrunk == {p: everyone - {PAUSED} for p in (0, 1, 2)}, f"every partition lost it: {errors}"
    assert shrunk == kafka_says
    expanded = _isr_until(
        source, lambda isr: len(isr) == 3 and all(s == everyone for s in isr.values()), EXPAND_WITHIN_S, []
    )
    assert expanded == {p: everyone for p in (0, 1, 2)}, "the continued follower rejoined every ISR"
    assert expanded == _kafka_isr(kafka_cluster.bootstrap)


UNCLEAN = "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"


def test_a_real_unclean_election_is_counted_as_kafka_counts_it_with_counters_and_from_events(kafka_cluster):
    """unclean.leader.election.enable on a topic whose replicas are nodes 2 (leader) and 3: node 3 hangs and
    falls out of the ISR, node 2 dies, node 3 comes back and Kafka elects it though it is out of sync.
    kobs fed the metadata scrapes and the nodes' exporter pages counts what Kafka's controllers count (their
    JMX, read by Kafka's tool on node 1, which runs all along: the dead node's other partitions of replication
    factor 1 count too on its return, KIP-966); fed the events of the topic alone, it counts the one
    election they prove."""
    topic = f"unclean-ok-{uuid.uuid4().hex[:6]}"
    kafka_tools.run_tool(
        "kafka-topics", "--bootstrap-server", kafka_cluster.bootstrap, "--create", "--topic", topic,
        "--replica-assignment", "2:3", "--config", "unclean.leader.election.enable=true",
    )  # fmt: skip
    until(
        lambda: [r.isr for r in kafka_tools.describe_topics(kafka_cluster.bootstrap, topic=topic)] == [(2, 3)]
    )
    cluster = Cluster(name="test", bootstrap_servers=[kafka_cluster.bootstrap])
    metadata = MetadataSource(cluster, timeout_s=5)
    exporters = [
        ExpositionSource("test", f"exporter/broker-{i}", node.exporter_url, {"broker": str(i)}, timeout_s=1)
        for i, node in kafka_cluster.nodes.items()
    ]
    counted, from_events = ReplicationAnalysis(), ReplicationAnalysis()

    def scrape() -> None:
        for source in (metadata, *exporters):
            observations = _observations(source.collect(), counted.inputs)
            counted.observe(observations)
            if source is metadata:
                from_events.observe([o for o in observations if (o.event or {}).get("topic") == topic])

    def elections(analysis: ReplicationAnalysis) -> float:
        (total,) = [
            v for n, _, v in analysis.evaluate().metrics if n == "kobs_unclean_leader_elections_total"
        ]
        return total

    def kafka_count() -> float:
        return kafka_tools.jmx_values(kafka_cluster.nodes[1].jmx_address, UNCLEAN)[f"{UNCLEAN}:Count"]

    def scrape_until(done, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                return False
            scrape()
            time.sleep(1)
        scrape()
        return True

    scrape()
    scrape()  # the counters' baseline
    before = kafka_count()
    kafka_cluster.pause(3)
    try:
        assert scrape_until(lambda: _isr_of(kafka_cluster, topic) == (2,), 60), "node 3 fell out of the ISR"
        kafka_cluster.kill(2)
        # Two of the three voters gone: no controller can change the partition (led by the dead node 2) and
        # none answers kafka-topics --describe (it asks the controller for reassignments); node 1 still
        # serves its metadata, which kobs scrapes.
        for _ in range(3):
            scrape()
            time.sleep(1)
        kafka_cluster.resume(3)
        elected = scrape_until(lambda: _leader_of(kafka_cluster, topic) == 3, 90)
    finally:
        kafka_cluster.resume(3)
        kafka_cluster.restart(2)
    assert elected, "Kafka elected node 3"
    after = kafka_count()
    assert after >= before + 1  # this topic's election, and any of the dead node's own partitions
    assert scrape_until(lambda: elections(counted) == after - before, 60), (
        elections(counted),
        after - before,
    )
    assert elections(from_events) == 1
    until(
        lambda: not kafka_tools.describe_topics(kafka_cluster.bootstrap, "--under-replicated-partitions"), 120
    )


def _isr_of(kafka_cluster, topic: str) -> tuple[int, ...] | None:
    rows = kafka_tools.describe_topics(kafka_cluster.live_bootstrap, topic=topic)
    return rows[0].isr if rows else None


def _leader_of(kafka_cluster, topic: str) -> int | None:
    rows = kafka_tools.describe_topics(kafka_cluster.live_bootstrap, topic=topic)
    return rows[0].leader if rows else None

"""The KRaft ISR source (metadata diffs, ``collectors.metadata``) on the real cluster: the partitions of a
SIGSTOPped follower shrink and, once it is continued, expand again, as ``isr_change`` events the source emits
within the bounds stated here, each ISR equal to what Kafka's own ``kafka-topics --describe`` prints."""

from __future__ import annotations

import time

import pytest

from collectors.metadata import MetadataSource
from common.config import Cluster
from peers import kafka_tools
from peers.stack import create_topic

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

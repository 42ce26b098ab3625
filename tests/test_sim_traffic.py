"""Real traffic on the real broker, read back through the Admin API the way the offsets collector does."""

from __future__ import annotations

import time

from collectors.offsets import OffsetsSource
from common import names
from common.config import Cluster
from peers.process import free_port
from peers.stack import create_topic
from simulator.traffic import GroupTraffic, Traffic, TrafficSpec

SPEC = TrafficSpec(
    topic="traffic-orders",
    partitions=4,
    messages_per_s=50,
    groups=(GroupTraffic("traffic-healthy"), GroupTraffic("traffic-lagging", messages_per_s=10)),
    commit_interval_s=1.0,
)


def _lags(source: OffsetsSource, deadline: float) -> dict[str, int]:
    """Per group, the sum over the topic's partitions of end offset - committed offset (0 where it has not
    committed yet), from Admin API data; asked again until both groups answer (a scrape during a rebalance
    or on a loaded host can miss one, and says so in its errors)."""
    while True:
        scrape = source.collect()
        lags = _group_lags(scrape.batch.samples)
        if len(lags) == 2 or time.monotonic() > deadline:
            assert set(lags) == {"traffic-healthy", "traffic-lagging"}, f"both groups commit: {scrape.errors}"
            return lags
        time.sleep(0.5)


def _group_lags(samples) -> dict[str, int]:
    ends = {
        s.labels["partition"]: s.value
        for s in samples
        if s.name == names.PARTITION_END_OFFSET and s.labels["topic"] == SPEC.topic
    }
    committed: dict[str, dict[str, float]] = {}
    for s in samples:
        if s.name == names.GROUP_COMMITTED_OFFSET and s.labels["topic"] == SPEC.topic:
            committed.setdefault(s.labels["group"], {})[s.labels["partition"]] = s.value
    return {
        group: int(sum(ends[p] - offsets.get(p, 0) for p in ends)) for group, offsets in committed.items()
    }


def test_a_healthy_group_keeps_up_while_a_lagging_one_falls_behind(kafka_cluster):
    create_topic(kafka_cluster.bootstrap, SPEC.topic, SPEC.partitions)
    source = OffsetsSource(Cluster(name="test", bootstrap_servers=[kafka_cluster.bootstrap]))
    with Traffic(kafka_cluster.bootstrap, SPEC):
        first = _lags(source, time.monotonic() + 60)  # the joins take a few seconds
        started = time.monotonic()
        time.sleep(6)
        second = _lags(source, time.monotonic() + 20)
        elapsed = time.monotonic() - started
    # 'healthy' reads whatever arrives and commits every second: its lag stays within a few seconds of
    # traffic (a commit interval plus polling), however long it runs. The collector reads end offsets
    # before committed ones, so a commit in between can make the figure slightly negative.
    assert abs(second["traffic-healthy"]) <= 3 * SPEC.messages_per_s
    # 'lagging' reads 10 of the 50 msg/s: its lag grows by 40 msg/s (half of that is the bar here, so that
    # a slow machine still passes), and far beyond the healthy group's.
    assert second["traffic-lagging"] - first["traffic-lagging"] >= 0.5 * 40 * elapsed
    assert second["traffic-lagging"] > 2 * second["traffic-healthy"] + 100


def test_a_cluster_that_does_not_answer_keeps_the_traffic_clients_quiet(capfd):
    """The demo's incidents kill and hang brokers under this traffic: librdkafka wrote a line per failed
    connection and timed-out request to the demo's terminal (dozens a second), burying its narration."""
    spec = TrafficSpec(messages_per_s=0.1, groups=(GroupTraffic("quiet"),))  # nothing to flush at the stop
    with Traffic(f"127.0.0.1:{free_port()}", spec):  # nothing listens there
        time.sleep(3)
    assert "|FAIL|" not in capfd.readouterr().err

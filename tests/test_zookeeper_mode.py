"""The ZooKeeper ISR source against a real Kafka 3.9 cluster in ZooKeeper mode: three brokers write the
znodes, incidents are made with signals, and every number the source derives is checked against Kafka's
own ``kafka-topics`` and ``kafka-jmx`` or the raw znodes read with kazoo.

One cluster for the module, in the session's ZooKeeper under its own chroot. The tests run in file order
and break the cluster further each time (a paused broker is resumed; a killed one stays dead): the pause
needs three live brokers, the two kills two each. The last test checks what all of them showed: brokers at
the default inter-broker protocol write no ``isr_change_notification``.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from waiting import wait_for

from collectors.zookeeper_isr import ZooKeeperIsrSource
from common import names
from peers import kafka_tools
from peers.kafka import KafkaCluster

pytestmark = pytest.mark.peers

CHROOT = "/kafka-zkmode"
ACTIVE_CONTROLLER = "kafka.controller:type=KafkaController,name=ActiveControllerCount"
# A paused or killed broker's ZooKeeper session expires after 6 s (FAST_INCIDENTS), a lagging follower is
# dropped after 5 s plus up to 2.5 s until the leader's next check; the rest is slack for a loaded machine.
INCIDENT_S = 20
# A resumed broker whose session expired registers again, restarts its fetchers and catches up before the
# leader adds it back: Kafka's time, not the source's (which must follow each znode write within
# WATCH_LAG_MS); 20 s and once 60 s were not enough with the whole suite loading two cores.
RESUME_S = 120
WATCH_LAG_MS = 2000  # from a state znode's write (its mtime) to the source's event
# What the brokers log about their sessions, registrations and ISRs: a failure's message quotes it.
KAFKA_EVENTS = re.compile(r"Session expired|Registered broker|Newly added brokers|ISR|WARN|ERROR")


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    with KafkaCluster(tmp_path_factory.mktemp("kafka-zk"), zookeeper=zookeeper.connect + CHROOT) as started:
        yield started


@pytest.fixture(scope="module")
def znodes(zookeeper, cluster):
    """A kazoo client on the cluster's chroot: the raw znodes, read independently of the source."""
    client = KazooClient(hosts=zookeeper.connect + CHROOT)
    client.start()
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="module")
def notifications(znodes):
    """Every ``/isr_change_notification`` child seen while the module runs (a watch: the controller deletes
    them within milliseconds), and whether the watch ran at all."""
    seen: set[str] = set()
    calls = []
    znodes.ChildrenWatch("/isr_change_notification", lambda children: calls.append(seen.update(children)))
    return seen, calls


@pytest.fixture
def source(zookeeper, cluster):
    """The source under test, with one full read at its first scrape only: every later change it reports
    came through a watch."""
    started = ZooKeeperIsrSource("zk", zookeeper.connect + CHROOT, full_diff_s=3600).start()
    yield started
    started.stop()


def create_topic(cluster, name: str, assignment: list[list[int]]) -> None:
    """A topic with the given replicas per partition (the first is the preferred leader)."""
    admin = AdminClient({"bootstrap.servers": cluster.live_bootstrap})
    topic = NewTopic(name, len(assignment), replica_assignment=assignment)
    admin.create_topics([topic])[name].result(timeout=30)


def write_to_every_replica(cluster, topic: str, partitions: int) -> None:
    """A record in each partition, acknowledged by every replica in its ISR (acks=all): each follower has
    then made its log and fetched. A new topic's ISR names every replica before any has."""
    producer = Producer({"bootstrap.servers": cluster.live_bootstrap, "acks": "all"})
    failed = []
    for p in range(partitions):
        producer.produce(topic, b"x", partition=p, on_delivery=lambda err, _msg: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed


def controller(znodes) -> tuple[int, int]:
    """(broker id, epoch) from ``/controller`` and ``/controller_epoch``."""
    return json.loads(znodes.get("/controller")[0])["brokerid"], int(znodes.get("/controller_epoch")[0])


def live(cluster) -> list[int]:
    return [i for i, node in cluster.nodes.items() if node.running and i not in cluster.paused]


class Seen:
    """What the source reported so far: its events and its latest partition samples."""

    def __init__(self, source: ZooKeeperIsrSource, topic: str):
        self.source, self.topic = source, topic
        self.events: list = []
        self.isr: dict[int, int] = {}
        self.leader: dict[int, int] = {}
        self.replicas: dict[int, int] = {}
        self.preferred: dict[int, int] = {}

    def scrape(self) -> Seen:
        scrape = self.source.collect()
        assert scrape.errors == []
        self.events += scrape.batch.events
        for sample in scrape.batch.samples:
            if sample.labels["topic"] == self.topic:
                table = {
                    names.PARTITION_ISR: self.isr,
                    names.PARTITION_LEADER: self.leader,
                    names.PARTITION_REPLICAS: self.replicas,
                    names.PARTITION_PREFERRED_LEADER: self.preferred,
                }[sample.name]
                table[int(sample.labels["partition"])] = int(sample.value)
        return self

    def isr_changes(self, partition: int | None = None) -> list:
        return [
            e
            for e in self.events
            if e.type == "isr_change"
            and e.fields["topic"] == self.topic
            and partition in (None, e.fields["partition"])
        ]

    def controllers(self) -> list[tuple[int, int]]:
        return [
            (e.fields["controller_id"], e.fields["controller_epoch"])
            for e in self.events
            if e.type == "controller_change"
        ]


def rows_of(cluster, topic: str, *options: str) -> dict[int, kafka_tools.PartitionRow]:
    rows = kafka_tools.describe_topics(cluster.live_bootstrap, *options, topic=topic)
    return {r.partition: r for r in rows}


def rows_when(ok, cluster, topic: str, *options: str) -> dict[int, kafka_tools.PartitionRow] | None:
    """``kafka-topics`` rows once ``ok(rows)``: the brokers' metadata follows the znodes a moment later."""

    def check():
        rows = rows_of(cluster, topic, *options)
        return rows if ok(rows) else None

    return wait_for(check, 30)


def log_sizes(cluster) -> dict[int, int]:
    return {i: node.log_path.stat().st_size for i, node in cluster.nodes.items()}


def kafka_events(cluster, since: dict[int, int], lines: int = 25) -> str:
    """Each broker's last ``lines`` log lines about sessions, registrations and ISRs after ``since`` (the
    logs' sizes then): what Kafka did, for a failure's message."""
    out = []
    for i, node in cluster.nodes.items():
        with open(node.log_path, "rb") as log:
            log.seek(since[i])
            text = log.read().decode(errors="replace").splitlines()
        found = [line[:300] for line in text if KAFKA_EVENTS.search(line)]
        out += [f"broker {i}:", *found[-lines:]]
    return "\n".join(out)


def state_mtime_ms(znodes, topic: str, partition: int) -> int:
    return znodes.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[1].mtime


def state_isr(znodes, topic: str, partition: int) -> list[int]:
    return json.loads(znodes.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])["isr"]


def test_a_paused_follower_leaves_the_isr_and_rejoins_as_the_source_reports_at_once(
    cluster, znodes, notifications, source
):
    """SIGSTOP a broker that follows both partitions of an RF-3 topic: its ZooKeeper session expires and
    the controller writes both state znodes without it; SIGCONT: it rejoins and each leader asks the
    controller (AlterPartition) to add it back, and the controller writes the znodes again."""
    assert len(live(cluster)) == 3, "needs the three brokers"
    broker_id, _ = controller(znodes)
    paused = next(i for i in (1, 2, 3) if i != broker_id)
    a, b = (i for i in (1, 2, 3) if i != paused)
    create_topic(cluster, "zk-pause", [[a, b, paused], [b, a, paused]])
    # Paused before it had made its logs, a follower never rejoins: Kafka 3.9 makes them on the
    # controller's LeaderAndIsr, which reads the topic's config from ZooKeeper, and the session expired
    # by the pause fails that (SessionExpiredException; the partition stays unavailable on the broker).
    write_to_every_replica(cluster, "zk-pause", 2)
    # a new topic's followers may fall out of the ISR once on a loaded machine: start from a full one
    full = wait_for(lambda: all(len(state_isr(znodes, "zk-pause", p)) == 3 for p in (0, 1)), 60)
    assert full, "the new topic's ISR never became full"
    seen = Seen(source, "zk-pause").scrape()  # the baseline and the watches
    assert (seen.replicas, seen.isr, seen.leader) == ({0: 3, 1: 3}, {0: 3, 1: 3}, {0: a, 1: b})

    paused_at, logged = time.time(), log_sizes(cluster)
    cluster.pause(paused)
    try:
        wait_for(lambda: seen.scrape().isr == {0: 2, 1: 2}, INCIDENT_S)
        under = rows_when(lambda rows: len(rows) == 2, cluster, "zk-pause", "--under-replicated-partitions")
        seen.scrape()
    finally:
        resumed_at = time.time()
        cluster.resume(paused)
    assert seen.isr == {0: 2, 1: 2}, f"no shrink reported within {INCIDENT_S} s of the pause"
    # what kafka-topics says, partition by partition: ISR size, members, leader
    assert sorted(under) == [0, 1]
    assert {p: len(r.isr) for p, r in under.items()} == seen.isr
    assert {p: r.leader for p, r in under.items()} == seen.leader == {0: a, 1: b}
    lags_ms = []
    for p, row in under.items():
        changes = seen.isr_changes(p)  # one each, two if the leader's request beat the session expiry
        first, last = changes[0].fields, changes[-1]
        assert first["change"] == "shrink" and paused in first["old_isr"] and paused not in first["new_isr"]
        assert sorted(last.fields["new_isr"]) == sorted(row.isr) == sorted((a, b))
        lag_ms = last.ts_ms - state_mtime_ms(znodes, "zk-pause", p)
        assert 0 <= lag_ms <= WATCH_LAG_MS, f"partition {p} reported {lag_ms} ms after its znode was written"
        lags_ms.append(lag_ms)
    shrunk_after_s = max(e.ts_ms for e in seen.isr_changes()) / 1000 - paused_at
    print(f"shrink reported {shrunk_after_s:.1f} s after the pause, {max(lags_ms)} ms after the write")

    seen.events.clear()
    # Kafka's own expand first, as the znodes say it; then the source must have reported it at once.
    rejoined = wait_for(lambda: all(len(state_isr(znodes, "zk-pause", p)) == 3 for p in (0, 1)), RESUME_S)
    assert rejoined, (
        f"Kafka did not add {paused} back within {RESUME_S} s: {rows_of(cluster, 'zk-pause')}\n"
        + kafka_events(cluster, logged)
    )
    wait_for(lambda: seen.scrape().isr == {0: 3, 1: 3}, WATCH_LAG_MS / 1000 + 5)
    znode_isr = {p: state_isr(znodes, "zk-pause", p) for p in (0, 1)}
    assert seen.isr == {0: 3, 1: 3}, f"the znodes say {znode_isr}, the source {seen.isr}"
    expands = {e.fields["partition"]: e for e in seen.isr_changes()}
    assert {p: (e.fields["change"], sorted(e.fields["new_isr"])) for p, e in expands.items()} == {
        0: ("expand", [1, 2, 3]),
        1: ("expand", [1, 2, 3]),
    }
    for p, event in expands.items():
        lag_ms = event.ts_ms - state_mtime_ms(znodes, "zk-pause", p)
        assert 0 <= lag_ms <= WATCH_LAG_MS, f"partition {p} reported {lag_ms} ms after its znode was written"
    expanded_after_s = max(e.ts_ms for e in seen.isr_changes()) / 1000 - resumed_at
    print(f"expand reported {expanded_after_s:.1f} s after the resume")

    rows = rows_when(lambda rows: [len(r.isr) for r in rows.values()] == [3, 3], cluster, "zk-pause")
    assert rows, "kafka-topics never showed the ISR full again"
    assert {p: len(r.isr) for p, r in rows.items()} == seen.scrape().isr
    assert {p: r.leader for p, r in rows.items()} == seen.leader


def test_a_killed_controller_is_replaced_and_the_source_reports_the_failover(cluster, znodes, source):
    assert len(live(cluster)) >= 2, "needs two live brokers"
    old, epoch = controller(znodes)
    jmx = kafka_tools.jmx_values(cluster.nodes[old].jmx_address, ACTIVE_CONTROLLER)
    assert jmx == {f"{ACTIVE_CONTROLLER}:Value": 1.0}
    seen = Seen(source, "-")
    assert wait_for(lambda: seen.scrape().controllers(), 10) == [(old, epoch)]  # the first one, at start

    killed_at = time.time()
    cluster.kill(old)
    wait_for(lambda: seen.scrape().controllers()[-1][0] not in (old, -1), INCIDENT_S)
    new, new_epoch = seen.controllers()[-1]
    assert new not in (old, -1), f"no new controller reported within {INCIDENT_S} s of the kill"
    assert (new, new_epoch) == controller(znodes) and new_epoch == epoch + 1
    assert set(seen.controllers()[1:-1]) <= {(-1, epoch), (-1, new_epoch)}  # no controller for a moment
    failover_s = [e.ts_ms for e in seen.events if e.type == "controller_change"][-1] / 1000 - killed_at
    print(f"new controller reported {failover_s:.1f} s after the kill")
    jmx = kafka_tools.jmx_values(cluster.nodes[new].jmx_address, ACTIVE_CONTROLLER)
    assert jmx == {f"{ACTIVE_CONTROLLER}:Value": 1.0}


def test_a_killed_broker_takes_its_replication_factor_1_partitions_offline(cluster, znodes, source):
    alive = live(cluster)
    assert len(alive) >= 2, "needs two live brokers"
    broker_id, _ = controller(znodes)
    victim = next(i for i in alive if i != broker_id)
    create_topic(cluster, "zk-rf1", [[victim], [broker_id], [victim], [broker_id]])
    rows = rows_when(lambda rows: [r.leader >= 0 for r in rows.values()] == [True] * 4, cluster, "zk-rf1")
    leaders = {p: r.leader for p, r in rows.items()}
    assert leaders == {0: victim, 1: broker_id, 2: victim, 3: broker_id}
    seen = Seen(source, "zk-rf1").scrape()
    assert seen.leader == leaders and seen.isr == seen.replicas == {p: 1 for p in range(4)}

    killed_at = time.time()
    cluster.kill(victim)
    wait_for(lambda: seen.scrape().leader == {0: -1, 1: broker_id, 2: -1, 3: broker_id}, INCIDENT_S)
    assert seen.leader == {0: -1, 1: broker_id, 2: -1, 3: broker_id}, f"not offline within {INCIDENT_S} s"
    offline = rows_when(lambda rows: len(rows) == 2, cluster, "zk-rf1", "--unavailable-partitions")
    assert {p: r.leader for p, r in offline.items()} == {0: -1, 2: -1}
    assert {p: len(offline[p].isr) for p in offline} == {p: seen.isr[p] for p in offline} == {0: 1, 2: 1}
    for p in (0, 2):  # Kafka keeps the last ISR member of a partition without a leader
        state = json.loads(znodes.get(f"/brokers/topics/zk-rf1/partitions/{p}/state")[0])
        assert (state["leader"], state["isr"]) == (-1, [victim])
    changes = {e.fields["partition"]: e.fields for e in seen.isr_changes()}
    assert {p: (c["change"], c["leader"], c["new_isr"]) for p, c in changes.items()} == {
        0: ("leader_change", -1, [victim]),
        2: ("leader_change", -1, [victim]),
    }
    offline_after_s = max(e.ts_ms for e in seen.isr_changes()) / 1000 - killed_at
    print(f"offline partitions reported {offline_after_s:.1f} s after the kill")


def test_no_broker_wrote_an_isr_change_notification(cluster, znodes, notifications):
    """Since inter-broker protocol 2.7-IV2 a leader asks the controller to change an ISR (AlterPartition)
    instead of writing the state znode and, 5 to 7.5 s later, a notification: the ISR changes of the tests
    above (a leader's expand among them) left none. Waits until the newest state write is 8 s old."""
    seen, calls = notifications
    assert calls, "the notification watch never ran"
    writes = [
        state_mtime_ms(znodes, topic, int(p))
        for topic in znodes.get_children("/brokers/topics")
        for p in znodes.get_children(f"/brokers/topics/{topic}/partitions")
    ]
    time.sleep(max(0.0, max(writes, default=0) / 1000 + 8 - time.time()))
    assert seen == set()

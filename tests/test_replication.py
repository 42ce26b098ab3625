"""Replication health against known answers: Kafka's definitions on hand-built scrapes, and the
slow-follower scenario of the simulator."""

from __future__ import annotations

import math
import pickle

import pytest
from chunks import fed_both_ways

from common import names
from simulator.scenario import Simulation, load_scenario
from spark_jobs.analysis import Observation
from spark_jobs.replication import ReplicationAnalysis

fed = fed_both_ways(ReplicationAnalysis)  # every test: one by one (the reference) and in chunks (the stream)


def metadata(t_s, topic, partitions, cluster="c") -> list[Observation]:
    """One metadata scrape: ``partitions`` maps partition -> (replicas, isr, leader)."""
    out = []
    for partition, values in partitions.items():
        labels = {"topic": topic, "partition": str(partition)}
        for name, value in zip(
            (names.PARTITION_REPLICAS, names.PARTITION_ISR, names.PARTITION_LEADER), values, strict=True
        ):
            out.append(Observation(name, cluster, "admin/metadata", labels, t_s, value, None))
    return out


def gauge(name, t_s, broker, value, cluster="c", **labels) -> Observation:
    return Observation(
        name, cluster, f"exporter/broker-{broker}", {"broker": str(broker), **labels}, t_s, value, None
    )


def event(kind, t_s, cluster="c", **fields) -> Observation:
    return Observation(kind, cluster, "zookeeper/isr", {}, t_s, None, fields)


def isr_change(t_s, old, new, leader, change, partition=0, topic="orders", cluster="c") -> Observation:
    return event("isr_change", t_s, cluster, topic=topic, partition=partition, old_isr=old, new_isr=new,
                 leader=leader, leader_epoch=-1, change=change)  # fmt: skip


def metrics(analysis: ReplicationAnalysis) -> dict:
    return {(name, labels): value for name, labels, value in analysis.evaluate().metrics}


def by_cause(analysis, name, topic="orders", cluster="c") -> dict[str, float]:
    """A topic series per cause broker ("" when unknown)."""
    series = metrics(analysis).items()
    return {labels[2]: v for (n, labels), v in series if n == name and labels[:2] == (cluster, topic)}


def topic_state(analysis, topic="orders", cluster="c") -> tuple:
    """Partitions (summed over causes) and longest seconds (over causes) per state."""
    out = []
    for state in ("under_replicated", "under_min_isr", "offline"):
        out.append(sum(by_cause(analysis, f"kobs_topic_{state}_partitions", topic, cluster).values()))
        out.append(max(by_cause(analysis, f"kobs_topic_{state}_seconds", topic, cluster).values()))
    return tuple(out)


HEALTHY = {0: (3, 3, 1), 1: (3, 3, 2), 2: (3, 3, 0)}
MIN_ISR_2 = Observation(names.TOPIC_MIN_ISR, "c", "admin/metadata", {"topic": "orders"}, 0, 2, None)


def test_partition_states_counts_and_time_in_state_per_topic():
    analysis = ReplicationAnalysis()
    analysis.observe([MIN_ISR_2, *metadata(0, "orders", HEALTHY)])
    assert topic_state(analysis) == (0, 0, 0, 0, 0, 0)  # healthy: series exist, with 0
    assert metrics(analysis)["kobs_topic_replication_factor", ("c", "orders")] == 3
    # 30 s: p0 lost one follower (under-replicated), p1 two (also under min ISR 2), p2 its leader (offline,
    # keeping its last ISR member: under-replicated and under min ISR too).
    analysis.observe(metadata(30, "orders", {0: (3, 2, 1), 1: (3, 1, 2), 2: (3, 1, -1)}))
    assert topic_state(analysis) == (3, 0, 2, 0, 1, 0)
    # 60 s: p1 is whole again; p0 and p2 have been in their states since 30 s.
    analysis.observe(metadata(60, "orders", {0: (3, 2, 1), 1: (3, 3, 2), 2: (3, 1, -1)}))
    assert topic_state(analysis) == (2, 30, 1, 30, 1, 30)
    rows = {(r["scope"], r["partition"]): r for r in analysis.evaluate().history}
    assert set(rows) == {("topic", None), ("partition", "0"), ("partition", "2"), ("cluster", None)}
    assert (rows["partition", "2"]["offline"], rows["partition", "2"]["offline_s"]) == (1, 30)
    # 90 s all healthy: time in state resets to 0; p0 relapses at 120 s and counts from 120, not 30.
    analysis.observe(metadata(90, "orders", HEALTHY))
    assert topic_state(analysis) == (0, 0, 0, 0, 0, 0)
    analysis.observe(metadata(120, "orders", {**HEALTHY, 0: (3, 2, 1)}))
    analysis.observe(metadata(150, "orders", {**HEALTHY, 0: (3, 2, 1)}))
    assert topic_state(analysis)[:2] == (1, 30)


def test_min_insync_replicas_defaults_to_kafkas_1_and_replication_factor_is_the_smallest():
    analysis = ReplicationAnalysis()
    analysis.observe(metadata(0, "logs", {0: (3, 1, 0), 1: (1, 1, 1)}))
    assert topic_state(analysis, "logs") == (1, 0, 0, 0, 0, 0)
    assert metrics(analysis)["kobs_topic_replication_factor", ("c", "logs")] == 1


def test_brokers_up_while_reporting_and_active_controllers_among_them():
    analysis = ReplicationAnalysis(stale_after_s=45)
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 0, b, int(b == 0)) for b in range(3)])
    m = metrics(analysis)
    assert [m["kobs_broker_up", ("c", str(b))] for b in range(3)] == [1, 1, 1]
    assert m["kobs_cluster_active_controllers", ("c",)] == 1
    # Broker 0 (the controller) dies at 10 s; broker 1 takes over. Its last "1" must not count past 45 s.
    analysis.observe(
        [gauge(names.ACTIVE_CONTROLLER, t, b, int(b == 1)) for t in (15, 30, 60) for b in (1, 2)]
    )
    m = metrics(analysis)
    assert [m["kobs_broker_up", ("c", str(b))] for b in range(3)] == [0, 1, 1]
    assert m["kobs_cluster_active_controllers", ("c",)] == 1
    # A zombie: broker 2 also claims the controller.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 75, 1, 1), gauge(names.ACTIVE_CONTROLLER, 75, 2, 1)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 2


def test_a_controller_handover_seen_by_the_new_controllers_scrape_first_is_one_controller():
    """Each broker's JMX is scraped on its own schedule, seconds apart: after a handover the new controller
    may read 1 before the old one's next scrape reads 0 (a CI run paged "2 active controllers" for this)."""
    analysis = ReplicationAnalysis(stale_after_s=45)
    analysis.observe(
        [*registered(0, (1, 2, 3)), *(gauge(names.ACTIVE_CONTROLLER, 0, b, int(b == 1)) for b in (1, 2, 3))]
    )
    # Broker 1 read 1 at 10 s; the leadership moves to broker 2 at 12 s, whose scrape at 14 s reads 1.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 10, 1, 1), gauge(names.ACTIVE_CONTROLLER, 14, 2, 1)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 25, 1, 0)])  # broker 1's next scrape
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    # A late answer from broker 1 taken before the handover changes nothing.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 11, 1, 1)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    # Broker 1 claims the controller again while broker 2 still does: two controllers, both read after
    # the newer one became the controller.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 40, 1, 1), gauge(names.ACTIVE_CONTROLLER, 44, 2, 1)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 2


def test_zeros_read_before_the_controller_stopped_are_no_evidence_of_no_controller():
    """Between the moment the controller stops and the new controller's next scrape, the other brokers' 0s
    were read while the old one still led: a CI run paged "0 active controllers" after a controller hung
    (SIGSTOP), fenced by the metadata scrape before the new controller's JMX answered."""
    analysis = ReplicationAnalysis(stale_after_s=45)
    controller_3 = [gauge(names.ACTIVE_CONTROLLER, 30, b, int(b == 3)) for b in (1, 2, 3)]
    analysis.observe([o for t in (25, 30, 35) for o in registered(t, (1, 2, 3))] + controller_3)
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    # Broker 3 hangs at 36 s; broker 1 is elected at 38 s; the scrape at 45 s no longer lists broker 3.
    analysis.observe(registered(40, (1, 2, 3)) + registered(45, (1, 2)))
    assert ("kobs_cluster_active_controllers", ("c",)) not in metrics(analysis)  # unknown, not 0
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 46, 2, 0)])  # broker 1 not read yet
    assert ("kobs_cluster_active_controllers", ("c",)) not in metrics(analysis)
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 47, 1, 1)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    # Broker 1 steps down at 60 s, and is read first (0 at 61 s): broker 2's 0 from 46 s says nothing of now.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 61, 1, 0)])
    assert ("kobs_cluster_active_controllers", ("c",)) not in metrics(analysis)
    # Both read 0 after that: no controller by Kafka's own gauges, which pages.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 62, 2, 0)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 0


def test_dedicated_kraft_controllers_count_for_the_controller_and_are_not_brokers():
    """A KRaft cluster with dedicated controllers 100-102 (listed under ``jmx``, as docs/collectors.md says):
    only they have ``kafka.controller`` beans, and the cluster's broker list never names them. They used to
    be brokers that the metadata called down: KafkaBrokerDown paged for each, and the count was unknown."""
    analysis = ReplicationAnalysis(stale_after_s=45, forget_after_s=15)
    for t in (0, 5, 10, 15):
        analysis.observe(
            [*registered(t, (1, 2, 3)), *(gauge(names.PARTITION_COUNT, t, b, 10) for b in (1, 2, 3))]
            + [gauge(names.ACTIVE_CONTROLLER, t, b, int(b == 100)) for b in (100, 101, 102)]
        )
    m = metrics(analysis)
    assert {labels[1]: v for (name, labels), v in m.items() if name == "kobs_broker_up"} == {
        "1": 1,
        "2": 1,
        "3": 1,
    }
    assert m["kobs_cluster_active_controllers", ("c",)] == 1
    # Controller 100 hangs after 15 s; 101 takes over, read at 20 s: one controller.
    analysis.observe(
        registered(20, (1, 2, 3)) + [gauge(names.ACTIVE_CONTROLLER, 20, b, int(b == 101)) for b in (101, 102)]
    )
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    # 101 hangs too (no quorum): 102 keeps reading 0; once the others are silent past 45 s, none.
    analysis.observe(
        [
            o
            for t in range(25, 71, 5)
            for o in (*registered(t, (1, 2, 3)), gauge(names.ACTIVE_CONTROLLER, t, 102, 0))
        ]
    )
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 0


def test_a_state_stored_before_the_controller_handover_fields_reads_back():
    old = ReplicationAnalysis()
    old.observe([gauge(names.ACTIVE_CONTROLLER, 0, b, int(b == 1)) for b in (1, 2)])
    for name in ("controller_read_s", "controller_since_s", "controller_lost_s"):  # as pickled before
        delattr(old.clusters["c"], name)
    restored = pickle.loads(pickle.dumps(old))
    restored.observe([gauge(names.ACTIVE_CONTROLLER, 5, 2, 1)])  # a handover, broker 1 not scraped since
    assert metrics(restored)["kobs_cluster_active_controllers", ("c",)] == 1
    restored.observe([gauge(names.ACTIVE_CONTROLLER, 9, 1, 0)])
    assert metrics(restored)["kobs_cluster_active_controllers", ("c",)] == 1


def registered(t_s, brokers, cluster="c") -> list[Observation]:
    """One metadata scrape's broker list."""
    return [
        Observation(names.BROKER_REGISTERED, cluster, "admin/metadata", {"broker": str(b)}, t_s, 1, None)
        for b in brokers
    ]


def test_the_clusters_broker_list_decides_who_is_up_not_a_failing_jmx_scrape():
    analysis = ReplicationAnalysis(stale_after_s=45, forget_after_s=90)
    analysis.observe(
        [*registered(0, (1, 2, 3)), *(gauge(names.ACTIVE_CONTROLLER, 0, b, int(b == 1)) for b in (1, 2, 3))]
    )
    # From 0 s on every JMX scrape fails (an overloaded collector, a firewall): no broker gauges for 120 s,
    # while the metadata keeps listing all three brokers. Nobody is down, and the controller count is
    # unknown, not 0: neither may page.
    analysis.observe([o for t in range(30, 121, 30) for o in registered(t, (1, 2, 3))])
    m = metrics(analysis)
    assert [m["kobs_broker_up", ("c", str(b))] for b in (1, 2, 3)] == [1, 1, 1]
    assert ("kobs_cluster_active_controllers", ("c",)) not in m
    # Broker 2 is fenced (killed, or hung past its session): the next metadata scrape no longer lists it.
    analysis.observe(registered(150, (1, 3)))
    m = metrics(analysis)
    assert [m["kobs_broker_up", ("c", str(b))] for b in (1, 2, 3)] == [1, 0, 1]
    # Its controller gauge, had it reported one late, does not count while it is not listed.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 151, b, 1) for b in (1, 2)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1


def test_without_broker_gauges_the_controller_event_counts():
    analysis = ReplicationAnalysis()
    analysis.observe([event("controller_change", 0, controller_id=1, controller_epoch=2)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 1
    analysis.observe([event("controller_change", 5, controller_id=-1, controller_epoch=2)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 0


def test_unclean_elections_from_counters_and_events_are_not_counted_twice():
    analysis = ReplicationAnalysis()
    # Controller counter of broker 1: baseline 4, +1, then broker 1 restarts (counter back to 0) and +1.
    counter = [
        gauge(names.UNCLEAN_ELECTIONS, t, 1, v) for t, v in ((0, 4), (15, 4), (30, 5), (45, 0), (60, 1))
    ]
    analysis.observe(counter)
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 2
    # The same elections seen as ISR events: offline with last ISR member 1, then broker 2 leads.
    analysis.observe([
        isr_change(28, [1, 2], [1], 1, "shrink"), isr_change(29, [1], [2], 2, "replace"),
        isr_change(58, [2], [1], 1, "replace"),
    ])  # fmt: skip
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 2
    events_only = ReplicationAnalysis()
    events_only.observe([isr_change(29, [1], [2], 2, "replace", cluster="z")])
    assert metrics(events_only)["kobs_unclean_leader_elections_total", ("z",)] == 1


def test_unclean_elections_are_counted_from_the_active_controller_only():
    """KRaft: every controller replays the metadata log, so each one's UncleanLeaderElectionsPerSec counts
    the same election (seen on a real Kafka 4.3 cluster); only the active controller's increments count."""
    analysis = ReplicationAnalysis()
    for t, unclean in ((0, 0), (15, 1)):
        analysis.observe(
            [gauge(names.UNCLEAN_ELECTIONS, t, b, unclean) for b in (1, 2, 3)]
            + [gauge(names.ACTIVE_CONTROLLER, t, b, int(b == 2)) for b in (1, 2, 3)]
        )  # the counters come before the gauges in the batch: the gauge of the same scrape still decides
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 1
    # Controller 3 takes over; its counter (which also counted the first election) goes on from there.
    analysis.observe(
        [gauge(names.UNCLEAN_ELECTIONS, 30, b, 2) for b in (1, 2, 3)]
        + [gauge(names.ACTIVE_CONTROLLER, 30, b, int(b == 3)) for b in (1, 2, 3)]
    )
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 2


def test_a_restarting_former_controller_read_before_its_gauge_adds_no_election():
    """A Kafka 4.3 node starting here served ControllerStats 0.6 s before KafkaController's
    ActiveControllerCount: a scrape in between has the counter (replayed from the metadata log since the
    node's last snapshot, so lower than before it died) without the gauge, whose last reading is the 1 from
    when this node was the active controller. Neither that stale 1 nor the lower value is a new election."""
    analysis = ReplicationAnalysis()
    for t, unclean in ((0, 0), (15, 2)):  # controller 1 elects two leaders uncleanly; every node counts them
        analysis.observe(
            [gauge(names.UNCLEAN_ELECTIONS, t, b, unclean) for b in (1, 2, 3)]
            + [gauge(names.ACTIVE_CONTROLLER, t, b, int(b == 1)) for b in (1, 2, 3)]
        )
    # Node 1 dies; node 2 takes over. Node 1 restarts: its first scrape has only the replayed counter.
    analysis.observe(
        [gauge(names.UNCLEAN_ELECTIONS, 30, b, 2) for b in (2, 3)]
        + [gauge(names.ACTIVE_CONTROLLER, 30, b, int(b == 2)) for b in (2, 3)]
    )
    analysis.observe([gauge(names.UNCLEAN_ELECTIONS, 45, 1, 1)])
    analysis.observe([gauge(names.UNCLEAN_ELECTIONS, 60, 1, 2), gauge(names.ACTIVE_CONTROLLER, 60, 1, 0)])
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 2
    # A late scrape of the active controller, older than its counter already taken, adds nothing either.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 20, 2, 1), gauge(names.UNCLEAN_ELECTIONS, 20, 2, 0)])
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 75, 2, 1), gauge(names.UNCLEAN_ELECTIONS, 75, 2, 3)])
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 3


def test_isr_changes_by_kind_once_each_and_brokers_out_of_isr():
    analysis = ReplicationAnalysis()
    zookeeper = [
        isr_change(10, [1, 2, 3], [1, 3], 1, "shrink", partition=0),
        isr_change(11, [1, 2, 3], [1, 3], 1, "shrink", partition=1),
        isr_change(40, [1, 3], [1, 2, 3], 1, "expand", partition=0),
        isr_change(50, [1, 2, 3], [1, 2, 3], 3, "leader_change", partition=0),
    ]
    metadata_source = [o._replace(source="admin/metadata", t_s=o.t_s + 5) for o in zookeeper]
    analysis.observe([*zookeeper, *metadata_source])
    m = metrics(analysis)
    counts = {
        kind: m["kobs_isr_changes_total", ("c", "orders", kind)]
        for kind in ("shrink", "expand", "replace", "leader_change")
    }
    assert counts == {"shrink": 2, "expand": 1, "replace": 0, "leader_change": 1}
    assert m["kobs_broker_out_of_isr_partitions", ("c", "2")] == 1  # still out of partition 1
    # Metadata shows partition 1 whole again (the expand was missed): broker 2 is out of nothing.
    analysis.observe(metadata(60, "orders", {0: (3, 3, 3), 1: (3, 3, 1)}))
    assert metrics(analysis)["kobs_broker_out_of_isr_partitions", ("c", "2")] == 0


def test_bad_samples_are_skipped_and_counted():
    analysis = ReplicationAnalysis()
    bad = [
        Observation(names.PARTITION_ISR, "c", "admin/metadata", {"topic": "orders"}, 0, 2, None),
        Observation(
            names.PARTITION_ISR,
            "c",
            "admin/metadata",
            {"topic": "orders", "partition": "0"},
            0,
            math.nan,
            None,
        ),
        Observation(names.ACTIVE_CONTROLLER, "c", "exporter/broker-1", {}, 0, 1, None),
        event("controller_change", 0, controller_id="one"),
    ]
    analysis.observe([*bad, *metadata(0, "orders", {0: (3, 2, 1)})])
    assert analysis.skipped == 4
    assert topic_state(analysis)[0] == 1


def test_a_deleted_topic_is_forgotten():
    analysis = ReplicationAnalysis(forget_after_s=90)
    analysis.observe([*metadata(0, "old", {0: (3, 2, 1)}), *metadata(0, "orders", HEALTHY)])
    for t_s in (30, 60, 90):
        analysis.observe(metadata(t_s, "orders", HEALTHY))
    assert ("kobs_topic_under_replicated_partitions", ("c", "old", "")) in metrics(analysis)
    analysis.observe(metadata(120, "orders", HEALTHY))
    assert ("kobs_topic_under_replicated_partitions", ("c", "old", "")) not in metrics(analysis)


def test_scenario_c_slow_follower_under_replicated_from_lag_time_until_caught_up():
    # slow-follower: broker 2 throttled from 20 s to 120 s leaves the ISRs of the 2 partitions it follows
    # after replica.lag.time.max.ms (10 s), i.e. at about 30 s, and rejoins after 120 s. Scrapes every 1 s.
    sim = Simulation(load_scenario("slow-follower"))
    analysis = ReplicationAnalysis()
    answers = {}
    for t in range(1, 181):
        sim.advance(1)
        partitions = {p.index: (len(p.replicas), len(p.isr), p.leader) for p in sim.cluster.partitions}
        analysis.observe(metadata(float(t), "payments", partitions, cluster="sim"))
        if t in (29, 100, 180):
            answers[t] = topic_state(analysis, "payments", "sim")
    assert answers[29] == (0, 0, 0, 0, 0, 0)
    count, seconds = answers[100][:2]
    assert count == 2 and seconds == pytest.approx(100 - 30, abs=1)
    assert answers[100][2:] == (0, 0, 0, 0)  # min.insync.replicas 1: still accepting acks=all
    assert answers[180] == (0, 0, 0, 0, 0, 0)


def test_state_survives_a_snapshot():
    analysis = ReplicationAnalysis()
    analysis.observe([MIN_ISR_2, *metadata(0, "orders", {0: (3, 1, 1)})])
    restored = pickle.loads(pickle.dumps(analysis))
    for a in (analysis, restored):
        a.observe(metadata(30, "orders", {0: (3, 1, 1)}))
    assert metrics(restored) == metrics(analysis)


def test_each_partition_has_its_own_series_and_each_broker_kafkas_leader_imbalance():
    # orders-0 led by its preferred replica 1; orders-1 by 3 though 2 is preferred, one replica out of
    # sync; orders-2 offline, its preferred replica 3. Brokers 1-3 registered.
    analysis = ReplicationAnalysis()
    scrape = metadata(10, "orders", {0: (3, 3, 1), 1: (3, 2, 3), 2: (3, 0, -1)})
    preferred = {0: 1, 1: 2, 2: 3}
    scrape += [
        Observation(names.PARTITION_PREFERRED_LEADER, "c", "admin/metadata",
                    {"topic": "orders", "partition": str(p)}, 10, b, None)
        for p, b in preferred.items()
    ]  # fmt: skip
    scrape += [
        Observation(names.BROKER_REGISTERED, "c", "admin/metadata", {"broker": str(b)}, 10, 1, None)
        for b in (1, 2, 3)
    ]
    analysis.observe(scrape)
    m = metrics(analysis)

    def series(name):
        return {labels[-1]: value for (n, labels), value in m.items() if n == name}

    assert series("kobs_partition_leader") == {"0": 1, "1": 3, "2": -1}
    assert series("kobs_partition_replicas") == {"0": 3, "1": 3, "2": 3}
    assert series("kobs_partition_in_sync_replicas") == {"0": 3, "1": 2, "2": 0}
    assert series("kobs_partition_under_replicated") == {"0": 0, "1": 1, "2": 1}
    assert series("kobs_partition_leader_is_preferred") == {"0": 1, "1": 0, "2": 0}
    assert series("kobs_broker_leader_partitions") == {"1": 1, "2": 0, "3": 1}
    # Kafka's controller: of the partitions a broker is preferred leader of, the share it does not lead
    assert series("kobs_broker_leader_imbalance_ratio") == {"1": 0.0, "2": 1.0, "3": 1.0}
    # a preferred leader election (kafka-leader-election --election-type PREFERRED) puts 2 back on orders-1
    analysis.observe(metadata(20, "orders", {0: (3, 3, 1), 1: (3, 3, 2), 2: (3, 0, -1)}))
    m = metrics(analysis)
    assert series("kobs_broker_leader_imbalance_ratio")["2"] == 0.0
    assert series("kobs_partition_leader_is_preferred")["1"] == 1


def test_no_controller_among_the_brokers_that_reported_is_unknown_while_a_listed_one_has_not():
    analysis = ReplicationAnalysis(stale_after_s=45, forget_after_s=90)
    analysis.observe(
        [*registered(0, (1, 2, 3)), *(gauge(names.ACTIVE_CONTROLLER, 0, b, int(b == 3)) for b in (1, 2, 3))]
    )
    # Broker 3, the controller, is still listed but its JMX scrapes stop answering (a busy host); 1 and 2
    # report 0. The count is unknown, not 0 (which would page): 3 may well still be the controller.
    analysis.observe([o for t in (30, 60) for o in (*registered(t, (1, 2, 3)),
                      *(gauge(names.ACTIVE_CONTROLLER, t, b, 0) for b in (1, 2)))])  # fmt: skip
    assert ("kobs_cluster_active_controllers", ("c",)) not in metrics(analysis)
    # Broker 3 answers again, 0: it stopped being the controller by 61 s, so the 0s of 1 and 2 read at 60 s
    # say nothing yet; once both are read after it, every listed broker says 0: no controller, known.
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 61, 3, 0)])
    assert ("kobs_cluster_active_controllers", ("c",)) not in metrics(analysis)
    analysis.observe([gauge(names.ACTIVE_CONTROLLER, 75, b, 0) for b in (1, 2)])
    assert metrics(analysis)["kobs_cluster_active_controllers", ("c",)] == 0

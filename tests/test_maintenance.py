"""Planned restarts told from crashes, the cause broker of each troubled partition, reassignments and the
unclean elections the ISR events prove, on hand-built scrapes that follow what a real Kafka 4.3 cluster
showed (every controller's ControlledShutdownBrokerCount went to 1 at the SIGTERM and stayed 1 until the
broker registered again; SIGKILL and SIGSTOP left it 0; a replication-factor-1 partition's ISR emptied
when its only replica left). ``tests/test_demo_stack.py`` plays the same on the real cluster."""

from __future__ import annotations

from chunks import fed_both_ways
from test_replication import MIN_ISR_2, by_cause, gauge, isr_change, metadata, metrics

from common import names
from spark_jobs.analysis import Observation
from spark_jobs.maintenance import Departures
from spark_jobs.replication import ReplicationAnalysis

fed = fed_both_ways(ReplicationAnalysis)

RF3 = {0: (3, 3, 1), 1: (3, 3, 2), 2: (3, 3, 3)}  # partition -> (replicas, ISR, leader)


def listed(t_s, *brokers, cluster="c") -> list[Observation]:
    return [Observation(names.BROKER_REGISTERED, cluster, "admin/metadata", {"broker": str(b)}, t_s, 1, None)
            for b in brokers]  # fmt: skip


def shutting_down(t_s, count, controllers=(1, 2, 3)) -> list[Observation]:
    """Every controller's ControlledShutdownBrokerCount at ``t_s``."""
    return [gauge(names.CONTROLLED_SHUTDOWN_BROKERS, t_s, b, count) for b in controllers]


def broker(analysis, broker_id, cluster="c") -> tuple[float, float, float]:
    """(up, maintenance, maintenance seconds) of one broker."""
    m = metrics(analysis)
    names_ = ("kobs_broker_up", "kobs_broker_maintenance", "kobs_broker_maintenance_seconds")
    return tuple(m[name, (cluster, str(broker_id))] for name in names_)


def restart_of_2(analysis, planned: bool) -> None:
    """Broker 2 leaves at 15 s (its ISRs shrink, the partition it led moves to 3) and is back at 40 s."""
    analysis.observe([*listed(0, 1, 2, 3), *metadata(0, "orders", RF3), *shutting_down(0, 0)])
    if planned:
        analysis.observe(shutting_down(12, 1))  # SIGTERM: counted while it is still listed
    analysis.observe([
        *listed(15, 1, 3), *metadata(15, "orders", {0: (3, 2, 1), 1: (3, 2, 3), 2: (3, 2, 3)}),
        isr_change(15, [1, 2, 3], [1, 3], 1, "shrink", partition=0),
        isr_change(15, [2, 3, 1], [3, 1], 3, "shrink", partition=1),
        isr_change(15, [3, 1, 2], [3, 1], 3, "shrink", partition=2),
    ])  # fmt: skip
    analysis.observe(shutting_down(25, int(planned)))


def test_a_controlled_shutdown_is_maintenance_until_the_broker_is_back_in_every_isr():
    analysis = ReplicationAnalysis()
    restart_of_2(analysis, planned=True)
    assert broker(analysis, 2) == (0, 1, 10)  # away since the scrape at 15 s
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0, "2": 3}
    analysis.observe(
        [*listed(40, 1, 2, 3), *metadata(40, "orders", {0: (3, 2, 1), 1: (3, 2, 3), 2: (3, 2, 3)})]
    )
    assert broker(analysis, 2) == (1, 1, 25)  # back, catching up: still maintenance
    analysis.observe([
        *listed(45, 1, 2, 3), *metadata(45, "orders", {0: (3, 3, 1), 1: (3, 3, 3), 2: (3, 3, 3)}),
        *(isr_change(45, [1, 3], [1, 3, 2], 1, "expand", partition=p) for p in (0, 1, 2)),
    ])  # fmt: skip
    assert broker(analysis, 2) == (1, 0, 0)  # in every ISR again: over
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0}


def test_a_restart_of_a_broker_back_but_not_yet_settled_is_a_new_departure():
    """Broker 2 is back and still catching up when it is stopped again: the new restart's time counts from
    its new departure (it once kept the first one's, and paged as overdue at once)."""
    analysis = ReplicationAnalysis(maintenance_grace_s=60)
    restart_of_2(analysis, planned=True)
    analysis.observe(
        [*listed(40, 1, 2, 3), *metadata(40, "orders", {0: (3, 2, 1), 1: (3, 2, 3), 2: (3, 2, 3)})]
    )
    analysis.observe([*shutting_down(95, 1), *listed(100, 1, 3)])
    assert broker(analysis, 2) == (0, 1, 0)  # planned, away since 100 s: not 85 s, past the grace


def test_a_deleted_partition_leaves_no_broker_out_of_its_isr():
    analysis = ReplicationAnalysis(forget_after_s=30)
    analysis.observe(
        [*metadata(0, "gone", {0: (3, 2, 1)}), isr_change(0, [1, 2, 3], [1, 3], 1, "shrink", topic="gone")]
    )
    analysis.observe(metadata(10, "orders", {0: (3, 3, 1)}))
    assert metrics(analysis)["kobs_broker_out_of_isr_partitions", ("c", "2")] == 1
    analysis.observe(metadata(50, "orders", {0: (3, 3, 1)}))  # "gone" deleted: not scraped for 40 s
    assert metrics(analysis)["kobs_broker_out_of_isr_partitions", ("c", "2")] == 0


def test_a_crash_is_no_maintenance():
    analysis = ReplicationAnalysis()
    restart_of_2(analysis, planned=False)
    assert broker(analysis, 2) == (0, 0, 0)
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0, "2": 3}
    # a later reading of 1 (another broker's shutdown) does not make the crash planned
    analysis.observe(shutting_down(35, 1))
    assert broker(analysis, 2) == (0, 0, 0)


def unexplained(analysis, broker_id, cluster="c") -> float:
    return metrics(analysis)["kobs_broker_departure_unexplained", (cluster, str(broker_id))]


def test_a_departure_is_unexplained_until_a_controller_reading_after_it_says_planned_or_not():
    """The pages its partitions cause wait for that word, to name the cause (kafka_replication.rules.yml)."""
    for planned in (True, False):
        analysis = ReplicationAnalysis()
        analysis.observe([*listed(0, 1, 2, 3), *shutting_down(0, 0)])
        analysis.observe(listed(15, 1, 3))
        assert unexplained(analysis, 2) == 1
        analysis.observe(shutting_down(20, int(planned)))
        assert (unexplained(analysis, 2), broker(analysis, 2)[1]) == (0, int(planned))


def test_a_departure_no_reading_explains_waits_30_s_and_none_where_no_controller_is_read():
    analysis = ReplicationAnalysis()
    analysis.observe([*listed(0, 1, 2, 3), *shutting_down(0, 0)])
    analysis.observe(listed(15, 1, 3))
    analysis.observe(listed(40, 1, 3))
    assert unexplained(analysis, 2) == 1
    analysis.observe(listed(45, 1, 3))
    assert unexplained(analysis, 2) == 0  # 30 s: the pages go out unexplained
    unread = ReplicationAnalysis()
    unread.observe(listed(0, 1, 2, 3))
    unread.observe(listed(15, 1, 3))
    assert unexplained(unread, 2) == 0


def test_the_restarting_nodes_own_controller_reading_0_while_it_starts_says_nothing():
    """A combined node's exporter answers as soon as its JVM starts again, its controller's count 0 until
    it has read the metadata; the other controllers count it (a real Kafka 4.3 cluster, SIGTERM of node 1
    leading partitions: 1 on nodes 2 and 3 from 0.3 s after the signal for 3.5 s, node 1's own 0
    meanwhile)."""
    analysis = ReplicationAnalysis()
    analysis.observe([*listed(0, 1, 2, 3), *shutting_down(0, 0)])
    analysis.observe(listed(5, 2, 3))
    analysis.observe(shutting_down(6, 0, controllers=(1,)))  # node 1 starting again: not yet caught up
    assert broker(analysis, 1)[1] == 0 and unexplained(analysis, 1) == 1
    analysis.observe(shutting_down(7, 1, controllers=(2, 3)))
    assert broker(analysis, 1)[1] == 1


def test_a_planned_restart_past_its_grace_is_overdue():
    analysis = ReplicationAnalysis(maintenance_grace_s=60)
    restart_of_2(analysis, planned=True)
    analysis.observe([*listed(75, 1, 3), *shutting_down(75, 1)])
    assert broker(analysis, 2) == (0, 1, 60)
    analysis.observe([*listed(90, 1, 3), *shutting_down(90, 1)])
    assert broker(analysis, 2) == (0, 2, 75)
    assert metrics(analysis)["kobs_maintenance_grace_seconds", ("c",)] == 60


def test_a_reading_before_the_metadata_that_shows_the_departure_still_classifies_it():
    """The collector's exporter and metadata scrapes travel in different records; a micro-batch may hold the
    controllers' reading of 20 s before the metadata scrape of 15 s that shows the broker gone."""
    analysis = ReplicationAnalysis()
    analysis.observe([*listed(0, 1, 2, 3), *shutting_down(0, 0)])
    analysis.observe(shutting_down(20, 1))
    assert broker(analysis, 2) == (1, 0, 0)
    analysis.observe(listed(15, 1, 3))
    assert broker(analysis, 2)[1] == 1


def test_a_reading_of_0_before_the_broker_left_says_nothing():
    """Read between the last scrape listing it and its SIGTERM, a 0 is no evidence of a crash."""
    departures = Departures()
    departures.listing(0, {"2": 0})
    departures.reading(5, 0, "9")  # before the SIGTERM at 7
    departures.listing(10, {"2": 0})  # fenced: gone at 10
    departures.reading(20, 1, "9")
    departures.classify()
    assert departures.away["2"].planned is True


def test_two_brokers_away_and_one_controlled_shutdown_are_both_unplanned():
    """The count cannot say which of two away brokers asked to leave: losing a second broker during
    maintenance is an incident, so neither is maintenance."""
    departures = Departures()
    departures.listing(0, {"1": 0, "2": 0, "3": 0})
    departures.listing(10, {"1": 10, "2": 0, "3": 0})
    departures.reading(12, 1, "9")
    departures.classify()
    assert {b: d.planned for b, d in departures.away.items()} == {"2": False, "3": False}


def test_a_second_planned_departure_needs_a_count_that_covers_both():
    departures = Departures()
    departures.listing(0, {"1": 0, "2": 0, "3": 0})
    departures.listing(10, {"1": 10, "2": 0, "3": 10})
    departures.reading(12, 1, "9")
    departures.listing(20, {"1": 10, "2": 0, "3": 20})  # 1 left too, 2 still away
    departures.reading(22, 2, "9")
    departures.classify()
    assert {b: d.planned for b, d in departures.away.items()} == {"1": True, "2": True}
    departures.listing(30, {"1": 10, "2": 0, "3": 20})  # and now 3: the count stays 2
    departures.reading(32, 2, "9")
    departures.classify()
    assert departures.away["3"].planned is False


def test_a_broker_back_before_any_reading_stays_unclassified_and_is_forgotten_once_in_sync():
    departures = Departures()
    departures.listing(0, {"2": 0})
    departures.listing(5, {"2": 0})
    departures.listing(10, {"2": 10})
    departures.reading(12, 0, "9")  # after its return: says nothing of the departure
    departures.classify()
    assert departures.away["2"].planned is None
    assert departures.state("2", 12, 600) == (0, 0)
    departures.settle(catching_up={"2"})
    assert "2" in departures.away
    departures.settle(catching_up=set())
    assert departures.away == {}


def test_each_troubled_partition_is_put_down_to_the_broker_that_left_its_isr():
    analysis = ReplicationAnalysis()
    analysis.observe([MIN_ISR_2, *listed(0, 1, 2, 3), *metadata(0, "orders", RF3)])
    # Broker 3 is hung: it leaves partitions 0 and 1; partition 2, which it led, moves to 1 and keeps 2.
    analysis.observe([
        *listed(10, 1, 2), *metadata(10, "orders", {0: (3, 2, 1), 1: (3, 2, 2), 2: (3, 1, 1)}),
        isr_change(10, [1, 2, 3], [1, 2], 1, "shrink", partition=0),
        isr_change(10, [2, 3, 1], [2, 1], 2, "shrink", partition=1),
        isr_change(10, [3, 1, 2], [1], 1, "shrink", partition=2),
    ])  # fmt: skip
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0, "2": 1, "3": 2}
    assert by_cause(analysis, "kobs_topic_shrunk_to_min_isr_partitions") == {"": 0, "3": 2}  # ISR 2 = min
    assert by_cause(analysis, "kobs_topic_under_min_isr_partitions") == {"": 0, "2": 1}
    rows = {r["partition"]: r for r in analysis.evaluate().history if r["scope"] == "partition"}
    assert {p: r["cause_broker"] for p, r in rows.items()} == {"0": "3", "1": "3", "2": "2"}


def test_the_next_broker_of_a_rolling_restart_starts_the_time_under_replicated_again():
    """No scrape saw the ISR whole between broker 1's return and broker 2's departure (scrapes every 5 s, a
    restart's full ISR lasting less): the time counts from broker 2's, not from broker 1's."""
    analysis = ReplicationAnalysis()
    analysis.observe(metadata(0, "orders", {0: (3, 3, 3)}))
    analysis.observe(
        [*metadata(10, "orders", {0: (3, 2, 3)}), isr_change(10, [3, 1, 2], [3, 2], 3, "shrink")]
    )
    analysis.observe([*metadata(30, "orders", {0: (3, 2, 3)}), isr_change(30, [3, 2], [3, 1], 3, "shrink")])
    analysis.observe(metadata(40, "orders", {0: (3, 2, 3)}))
    assert by_cause(analysis, "kobs_topic_under_replicated_seconds") == {"": 0, "2": 10}
    analysis.observe(metadata(50, "orders", {0: (3, 3, 3)}))
    assert by_cause(analysis, "kobs_topic_under_replicated_seconds") == {"": 0}


def test_an_offline_partition_is_put_down_to_its_last_replica_with_or_without_eligible_leaders():
    """KRaft with eligible leader replicas (Kafka 4.x) empties the ISR of a partition whose only replica
    leaves; ZooKeeper mode and older KRaft keep that replica in the ISR with leader -1."""
    for old, new in (([2], []), ([2], [2])):
        analysis = ReplicationAnalysis()
        analysis.observe(metadata(0, "orders", {0: (1, 1, 2), 1: (1, 1, 1)}))
        change = "shrink" if new != old else "leader_change"
        analysis.observe(
            [
                *metadata(10, "orders", {0: (1, len(new), -1), 1: (1, 1, 1)}),
                isr_change(10, old, new, -1, change),
            ]
        )
        assert by_cause(analysis, "kobs_topic_offline_partitions") == {"": 0, "2": 1}, (old, new)


def test_trouble_the_events_do_not_explain_has_no_cause():
    """A collector started while a follower was already out: no ISR event names it."""
    analysis = ReplicationAnalysis()
    analysis.observe(metadata(0, "orders", {0: (3, 2, 1)}))
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 1}


def test_a_reassignment_adding_replicas_is_not_under_replication():
    """kafka-reassign-partitions moving [1,2,3] to [4,5,6]: the metadata lists all six replicas until the new
    ones are in sync, then the three kept; no replica left the ISR in between."""
    analysis = ReplicationAnalysis()
    analysis.observe(metadata(0, "orders", {0: (3, 3, 1)}))
    analysis.observe(metadata(10, "orders", {0: (6, 3, 1)}))
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0}
    assert metrics(analysis)["kobs_topic_reassigning_partitions", ("c", "orders")] == 1
    analysis.observe(
        [*metadata(20, "orders", {0: (6, 6, 1)}), isr_change(20, [1, 2, 3], [1, 2, 3, 4, 5, 6], 1, "expand")]
    )
    analysis.observe(
        [*metadata(30, "orders", {0: (3, 3, 4)}), isr_change(30, [1, 2, 3, 4, 5, 6], [4, 5, 6], 4, "replace")]
    )
    assert metrics(analysis)["kobs_topic_reassigning_partitions", ("c", "orders")] == 0
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0}
    assert metrics(analysis)["kobs_broker_out_of_isr_partitions", ("c", "1")] == 0  # moved away, not out


def test_a_follower_lost_during_a_reassignment_is_under_replication():
    analysis = ReplicationAnalysis()
    analysis.observe(metadata(0, "orders", {0: (3, 3, 1)}))
    analysis.observe(
        [*metadata(10, "orders", {0: (4, 2, 1)}), isr_change(10, [1, 2, 3], [1, 2], 1, "shrink")]
    )
    assert by_cause(analysis, "kobs_topic_under_replicated_partitions") == {"": 0, "3": 1}
    assert metrics(analysis)["kobs_topic_reassigning_partitions", ("c", "orders")] == 0


def test_the_events_prove_an_unclean_election_only_when_the_new_leader_is_left_alone_in_the_isr():
    """Without controller counters. A rolling restart whose next SIGTERM came within a metadata scrape of
    the last broker's return: the scrapes saw [2, 3] led by 2, then [3, 1] led by 1, which rejoined and was
    elected in between (clean). An unclean election makes the out-of-sync replica the whole ISR."""
    analysis = ReplicationAnalysis()
    analysis.observe(
        [isr_change(10, [1, 2, 3], [2, 3], 2, "shrink"), isr_change(20, [2, 3], [3, 1], 1, "replace")]
    )
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 0
    analysis.observe([isr_change(30, [3, 1], [3], 3, "shrink"), isr_change(40, [3], [2], 2, "replace")])
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 1


def test_the_events_prove_an_unclean_election_after_kafka_4_emptied_the_isr():
    """Kafka 4's eligible leader replicas empty the ISR of a partition whose last in-sync replica leaves:
    electing that replica again is clean (it was in the last ISR with members); electing the replica that
    had fallen out before, with unclean.leader.election.enable, is not."""
    analysis = ReplicationAnalysis()
    analysis.observe([
        isr_change(10, [2, 3], [2], 2, "shrink"),  # 3 hangs and falls out
        isr_change(20, [2], [], -1, "shrink"),  # 2 dies: offline, the ISR emptied
        isr_change(30, [], [3], 3, "expand"),  # 3 is back and elected uncleanly
    ])  # fmt: skip
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 1
    clean = ReplicationAnalysis()
    clean.observe([isr_change(20, [2], [], -1, "shrink"), isr_change(30, [], [2], 2, "expand")])
    assert metrics(clean)["kobs_unclean_leader_elections_total", ("c",)] == 0


def test_kafkas_own_count_wins_over_the_events_where_a_controller_serves_it():
    analysis = ReplicationAnalysis()
    analysis.observe([gauge(names.UNCLEAN_ELECTIONS, t, 1, 0) for t in (0, 15)])
    analysis.observe([isr_change(10, [1], [2], 2, "replace")])  # looks unclean; Kafka did not count it
    assert metrics(analysis)["kobs_unclean_leader_elections_total", ("c",)] == 0

"""The simulator's model against Kafka's documented behaviour (docs/kafka-behaviour.md), computed by hand."""

from __future__ import annotations

import pytest

from simulator.cluster import Cluster
from simulator.consumer import ConsumerGroup, GroupSpec
from simulator.model import ClusterSettings, TopicSpec
from simulator.producer import Producer, ProducerSpec
from simulator.scenario import Scenario, ScenarioError, Simulation, builtin_names, load_scenario


def _cluster(settings: ClusterSettings | None = None, brokers: int = 3) -> Cluster:
    return Cluster(range(brokers), settings)


def test_hw_is_min_isr_leo_and_lags_one_fetch_round():
    c = _cluster()
    topic = c.create_topic(TopicSpec("t", 1, 3, message_bytes=100, start_index=0, replica_shift=0))
    p = topic.partitions[0]
    c.append(p, 50)
    c.step(0.1)  # followers fetch 50; the leader learns it at their next fetch
    assert p.leo == {0: 50, 1: 50, 2: 50}
    assert p.hw == 0
    c.step(0.1)
    assert p.hw == 50


def test_controller_failover_bumps_epoch_and_moves_leaders():
    c = _cluster()
    topic = c.create_topic(TopicSpec("t", 3, 3, start_index=0, replica_shift=0))
    assert (c.controller, c.controller_epoch) == (0, 1)
    c.kill_broker(0)
    assert (c.controller, c.controller_epoch) == (1, 2)
    # p0 [0,1,2] -> next live ISR replica in replica order is 1; p2 [2,0,1] keeps leader 2 with ISR [2,1].
    p0, _, p2 = topic.partitions
    assert (p0.leader, p0.isr, p0.leader_epoch) == (1, [1, 2], 1)
    assert (p2.leader, p2.isr) == (2, [2, 1])


def test_last_isr_member_dying_leaves_partition_offline_with_its_isr():
    c = _cluster()
    p = c.create_topic(TopicSpec("t", 1, 2, start_index=0, replica_shift=0)).partitions[0]  # [0, 1]
    c.kill_broker(1)
    assert p.isr == [0]
    c.kill_broker(0)
    assert (p.leader, p.isr) == (-1, [0])
    c.start_broker(1)  # out of sync, unclean election disabled: stays offline
    assert p.leader == -1
    c.start_broker(0)
    assert (p.leader, p.isr) == (0, [0])


def test_unclean_election_loses_the_uncopied_messages():
    c = _cluster(ClusterSettings(unclean_leader_election=True))
    p = c.create_topic(TopicSpec("t", 1, 2, start_index=0, replica_shift=0)).partitions[0]  # [0, 1]
    c.kill_broker(1)
    c.append(p, 500)  # only broker 0 has these
    c.start_broker(1)  # broker 1 is out of the ISR ...
    c.kill_broker(0)  # ... and becomes leader uncleanly
    assert (p.leader, p.isr, p.unclean) == (1, [1], True)
    assert c.messages_lost == 500
    assert c.counters[1].unclean_elections == 1


def test_time_based_isr_removes_a_slow_follower_after_lag_time():
    c = _cluster(ClusterSettings(replica_lag_time_max_s=10))
    p = c.create_topic(TopicSpec("t", 1, 2, message_bytes=1000, start_index=0, replica_shift=0)).partitions[0]
    c.slow_broker(1, 0)
    for _ in range(100):  # 10.0 s: not yet "more than" 10 s behind
        c.append(p, 10)
        c.step(0.1)
    assert p.isr == [0, 1]
    c.step(0.1)
    assert p.isr == [0]
    assert c.counters[0].isr_shrinks == 1


def test_acks_all_producer_waits_for_min_isr():
    c = _cluster(ClusterSettings(min_insync_replicas=2))
    topic = c.create_topic(TopicSpec("t", 1, 2, message_bytes=1000, start_index=0, replica_shift=0))
    producer = Producer(ProducerSpec("app", "t", 1000, acks="all", buffer_memory=1_000_000))
    c.producers.append(producer)
    c.kill_broker(1)  # ISR [0] < min.insync.replicas 2: nothing is written
    for _ in range(10):
        c.step(0.1)
    assert topic.partitions[0].leo[0] == 0
    # 1000 msg/s x 1000 B fills the 1,000,000 B buffer in exactly 1 s; the next send() blocks.
    assert (producer.blocked, producer.available_bytes) == (False, 0)
    c.step(0.1)
    assert producer.blocked and producer.waiting_threads == 1
    assert c.topic_meter("failed_produce", 0)["t"] > 0


def test_consumer_group_commits_and_lag():
    c = _cluster()
    topic = c.create_topic(TopicSpec("t", 2, 1, start_index=0, replica_shift=0))
    group = ConsumerGroup(GroupSpec("g", "t", members=1, messages_per_s=100, commit_interval_s=1.0))
    c.groups.append(group)
    for p in topic.partitions:
        c.append(p, 1000)
    for _ in range(10):
        c.step(0.1)
    # 1 member, 100 msg/s over 2 partitions: 50 per partition in 1 s, committed at t=1.0.
    assert [group.committed[p.index] for p in topic.partitions] == [50, 50]
    assert [group.lag(p) for p in topic.partitions] == [950, 950]


def test_every_builtin_scenario_loads():
    assert {"rf1-incident", "isr-flapping", "slow-follower", "consumer-groups"} <= set(builtin_names())
    for name in builtin_names():
        assert load_scenario(name).name == name


def test_bad_scenarios_are_rejected_with_a_reason(tmp_path):
    with pytest.raises(ScenarioError, match="unknown action"):
        Scenario.from_dict(
            {
                "topics": [{"name": "t", "partitions": 1, "replication_factor": 1}],
                "events": [{"at": 1, "action": "explode"}],
            }
        )
    with pytest.raises(ScenarioError, match="acks"):
        Scenario.from_dict(
            {
                "topics": [{"name": "t", "partitions": 1, "replication_factor": 1}],
                "producers": [{"client_id": "p", "topic": "t", "messages_per_s": 1, "acks": 2}],
            }
        )
    bad = tmp_path / "x.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(bad)


def test_same_seed_same_run():
    def run(seed: int) -> list:
        sim = Simulation(load_scenario("controller-failover").replace(seed=seed))
        sim.advance(60)
        return [(p.replicas, p.leader, p.isr, p.hw) for p in sim.cluster.partitions]

    assert run(7) == run(7)


def test_consumer_group_scenario_lags_stalls_stops_and_rewinds():
    sim = Simulation(load_scenario("consumer-groups"))
    sim.advance(60)  # the last commit before the stall and the stop is at t=60
    before = {name: dict(g.committed) for name, g in sim.groups.items()}
    sim.advance(60)
    groups, partitions = sim.groups, sim.cluster.partitions
    # 2,000 msg/s over 8 partitions = 250 msg/s each; 'lagging' reads 2 x 750 = 1,500 msg/s in total, so its
    # lag grows by about 500 msg/s: > 25,000 messages over 8 partitions after 60 s more.
    assert sum(groups["lagging"].lag(p) for p in partitions) > 25_000
    assert groups["stalled"].committed == before["stalled"] and groups["stalled"].last_commit > 115
    assert groups["stopped"].committed == before["stopped"] and groups["stopped"].last_commit == 60
    assert groups["stopped"].member_ids == []
    assert all(groups["healthy"].lag(p) <= 250 * 5 for p in partitions)  # within one commit interval


def test_rewinding_group_commits_backwards():
    sim = Simulation(load_scenario("consumer-groups"))
    sim.advance(89.9)
    high = dict(sim.groups["rewinding"].committed)
    sim.advance(5.2)  # rewound by 50,000 at t=90; the next commit is at t=95
    low = sim.groups["rewinding"].committed
    assert all(low[i] < high[i] for i in high)


def test_unclean_election_scenario_keeps_the_topic_available_and_counts_the_loss():
    sim = Simulation(load_scenario("unclean-election"))
    sim.advance(45)
    # logs-1 is [1,2] (startIndex 0): broker 2, slowed to 100 kB/s from t=10, left its ISR at about t=20;
    # broker 1 dies at t=40 and broker 2 is elected out of sync.
    logs1 = sim.cluster.topics["logs"].partitions[1]
    assert (logs1.replicas, logs1.leader, logs1.isr, logs1.unclean) == ([1, 2], 2, [2], True)
    assert sim.cluster.counters[sim.cluster.controller].unclean_elections == 1
    assert sim.cluster.messages_lost > 0


def test_network_limit_shares_a_brokers_fetch_bandwidth_between_partitions():
    c = _cluster(ClusterSettings(network_out_bytes_per_s=1_000_000), brokers=1)
    topic = c.create_topic(TopicSpec("t", 2, 1, message_bytes=1000))
    group = ConsumerGroup(GroupSpec("g", "t", members=1, commit_interval_s=1.0))
    c.groups.append(group)
    for p in topic.partitions:
        c.append(p, 100_000)
    for _ in range(10):
        c.step(0.1)
    # 1 MB/s of 1,000-byte messages is 1,000 msg/s, split evenly between the two partitions the group asks
    # for: 500 each after 1 s, though 100,000 each are there to read.
    assert group.committed == {0: 500, 1: 500}
    assert c.topic_meter("bytes_out", 0) == {"t": 1_000_000}


def test_size_retention_deletes_whole_segments_and_keeps_retention_bytes():
    c = _cluster(ClusterSettings(log_retention_check_s=1.0), brokers=1)
    spec = TopicSpec("t", 1, 1, message_bytes=100, segment_bytes=1000, retention_bytes=2500)
    p = c.create_topic(spec).partitions[0]
    c.append(p, 54)  # segments of 10 messages: [0,10) ... [40,50) and the active [50,54)
    for _ in range(10):
        c.step(0.1)
    # Kafka deletes the oldest segment while the log without it still holds 2,500 B (25 messages):
    # [0,10) (44 left), [10,20) (34 left) and [20,30) (24 < 25: kept).
    assert (p.log_start, p.hw) == (20, 54)


def test_time_retention_deletes_segments_whose_newest_message_is_older_than_retention():
    c = _cluster(ClusterSettings(log_retention_check_s=1.0), brokers=1)
    spec = TopicSpec("t", 1, 1, message_bytes=10, segment_bytes=1000, retention_s=5.0)
    p = c.create_topic(spec).partitions[0]
    for _ in range(100):  # 100 msg/s for 10 s, in segments of 100 messages (1 s each)
        c.append(p, 10)
        c.step(0.1)
    # At the check at t=10 s, segment [300, 400) was last written at t=4 s (6 s ago, past retention.ms):
    # it goes with the ones before it; [400, 500) was last written at t=5 s, exactly 5 s ago, and stays.
    assert (p.log_start, p.hw) == (400, 1000)

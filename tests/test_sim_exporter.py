"""The broker page's replica-fetcher, controller and request series: known answers from the model's state,
read through the collectors' exposition parser into canonical names."""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, generate_latest

from collectors.exposition import ExpositionSource, parse_exposition
from collectors.mapping import DEFAULT_MAPPING
from common import names
from simulator.cluster import Cluster
from simulator.exporter import BrokerCollector
from simulator.model import ClusterSettings, TopicSpec
from simulator.producer import Producer, ProducerSpec
from simulator.runtime import Runtime
from simulator.scenario import Scenario, Simulation, load_scenario

STAGES = {
    names.REQUEST_TOTAL_MS: "total",
    names.REQUEST_QUEUE_MS: "request queue",
    names.REQUEST_LOCAL_MS: "local",
    names.REQUEST_REMOTE_MS: "remote",
    names.RESPONSE_QUEUE_MS: "response queue",
    names.RESPONSE_SEND_MS: "response send",
}
QUANTILES = ("0.50", "0.99", "0.999")


def page(cluster: Cluster, broker: int) -> dict[tuple[str, tuple], float]:
    """The broker's page as the exposition collector maps it: {(canonical name, sorted labels): value}."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(cluster, broker, threading.Lock()))
    samples = parse_exposition(generate_latest(registry).decode(), DEFAULT_MAPPING, {"broker": str(broker)})
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


def gauge(cluster: Cluster, broker: int, name: str, **labels: str) -> float:
    return page(cluster, broker)[(name, tuple(sorted({"broker": str(broker), **labels}.items())))]


def produce_ms(cluster: Cluster, broker: int, name: str) -> list[float]:
    """Produce's figures of one stage at p50, p99, p999."""
    return [gauge(cluster, broker, name, request="Produce", quantile=q) for q in QUANTILES]


def test_at_min_isr_counts_the_led_partitions_whose_isr_is_exactly_min_isr():
    c = Cluster(range(3), ClusterSettings(min_insync_replicas=2, replica_lag_time_max_s=10))
    # startIndex 0, shift 0: t-0 [0,1,2] t-1 [1,2,0] t-2 [2,0,1]; u-0 [0,1] u-1 [1,2] u-2 [2,0]
    t = c.create_topic(TopicSpec("t", 3, 3, message_bytes=1000, start_index=0, replica_shift=0))
    u = c.create_topic(TopicSpec("u", 3, 2, message_bytes=1000, start_index=0, replica_shift=0))
    c.slow_broker(2, 0)  # broker 2 fetches nothing: it leaves every ISR it follows in after 10 s
    for _ in range(101):
        for p in [*t.partitions, *u.partitions]:
            c.append(p, 10)
        c.step(0.1)
    isrs = [p.isr for p in [*t.partitions, *u.partitions]]
    assert isrs == [[0, 1], [1, 0], [2, 0, 1], [0, 1], [1], [2, 0]]
    # At min ISR (2 in sync): broker 0 leads t-0 and u-0 (RF 2 with min ISR 2 is at min even when healthy);
    # broker 1 leads t-1, while u-1 is under min ISR; broker 2 leads u-2 (t-2 keeps all three).
    assert [gauge(c, b, names.AT_MIN_ISR_PARTITIONS) for b in range(3)] == [2, 1, 1]
    assert [gauge(c, b, names.UNDER_MIN_ISR_PARTITIONS) for b in range(3)] == [0, 1, 0]


def test_a_healthy_brokers_produce_times_are_the_stand_in_figures_by_acks():
    c = Cluster(range(3))
    # orders [0,1,2] is led by broker 0, clicks [1,2] by broker 1; broker 2 leads nothing
    c.create_topic(TopicSpec("orders", 1, 3, start_index=0, replica_shift=0))
    c.create_topic(TopicSpec("clicks", 1, 2, start_index=1, replica_shift=0))
    c.producers = [
        Producer(ProducerSpec("checkout", "orders", 100, acks="all")),
        Producer(ProducerSpec("audit", "orders", 100, acks="1")),
        Producer(ProducerSpec("tracker", "clicks", 100, acks="1")),
    ]
    # Broker 0 takes two requests a moment: acks=all (remote 1, 2, 4 ms) and acks=1 (no remote time); the
    # nearest rank of p50 over two is the lower, of p99 and p999 the higher.
    assert produce_ms(c, 0, names.REQUEST_REMOTE_MS) == [0, 2, 4]
    assert produce_ms(c, 0, names.REQUEST_TOTAL_MS) == [
        0 + 1 + 0 + 0 + 0,
        1 + 2 + 2 + 0 + 1,
        2 + 4 + 4 + 1 + 1,
    ]
    assert produce_ms(c, 1, names.REQUEST_REMOTE_MS) == [0, 0, 0]
    assert produce_ms(c, 1, names.REQUEST_TOTAL_MS) == [1, 4, 8]
    assert produce_ms(c, 1, names.REQUEST_LOCAL_MS) == [1, 2, 4]
    for name in STAGES:  # no Produce requests: empty histograms read 0
        assert produce_ms(c, 2, name) == [0, 0, 0]


def test_acks_all_waits_for_a_limited_follower_to_fetch_the_backlog_at_most_until_it_is_dropped():
    c = Cluster(range(2), ClusterSettings(replica_lag_time_max_s=10))
    p = c.create_topic(TopicSpec("t", 1, 2, message_bytes=1000, start_index=0, replica_shift=0)).partitions[0]
    c.producers = [Producer(ProducerSpec("app", "t", 1000, acks="all"))]  # not stepped: sends nothing
    c.append(p, 100)  # the leader (0) has 100,000 B the follower (1) has not fetched
    c.slow_broker(1, 50_000)  # its one follower replica fetches 50,000 B/s: 2 s
    assert produce_ms(c, 0, names.REQUEST_REMOTE_MS) == [1 + 2000, 2 + 2000, 4 + 2000]
    c.slow_broker(1, 0)  # never: until it has not caught up for 10 s and the leader drops it
    assert produce_ms(c, 0, names.REQUEST_REMOTE_MS) == [1 + 10_000, 2 + 10_000, 4 + 10_000]
    assert produce_ms(c, 0, names.REQUEST_TOTAL_MS)[1] == 1 + 2 + 10_002 + 0 + 1
    assert produce_ms(c, 1, names.REQUEST_REMOTE_MS) == [0, 0, 0]  # leads nothing


def test_slow_follower_holds_acks_all_produce_then_lags_once_out_of_the_isr():
    sim = Simulation(load_scenario("slow-follower"))
    c = sim.cluster
    # By hand (test_sim_wire): broker 2 follows p1 (leader 1) and p3 (leader 0) from t=20 at 1,000,000 B/s
    # shared by its 2 follower replicas: 500 messages/s each of the 1,000/s written, so it falls 50 messages
    # (50,000 B = 0.1 s at its share) behind per 0.1 s round, last caught up at t=20.
    sim.advance(25)
    # 5 s behind, 5 s left before it is dropped: brokers 0 and 1 hold acks=all requests 5 s.
    for b in (0, 1):
        assert produce_ms(c, b, names.REQUEST_REMOTE_MS) == [5001, 5002, 5004]
        assert produce_ms(c, b, names.REQUEST_TOTAL_MS) == [5002, 5006, 5012]
    assert produce_ms(c, 2, names.REQUEST_REMOTE_MS) == [1, 2, 4]  # its followers keep up
    # In the ISR it holds the HW back to its own fetch offset: no lag against the HW.
    assert gauge(c, 2, names.REPLICA_MAX_LAG, client_id="Replica") == 0
    sim.advance(3)  # 8 s behind, but dropped in 2 s: the wait is the 2 s
    assert produce_ms(c, 0, names.REQUEST_REMOTE_MS) == [2001, 2002, 2004]
    sim.advance(7)  # dropped at t=30.1; by t=35, 150 rounds x 50 messages behind the leaders' HW
    assert [produce_ms(c, b, names.REQUEST_REMOTE_MS) for b in range(3)] == [[1, 2, 4]] * 3
    assert gauge(c, 2, names.REPLICA_MAX_LAG, client_id="Replica") == 150 * 50
    assert [gauge(c, b, names.REPLICA_MAX_LAG, client_id="Replica") for b in (0, 1)] == [0, 0]


def test_controller_counts_live_brokers_and_fences_none_in_zookeeper_mode():
    c = Cluster(range(3))
    c.create_topic(TopicSpec("t", 3, 3))
    c.kill_broker(2)
    assert [gauge(c, b, names.ACTIVE_BROKERS) for b in (0, 1)] == [2, 0]  # 0 is the controller
    assert [gauge(c, b, names.FENCED_BROKERS) for b in (0, 1)] == [0, 0]


def test_exposition_source_maps_the_broker_page_to_canonical_names():
    scenario = Scenario.from_dict(
        {
            "name": "mapped",
            "topics": [{"name": "t", "partitions": 3, "replication_factor": 3}],
            "producers": [{"client_id": "app", "topic": "t", "messages_per_s": 300, "acks": "all"}],
        }
    )
    with Runtime(Simulation(scenario)) as rt:
        rt.advance(1)
        scrape = ExpositionSource("sim", "exporter/broker-0", rt.brokers[0].url, {"broker": "0"}).collect()
    assert scrape.errors == []
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in scrape.batch.samples}
    b = (("broker", "0"),)
    for name in STAGES:
        for q in QUANTILES:
            assert (name, (*b, ("quantile", q), ("request", "Produce"))) in values
    assert values[(names.REQUEST_TOTAL_MS, (*b, ("quantile", "0.99"), ("request", "Produce")))] == 6
    gauges = (
        names.REQUEST_QUEUE_SIZE,
        names.RESPONSE_QUEUE_SIZE,
        names.AT_MIN_ISR_PARTITIONS,
        names.REPLICA_MAX_LAG,
        names.ACTIVE_BROKERS,
        names.FENCED_BROKERS,
        names.OFFLINE_LOG_DIRS,
    )
    assert {key: value for key, value in values.items() if key[0] in gauges} == {
        (names.REQUEST_QUEUE_SIZE, b): 0,  # no request handler threads in the model: nothing queues
        (names.RESPONSE_QUEUE_SIZE, b): 0,
        (names.AT_MIN_ISR_PARTITIONS, b): 0,  # ISR 3, min ISR 1
        (names.REPLICA_MAX_LAG, (*b, ("client_id", "Replica"))): 0,
        (names.ACTIVE_BROKERS, b): 3,
        (names.FENCED_BROKERS, b): 0,
        (names.OFFLINE_LOG_DIRS, b): 0,
    }
    # A ZooKeeper-mode cluster: no KRaft quorum, so no raft-metrics
    assert not [name for name, _ in values if name.startswith("kafka_raft_")]

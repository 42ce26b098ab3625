"""Blocked producers, pure: the replication-factor-1 incident of docs/kafka-behaviour.md (time to block =
buffer.memory / bytes per second aimed at the lost partitions), acks=all under min ISR, client signals."""

from __future__ import annotations

import math

import pytest
from chunks import fed_both_ways
from sim_scrape import scrape_simulation

from common import names
from simulator.scenario import Simulation, load_scenario
from spark_jobs.analysis import Observation
from spark_jobs.producers import BUFFER_MEMORY, ProducerAnalysis, time_to_block

fed = fed_both_ways(ProducerAnalysis)  # every test: one by one (the reference) and in chunks (the stream)

MIB = 1024 * 1024
# rf1-incident: 16 partitions, RF 1, on brokers 0..2 (Kafka's placement from index 0: partition p on broker
# p % 3), 16,000 records/s of 1 KiB spread evenly by key, 1,000 records/s per partition.
PARTITIONS = 16
PER_PARTITION = 1000 * 1024  # bytes/s


def sample(name: str, t_s: float, value: float, **labels: str) -> Observation:
    return Observation(name, "prod", "test", labels, t_s, value, None)


def event(t_s: float, **fields) -> Observation:
    """An ``isr_change`` event; a leader change unless ``fields`` say otherwise (the contract's fields)."""
    fields = {"type": "isr_change", "change": "leader_change", "leader_epoch": -1, **fields}
    return Observation("isr_change", "prod", "zookeeper/isr", {}, t_s, None, fields)


def client(t_s: float, available: float, waiting: float = 0, wait_ratio: float = 0, client_id="web-frontend"):
    labels = {"client_id": client_id}
    yield sample(names.PRODUCER_BUFFER_TOTAL_BYTES, t_s, 32 * MIB, **labels)
    yield sample(names.PRODUCER_BUFFER_AVAILABLE_BYTES, t_s, available, **labels)
    yield sample(names.PRODUCER_WAITING_THREADS, t_s, waiting, **labels)
    yield sample(names.PRODUCER_BUFFERPOOL_WAIT_RATIO, t_s, wait_ratio, **labels)


def brokers(t_s: float, dead: set[int] = frozenset()):
    """Each live broker's bytes-in counter of the topic."""
    for broker in {0, 1, 2} - dead:
        led = [p for p in range(PARTITIONS) if p % 3 == broker]
        yield sample(names.BYTES_IN, t_s, t_s * PER_PARTITION * len(led), broker=str(broker), topic="orders")


def metadata(t_s: float, offline: set[int] = frozenset()):
    """Leader and ISR size of every partition, as the metadata and ZooKeeper sources report them at each
    scrape; an offline partition's leader is -1, its ISR keeps the last member."""
    for p in range(PARTITIONS):
        yield sample(
            names.PARTITION_LEADER, t_s, -1 if p in offline else p % 3, topic="orders", partition=str(p)
        )
        yield sample(names.PARTITION_ISR, t_s, 1, topic="orders", partition=str(p))


def metrics_of(analysis: ProducerAnalysis) -> dict[tuple, float]:
    """(name, cluster, client_id) -> value; the cause broker is read by :func:`cause_of`."""
    return {(m.name, *m.labels[:2]): m.value for m in analysis.evaluate().metrics}


def cause_of(analysis: ProducerAnalysis, client_id: str = "web-frontend") -> str:
    (cause,) = {
        m.labels[2]
        for m in analysis.evaluate().metrics
        if m.name == "kobs_producer_blocked" and m.labels[1] == client_id
    }
    return cause


def test_the_formula_of_the_rf1_incident():
    # 33554432 / (5 x 1000 x 1024) = 6.55 s, as the scenario's description and docs/kafka-behaviour.md say
    assert time_to_block(32 * MIB, 5 * PER_PARTITION) == pytest.approx(6.5536)
    assert time_to_block(32 * MIB, 0) == math.inf
    assert time_to_block(32 * MIB, -1e6) == math.inf  # draining
    assert time_to_block(0, 1e6) == 0.0


def test_a_loss_seen_in_the_metadata_alone_is_measured_against_the_rate_before_it():
    """A KRaft cluster has no ZooKeeper events: the metadata scrape that first shows broker 1's partitions
    without a leader is the loss. One micro-batch (a backlog) holds the scrapes before and after it, and the
    rate is taken before that scrape; later, broker 1's counter gone, the loss keeps that rate."""
    analysis = ProducerAnalysis(topics={("prod", "web-frontend"): ["orders"]})
    lost = {p for p in range(PARTITIONS) if p % 3 == 1}
    backlog = [o for t in (0, 15, 30) for o in (*brokers(t), *metadata(t), *client(t, 32 * MIB))]
    for t in (45, 60, 75, 90, 105):
        backlog += [*brokers(t, dead={1}), *metadata(t, offline=lost)]
    analysis.observe(backlog)
    topic_row = next(r for r in analysis.evaluate().history if r["topic"] == "orders")
    assert (topic_row["offline_partitions"], topic_row["lost_bytes_per_s"]) == (5, 5 * PER_PARTITION)


def test_rf1_incident_broker_side_estimate_then_the_client_blocks():
    analysis = ProducerAnalysis(topics={("prod", "web-frontend"): ["orders"]})
    everything = []
    for t in (0, 15, 30):  # healthy, empty buffer (acks=1 frees it at once)
        scraped = [*brokers(t), *metadata(t), *client(t, 32 * MIB)]
        analysis.observe(scraped)
        everything += scraped
    got = metrics_of(analysis)
    assert got["kobs_producer_time_to_block_seconds", "prod", "web-frontend"] == math.inf
    assert got["kobs_producer_blocked", "prod", "web-frontend"] == 0
    assert cause_of(analysis) == ""  # nothing lost
    # Broker 1 dies at 44 s: ZooKeeper shows its 5 partitions without a leader (ISR keeps the last member).
    lost = [p for p in range(PARTITIONS) if p % 3 == 1]
    loss = [event(44, topic="orders", partition=p, old_isr=[1], new_isr=[1], leader=-1) for p in lost]
    after = [*brokers(45, dead={1}), *metadata(45, offline=set(lost))]
    everything += loss + after
    analysis.observe(loss + after)
    got = metrics_of(analysis)
    # The same scrapes in one micro-batch, grouped by name as the pipeline hands them over: same answer.
    at_once = ProducerAnalysis(topics={("prod", "web-frontend"): ["orders"]})
    at_once.observe(sorted(everything, key=lambda o: o.name))
    assert metrics_of(at_once) == got
    # 16 partitions x 1000 x 1024 B/s before the loss, 5/16 of it to the lost ones; the client's last
    # scrape (30 s) predates the loss (44 s), 1 s has passed: 6.5536 - 1 s.
    assert got["kobs_producer_time_to_block_seconds", "prod", "web-frontend"] == pytest.approx(6.5536 - 1)
    topic_row = next(r for r in analysis.evaluate().history if r["topic"] == "orders")
    assert (topic_row["partitions"], topic_row["offline_partitions"]) == (16, 5)
    assert topic_row["lost_bytes_per_s"] == pytest.approx(5 * PER_PARTITION)
    # 15 s later the producer's own metrics show it: buffer exhausted, all 8 threads waiting.
    analysis.observe(client(60, 100, waiting=8, wait_ratio=0.9))
    got = metrics_of(analysis)
    assert got["kobs_producer_blocked", "prod", "web-frontend"] == 1
    assert cause_of(analysis) == "1"  # the lost partitions' last replica: the dead broker
    assert got["kobs_producer_time_to_block_seconds", "prod", "web-frontend"] == 0
    assert got["kobs_producer_buffer_utilization_ratio", "prod", "web-frontend"] == pytest.approx(
        1 - 100 / (32 * MIB)
    )
    # Broker 1 returns: the partitions have a leader again, the buffer drains.
    analysis.observe(
        [event(150, topic="orders", partition=p, old_isr=[1], new_isr=[1], leader=1) for p in lost]
        + list(brokers(150))
        + list(metadata(150))
        + list(client(150, 20 * MIB))
    )
    got = metrics_of(analysis)
    assert got["kobs_producer_blocked", "prod", "web-frontend"] == 0
    assert got["kobs_producer_time_to_block_seconds", "prod", "web-frontend"] == math.inf


def test_a_producer_not_scraped_is_estimated_from_the_default_buffer_and_shares_with_its_peers():
    topics = {("prod", "a"): ["orders"], ("prod", "b"): ["orders"]}
    analysis = ProducerAnalysis(topics=topics)
    for t in (0, 15):
        analysis.observe([*brokers(t), *metadata(t)])
    analysis.observe([*brokers(20), *metadata(20, offline={1})])
    got = metrics_of(analysis)
    # 1 of 16 partitions lost; two producers configured for the topic: each fills at half of 1/16.
    share = PARTITIONS * PER_PARTITION / 16 / 2
    assert got["kobs_producer_time_to_block_seconds", "prod", "a"] == pytest.approx(BUFFER_MEMORY / share)
    assert ("kobs_producer_blocked", "prod", "a") not in got  # no client metrics: unknown, not 0


def test_acks_all_traffic_under_min_isr_counts_only_while_produce_requests_fail():
    analysis = ProducerAnalysis(topics={("prod", "pay"): ["payments"]})
    rate = 4 * 1e6  # 4 partitions, 1 MB/s each

    def scrape(t: float, isr_of_1: int, failed: float):
        yield sample(names.TOPIC_MIN_ISR, t, 2, topic="payments")
        for p in range(4):
            isr = isr_of_1 if p == 1 else 3
            yield sample(names.PARTITION_LEADER, t, 0, topic="payments", partition=str(p))
            yield sample(names.PARTITION_ISR, t, isr, topic="payments", partition=str(p))
        yield sample(names.BYTES_IN, t, t * rate, broker="0", topic="payments")
        yield sample(names.FAILED_PRODUCE_REQUESTS, t, failed, broker="0", topic="payments")

    analysis.observe(scrape(0, 3, 0))
    analysis.observe(scrape(15, 3, 0))
    analysis.observe(scrape(30, 1, 0))  # under min ISR, but nothing fails: acks=1 producers write fine
    got = metrics_of(analysis)
    assert got["kobs_producer_time_to_block_seconds", "prod", "pay"] == math.inf
    analysis.observe(scrape(45, 1, 150))  # 10 refused produce requests/s
    got = metrics_of(analysis)
    # 1 of 4 partitions takes no acks=all writes since its ISR shrank at 30 s: 1 MB/s for 15 s already
    # held in the (default, not scraped) buffer
    assert got["kobs_producer_time_to_block_seconds", "prod", "pay"] == pytest.approx(
        (BUFFER_MEMORY - 15 * rate / 4) / (rate / 4)
    )


def test_client_side_fill_rate_and_draining():
    analysis = ProducerAnalysis()
    analysis.observe(client(0, 32 * MIB))
    analysis.observe(client(15, 31 * MIB))
    analysis.observe(client(30, 30 * MIB))
    got = metrics_of(analysis)
    # 2 MiB in 30 s; 30 MiB left
    assert got["kobs_producer_time_to_block_seconds", "prod", "web-frontend"] == pytest.approx(30 * 15)
    assert got["kobs_producer_buffer_utilization_ratio", "prod", "web-frontend"] == pytest.approx(2 / 32)
    analysis.observe(client(45, 31 * MIB))
    analysis.observe(client(60, 32 * MIB))
    assert metrics_of(analysis)["kobs_producer_time_to_block_seconds", "prod", "web-frontend"] == math.inf


@pytest.mark.parametrize(
    ("available", "waiting", "wait_ratio", "blocked"),
    [
        (32 * MIB, 0, 0.0, 0),
        (32 * MIB, 3, 0.0, 1),  # threads wait for buffer space
        # waits that ended: Kafka's BufferPool records a wait when it ends, so after a recovery the ratio
        # is high while nobody waits (a real client: 0.8, waiting-threads 0, 97 % of its buffer free)
        (32 * MIB, 0, 0.8, 0),
        (10_000, 0, 0.0, 1),  # less than one 16 KiB batch left: the next batch cannot be allocated
        (16_384, 0, 0.0, 0),
    ],
)
def test_blocked_signals(available, waiting, wait_ratio, blocked):
    analysis = ProducerAnalysis()
    analysis.observe(client(0, available, waiting, wait_ratio))
    assert metrics_of(analysis)["kobs_producer_blocked", "prod", "web-frontend"] == blocked


def test_bad_input_is_skipped_and_counted_never_raised():
    analysis = ProducerAnalysis()
    analysis.observe(
        [
            sample(names.PRODUCER_BUFFER_AVAILABLE_BYTES, 0, 5.0),  # no client_id
            sample(names.PRODUCER_WAITING_THREADS, 0, math.nan, client_id="x"),
            sample(names.PARTITION_LEADER, 0, 1, topic="orders"),  # no partition
            event(0, topic="orders"),  # no partition, leader, ISR
            sample(names.BYTES_IN, 0, 1.0, broker="1"),  # broker-wide bean: not an error, not used
            *client(0, 32 * MIB, client_id="ok"),
        ]
    )
    assert analysis.skipped == 4
    assert metrics_of(analysis)["kobs_producer_blocked", "prod", "ok"] == 0


def test_rf1_incident_in_the_simulator_the_estimate_foresees_when_the_producer_blocks():
    """The simulator's scenario (a), scraped once a simulated second: the estimate made at the first scrape
    after broker 1 dies says when the simulated producer blocks."""
    sim = Simulation(load_scenario("rf1-incident"))
    producer = sim.producers["web-frontend"]
    analysis = ProducerAnalysis(topics={("sim", "web-frontend"): ["orders"]})
    estimate = estimated_at = None
    while producer.blocked_since is None:
        sim.advance(1.0)
        analysis.observe(scrape_simulation(sim, analysis.inputs))
        got = metrics_of(analysis)["kobs_producer_time_to_block_seconds", "sim", "web-frontend"]
        if estimate is None and got < math.inf:
            estimate, estimated_at = sim.now + got, sim.now
    assert estimated_at == pytest.approx(31.0)  # the first scrape after the death at 30 s gave the estimate
    # The producer blocked within a tick of the predicted time (the scenario's 30 s + 6.55 s)
    assert producer.blocked_since == pytest.approx(estimate, abs=0.1)
    assert estimate == pytest.approx(30 + 6.5536, abs=0.1)


def test_a_producer_no_longer_scraped_is_forgotten_so_its_page_resolves():
    # Its last scrape said blocked; then its metrics stop coming (the app died, its JMX does not answer)
    # while other sources go on. Past client_stale_s its gauges are gone: nothing claims it is blocked.
    analysis = ProducerAnalysis(client_stale_s=15)
    analysis.observe(client(0, 100, waiting=1))
    assert metrics_of(analysis)["kobs_producer_blocked", "prod", "web-frontend"] == 1
    analysis.observe(client(15, 32 * MIB, client_id="batch"))
    assert ("kobs_producer_blocked", "prod", "web-frontend") in metrics_of(analysis)  # 15 s: not yet
    analysis.observe(client(16, 32 * MIB, client_id="batch"))
    got = metrics_of(analysis)
    assert ("kobs_producer_blocked", "prod", "web-frontend") not in got
    assert got["kobs_producer_blocked", "prod", "batch"] == 0

"""Throughput versus stored data, pure: counter rates, correlation, growth and runway against hand-computed
answers (Prometheus' counter-reset rule, Pearson's formula, plain arithmetic)."""

from __future__ import annotations

import math

import pytest
from chunks import fed_both_ways
from sim_scrape import scrape_simulation

from common.names import BYTES_IN, BYTES_OUT, LOG_SIZE_BYTES, MESSAGES_IN
from simulator.scenario import Simulation, load_scenario
from spark_jobs.analysis import Observation
from spark_jobs.rates import CounterRates, increase
from spark_jobs.throughput import ThroughputAnalysis, growth_per_day, runway_days, within_correlation

fed = fed_both_ways(ThroughputAnalysis)  # every test: one by one (the reference) and in chunks (the stream)

GB = 1e9


def sample(name: str, t_s: float, value: float, **labels: str) -> Observation:
    return Observation(name, "prod", "exporter/broker", labels, t_s, value, None)


def metrics_of(analysis: ThroughputAnalysis) -> dict[tuple, float]:
    return {(m.name, *m.labels): m.value for m in analysis.evaluate().metrics}


def test_a_counter_drop_is_a_reset_as_in_prometheus():
    # 5 → 10 (+5), 10 → 3 (reset: +3), 3 → 8 (+5)
    assert increase([5, 10, 3, 8]) == 13


def test_rate_spans_the_window_plus_the_point_before_and_forgets_stale_series():
    rates = CounterRates(window_s=60, stale_s=300)
    for t, v in [(0, 0), (30, 300), (60, 600), (90, 1500)]:  # 10/s, then 30/s
        rates.add("a", t, v)
    # window [30, 90] plus the point before it (30 itself is the boundary): (1500 - 300) / 60
    assert dict(rates.rates()) == {"a": 20.0}
    rates.add("b", 100, 7)
    assert "b" not in dict(rates.rates())  # one point is no rate
    rates.forget_stale(391)  # a: last seen at 90, more than 300 s ago; b at 100
    assert rates.points.keys() == {"b"}


def test_within_correlation_by_hand():
    # x 1..4, y 2,1,4,3: deviations ±1.5/±0.5; Sxy = 3, Sxx = Syy = 5 -> 0.6
    assert within_correlation([[(1, 2), (2, 1), (3, 4), (4, 3)]], min_points=2) == pytest.approx(0.6)
    assert within_correlation([[(1, 3), (2, 2), (3, 1)]], min_points=2) == pytest.approx(-1.0)
    assert within_correlation([[(1, 5), (2, 5), (3, 5)]], min_points=2) == 0.0  # flat throughput
    assert within_correlation([[(1, 5)]], min_points=2) is None


def test_within_correlation_is_not_fooled_by_differences_between_brokers():
    # Each broker's throughput falls as its data grows; the big broker has more of both. Pooled raw the
    # points correlate positively (Simpson's paradox); centred per broker they are perfectly negative.
    small, big = [(0, 10), (1, 9)], [(100, 110), (101, 109)]
    xs, ys = zip(*small, *big, strict=True)
    mx, my = sum(xs) / 4, sum(ys) / 4
    raw = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    assert raw > 0
    assert within_correlation([small, big], min_points=2) == pytest.approx(-1.0)


def test_growth_and_runway_by_hand():
    assert growth_per_day((0, 100 * GB), (43_200, 110 * GB)) == pytest.approx(20 * GB)  # 10 GB in 12 h
    assert growth_per_day((5, 1), (5, 2)) is None
    assert runway_days(1000 * GB, 400 * GB, 50 * GB) == pytest.approx(12.0)
    assert runway_days(1000 * GB, 400 * GB, 0) == math.inf
    assert runway_days(1000 * GB, 400 * GB, -5 * GB) == math.inf  # retention frees more than arrives
    assert runway_days(1000 * GB, 1200 * GB, 5 * GB) == 0.0


def scrape(t_s: float, broker: str, bytes_in: float, bytes_out: float, sizes: dict[str, float]):
    yield sample(BYTES_IN, t_s, bytes_in, broker=broker, topic="orders")
    yield sample(BYTES_IN, t_s, bytes_in, broker=broker)  # broker-wide bean: must not count twice
    yield sample(BYTES_OUT, t_s, bytes_out, broker=broker, topic="orders")
    for partition, size in sizes.items():
        yield sample(LOG_SIZE_BYTES, t_s, size, broker=broker, topic="orders", partition=partition)


def test_topic_and_broker_figures_with_a_counter_reset():
    analysis = ThroughputAnalysis(disk_bytes={"prod": 100 * GB})
    # broker 1: 2 MB/s in; restarts between 120 and 180 s (its counter starts again from 0)
    ins = {0: 0, 60: 120e6, 120: 240e6, 180: 60e6}
    for t, v in ins.items():
        analysis.observe(scrape(t, "1", v, v / 2, {"0": 1 * GB + t * 1e6, "1": 2 * GB}))
        analysis.observe(scrape(t, "2", 0, 0, {"2": 3 * GB}))
    got = metrics_of(analysis)
    # window [120, 180] plus the point before (120): increase 60e6 over 60 s; broker 2 adds 0
    assert got["kobs_topic_bytes_in_per_second", "prod", "orders"] == pytest.approx(1e6)
    assert got["kobs_topic_bytes_out_per_second", "prod", "orders"] == pytest.approx(0.5e6)
    assert got["kobs_topic_stored_bytes", "prod", "orders"] == pytest.approx((1 + 0.18 + 2 + 3) * GB)
    assert got["kobs_broker_stored_bytes", "prod", "1"] == pytest.approx(3.18 * GB)
    # broker 1 grew 180 MB in 180 s = 1 MB/s = 86.4 GB/day; 100 - 3.18 GB left
    assert got["kobs_broker_disk_runway_days", "prod", "1"] == pytest.approx((100 - 3.18) / 86.4)
    assert got["kobs_broker_disk_runway_days", "prod", "2"] == math.inf  # not growing


def test_a_partition_that_moved_away_stops_counting_and_a_silent_broker_is_forgotten():
    analysis = ThroughputAnalysis(stale_s=300)
    analysis.observe(scrape(0, "1", 0, 0, {"0": 5 * GB, "1": 5 * GB}))
    analysis.observe(scrape(60, "1", 0, 0, {"0": 5 * GB}))  # partition 1 reassigned elsewhere
    assert metrics_of(analysis)["kobs_broker_stored_bytes", "prod", "1"] == 5 * GB
    analysis.observe(scrape(400, "2", 0, 0, {"0": 1 * GB}))  # broker 1 silent for 340 s
    got = metrics_of(analysis)
    assert ("kobs_broker_stored_bytes", "prod", "1") not in got
    assert got["kobs_topic_stored_bytes", "prod", "orders"] == 1 * GB


def test_correlation_needs_ten_points_and_sees_throughput_falling_as_data_grows():
    analysis, at_once = ThroughputAnalysis(), ThroughputAnalysis()
    counter, everything = 0.0, []
    for minute in range(11):  # 11 scrapes a minute apart: 10 rates from minute 1 on
        t = minute * 60.0
        scraped = list(scrape(t, "1", counter, 0, {"0": (100 + minute) * GB}))
        analysis.observe(scraped)
        everything += scraped
        counter += (10 - 0.5 * minute) * 1e6 * 60  # 10 MB/s falling by 0.5 MB/s per minute
        got = metrics_of(analysis)
        if minute < 10:
            assert ("kobs_cluster_throughput_stored_correlation", "prod") not in got
    assert got["kobs_cluster_throughput_stored_correlation", "prod"] == pytest.approx(-1.0)
    row = next(r for r in analysis.evaluate().history if r["topic"] is None)
    assert row["throughput_stored_correlation"] == pytest.approx(-1.0)
    # one micro-batch holding all scrapes, grouped by name as the pipeline hands them over: same answers
    at_once.observe(sorted(everything, key=lambda o: o.name))
    assert metrics_of(at_once) == got


def test_bad_samples_are_skipped_and_counted_never_raised():
    analysis = ThroughputAnalysis()
    analysis.observe(
        [
            sample(BYTES_IN, 0, 1.0, topic="orders"),  # no broker
            sample(LOG_SIZE_BYTES, 0, 1.0, broker="1", topic="orders"),  # no partition
            sample(BYTES_IN, 0, math.nan, broker="1", topic="orders"),
            sample(LOG_SIZE_BYTES, 0, 7.0, broker="1", topic="orders", partition="0"),
        ]
    )
    assert analysis.skipped == 3
    assert metrics_of(analysis)["kobs_broker_stored_bytes", "prod", "1"] == 7.0


def test_rf1_incident_in_the_simulator_rates_stored_bytes_and_runway_match_the_scenario():
    """Scenario (a) scraped once a simulated second until just before broker 1 dies: 16,000 records/s of
    1 KiB into 16 partitions with replication factor 1, partition p on broker p % 3 (6 on broker 0)."""
    sim = Simulation(load_scenario("rf1-incident"))
    analysis = ThroughputAnalysis(disk_bytes={"sim": 1e12})
    for _ in range(29):
        sim.advance(1.0)
        analysis.observe(scrape_simulation(sim, analysis.inputs))
    got = {(name, *labels[1:]): value for (name, *labels), value in metrics_of(analysis).items()}
    assert got["kobs_topic_bytes_in_per_second", "orders"] == pytest.approx(16_000 * 1024)
    assert got["kobs_topic_stored_bytes", "orders"] == pytest.approx(29 * 16_000 * 1024)
    growth_per_day = 6_000 * 1024 * 86_400
    assert got["kobs_broker_disk_runway_days", "0"] == pytest.approx(
        (1e12 - 29 * 6_000 * 1024) / growth_per_day
    )


def test_topic_counters_sum_their_brokers_increases_across_a_restart_and_leave_with_the_topic():
    analysis = ThroughputAnalysis(stale_s=300)
    points = [  # (t, broker, bytes in, messages in) of topic orders
        (0, "1", 100, 10), (0, "2", 1000, 40),
        (60, "1", 400, 13), (60, "2", 1600, 46),
        (120, "1", 50, 2),  # broker 1 restarted: its counters began again from 0
    ]  # fmt: skip
    for t, broker, nbytes, messages in points:
        analysis.observe([
            sample(BYTES_IN, t, nbytes, broker=broker, topic="orders"),
            sample(MESSAGES_IN, t, messages, broker=broker, topic="orders"),
        ])  # fmt: skip
    analysis.observe(
        [sample(BYTES_IN, 60, 400, broker="1", topic="orders")]
    )  # a replayed scrape adds nothing
    m = metrics_of(analysis)
    # broker 1: +300, then the reset: +50; broker 2: +600. Messages: +3 +2, +6
    assert m["kobs_topic_bytes_in_total", "prod", "orders"] == 300 + 50 + 600
    assert m["kobs_topic_messages_in_total", "prod", "orders"] == 3 + 2 + 6
    assert ("kobs_topic_bytes_out_total", "prod", "orders") not in m  # no bytes-out counter reported
    # the topic is deleted: no broker reports it for stale_s (while another topic keeps the clock going)
    analysis.observe([sample(BYTES_IN, 421, 5, broker="1", topic="payments")])
    m = metrics_of(analysis)
    assert ("kobs_topic_bytes_in_total", "prod", "orders") not in m
    assert m["kobs_topic_bytes_in_total", "prod", "payments"] == 0  # counts from its second point on

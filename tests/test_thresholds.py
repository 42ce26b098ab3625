"""The alert rules' lines, as the dashboards read them: parsed from the shipped rule files, and turned into
Grafana threshold steps that colour every value as the rules would judge it."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from alerts import check
from alerts.thresholds import GREEN, ORANGE, RED, Line, colour, lines, quantity_lines, steps

SHIPPED = lines(check.alert_rules())


def _of(alert: str) -> list[tuple[str, str, float]]:
    return [(line.metric, line.op, line.value) for line in SHIPPED if line.alert == alert]


def test_a_plain_comparison_is_its_rules_line():
    assert _of("KafkaUnderReplicatedPartitions") == [("kobs_topic_under_replicated_seconds", ">", 60.0)]
    assert _of("KafkaThroughputDegradingWithStoredData") == [
        ("kobs_cluster_throughput_stored_correlation", "<", -0.7)
    ]


def test_an_unless_arm_vetoes_and_draws_no_line():
    """A broker in a planned restart (kobs_broker_maintenance == 1) does not page as down: that 1 is no line
    on the maintenance metric; nor is a veto inside brackets, before an ``or`` arm."""
    assert _of("KafkaBrokerDown") == [("kobs_broker_up", "<", 1.0)]
    assert _of("KafkaActiveControllerCount") == [
        ("kobs_cluster_active_controllers", "!=", 1.0),
        ("kafka_controller_kafkacontroller_activecontrollercount", "!=", 1.0),
    ]
    rule = {"alert": "A", "expr": "(max by (c) (x) > 1 unless max by (c) (y) == 1) or max by (c) (z) < 2"}
    assert [(line.metric, line.op) for line in lines([rule])] == [("x", ">"), ("z", "<")]


def test_each_metric_of_a_rule_has_a_line_and_a_hysteresis_arm_is_not_one():
    # fires under 7 days; the "< 8 and ALERTS{...}" arm only keeps a firing alert firing
    assert _of("KafkaDiskRunwayLow") == [("kobs_broker_disk_runway_days", "<", 7.0)]
    assert _of("KafkaActiveControllerCount") == [
        ("kobs_cluster_active_controllers", "!=", 1.0),
        ("kafka_controller_kafkacontroller_activecontrollercount", "!=", 1.0),
    ]
    assert ("kobs_consumergroup_critical", "==", 1.0) in _of("KafkaConsumerGroupCritical")


def test_a_comparison_of_arithmetic_is_no_line_on_the_metric():
    # time() - last batch > 300: 300 is not a value of the timestamp metric
    assert _of("KobsPipelineStalled") == [] and _of("KobsSourceSilent") == []


def test_steps_colour_consumer_group_statuses_as_burrow_and_the_rules_do():
    """WARN (1) is a ticket, ERR (2) pages (for critical groups): green, orange from 1, red from 2."""
    group = [line for line in SHIPPED if line.metric == "kobs_consumergroup_status"]
    assert steps(group) == [(None, GREEN), (1.0, ORANGE), (2.0, RED)]


def test_steps_for_exactly_one_controller():
    (line,) = [line for line in SHIPPED if line.metric == "kobs_cluster_active_controllers"]
    assert steps([line]) == [(None, RED), (1.0, GREEN), (math.nextafter(1.0, 2), RED)]


def test_a_strict_line_starts_just_above_its_number():
    (line,) = [line for line in SHIPPED if line.metric == "kobs_topic_offline_partitions"]
    (base, fired) = steps([line])
    assert base == (None, GREEN) and fired[1] == RED and 0 < fired[0] < 1e-300


def _grafana_colour(steps_: list[tuple[float | None, str]], x: float) -> str:
    """Grafana's rule: a value takes the colour of the last step whose value it reaches."""
    return [c for start, c in steps_ if start is None or x >= start][-1]


LINE = st.builds(
    Line,
    alert=st.just("A"),
    severity=st.sampled_from(["page", "ticket"]),
    metric=st.just("m"),
    op=st.sampled_from([">", ">=", "<", "<=", "==", "!="]),
    value=st.integers(-3, 3).map(float),
)


@given(st.lists(LINE, min_size=1, max_size=4), st.floats(-5, 5) | st.integers(-4, 4).map(float))
def test_every_value_gets_the_colour_the_rules_give_it(lines_, x):
    """Whatever the lines, Grafana colouring a value by the steps agrees with the rules' own verdict."""
    assert _grafana_colour(steps(lines_), x) == colour(lines_, x)


def test_a_panel_of_exactly_the_rules_arithmetic_gets_its_line_and_another_window_none():
    rules = check.alert_rules()
    stalled = 'time() - max by (query) (kobs_pipeline_last_batch_timestamp_seconds{query=~"$query"})'
    ((alert, op, value),) = [(x.alert, x.op, x.value) for x in quantity_lines(stalled, rules)]
    assert (alert, op, value) == ("KobsPipelineStalled", ">", 300.0)
    moves = 'max by (cluster) (changes(kobs_quorum_leader{cluster=~"$cluster"}[10m]))'
    assert [(x.alert, x.op, x.value) for x in quantity_lines(moves, rules)] == [
        ("KafkaControllerMovingOften", ">", 3.0)
    ]
    # the same counter over another window is another quantity: "> 0 in 2 minutes" is no line on an hour
    hour = "sum by (cluster) (increase(kobs_unclean_leader_elections_total[1h]))"
    assert quantity_lines(hour, rules) == []
    # a quantity a rule only vetoes with draws nothing
    assert quantity_lines("max by (cluster, broker) (kobs_broker_maintenance)", rules) == []

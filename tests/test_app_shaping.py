"""The live pages' pure shaping (app/live.py): verdicts, tables and the regression, without a Streamlit
server (the status colouring's pandas Styler from app/ui.py included)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from app import live, ui
from app.alertmanager import Firing

# Anscombe's quartet, data set I (Anscombe 1973): published fit y = 3.00 + 0.500 x, r = 0.816.
ANSCOMBE_X = [10, 8, 13, 9, 11, 14, 6, 4, 12, 7, 5]
ANSCOMBE_Y = [8.04, 6.95, 7.58, 8.81, 8.33, 9.96, 7.24, 4.26, 10.84, 4.82, 5.68]


def frame(key: str, values: dict[str, float], cluster: str = "c1") -> pd.DataFrame:
    return pd.DataFrame([{"cluster": cluster, key: k, "value": v} for k, v in values.items()])


def restarts(brokers: dict[str, tuple[float, float, float, float, float]]) -> pd.DataFrame:
    """planned_restarts of c1's brokers, each given as (maintenance, seconds, up, out of ISR, leads)."""
    columns = list(live.RESTART_QUERIES)
    return live.planned_restarts(
        {name: frame("broker", {b: v[i] for b, v in brokers.items()}) for i, name in enumerate(columns)}
    )


def test_regression_reproduces_anscombes_published_fit():
    fit = live.fit_line(ANSCOMBE_X, ANSCOMBE_Y)
    assert fit.slope == pytest.approx(0.500, abs=5e-4)
    assert fit.intercept == pytest.approx(3.00, abs=5e-3)
    assert fit.r == pytest.approx(0.816, abs=5e-4)


def test_regression_needs_two_distinct_x_and_says_so():
    assert live.fit_line([1.0], [2.0]) is None
    assert live.fit_line([3.0, 3.0], [1.0, 2.0]) is None
    assert live.fit_verdict(None) == "not enough points for a regression yet"


def test_points_with_a_missing_value_are_left_out_never_turned_into_a_verdict():
    """Early history rows have NaN rates: the fit is Anscombe's over the known points, and from NaN points
    alone there is no fit and no verdict (once "does not fall, as expected" from Fit(nan, nan, nan))."""
    fit = live.fit_line([*ANSCOMBE_X, math.nan, 3.0], [*ANSCOMBE_Y, 1.0, math.nan])
    assert (round(fit.slope, 3), round(fit.intercept, 2), round(fit.r, 3)) == (0.5, 3.0, 0.816)
    assert live.fit_line([1.0, 2.0, 3.0], [math.nan, math.nan, 5.0]) is None
    assert live.fit_verdict(live.fit_line([1.0, 2.0], [math.nan, math.nan])) == (
        "not enough points for a regression yet"
    )


def test_names_in_alert_text_show_as_written_not_as_markdown():
    """A consumer group may be named like a Markdown link, emphasis or HTML; CommonMark reads a
    backslash-escaped sign as itself, and a zero-width space keeps GitHub's autolinks off a bare URL."""
    group = "[click](https://evil.example/) *now* `x` <b>"
    alert = Firing("KafkaConsumerGroupUnhealthy", "ticket", f"c1: group {group} ERR", 9_000.0, "")
    [(_, line)] = live.firing_lines([alert], 10_000.0)
    escaped = r"\[click\](https:" + "\u200b" + r"//evil.example/) \*now\* \`x\` \<b\>"
    assert line == f"KafkaConsumerGroupUnhealthy (ticket): c1: group {escaped} ERR — for 16.7 min"


def test_firing_alerts_pages_first_then_longest_firing_with_runbook_links_and_durations():
    now = 10_000.0
    alerts = [
        Firing("KafkaConsumerLagOverSlo", "ticket", "c1: group billing is 30m behind", now - 3600, ""),
        Firing(
            "KafkaProducerBlocked", "page", "c1: producer web is blocked in send()", now - 90, "http://rb/b"
        ),
        Firing("KafkaOfflinePartitions", "page", "c1/orders: 5 partitions offline", now - 600, "http://rb/o"),
    ]
    assert live.firing_lines(alerts, now) == [
        (
            "page",
            "[KafkaOfflinePartitions](http://rb/o) (page): c1/orders: 5 partitions offline — for 10.0 min",
        ),
        (
            "page",
            "[KafkaProducerBlocked](http://rb/b) (page): c1: producer web is blocked in send() — for 1.5 min",
        ),
        ("ticket", "KafkaConsumerLagOverSlo (ticket): c1: group billing is 30m behind — for 1.0 h"),
    ]


def test_unhealthy_now_longest_first_and_unknown_without_any_broker_series():
    timed = {
        "offline": pd.DataFrame([{"cluster": "c1", "topic": "orders", "value": 95.0}]),
        "under min ISR": pd.DataFrame(columns=["cluster", "topic", "value"]),
        "under-replicated": pd.DataFrame(
            [
                {"cluster": "c1", "topic": "orders", "value": 400.0},
                {"cluster": "c2", "topic": "logs", "value": 20.0},
            ]
        ),
    }
    brokers = frame("broker", {"1": 1, "2": 0})
    blocked = frame("client_id", {"web": 1})
    none = restarts({})
    assert live.unhealthy_sentence(timed, brokers, blocked, none) == (
        "error",
        "Unhealthy now: c1/orders under-replicated for 6.7 min; c1/orders offline for 1.6 min; "
        "c2/logs under-replicated for 20 s; c1 broker 2 down; c1/web blocked in send()",
    )
    healthy = {words: f.iloc[0:0] for words, f in timed.items()}
    assert live.unhealthy_sentence(healthy, frame("broker", {"1": 1}), blocked.iloc[0:0], none) == (
        "success",
        "Nothing unhealthy now.",
    )
    level, sentence = live.unhealthy_sentence(healthy, brokers.iloc[0:0], blocked.iloc[0:0], none)
    assert level == "info" and sentence.startswith("Health unknown")


def test_a_broker_in_a_planned_restart_is_said_apart_from_outages_and_never_called_down():
    """Broker 2 left by controlled shutdown 40 s ago; broker 3 crashed: only 3 is down. A planned restart
    alone is a warning; one past its grace (overdue: it pages) an error."""
    brokers = frame("broker", {"1": 1, "2": 0, "3": 0})
    rolling = restarts({"1": (0, 0, 1, 0, 6), "2": (1, 40, 0, 0, 0), "3": (0, 0, 0, 0, 0)})
    healthy = {words: pd.DataFrame(columns=["cluster", "topic", "value"]) for words in live.TIMED_STATES}
    nobody = pd.DataFrame(columns=["cluster", "client_id", "value"])
    assert live.unhealthy_sentence(healthy, brokers, nobody, rolling) == (
        "error",
        "Unhealthy now: c1 broker 3 down; c1 broker 2 in a planned restart for 40 s",
    )
    only_planned = frame("broker", {"1": 1, "2": 0, "3": 1})
    assert live.unhealthy_sentence(healthy, only_planned, nobody, rolling) == (
        "warning",
        "Unhealthy now: c1 broker 2 in a planned restart for 40 s",
    )
    overdue = restarts({"2": (2, 720, 0, 0, 0)})
    assert live.unhealthy_sentence(healthy, only_planned, nobody, overdue) == (
        "error",
        "Unhealthy now: c1 broker 2 in a planned restart for 12.0 min, overdue",
    )


def test_planned_restart_lines_say_away_or_catching_up_overdue_first():
    table = restarts(
        {
            "1": (0, 0, 1, 0, 6),  # in no restart: no line
            "2": (1, 40, 0, 0, 0),  # away 40 s, its leaders moved away by the controlled shutdown
            "3": (1, 70, 1, 12, 1),  # back, not yet in 12 of the ISRs it left
            "4": (2, 720, 0, 0, 1),  # away past the grace
        }
    )
    assert live.restart_lines(table) == [
        ("error", "c1 broker 4: planned restart overdue, away 12.0 min, leads 1 partition"),
        ("warning", "c1 broker 3: planned restart, back, catching up: out of 12 ISRs, 1.2 min since it left"),
        ("warning", "c1 broker 2: planned restart, away 40 s, leads 0 partitions"),
    ]
    assert live.restart_lines(restarts({"1": (0, 0, 1, 0, 6)})) == []
    unknown = live.planned_restarts({"maintenance": frame("broker", {"2": 1})})
    assert live.restart_lines(unknown) == [
        ("warning", "c1 broker 2: planned restart, away unknown, leads ? partitions")
    ]


def test_verdict_flags_throughput_falling_with_stored_data_and_accepts_a_flat_line():
    falling = live.fit_line([1, 2, 3, 4], [40, 30, 20, 10])
    assert falling.r == pytest.approx(-1.0)
    assert "throughput falls as stored data grows (r = -1.00)" in live.fit_verdict(falling)
    flat = live.fit_line([1, 2, 3, 4], [50, 50, 50, 50])  # LinkedIn: flat up to 1 TB stored
    assert flat.slope == 0 and math.isnan(flat.r)
    assert live.fit_verdict(flat) == "throughput does not fall with stored data, as expected of Kafka"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(math.inf, "never"), (None, "unknown"), (math.nan, "unknown"), (42, "42 s"), (90, "1.5 min"),
     (5400, "1.5 h"), (3 * 86400, "3.0 days")],
)  # fmt: skip
def test_durations_read_as_people_say_them(seconds, text):
    assert live.duration_text(seconds) == text


def test_controller_verdict_accepts_exactly_one():
    assert live.controller_verdict(1) == (True, "one active controller")
    assert live.controller_verdict(0)[0] is False and "no active controller" in live.controller_verdict(0)[1]
    assert "2 brokers claim to be controller" in live.controller_verdict(2)[1]
    assert live.controller_verdict(None)[0] is False


def test_missing_data_names_the_cause():
    address = "127.0.0.1:9308"
    no_job = live.missing_reason("kobs_broker_up", pd.DataFrame(columns=["value"]), address)
    assert "does not scrape the kobs exporter" in no_job and address in no_job
    down = live.missing_reason("kobs_broker_up", pd.DataFrame({"value": [0.0]}), address)
    assert "cannot reach the kobs exporter at 127.0.0.1:9308" in down and "kobs stream" in down
    up = live.missing_reason("kobs_broker_up", pd.DataFrame({"value": [1.0]}), address)
    assert "has not reported yet" in up


def test_groups_are_named_by_status_worst_first_with_eta_in_words():
    table = live.group_table(
        {
            "status": frame("group", {"ok-group": 0, "stopped": 2, "slow": 1}),
            "eta_s": frame("group", {"ok-group": 0, "stopped": math.inf, "slow": 120}),
        }
    )
    assert list(table["group"]) == ["stopped", "slow", "ok-group"]
    assert list(table["status"]) == ["ERR", "WARN", "OK"]
    assert list(table["catch-up ETA"]) == ["never", "2.0 min", "0 s"]


def test_producers_blocked_first_then_at_risk_under_five_minutes():
    table = live.producer_states(
        {
            "blocked": frame("client_id", {"web": 1, "batch": 0, "etl": 0, "edge": 0}),
            "time_to_block_s": frame("client_id", {"web": 0, "batch": 120, "etl": math.inf, "edge": 300}),
            "buffer_used": frame("client_id", {"web": 1.0, "batch": 0.6, "etl": 0.1, "edge": 0.5}),
        }
    )
    assert list(zip(table["client_id"], table["state"], strict=True)) == [
        ("web", "blocked"), ("batch", "at risk"), ("edge", "ok"), ("etl", "ok"),
    ]  # fmt: skip  # 300 s is the alert's threshold: not below it, so not at risk


def test_topics_in_trouble_come_first():
    table = live.topic_health(
        {
            "offline": frame("topic", {"orders": 5, "payments": 0}),
            "under-replicated": frame("topic", {"orders": 0, "payments": 0}),
            "replication factor": frame("topic", {"orders": 1, "payments": 3}),
        }
    )
    assert list(zip(table["topic"], table["healthy"], strict=True)) == [("orders", False), ("payments", True)]


def test_reassigning_partitions_are_no_trouble_and_one_replica_from_min_isr_is():
    table = live.topic_health(
        {
            "one replica from min ISR": frame("topic", {"orders": 0, "payments": 2, "logs": 0}),
            "under-replicated": frame("topic", {"orders": 0, "payments": 2, "logs": 0}),
            "reassigning": frame("topic", {"orders": 4, "payments": 0, "logs": 0}),
            "replication factor": frame("topic", {"orders": 3, "payments": 3, "logs": 3}),
        }
    )
    healthy = dict(zip(table["topic"], table["healthy"], strict=True))
    assert healthy == {"payments": False, "logs": True, "orders": True}
    assert table.loc[table["topic"] == "orders", "reassigning"].item() == 4


def test_runway_shortest_first_and_low_below_a_week():
    table = live.runway_table(
        frame("broker", {"0": math.inf, "1": 5.0, "2": 30.0}), frame("broker", {"0": 1e9, "1": 2e9, "2": 3e9})
    )
    assert list(table["broker"]) == ["1", "2", "0"]
    assert list(table["low"]) == [True, False, False]
    assert list(table["disks full in"]) == ["5.0 days", "30.0 days", "never"]
    assert list(table["stored GB"]) == [2.0, 3.0, 1.0]


def test_lag_timeline_sums_partitions_per_group_and_time():
    history = pd.DataFrame(
        {
            "cluster": ["c1"] * 4,
            "group": ["g", "g", "g", "g"],
            "at_s": [100.0, 100.0, 110.0, 110.0],
            "lag_messages": [3, 4, 0, 1],
            "lag_seconds": [2.0, 5.0, 0.0, 1.0],
        }
    )
    timeline = live.lag_timeline(history)
    assert list(timeline["lag_messages"]) == [7, 1]
    assert list(timeline["lag_seconds"]) == [5.0, 1.0]
    assert list(timeline["time"]) == [100.0, 110.0]
    assert live.lag_timeline(pd.DataFrame()).empty


def test_incident_spans_join_consecutive_troubled_samples_and_end_a_step_after_the_last():
    step = 10.0
    up = pd.DataFrame(
        [
            {"cluster": "c1", "broker": "2", "time": t, "value": v}
            for t, v in [(0, 1), (10, 0), (20, 0), (30, 1), (40, 0)]
        ]
        + [{"cluster": "c1", "broker": "1", "time": t, "value": 1.0} for t in (0, 10, 20, 30, 40)]
    )
    blocked = pd.DataFrame(
        [{"cluster": "c1", "client_id": "web", "time": t, "value": 1.0} for t in (5, 15, 45)]
    )
    spans = live.incident_spans(
        {"broker down": up, "producer blocked": blocked, "offline": up.iloc[0:0]}, step
    )
    assert spans.to_dict("records") == [
        {"what": "c1/web blocked", "kind": "producer blocked", "start": 5, "end": 25.0},
        {"what": "c1 broker 2 down", "kind": "broker down", "start": 10, "end": 30.0},
        {"what": "c1 broker 2 down", "kind": "broker down", "start": 40, "end": 50.0},
        {
            "what": "c1/web blocked",
            "kind": "producer blocked",
            "start": 45,
            "end": 55.0,
        },  # a gap: a new stretch
    ]


def test_a_planned_restart_is_its_own_kind_on_the_timeline_in_its_own_colour():
    maintenance = pd.DataFrame(
        [
            {"cluster": "c1", "broker": "2", "time": t, "value": v}
            for t, v in [(0, 0), (10, 1), (20, 2), (30, 0)]
        ]
    )
    spans = live.incident_spans({"planned restart": maintenance}, step_s=10.0)
    assert spans.to_dict("records") == [
        {"what": "c1 broker 2 planned restart", "kind": "planned restart", "start": 10, "end": 30.0}
    ]  # planned, then overdue: one stretch
    assert list(live.INCIDENT_COLOURS) == list(live.INCIDENT_QUERIES)  # every kind coloured
    others = {c for kind, c in live.INCIDENT_COLOURS.items() if kind != "planned restart"}
    assert live.INCIDENT_COLOURS["planned restart"] not in others


def test_the_scatter_takes_each_brokers_own_rows_not_its_per_topic_rows():
    rows = pd.DataFrame(
        {
            "broker": ["1", "1", "2"],
            "topic": [None, "orders", None],
            "stored_bytes": [2e9, 5e8, 4e9],
            "bytes_in_per_s": [3e6, 1e6, 5e6],
        }
    )
    assert live.broker_points(rows).to_dict("list") == {
        "stored GB": [2.0, 4.0],
        "MB/s in": [3.0, 5.0],
        "broker": ["1", "2"],
    }


def test_the_canary_table_puts_brokers_losing_messages_first_with_latencies_in_words():
    table = live.canary_table(
        {
            "read back": frame("broker", {"1": 120, "2": 90, "3": 0}),
            "lost": frame("broker", {"1": 0, "2": 30}),  # broker 3: just started, nothing due yet
            "end-to-end p99": frame("broker", {"1": 0.0123, "2": 4.96, "3": math.nan}),
            "produce p99": frame("broker", {"1": 0.004, "2": 0.5}),
        }
    )
    assert list(table["broker"]) == ["2", "1", "3"]
    assert list(table["lost"]) == [30, 0, 0]
    assert table["delivered"].iloc[0] == 90 / 120 and table["delivered"].iloc[1] == 1.0
    assert math.isnan(table["delivered"].iloc[2])  # no message was due: unknown, not 0% or 100%
    assert list(table["end-to-end p99"]) == ["5 s", "12 ms", "unknown"]
    assert list(table["produce p99"]) == ["500 ms", "4 ms", "unknown"]


def test_status_cells_take_the_colour_of_their_severity_and_other_cells_none():
    # Burrow's severities: OK healthy, WARN a lag still growing, the rest a consumer in trouble
    burrow = {"OK": "green", "WARN": "orange", "ERR": "red", "STOP": "red", "STALL": "red", "REWIND": "red"}
    assert {status: live.status_colour(status) for status in burrow} == burrow
    assert [live.status_colour(s) for s in ("ok", "at risk", "blocked", "unknown")] == [
        "green", "orange", "red", "grey",
    ]  # fmt: skip
    assert [live.status_colour(v) for v in (True, False, "orders", 3)] == ["green", "red", None, None]
    table = pd.DataFrame({"group": ["OK", "etl"], "status": ["OK", "STALL"], "healthy": [True, False]})
    styles = ui.coloured(table, "status", "healthy", "absent")._compute().ctx
    assert dict(styles[0, 1]) == {"background-color": ui.CELL_BACKGROUNDS["green"]}
    assert dict(styles[1, 1]) == dict(styles[1, 2]) == {"background-color": ui.CELL_BACKGROUNDS["red"]}
    assert (0, 0) not in styles  # a group named like a status is not a status


def test_counts_from_prometheus_read_as_whole_numbers_and_other_figures_stay_as_they_are():
    table = pd.DataFrame({"members": [3.0, float("nan")], "lag": [1200.0, 0.0], "ratio": [0.25, 1.0]})
    shown = live.whole_numbers(table)
    assert list(shown["members"]) == [3, pd.NA] and str(shown["members"].dtype) == "Int64"
    assert list(shown["lag"]) == [1200, 0] and shown["ratio"].tolist() == [0.25, 1.0]
    html = ui.coloured(shown, "status").to_html()
    assert ">1200<" in html and ">0.25<" in html and "1200.000000" not in html


def test_brokers_whose_request_handlers_idle_least_come_first_and_pools_under_a_fifth_idle_are_named():
    table = live.resource_table(
        {
            "handlers idle": frame("broker", {"1": 0.9, "2": 0.15, "3": float("nan")}),
            "network idle": frame("broker", {"1": 0.1, "2": 0.5, "3": 0.9}),
        }
    )
    assert list(table["broker"]) == ["2", "1", "3"]  # unknown last
    assert set(live.RESOURCE_QUERIES) <= set(table.columns)  # every column, even one nothing reported
    assert live.saturated(table) == ["c1 broker 2 (handlers idle 15%)", "c1 broker 1 (network idle 10%)"]


def test_produce_p99_and_metadata_age_read_as_times_and_queues_and_offline_log_dirs_as_counts():
    table = live.resource_table(
        {
            "handlers idle": frame("broker", {"1": 0.5, "2": 0.9, "3": 0.7}),
            "produce p99": frame("broker", {"1": 0.0123, "2": 3.2}),  # broker 3: not reported
            "metadata age": frame("broker", {"1": 0.25, "2": 90}),
            "request queue": frame("broker", {"1": 40, "2": 0}),
            "offline log dirs": frame("broker", {"1": 0, "2": 1}),
        }
    )
    assert list(table["broker"]) == ["1", "3", "2"]
    assert list(table["produce p99"]) == ["12 ms", None, "3 s"]  # 0.0123 s = 12.3 ms; unknown: empty
    assert list(table["metadata age"]) == ["250 ms", None, "1.5 min"]  # 90 s = 1.5 min
    counts = table.set_index("broker").loc[["1", "2"], ["request queue", "offline log dirs"]]
    assert counts.to_dict("list") == {"request queue": [40, 0], "offline log dirs": [0, 1]}


def per_cluster(values: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"cluster": c, "value": v} for c, v in values.items()])


def test_the_quorum_names_its_leader_warns_while_electing_and_errs_past_the_pages_30_s():
    """KafkaQuorumLeaderless pages above 30 s without a leader: 30 s is still an election, 45 s the page's
    line. Clusters without quorum series (ZooKeeper mode) have no line."""
    quorum = {
        "leader": per_cluster({"c1": 2, "c2": 1, "c3": 3, "c4": 1}),
        "epoch": per_cluster({"c1": 7, "c2": 9, "c3": 4, "c4": 1}),
        "voters": per_cluster({"c1": 3, "c2": 3, "c3": 5, "c4": 1}),
        "leaderless": per_cluster({"c1": 0, "c2": 45, "c3": 30, "c4": 0}),
    }
    assert live.quorum_lines(quorum) == [
        ("success", "c1: quorum leader node 2, epoch 7, 3 voters"),
        ("error", "c2: the controller quorum has had no leader for 45 s"),
        ("warning", "c3: the controller quorum has been electing a leader for 30 s"),
        ("success", "c4: quorum leader node 1, epoch 1, 1 voter"),
    ]
    none = pd.DataFrame(columns=["value"])  # what Prometheus answers for a ZooKeeper-mode cluster
    assert live.quorum_lines(dict.fromkeys(live.QUORUM_QUERIES, none)) == []


def test_brokers_with_offline_log_directories_are_named_in_broker_order_with_how_many():
    dirs = pd.concat(
        [frame("broker", {"10": 1, "2": 2, "3": 0}), frame("broker", {"1": 1}, cluster="c2")],
        ignore_index=True,
    )
    assert live.offline_log_dirs(dirs) == (
        "Offline log directories: c1 broker 2 (2), c1 broker 10 (1), c2 broker 1 (1)"
    )
    assert live.offline_log_dirs(frame("broker", {"1": 0, "2": 0})) is None
    assert live.offline_log_dirs(pd.DataFrame(columns=["value"])) is None

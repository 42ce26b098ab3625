"""Generated dashboards: valid Grafana JSON, and every panel query returns data from a real Prometheus."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from derived_exporter import DerivedExporter
from exposition import scrape

import dashboards
from alerts import check
from alerts.runbooks import DEFAULT_TEMPLATE
from common.metrics import ALL_METRICS, COLLECTOR_METRICS, metric_of
from dashboards.spec import DASHBOARDS
from kobs.cli import main
from peers.process import HOST, free_port
from peers.prometheus import Prometheus, http_json
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario

PROVISIONING = Path(dashboards.__file__).parent / "provisioning"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def boards(tmp_path_factory):
    out = tmp_path_factory.mktemp("dashboards")
    assert main(["dashboards", "generate", "--out", str(out)]) == 0
    return {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def _panels(board):
    return [p for p in board["panels"] if p["type"] != "row"]


def _queries(boards):
    return [
        (uid, p["title"], t["expr"]) for uid, b in boards.items() for p in _panels(b) for t in p["targets"]
    ]


def test_one_file_per_dashboard_with_unique_stable_uids(boards):
    assert set(boards) == {spec.uid for spec in DASHBOARDS}
    assert all(board["uid"] == uid for uid, board in boards.items())
    assert len({b["title"] for b in boards.values()}) == len(boards)


def test_every_board_links_the_others_and_per_broker_panels_follow_the_broker_variable(boards):
    for uid, board in boards.items():
        (link,) = board["links"]  # Grafana lists the dashboards tagged kobs: every other board
        assert link["type"] == "dashboards" and link["tags"] == ["kobs"] and "kobs" in board["tags"]
        assert link["includeVars"] and link["keepTime"], uid
        variables = {v["name"] for v in board["templating"]["list"]}
        for panel in _panels(board):
            expr = panel["targets"][0]["expr"]
            if re.search(r"by \(cluster, broker", expr) and "kobs_canary" not in expr:
                assert 'broker=~"$broker"' in expr and "broker" in variables, (uid, panel["title"])


def test_dashboards_are_grafana_json_with_datasource_and_targets(boards):
    for uid, board in boards.items():
        assert {"title", "uid", "panels", "templating", "schemaVersion", "time"} <= set(board), uid
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert (
            variables["datasource"]["type"] == "datasource"
            and variables["datasource"]["query"] == "prometheus"
        )
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), f"{uid}: duplicate panel ids"
        assert _panels(board), uid
        for panel in _panels(board):
            assert panel["datasource"] == "${datasource}", (uid, panel["title"])
            assert panel["targets"] and all(
                t["expr"] and t["datasource"] == "${datasource}" for t in panel["targets"]
            )
            assert (
                set(panel["gridPos"]) == {"h", "w", "x", "y"}
                and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
            )
        used = set(re.findall(r"\$(\w+)", " ".join(t["expr"] for p in _panels(board) for t in p["targets"])))
        assert used - {"__rate_interval"} <= set(variables), f"{uid}: query uses an undefined variable"


def test_panels_and_variables_read_documented_metrics(boards):
    read = {
        metric_of(m) for _, _, expr in _queries(boards) for m in re.findall(r"\b((?:kobs|kafka)_\w+)", expr)
    }
    assert read <= set(ALL_METRICS)
    never_shown = (
        set(ALL_METRICS)
        - read
        - {
            # raw counterparts of shown derived metrics, and the critical marker: read by alerts only
            "kafka_controller_kafkacontroller_activecontrollercount",
            "kafka_controller_controllerstats_uncleanleaderelections_total",
            "kafka_server_replicamanager_isrshrinks_total",
            "kobs_consumergroup_critical",
        }
    )
    assert not never_shown, f"documented metrics no dashboard shows: {never_shown}"


def test_each_variable_comes_from_a_metric_that_carries_it_and_is_filtered_only_by_labels_it_has(boards):
    """So a variable lists what exists, and choosing a cluster (or group) never empties the next one."""
    for spec in DASHBOARDS:
        queries = {v["name"]: v["query"] for v in boards[spec.uid]["templating"]["list"]}
        for variable in spec.variables:
            labels = set(ALL_METRICS[variable.metric].labels)
            assert variable.name in labels, (spec.uid, variable)
            assert set(re.findall(r"(\w+)=~", queries[variable.name])) <= labels, queries[variable.name]
    lag = {v["name"]: v["query"] for v in boards["kobs-consumer-lag"]["templating"]["list"]}
    assert (
        lag["topic"]
        == 'label_values(kobs_consumergroup_lag_messages{cluster=~"$cluster",group=~"$group"}, topic)'
    )


def _stats(boards):
    return {p["title"]: p for b in boards.values() for p in _panels(b) if p["type"] == "stat"}


def _colour(panel: dict, x: float) -> str:
    """The colour Grafana gives value ``x``: that of the last threshold step it reaches."""
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [s["color"] for s in steps if s["value"] is None or x >= s["value"]][-1]


def test_every_stat_panel_is_coloured_where_its_alert_fires(boards):
    stats = _stats(boards)
    for title, panel in stats.items():
        colours = {s["color"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]}
        assert "green" in colours and colours & {"orange", "red"}, f"{title}: thresholds {colours}"
        assert panel["options"]["colorMode"] == "background", title
    # known answers from the rules: > 0 pages, exactly one controller, WARN a ticket and ERR a page,
    # a correlation under -0.7 a ticket, over 60 s under-replicated a ticket
    assert [_colour(stats["Partitions offline"], x) for x in (0, 1, 7)] == ["green", "red", "red"]
    assert [_colour(stats["Active controllers"], x) for x in (0, 1, 2)] == ["red", "green", "red"]
    assert [_colour(stats["Worst group status"], x) for x in (0, 1, 2)] == ["green", "orange", "red"]
    correlation = stats["Throughput vs stored data correlation (6 h)"]
    assert [_colour(correlation, x) for x in (-0.9, 0.2)] == ["orange", "green"]
    assert [_colour(stats["Longest under-replicated"], x) for x in (60, 61)] == ["green", "orange"]
    assert [_colour(stats["Blocked producers"], x) for x in (0, 2)] == ["green", "red"]


def test_a_stat_panel_aggregates_as_its_rule_does():
    """A stat crosses the line exactly when some entity of the rule does: it aggregates as the rule does, or
    per cluster with max for an upper line, min for a lower one, or a sum of counts against > 0."""
    rules = {r["alert"]: r["expr"] for r in check.alert_rules()}
    for spec in DASHBOARDS:
        for _, row in spec.rows:
            for panel in (p for p in row if p.kind == "stat"):
                func, metric = re.match(r"(\w+) by \([^)]*\) \((\w+)", panel.expr).groups()
                assert panel.alerts, panel.title
                for alert in panel.alerts:
                    rule = rf"(\w+ by \([^)]*\)) \({metric}\b[^)]*\)\s*(\S+)\s*(\S+)"
                    rule_by, op, value = re.search(rule, rules[alert]).groups()
                    sound = panel.expr.startswith(rule_by) or {  # the rule's own groups, or coarser ones:
                        ">": func == "max" or (func == "sum" and value == "0"),
                        ">=": func == "max",
                        "<": func == "min",
                        "<=": func == "min",
                    }.get(op, False)
                    assert sound, f"{panel.title}: {func} against {alert}'s {op} {value}"


def test_panels_say_what_they_show_and_link_the_runbooks_of_their_alerts(tmp_path):
    template = "https://docs.example.com/kobs/runbooks/{file}#{anchor}"
    assert main(["dashboards", "generate", "--out", str(tmp_path), "--runbook-url", template]) == 0
    rules = {r["alert"]: r for r in check.alert_rules()}
    linked = set()
    for path in tmp_path.glob("*.json"):
        for panel in _panels(json.loads(path.read_text())):
            assert len(panel["description"]) > 30, panel["title"]
            for link in panel["links"]:
                alert = link["title"].removeprefix("Runbook: ")
                relative = rules[alert]["annotations"]["runbook_url"]
                assert link["url"] == "https://docs.example.com/kobs/" + relative.removeprefix("docs/")
                assert f"[{alert}]({link['url']})" in panel["description"]
                linked.add(alert)
    assert len(linked) >= 20, f"only {sorted(linked)} linked from panels"


def test_runbook_links_open_the_apps_runbooks_page_by_default(boards):
    (link, *_) = next(p["links"] for p in _panels(boards["kobs-cluster-health"]) if p["links"])
    alert = link["title"].removeprefix("Runbook: ")
    assert (
        link["url"] == f"http://localhost:8501/runbooks?alert={alert}" == DEFAULT_TEMPLATE.format(alert=alert)
    )


def test_statuses_are_state_timelines_with_a_coloured_name_for_every_value(boards):
    timelines = {p["title"]: p for b in boards.values() for p in _panels(b) if p["type"] == "state-timeline"}
    assert {"Broker up", "Group status", "Partition status", "Blocked by client", "Why ISRs flap"} <= set(
        timelines
    )
    for title, panel in timelines.items():
        (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
        assert all(option["color"] and option["text"] for option in mapping["options"].values()), title
    status = timelines["Partition status"]["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert {v["text"]: v["color"] for v in status.values()} == {
        "OK": "green", "WARN": "orange", "STOP": "red", "STALL": "red", "REWIND": "red",
    }  # fmt: skip
    blocked = timelines["Blocked by client"]["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert blocked["1"] == {"text": "blocked", "color": "red", "index": 1}


def test_provisioning_points_grafana_at_prometheus_and_the_generated_json():
    datasource = yaml.safe_load((PROVISIONING / "datasource.yml").read_text())["datasources"][0]
    assert datasource["type"] == "prometheus" and datasource["name"] == "Prometheus"
    provider = yaml.safe_load((PROVISIONING / "dashboards.yml").read_text())["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"]


@contextlib.contextmanager
def collector(tmp_path: Path, bootstrap: str, exporter_urls: list[str]):
    """A real ``kobs collect`` scraping ``exporter_urls`` and an address where nothing listens (its errors
    feed the error panels) every second; yields its self-metrics address."""
    address = f"{HOST}:{free_port()}"
    urls = [*exporter_urls, f"http://{HOST}:{free_port()}/metrics"]
    exporters = [{"broker_id": i, "url": url} for i, url in enumerate(urls)]
    config = tmp_path / "kobs.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c1", "bootstrap_servers": [bootstrap], "exporters": exporters}],
                "metrics_topic": {"name": "dashboards-metrics"},
                "intervals": {"metrics_s": 1, "offsets_s": 1, "metadata_s": 1, "producers_s": 1},
                "sinks": {"run_dir": str(tmp_path / "run"), "self_metrics_address": address},
            }
        )
    )
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "kobs.cli", "collect", "--config", str(config)]
    with open(tmp_path / "collect.log", "w") as log:
        process = subprocess.Popen(command, env=env, stderr=log)
    try:
        yield address
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _metric_labels(url: str) -> dict[str, set[str]]:
    """Metric -> label names served at ``url`` (histogram series folded into their metric)."""
    served: dict[str, set[str]] = {}
    for name, labels in scrape(url):
        if not name.endswith("_created"):  # prometheus_client's creation timestamps
            served.setdefault(metric_of(name), set()).update(k for k, _ in labels if k != "le")
    return served


@pytest.mark.peers
def test_the_collector_serves_the_documented_self_metrics(kafka_cluster, tmp_path):
    """What panels and rules read of ``kobs collect`` is what it serves: COLLECTOR_METRICS with their labels
    (the source that cannot be reached makes the error counter appear; the canary's message counters appear
    once it follows its partitions)."""
    documented = {m.name: set(m.labels) for m in COLLECTOR_METRICS}
    with collector(tmp_path, kafka_cluster.bootstrap, []) as address:
        deadline, served = time.monotonic() + 60, {}
        while served.keys() != documented.keys() and time.monotonic() < deadline:
            time.sleep(0.2)
            with contextlib.suppress(OSError):
                served = _metric_labels(f"http://{address}/metrics")
    assert served == documented


@contextlib.contextmanager
def simulated_cluster():
    """The rf1-incident scenario's brokers behind their JMX-exporter endpoints; yields the runtime."""
    runtime = Runtime(Simulation(load_scenario("rf1-incident"))).start()
    try:
        yield runtime
    finally:
        runtime.stop()


def _label_values(prom: Prometheus, query: str) -> list[str]:
    """Grafana's ``label_values(selector, label)``, answered by Prometheus's label-values API."""
    selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", query).groups()
    url = f"{prom.url}/api/v1/label/{label}/values?" + urllib.parse.urlencode({"match[]": selector})
    return sorted(http_json(url)["data"])


def _at_first_values(prom: Prometheus, board: dict) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """Each variable's values with the variables before it at their first value, as Grafana fills them on
    opening the board; and each panel's (title, query) with every variable at its first value."""
    chosen: dict[str, str] = {}
    listed = {}
    for variable in board["templating"]["list"][1:]:  # after the data source
        query = re.sub(r"\$(\w+)", lambda m: re.escape(chosen[m[1]]), variable["query"])
        listed[variable["name"]] = _label_values(prom, query)
        chosen[variable["name"]] = (listed[variable["name"]] or [""])[0]
    panels = [
        (
            p["title"],
            re.sub(
                r"\$(\w+)", lambda m: re.escape(chosen[m[1]]), t["expr"].replace("$__rate_interval", "1m")
            ),
        )
        for p in _panels(board)
        for t in p["targets"]
    ]
    return listed, panels


@pytest.mark.peers
def test_every_panel_query_returns_data_from_prometheus(boards, kafka_cluster, tmp_path):
    """Prometheus scrapes the derived exporter, the simulated brokers' JMX exporters (raw broker panels) and
    a real collector's self-metrics (the collector scrapes the simulated brokers). With variables match-all
    and $__rate_interval 1m every query returns data; so it does with every variable at its first value, and
    every variable lists values."""
    queries = [
        (uid, title, re.sub(r"\$\w+", ".*", expr.replace("$__rate_interval", "1m")))
        for uid, title, expr in _queries(boards)
    ]
    with (
        DerivedExporter() as exporter,
        simulated_cluster() as sim,
        collector(tmp_path, kafka_cluster.bootstrap, [e.url for e in sim.brokers.values()]) as self_metrics,
        Prometheus(
            tmp_path / "prom",
            {
                "kobs-exporter": [exporter.address],
                "kobs-collector": [self_metrics],
                "simulated-kafka": [f"{HOST}:{e.port}" for e in sim.brokers.values()],
            },
            target_labels={"simulated-kafka": {"cluster": "c1"}},
        ) as prom,
    ):
        deadline = time.monotonic() + 45
        empty = queries
        while empty and time.monotonic() < deadline:  # rate() needs two scrapes
            empty = [(u, t, q) for u, t, q in empty if not prom.query(q)]
            time.sleep(0.5)
        assert not empty, f"panels without data: {empty}"
        for uid, board in boards.items():  # as a person opens each board: every variable at its first value
            listed, panels = _at_first_values(prom, board)
            assert all(listed.values()), f"{uid}: variables that list nothing: {listed}"
            assert not [(t, q) for t, q in panels if not prom.query(q)], f"{uid}: empty at the first values"

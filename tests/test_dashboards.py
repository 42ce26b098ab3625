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
from pathlib import Path

import pytest
import yaml
from derived_exporter import DerivedExporter
from exposition import scrape

import dashboards
from common.metrics import ALL_METRICS, COLLECTOR_METRICS, metric_of
from dashboards.spec import DASHBOARDS, VARIABLE_SOURCES
from kobs.cli import main
from peers.process import HOST, free_port
from peers.prometheus import Prometheus
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
    assert set(VARIABLE_SOURCES.values()) <= set(ALL_METRICS)
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
    (the source that cannot be reached makes the error counter appear)."""
    with collector(tmp_path, kafka_cluster.bootstrap, []) as address:
        deadline, served = time.monotonic() + 30, {}
        while "kobs_collector_scrape_errors_total" not in served and time.monotonic() < deadline:
            time.sleep(0.2)
            with contextlib.suppress(OSError):
                served = _metric_labels(f"http://{address}/metrics")
    assert served == {m.name: set(m.labels) for m in COLLECTOR_METRICS}


@contextlib.contextmanager
def simulated_cluster():
    """The rf1-incident scenario's brokers behind their JMX-exporter endpoints; yields the runtime."""
    runtime = Runtime(Simulation(load_scenario("rf1-incident"))).start()
    try:
        yield runtime
    finally:
        runtime.stop()


@pytest.mark.peers
def test_every_panel_query_returns_data_from_prometheus(boards, kafka_cluster, tmp_path):
    """Prometheus scrapes the derived exporter, the simulated brokers' JMX exporters (raw broker panels) and
    a real collector's self-metrics (the collector scrapes the simulated brokers). Variables become match-all
    and $__rate_interval 1m; every query must return a non-empty result."""
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

"""The app in a real browser: Chromium (Playwright) against ``kobs app``'s Streamlit server, with live
pages fed by a real Prometheus scraping the derived-metrics exporter and Parquet history written here."""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path

import pytest
from app_data import SERIES, by, write_config, write_history
from browser import RENDERED, browser_page, open_page
from derived_exporter import DerivedExporter

from app.capacity.model import Hardware, Workload, throughput
from app.serve import app_env, streamlit_argv
from peers.process import ManagedProcess, free_port, http_ready
from peers.prometheus import Prometheus

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "var" / "artifacts"
REFRESH_S = 2
# Page (sidebar link, screenshot name) -> text that appears once the page has rendered its live data.
LIVE_PAGES = {
    ("Cluster health", "health"): "Topics in trouble: orders",
    ("Consumer lag", "lag"): "Lag over time",
    ("Throughput vs stored data", "throughput"): "throughput falls as stored data grows (r = -1.00)",
    ("Producers", "producers"): "c1/web: send() is blocking now",
}


@pytest.fixture(scope="module")
def exporter():
    with DerivedExporter(series=dict(SERIES)) as exporter:
        yield exporter


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, exporter):
    run_dir = tmp_path_factory.mktemp("app")
    write_history(run_dir / "history")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with Prometheus(run_dir / "prom", {"kobs-exporter": [exporter.address]}) as prom:
        deadline = time.monotonic() + 30
        while len(prom.query("kobs_broker_up")) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        config = write_config(run_dir / "kobs.yaml", prom.url, run_dir, refresh_s=REFRESH_S)
        env = {"PYTHONPATH": str(ROOT), **app_env(config)}
        ready = http_ready(url + "_stcore/health")
        with ManagedProcess("streamlit", streamlit_argv(port), run_dir, ready, env, 60):
            yield url


@pytest.fixture(scope="module")
def page():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        yield page


def test_browser_opens_every_live_page_with_its_data(app_url, page):
    page.goto(app_url)
    for (title, name), text in LIVE_PAGES.items():
        open_page(page, title)
        # A fresh server's first paint is blank: wait for the live data to render.
        page.get_by_text(text).first.wait_for(timeout=30_000)
        page.wait_for_function(RENDERED, timeout=30_000)  # tables and charts load after the text
        page.screenshot(path=ARTIFACTS / f"live-{name}.png", full_page=True)


def test_browser_changes_what_if_inputs_and_sees_the_result(app_url, page):
    page.goto(app_url)
    open_page(page, "What if")
    # the page shows the model's answer for its defaults (LinkedIn's 2014 benchmark)
    page.get_by_text(throughput(Hardware(), Workload()).bottleneck).wait_for(timeout=30_000)
    page.screenshot(path=ARTIFACTS / "whatif-throughput.png", full_page=True)

    partitions = page.get_by_label("Partitions", exact=True)
    partitions.fill("16")
    partitions.press("Enter")
    page.get_by_role("tab", name="Broker failure").click()
    # 16 partitions, RF 1, 3 brokers; broker 0 dies holding 6 of them: 32 MiB / (6/16 MiB/s) = 85.3 s.
    page.get_by_text("send() blocks after 85.3 s").wait_for(timeout=30_000)
    page.screenshot(path=ARTIFACTS / "whatif-broker-failure.png", full_page=True)

    replication = page.get_by_label("Replication factor", exact=True)
    replication.fill("4")
    replication.press("Enter")
    failure_tab = page.get_by_role("tabpanel", name="Broker failure")
    failure_tab.get_by_text("4 is outside 1..3 (the number of brokers) — use 1..3").wait_for(timeout=30_000)
    page.screenshot(path=ARTIFACTS / "whatif-bad-input.png", full_page=True)


def test_live_pages_refresh_on_their_own(app_url, page, exporter):
    page.goto(app_url)
    page.get_by_text("2 / 3").wait_for(timeout=30_000)
    exporter.series["kobs_broker_up"] = [({"broker": b}, 1) for b in ("1", "2", "3")]  # broker 2 is back
    # No reload: Prometheus scrapes every second and the page re-runs every REFRESH_S seconds.
    page.get_by_text("3 / 3").wait_for(timeout=30_000)


def test_the_health_page_shows_a_planned_restart_not_a_broker_down(app_url, page, exporter, monkeypatch):
    """Broker 2 leaves by controlled shutdown: the page names its planned restart, never calls it down."""
    restart = {
        "kobs_broker_up": by("broker", {"1": 1, "2": 0, "3": 1}),
        "kobs_broker_maintenance": by("broker", {"2": 1}),
        "kobs_broker_maintenance_seconds": by("broker", {"2": 40}),
        "kobs_broker_leader_partitions": by("broker", {"2": 0}),
    }
    for metric, series in restart.items():
        monkeypatch.setitem(exporter.series, metric, series)
    page.goto(app_url)
    page.get_by_text("c1 broker 2: planned restart, away 40 s, leads 0 partitions").wait_for(timeout=30_000)
    header = "Unhealthy now: c1/orders offline for 1.5 min; c1/web blocked in send(); "
    page.get_by_text(header + "c1 broker 2 in a planned restart for 40 s", exact=True).wait_for(
        timeout=30_000
    )
    page.screenshot(path=ARTIFACTS / "live-health-planned-restart.png", full_page=True)


def test_an_alerts_runbook_link_opens_its_section_in_the_app(app_url, page):
    """The link the alert rules and dashboards carry by default: /runbooks?alert=<name>."""
    section = (
        (ROOT / "docs" / "runbooks" / "replication.md").read_text().split("## KafkaOfflinePartitions\n")[1]
    )
    # its first line up to a comma, plain text: "Partitions of the topic have had no live leader for ..."
    first_words = section.removeprefix("**Page.** ").splitlines()[0].split(",")[0]
    page.goto(app_url + "runbooks?alert=KafkaOfflinePartitions")
    page.get_by_role("heading", name="KafkaOfflinePartitions").wait_for(timeout=30_000)
    page.get_by_text(first_words).first.wait_for(timeout=30_000)
    page.get_by_test_id("stSidebarNav").get_by_text("Runbooks", exact=True).wait_for(timeout=30_000)
    page.screenshot(path=ARTIFACTS / "runbook.png", full_page=True)
    page.goto(app_url + "runbooks?alert=KafkaNoSuchAlert")
    page.get_by_text("No runbook has a section for alert 'KafkaNoSuchAlert'").wait_for(timeout=30_000)
    # a name written as a Markdown link shows as written, not as a live link (it once rendered one)
    page.goto(app_url + "runbooks?alert=" + urllib.parse.quote("[click](https://evil.example/)", safe=""))
    said = page.get_by_text("No runbook has a section for alert '[click]")
    said.wait_for(timeout=30_000)  # the text as written (with an invisible zero-width space after "https:")
    assert (
        said.inner_text()
        .replace("\u200b", "")
        .startswith("No runbook has a section for alert '[click](https://evil.example/)'")
    )
    assert page.locator('a[href*="evil.example"]').count() == 0

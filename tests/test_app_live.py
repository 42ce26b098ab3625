"""The live pages through Streamlit's AppTest, against a real Prometheus scraping the derived-metrics
exporter (tests/derived_exporter.py) and Parquet history written here; also Prometheus down and no data."""

from __future__ import annotations

import json
import math
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from app_data import ROLLING_RESTART, SERIES, write_config, write_history
from derived_exporter import DerivedExporter
from streamlit.testing.v1 import AppTest
from waiting import until

from app import live
from app.prometheus import PrometheusClient, PrometheusUnavailable
from peers.process import free_port
from peers.prometheus import Alertmanager, Prometheus

pytestmark = pytest.mark.peers
MAIN = str(Path(__file__).resolve().parents[1] / "app" / "main.py")
# The header of every live page on SERIES: what is unhealthy, longest first.
UNHEALTHY = "Unhealthy now: c1/orders offline for 1.5 min; c1 broker 2 down; c1/web blocked in send()"


@contextmanager
def scraping(series: dict, where: Path) -> Iterator[Prometheus]:
    """A Prometheus scraping the derived-metrics exporter serving ``series``, once it has three brokers."""
    with (
        DerivedExporter(series=series) as exporter,
        Prometheus(where, {"kobs-exporter": [exporter.address]}) as prom,
    ):
        deadline = time.monotonic() + 30
        while len(prom.query("kobs_broker_up")) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        yield prom


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with scraping(SERIES, tmp_path_factory.mktemp("prom")) as prom:
        yield prom


@pytest.fixture(scope="module")
def rolling_restart(tmp_path_factory):
    with scraping(ROLLING_RESTART, tmp_path_factory.mktemp("prom-restart")) as prom:
        yield prom


@pytest.fixture
def populated(prometheus, tmp_path, monkeypatch):
    write_history(tmp_path / "history")
    monkeypatch.setenv("KOBS_CONFIG", str(write_config(tmp_path / "kobs.yaml", prometheus.url, tmp_path)))


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=30).run()
    if page != "health":
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_health_shows_brokers_controller_topics_in_trouble_and_the_flapping_timeline(populated):
    at = open_page("health")
    assert at.title[0].value == "Cluster health"
    assert metrics(at) == {"Brokers up": "2 / 3", "Active controllers": "1", "Brokers down": "c1 broker 2"}
    # the exporter's quorum: leader 1, epoch 4, 3 voters, never leaderless
    assert [s.value for s in at.success] == [
        "Controller: one active controller",
        "c1: quorum leader node 1, epoch 4, 3 voters",
    ]
    assert [e.value for e in at.error] == [UNHEALTHY, "Topics in trouble: orders"]
    resources, topics = at.dataframe[0].value, at.dataframe[1].value
    assert topics.loc[topics["topic"] == "orders", "offline"].item() == 5  # one row: 3 + 2 over cause brokers
    # broker 1's request handlers idle 12% of the time: saturated, and first; heap 3e8 of 4e8 bytes
    assert list(resources["broker"]) == ["1", "3"] and resources["heap used"].tolist() == [0.75, 0.25]
    assert resources["produce p99"].tolist() == ["4 ms", None]  # broker 1's Produce p99: 0.004 s
    saturated = "Thread pools idle less than 20%: c1 broker 1 (handlers idle 12%)"
    assert [w.value for w in at.warning] == [saturated]
    assert "Flapping partitions per broker" in " ".join(c.value for c in at.caption)
    at.selectbox(key="health_window").set_value("15 minutes").run()
    assert not at.exception and at.selectbox(key="health_window").value == "15 minutes"


def test_health_during_a_rolling_restart_says_planned_restart_not_down(
    rolling_restart, tmp_path, monkeypatch
):
    monkeypatch.setenv(
        "KOBS_CONFIG", str(write_config(tmp_path / "kobs.yaml", rolling_restart.url, tmp_path))
    )
    at = open_page("health")
    assert metrics(at) == {"Brokers up": "2 / 3", "Active controllers": "1", "Brokers down": "none"}
    assert [w.value for w in at.warning] == ["c1 broker 2: planned restart, away 40 s, leads 0 partitions"]
    assert [e.value for e in at.error] == [
        "Unhealthy now: c1/orders under-replicated for 40 s; c1 broker 2 in a planned restart for 40 s",
        "Topics in trouble: orders",
    ]
    topics = at.dataframe[1].value.set_index("topic")
    assert topics.loc["orders", ["under-replicated", "one replica from min ISR", "reassigning"]].tolist() == [
        12, 12, 0,
    ]  # fmt: skip
    assert topics.loc["payments", "reassigning"] == 4 and topics.loc["payments", "healthy"]
    # the incident timeline's queries: broker 2's planned restart, and no outage of it
    client = PrometheusClient(rolling_restart.url)
    ranges = {kind: client.range(query, 60, 5) for kind, (query, _, _) in live.INCIDENT_QUERIES.items()}
    assert set(live.incident_spans(ranges, 5)["what"]) == {
        "c1 broker 2 planned restart",
        "c1/orders under-replicated",
    }


def test_lag_shows_groups_worst_first_and_the_history_of_committed_batches(populated):
    at = open_page("lag")
    groups = at.dataframe[0].value
    assert list(groups["group"]) == ["billing", "analytics"]
    assert list(groups["status"]) == ["ERR", "OK"]
    assert list(groups["catch-up ETA"]) == ["never", "0 s"]
    assert list(groups["lag (messages)"]) == [1200, 0]
    assert list(groups["lag"]) == ["30.0 min", "0 s"]  # the oldest unconsumed message's age, in words
    assert list(groups["members"]) == [0, 3]  # lag with nobody in the group: nothing will consume it
    assert metrics(at)["Groups not OK"] == "1"
    at.selectbox(key="lag_group").set_value("billing").run()
    partitions = at.dataframe[1].value
    assert list(partitions["lag_messages"]) == [700, 500]  # the newest committed batch, not the one in flight
    at.radio(key="lag_unit").set_value("seconds").run()
    assert not at.exception


def test_throughput_draws_the_regression_and_flags_a_short_disk_runway(populated):
    at = open_page("throughput")
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Regression**"))
    assert "throughput falls as stored data grows (r = -1.00)" in verdict
    assert [e.value for e in at.error] == [UNHEALTHY, "Disks fill within 7 days on broker(s) 1"]
    runway = at.dataframe[0].value
    assert list(runway["broker"]) == ["1", "3", "2"] and list(runway["disks full in"])[-1] == "never"
    per_topic = at.dataframe[1].value
    assert list(per_topic["topic"]) == ["orders", "payments"] and list(per_topic["in MB/s"]) == [2.0, 1.0]


def test_producers_name_the_blocked_one_and_the_one_at_risk(populated):
    at = open_page("producers")
    assert [e.value for e in at.error] == [UNHEALTHY, "c1/web: send() is blocking now"]
    assert [w.value for w in at.warning] == ["c1/batch: blocks in 2.0 min"]
    assert metrics(at)["Blocked"] == "1" and metrics(at)["At risk (< 5.0 min)"] == "1"
    at.selectbox(key="producers_window").set_value("1 day").run()
    assert not at.exception


@pytest.mark.parametrize("page", ["health", "lag", "throughput", "producers"])
def test_prometheus_down_is_one_clear_message_and_history_still_shows(page, tmp_path, monkeypatch):
    write_history(tmp_path / "history")
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("KOBS_CONFIG", str(write_config(tmp_path / "kobs.yaml", dead, tmp_path)))
    at = open_page(page)
    assert [e.value for e in at.error] == [
        f"Prometheus at {dead} is not answering ([Errno 111] Connection refused): is it running? "
        "Point app.prometheus_url in the configuration at it."
    ]
    if page == "lag":  # the history does not need Prometheus
        at.selectbox(key="lag_group").set_value("billing").run()
        assert list(at.dataframe[0].value["lag_messages"]) == [700, 500]


@pytest.fixture(scope="module")
def no_exporter(tmp_path_factory):
    """Told to scrape the kobs exporter at an address where nothing listens."""
    dead = f"127.0.0.1:{free_port()}"
    with Prometheus(tmp_path_factory.mktemp("prom-empty"), {"kobs-exporter": [dead]}) as prom:
        deadline = time.monotonic() + 30
        while not prom.query('up{job="kobs-exporter"}') and time.monotonic() < deadline:
            time.sleep(0.2)
        yield prom


@pytest.mark.parametrize(
    ("page", "says"),
    [
        ("health", "No `kobs_broker_up` yet: Prometheus cannot reach the kobs exporter at 127.0.0.1:9308"),
        ("lag", "No `kobs_consumergroup_status` yet: Prometheus cannot reach the kobs exporter"),
        ("throughput", "No throughput history yet under "),
        ("producers", "No `kobs_producer_blocked` yet: Prometheus cannot reach the kobs exporter"),
    ],
)
def test_empty_states_say_what_has_not_arrived(page, says, no_exporter, tmp_path, monkeypatch):
    config = write_config(tmp_path / "kobs.yaml", no_exporter.url, tmp_path)
    monkeypatch.setenv("KOBS_CONFIG", str(config))
    at = open_page(page)
    assert not at.error
    assert any(i.value.startswith(says) for i in at.info), [i.value for i in at.info]
    if page == "health":  # said once, not again by each section lacking the exporter's data
        assert sum("cannot reach the kobs exporter" in i.value for i in at.info) == 1
    if page == "lag":
        assert f"No lag history yet under {tmp_path / 'history' / 'lag'}: is `kobs stream` running?" in [
            i.value for i in at.info
        ]


def test_client_reports_a_bad_query_and_returns_infinity_as_never(prometheus):
    client = PrometheusClient(prometheus.url)
    runway = client.instant("kobs_broker_disk_runway_days")
    assert math.isinf(runway.loc[runway["broker"] == "2", "value"].item())
    with pytest.raises(PrometheusUnavailable, match=r"refused 'sum by \(': .*parse error"):
        client.instant("sum by (")


def test_a_bad_configuration_is_one_line_in_the_page_and_in_kobs_app(tmp_path, monkeypatch):
    bad = tmp_path / "kobs.yaml"
    bad.write_text("clusters: []\napp: {prometheus_url: localhost:9090}\n")
    monkeypatch.setenv("KOBS_CONFIG", str(bad))
    at = AppTest.from_file(MAIN, default_timeout=30).run()
    assert len(at.error) == 1 and at.error[0].value.startswith(f"config error in {bad}: ")
    done = subprocess.run(
        [sys.executable, "-m", "kobs.cli", "app", "--config", str(bad)], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.startswith(f"kobs: config error in {bad}: ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_kobs_app_ends_on_sigterm_and_leaves_no_listener(tmp_path):
    """``kobs app`` is the Streamlit server itself: a SIGTERM to the PID that was started closes the port."""
    config = write_config(tmp_path / "kobs.yaml", "http://127.0.0.1:1", tmp_path)
    port = free_port()
    command = [sys.executable, "-m", "kobs.cli", "app", "--config", str(config), "--port", str(port)]
    app = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert until(lambda: _listening(port), timeout_s=60), "kobs app never listened"
        app.send_signal(signal.SIGTERM)
        app.wait(30)
        assert not _listening(port)
    finally:
        app.kill()
        app.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class _Misbehaving:
    """What a broken proxy in front of Prometheus, or a URL pointing at something else, answers: an HTTP
    server on 127.0.0.1 sending one fixed reply. A stand-in: a real Prometheus never sends these."""

    def __init__(self, status: int, body: bytes, content_type: str):
        import http.server
        import threading

        reply = (status, body, content_type)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                code, content, kind = reply
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *_args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.server.shutdown()
        self.server.server_close()


HTML_503 = b"<html><body><h1>503 Service Temporarily Unavailable</h1>nginx</body></html>"
BAD_ANSWERS = {
    "a proxy's 503 page": (503, HTML_503, "text/html"),
    "a proxy's 400 page": (400, b"<html>400 Bad Request</html>", "text/html"),
    "JSON without data": (200, b'{"status": "success"}', "application/json"),
    "a non-numeric value": (
        200,
        b'{"status":"success","data":{"resultType":"vector","result":'
        b'[{"metric":{"broker":"1"},"value":[1700000000,"many"]}]}}',
        "application/json",
    ),
    "an HTML page with 200": (200, b"<html>Grafana login</html>", "text/html"),
}


@pytest.mark.parametrize("answer", BAD_ANSWERS)
def test_a_bad_answer_is_one_line_naming_the_url_in_the_client_and_on_every_live_page(
    answer, tmp_path, monkeypatch
):
    with _Misbehaving(*BAD_ANSWERS[answer]) as server:
        with pytest.raises(PrometheusUnavailable) as raised:
            PrometheusClient(server.url).instant("kobs_broker_up")
        message = str(raised.value)
        assert message.startswith(f"Prometheus at {server.url} ") and "\n" not in message
        monkeypatch.setenv("KOBS_CONFIG", str(write_config(tmp_path / "kobs.yaml", server.url, tmp_path)))
        for page in ("health", "lag", "producers"):
            at = open_page(page)  # asserts no exception (traceback) on the page
            (error,) = [e.value for e in at.error]
            assert error.startswith(f"Prometheus at {server.url} ") and "\n" not in error, page


def _post(url: str, body: object) -> None:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory):
    """A real Alertmanager holding a page, a ticket and a silenced page, as Prometheus would send them."""
    with Alertmanager(tmp_path_factory.mktemp("am")) as am:
        started = datetime.now(UTC) - timedelta(minutes=10)
        alerts = [
            ("KafkaProducerBlocked", "page", "c1: producer web is blocked in send()", "KafkaProducerBlocked"),
            ("KafkaConsumerLagOverSlo", "ticket", "c1: group billing is 30m behind", ""),
            ("KafkaBrokerDown", "page", "c1: broker 2 is down", ""),
        ]
        body = [
            {
                "labels": {"alertname": name, "severity": severity, "cluster": "c1"},
                "annotations": {
                    "summary": summary,
                    **({"runbook_url": f"http://rb/?alert={rb}"} if rb else {}),
                },
                "startsAt": started.isoformat(),
            }
            for name, severity, summary, rb in alerts
        ]
        _post(f"{am.url}/api/v2/alerts", body)
        silence = {
            "matchers": [{"name": "alertname", "value": "KafkaBrokerDown", "isRegex": False}],
            "startsAt": started.isoformat(),
            "endsAt": (started + timedelta(hours=2)).isoformat(),
            "createdBy": "test",
            "comment": "planned restart",
        }
        _post(f"{am.url}/api/v2/silences", silence)
        deadline = time.monotonic() + 30
        while len(am.alerts()) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        yield am


def test_every_live_page_opens_with_the_alerts_firing_now_and_what_is_unhealthy_since_when(
    prometheus, alertmanager, tmp_path, monkeypatch
):
    config = write_config(tmp_path / "kobs.yaml", prometheus.url, tmp_path, alertmanager_url=alertmanager.url)
    monkeypatch.setenv("KOBS_CONFIG", str(config))
    for page in ("health", "lag", "throughput", "producers"):
        at = open_page(page)
        page_line, ticket_line = at.error[0].value, at.warning[0].value  # the silenced page is not shown
        assert re.fullmatch(
            r"\[KafkaProducerBlocked\]\(http://rb/\?alert=KafkaProducerBlocked\) \(page\): "
            r"c1: producer web is blocked in send\(\) — for 10\.\d min",  # started 10 minutes before the test
            page_line,
        ), page
        assert re.fullmatch(
            r"KafkaConsumerLagOverSlo \(ticket\): c1: group billing is 30m behind — for 10\.\d min",
            ticket_line,
        )
        assert at.error[1].value == UNHEALTHY, page


def test_alertmanager_down_is_one_warning_and_the_page_still_shows(prometheus, tmp_path, monkeypatch):
    dead = f"http://127.0.0.1:{free_port()}"
    config = write_config(tmp_path / "kobs.yaml", prometheus.url, tmp_path, alertmanager_url=dead)
    monkeypatch.setenv("KOBS_CONFIG", str(config))
    at = open_page("producers")
    warning = at.warning[0].value
    assert (
        warning.startswith(f"Alertmanager at {dead} is not answering") and "app.alertmanager_url" in warning
    )
    assert metrics(at)["Blocked"] == "1"

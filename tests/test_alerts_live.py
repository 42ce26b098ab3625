"""End to end: a real Prometheus with the shipped rules (for: shortened) scrapes a derived-metrics exporter,
a metric flips to its alerting value, and the page reaches a webhook through a real Alertmanager routed by the
shipped config; the inhibited consequence stays suppressed."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from derived_exporter import DerivedExporter

from alerts import check
from peers.process import HOST
from peers.prometheus import Alertmanager, Prometheus

pytestmark = pytest.mark.peers


class Webhook(ThreadingHTTPServer):
    """Collects Alertmanager webhook payloads by URL path."""

    def __init__(self):
        self.received: list[tuple[str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args):
                pass

        super().__init__((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server_address[1]}"


def _short_rules(tmp_path):
    """Copies of the rule files with every ``for:`` set to 1s."""
    paths = []
    for path in check.rule_files():
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = "1s"
        paths.append(tmp_path / path.name)
        paths[-1].write_text(yaml.safe_dump(doc))
    return paths


def _alertmanager_config(webhook_url: str) -> dict:
    """The shipped routing, with webhooks pointing at the test's server and 1 s grouping delays."""
    config = yaml.safe_load(check.ALERTMANAGER_CONFIG.read_text())
    config["route"].update(group_wait="1s", group_interval="1s")
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = webhook_url + "/" + receiver["name"]
    return config


def _wait_for(predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not (result := predicate()):
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)
    return result


def test_offline_partitions_page_reaches_the_pager_webhook_and_inhibit_the_urp_page(tmp_path):
    webhook = Webhook()
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    try:
        with (
            DerivedExporter() as exporter,
            Alertmanager(tmp_path / "am", _alertmanager_config(webhook.url)) as am,
            Prometheus(
                tmp_path / "prom",
                {"kobs-exporter": [exporter.address]},
                rule_files=_short_rules(tmp_path),
                alertmanager=am.address,
            ) as prom,
        ):
            _wait_for(lambda: prom.query('kobs_broker_up{job="kobs-exporter"}'))
            exporter.values["kobs_topic_offline_partitions"] = 3
            exporter.values["kobs_topic_under_replicated_seconds"] = 600

            def both_in_alertmanager():
                alerts = {a["labels"]["alertname"]: a for a in am.alerts()}
                names = {"KafkaOfflinePartitions", "KafkaUnderReplicatedPartitions"}
                return alerts if names <= set(alerts) else None

            alerts = _wait_for(both_in_alertmanager)
            pages = _wait_for(lambda: [p for path, p in webhook.received if path == "/page"])
    finally:
        webhook.shutdown()
        webhook.server_close()

    assert set(alerts) == {"KafkaOfflinePartitions", "KafkaUnderReplicatedPartitions"}, "healthy values fired"
    offline, urp = alerts["KafkaOfflinePartitions"], alerts["KafkaUnderReplicatedPartitions"]
    assert offline["labels"] | {"cluster": "c1", "topic": "orders", "severity": "page"} == offline["labels"]
    assert [r["name"] for r in offline["receivers"]] == ["page"]
    assert offline["status"]["state"] == "active"
    assert urp["status"]["state"] == "suppressed"
    assert urp["status"]["inhibitedBy"] == [offline["fingerprint"]]

    page = pages[0]
    assert page["receiver"] == "page" and page["status"] == "firing"
    assert page["groupLabels"] == {"cluster": "c1", "alertname": "KafkaOfflinePartitions"}
    assert page["alerts"][0]["annotations"]["summary"] == "c1/orders: 3 partitions offline"
    assert all(p["groupLabels"]["alertname"] != "KafkaUnderReplicatedPartitions" for _, p in webhook.received)

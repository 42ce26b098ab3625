"""End to end through a real Prometheus loaded with the shipped rules and a real Alertmanager with the shipped
routing (webhook URLs pointed at the test's server, grouping delays 1 s), to the pager webhook:
- the simulator plays the unclean-election scenario in accelerated time behind its JMX-exporter endpoints,
  and the raw broker counter pages KafkaUncleanLeaderElection (shipped rules unchanged: it has no ``for:``);
- a derived-metrics exporter flips to offline partitions (rules' ``for:`` shortened to 1 s): the page
  arrives and the inhibited under-replicated page stays suppressed;
- the whole pipeline (the demo's embedded stack, shipped rules unchanged): the simulator plays rf1-incident,
  ``kobs collect`` publishes its exporters and znodes to the metrics topic, ``kobs stream`` derives the
  blocked producer, Prometheus scrapes that exporter and KafkaProducerBlocked pages after its ``for: 1m``."""

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
from peers.stack import EmbeddedStack
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario

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


@pytest.fixture
def webhook():
    server = Webhook()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not (result := predicate()):
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)
    return result


def test_unclean_election_in_the_simulator_pages_through_alertmanager(webhook, tmp_path):
    """unclean-election: topic logs (3 partitions, RF 2, start index and shift 0) is placed as Kafka does,
    [0,1] [1,2] [2,0]; broker 2 falls out of the ISR of partition 1, then its leader, broker 1, dies at 40 s:
    the controller elects broker 2 uncleanly for that one partition."""
    runtime = Runtime(Simulation(load_scenario("unclean-election"))).start()
    brokers = [f"{HOST}:{endpoint.port}" for endpoint in runtime.brokers.values()]
    elections = 'sum(kafka_controller_controllerstats_uncleanleaderelections_total{cluster="sim"})'
    # 20 simulated seconds per wall second, up to 60 s: the election at 40 s comes 2 s after the start
    scenario_run = threading.Thread(target=runtime.run, args=(20.0, 60.0))
    try:
        with (
            Alertmanager(tmp_path / "am", _alertmanager_config(webhook.url)) as am,
            Prometheus(
                tmp_path / "prom",
                {"simulated-kafka": brokers},
                rule_files=check.rule_files(),
                alertmanager=am.address,
                target_labels={"simulated-kafka": {"cluster": "sim"}},
            ) as prom,
        ):
            before = _wait_for(lambda: prom.query(elections))  # the counter is scraped at 0 first
            scenario_run.start()
            pages = _wait_for(lambda: [p for path, p in webhook.received if path == "/page"])
            after = prom.query(elections)
            alerts = am.alerts()
    finally:
        if scenario_run.is_alive():
            scenario_run.join()
        runtime.stop()

    assert float(before[0]["value"][1]) == 0 and float(after[0]["value"][1]) == 1
    assert runtime.sim.cluster.messages_lost > 0  # the model's ground truth: the page was deserved
    labels = {"alertname": "KafkaUncleanLeaderElection", "cluster": "sim", "severity": "page"}
    assert [a["labels"] for a in alerts] == [labels], "only the unclean election fired"
    assert [r["name"] for r in alerts[0]["receivers"]] == ["page"]
    (page,) = pages
    assert page["receiver"] == "page" and page["status"] == "firing"
    assert page["groupLabels"] == {"cluster": "sim", "alertname": "KafkaUncleanLeaderElection"}
    (alert,) = page["alerts"]
    assert alert["labels"] == labels
    assert alert["annotations"]["summary"] == "sim: unclean leader election (possible data loss)"
    assert alert["annotations"]["runbook_url"] == "docs/runbooks/replication.md#kafkauncleanleaderelection"
    assert all(path == "/page" for path, _ in webhook.received), "nothing went to the ticket receiver"


def test_offline_partitions_page_reaches_the_pager_webhook_and_inhibit_the_urp_page(webhook, tmp_path):
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


class _Paged(Exception):
    """Ends a scenario run early: the page it waited for has arrived."""


def test_rf1_incident_pages_a_blocked_producer_from_the_derived_exporter(webhook, tmp_path):
    """rf1-incident: broker 1 dies at 30 s; keyed records for its 5 of orders' 16 partitions fill the 32 MiB
    buffer of web-frontend at 5 x 1000 x 1 KiB/s, so send() blocks from about 36.5 s until broker 1 returns
    at 150 s. The quiet seconds before the incident play at 10x, the rest in real time: longer than the
    rule's ``for: 1m`` plus the pipeline's delays (15 s producer scrapes, a Spark micro-batch, 5 s Prometheus
    scrapes and rule evaluations), which may carry the page a little past the simulated recovery. The 5
    offline partitions reach the derived metrics too, read from the simulated cluster's ZooKeeper znodes
    (within a 30 s full read of the partition states)."""
    stack = EmbeddedStack(tmp_path / "stack", routing=_alertmanager_config(webhook.url))
    blocked = 'kobs_producer_blocked{job="kobs-exporter",cluster="demo",client_id="web-frontend"}'

    def blocked_pages():
        pages = [p for path, p in webhook.received if path == "/page"]
        return [p for p in pages if p["groupLabels"]["alertname"] == "KafkaProducerBlocked"]

    def stop_when_paged():
        if blocked_pages():
            raise _Paged

    try:
        stack.start(progress=lambda _step: None)
        prom = next(p for p in stack.processes if isinstance(p, Prometheus))
        before = _wait_for(lambda: prom.query(blocked), timeout_s=180)  # Spark's first batches are slow
        stack.simulation.run(10.0, 29.0)
        with pytest.raises(_Paged):
            stack.simulation.run(1.0, 211.0, on_tick=stop_when_paged)
        during = prom.query(f"max_over_time({blocked}[2m])")
        offline = prom.query(
            'max_over_time(kobs_topic_offline_partitions{job="kobs-exporter",cluster="demo",topic="orders"}[3m])'
        )
        alerts = next(p for p in stack.processes if isinstance(p, Alertmanager)).alerts()
    finally:
        stack.stop()

    assert float(before[0]["value"][1]) == 0, "not blocked before the incident"
    assert float(during[0]["value"][1]) == 1
    assert float(offline[0]["value"][1]) == 5
    page = blocked_pages()[0]
    assert page["receiver"] == "page" and page["status"] == "firing"
    assert page["groupLabels"] == {"cluster": "demo", "alertname": "KafkaProducerBlocked"}
    (alert,) = page["alerts"]
    labels = {
        "alertname": "KafkaProducerBlocked",
        "cluster": "demo",
        "client_id": "web-frontend",
        "severity": "page",
    }
    assert alert["labels"] == labels
    assert alert["annotations"]["summary"] == "demo: producer web-frontend is blocked in send()"
    assert alert["annotations"]["runbook_url"] == "docs/runbooks/producers.md#kafkaproducerblocked"
    assert [r["name"] for a in alerts if a["labels"] == labels for r in a["receivers"]] == ["page"]

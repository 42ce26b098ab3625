"""End to end through a real Prometheus loaded with the shipped rules and a real Alertmanager with the shipped
routing (webhooks pointed at a pager on loopback), to the pager:
- the simulator plays the unclean-election scenario in accelerated time behind its JMX-exporter endpoints,
  and the raw exporter counter pages KafkaUncleanLeaderElection (a stand-in: the demo's Prometheus scrapes
  kobs's derived series, not the real nodes' exporters, which kobs collect reads);
- a derived-metrics exporter flips to offline partitions (rules' ``for:`` shortened to 1 s): the page
  arrives and the inhibited under-replicated page stays suppressed.

The real cluster's incidents page through the same rules and routing in ``test_demo_stack.py``."""

from __future__ import annotations

import threading

import pytest
import yaml
from derived_exporter import DerivedExporter
from waiting import until

from alerts import check
from peers.pager import Pager, routed_to
from peers.process import HOST
from peers.prometheus import Alertmanager, Prometheus
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario

pytestmark = pytest.mark.peers


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


@pytest.fixture
def webhook():
    with Pager() as pager:
        yield pager


def _routing(pager: Pager, group_wait: str = "1s") -> dict:
    return routed_to(pager.url, group_wait=group_wait, group_interval="1s")


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
            Alertmanager(tmp_path / "am", _routing(webhook)) as am,
            Prometheus(
                tmp_path / "prom",
                {"simulated-kafka": brokers},
                rule_files=check.rule_files(),
                alertmanager=am.address,
                target_labels={"simulated-kafka": {"cluster": "sim"}},
            ) as prom,
        ):
            before = until(lambda: prom.query(elections))  # the counter is scraped at 0 first
            scenario_run.start()
            pages = until(lambda: [n.payload for n in webhook.pages()])
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
    assert all(n.receiver == "page" for n in webhook.received), "nothing went to the ticket receiver"


def test_offline_partitions_page_reaches_the_pager_webhook_and_inhibit_the_urp_page(webhook, tmp_path):
    # The shipped page group_wait (10 s): the under-replicated alert fires an evaluation before the offline
    # one (its rule has no `for:`), and it is the wait that lets the inhibiting alert arrive first.
    with (
        DerivedExporter() as exporter,
        Alertmanager(tmp_path / "am", _routing(webhook, group_wait="10s")) as am,
        Prometheus(
            tmp_path / "prom",
            {"kobs-exporter": [exporter.address]},
            rule_files=_short_rules(tmp_path),
            alertmanager=am.address,
        ) as prom,
    ):
        until(lambda: prom.query('kobs_broker_up{job="kobs-exporter"}'))
        exporter.values["kobs_topic_offline_partitions"] = 3
        exporter.values["kobs_topic_under_replicated_seconds"] = 600

        def both_in_alertmanager():
            alerts = {a["labels"]["alertname"]: a for a in am.alerts()}
            names = {"KafkaOfflinePartitions", "KafkaUnderReplicatedPartitions"}
            return alerts if names <= set(alerts) else None

        alerts = until(both_in_alertmanager)
        pages = until(lambda: [n.payload for n in webhook.pages()])

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
    assert all(n.alertname != "KafkaUnderReplicatedPartitions" for n in webhook.received)

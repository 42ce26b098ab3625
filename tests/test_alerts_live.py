"""End to end through a real Prometheus loaded with the shipped rules and a real Alertmanager with the shipped
routing (webhooks pointed at a pager on loopback), to the pager:
- the session's real Kafka cluster, scraped by Prometheus through its nodes' JMX-exporter agents: a killed
  and restarted node's partition is elected uncleanly and the raw counter pages KafkaUncleanLeaderElection,
  Kafka's JMX tool counting the same election;
- a derived-metrics exporter serves a broken broker and what it broke (rules' ``for:`` shortened to 1 s):
  one notification for the broker, its under-replicated ticket suppressed, other pages apart.

The demo stack's incidents page through the same rules and routing in ``test_demo_stack.py``."""

from __future__ import annotations

import uuid

import pytest
import yaml
from derived_exporter import DerivedExporter
from waiting import until, wait_for

from alerts import check
from peers import kafka_tools
from peers.pager import Pager, routed_to
from peers.prometheus import Alertmanager, Prometheus
from peers.stack import create_topic

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


@pytest.mark.timeout(600)
def test_an_unclean_election_on_the_real_cluster_pages_from_the_raw_counter(kafka_cluster, webhook, tmp_path):
    """Prometheus scrapes only the nodes' JMX-exporter agents (no kobs anywhere): the raw-series side of
    KafkaUncleanLeaderElection. A node leading a replication-factor-1 partition is killed with SIGKILL and
    restarted once the partition is offline; Kafka elects it leader again uncleanly (KIP-966: its ISR had
    emptied and it shut down uncleanly), counts it in every controller's UncleanLeaderElectionsPerSec, and
    the page arrives through the shipped routing."""
    topic = f"unclean-{uuid.uuid4().hex[:6]}"
    create_topic(kafka_cluster.bootstrap, topic, 3, replication_factor=1)
    victim = 2
    (led,) = [r.partition for r in kafka_tools.describe_topics(kafka_cluster.bootstrap, topic=topic)
              if r.leader == victim]  # fmt: skip
    nodes = {str(i): n.exporter_address for i, n in kafka_cluster.nodes.items()}
    elections = 'kafka_controller_controllerstats_uncleanleaderelections_total{cluster="c1"}'
    witness = next(i for i in kafka_cluster.nodes if i != victim)  # a controller running all along
    bean = "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"

    def counted() -> float:  # Kafka's own count, by its JMX tool
        return kafka_tools.jmx_values(kafka_cluster.nodes[witness].jmx_address, bean)[f"{bean}:Count"]

    with (
        Alertmanager(tmp_path / "am", _routing(webhook)) as am,
        Prometheus(
            tmp_path / "prom",
            {"kafka": list(nodes.values())},
            # the Kafka rules only: with no kobs anywhere, kobs's own rules rightly page its absent targets
            rule_files=[path for path in check.rule_files() if path.name.startswith("kafka_")],
            alertmanager=am.address,
            target_labels={"kafka": {"cluster": "c1"}},
        ) as prom,
    ):
        until(lambda: len(prom.query(elections)) == 3)  # every node's counter scraped
        before = counted()
        kafka_cluster.kill(victim)
        try:
            offline = wait_for(
                lambda: kafka_tools.describe_topics(
                    kafka_cluster.live_bootstrap, "--unavailable-partitions", topic=topic
                ),
                timeout_s=30,
            )
            # with every partition the node alone held: other tests' topics of replication factor 1
            lost = kafka_tools.describe_topics(kafka_cluster.live_bootstrap, "--unavailable-partitions")
            assert not webhook.received, "nothing pages before the election"
        finally:
            kafka_cluster.restart(victim)
        pages = until(lambda: [n.payload for n in webhook.pages()], timeout_s=120)
        # count once every partition the node alone held has its leader back
        unavailable = ("--unavailable-partitions",)
        until(lambda: not kafka_tools.describe_topics(kafka_cluster.bootstrap, *unavailable), timeout_s=120)
        after = counted()

        def raw() -> dict[str, float]:
            return {r["metric"]["instance"]: float(r["value"][1]) for r in prom.query(elections)}

        scraped = wait_for(lambda: raw().get(nodes[str(witness)]) == after, timeout_s=60)
        alerts = am.alerts()

    assert [r.partition for r in offline] == [led]
    # the controller's own count: this test's partition elected uncleanly, perhaps others the node alone held
    # (other tests' topics, some of them: runs of two workers counted 17 more, and none of 18 more)
    assert before + 1 <= after <= before + len(lost)
    assert scraped, (after, raw())  # the series the rule reads is Kafka's own count
    labels = {"alertname": "KafkaUncleanLeaderElection", "cluster": "c1", "severity": "page"}
    assert [a["labels"] for a in alerts] == [labels], "only the unclean election fired"
    assert [r["name"] for r in alerts[0]["receivers"]] == ["page"]
    (page,) = pages
    assert page["receiver"] == "page" and page["status"] == "firing"
    assert page["groupLabels"] == {"cluster": "c1", "alertname": "KafkaUncleanLeaderElection"}
    (alert,) = page["alerts"]
    assert alert["labels"] == labels
    assert alert["annotations"]["summary"] == "c1: unclean leader election (possible data loss)"
    assert alert["annotations"]["runbook_url"] == "docs/runbooks/replication.md#kafkauncleanleaderelection"
    assert all(n.receiver == "page" for n in webhook.received), "nothing went to the ticket receiver"


def test_what_one_broker_broke_reaches_the_pager_as_one_notification_and_the_rest_apart(webhook, tmp_path):
    """The shipped routing groups pages by cluster and cause broker: a down broker, the partitions it took
    offline and the producer they block arrive as one notification; its under-replicated ticket is
    silenced (by the broker down, and by the same topic's offline page); offline partitions no broker
    explains page apart. Rules' ``for:`` shortened to 1 s; the shipped page ``group_wait`` (10 s) lets every
    alert of the incident join before the first notification."""
    broken = {"cause_broker": "2", "broker": "2"}
    series = {
        "kobs_broker_up": [({"broker": "1"}, 1), ({"broker": "2"}, 0)],
        "kobs_broker_maintenance": [({"broker": "1"}, 0), ({"broker": "2"}, 0)],
        "kobs_topic_offline_partitions": [(broken, 2), ({"topic": "logs"}, 1)],
        "kobs_topic_under_replicated_seconds": [(broken, 600), ({"topic": "logs"}, 0)],
        "kobs_producer_blocked": [(broken | {"client_id": "web-frontend"}, 1)],
    }
    with (
        DerivedExporter(series=series) as exporter,
        Alertmanager(tmp_path / "am", _routing(webhook, group_wait="10s")) as am,
        Prometheus(
            tmp_path / "prom",
            {"kobs-exporter": [exporter.address]},
            rule_files=_short_rules(tmp_path),
            alertmanager=am.address,
        ) as prom,
    ):
        until(lambda: prom.query('kobs_broker_up{job="kobs-exporter"}'))
        pages = until(lambda: len(webhook.pages()) >= 2 and webhook.pages(), timeout_s=60)
        alerts = {(a["labels"]["alertname"], a["labels"].get("topic")): a for a in am.alerts()}

    incident = next(n for n in pages if n.payload["groupLabels"].get("cause_broker") == "2")
    assert incident.payload["groupLabels"] == {"cluster": "c1", "cause_broker": "2"}
    told = {(a["labels"]["alertname"], a["labels"].get("topic") or a["labels"].get("client_id"))
            for a in incident.payload["alerts"]}  # fmt: skip
    assert told == {
        ("KafkaBrokerDown", None),
        ("KafkaOfflinePartitions", "orders"),
        ("KafkaProducerBlocked", "web-frontend"),
    }
    down = next(a for a in incident.payload["alerts"] if a["labels"]["alertname"] == "KafkaBrokerDown")
    assert down["annotations"]["summary"] == (
        "c1: broker 2 is down: no controlled shutdown (a crash, a hang or a cut network)"
    )
    assert "Offline because of it: orders (2)." in down["annotations"]["description"]
    assert "Producers blocked: web-frontend." in down["annotations"]["description"]
    apart = [n for n in pages if n is not incident]
    assert [n.payload["groupLabels"] for n in apart] == [
        {"cluster": "c1", "alertname": "KafkaOfflinePartitions"}
    ]
    assert [a["labels"].get("topic") for a in apart[0].payload["alerts"]] == ["logs"]
    urp = alerts["KafkaUnderReplicatedPartitions", "orders"]
    assert urp["status"]["state"] == "suppressed", urp["status"]  # by the offline page or the broker down
    assert all(n.receiver == "page" for n in webhook.received), "the suppressed ticket went nowhere"

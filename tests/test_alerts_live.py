"""End to end through a real Prometheus loaded with the shipped rules and a real Alertmanager with the shipped
routing (webhooks pointed at a pager on loopback), to the pager:
- the real cluster (the demo's stack: three Kafka nodes, Kafka's Java producer, ``kobs collect`` and
  ``kobs stream``, shipped rules unchanged): a broker of the replication-factor-1 topic is killed and
  KafkaProducerBlocked pages; a follower is SIGSTOPped and KafkaUnderReplicatedPartitions pages; each is
  cross-checked at the page with what Kafka's own tools and the producer's own JMX say, and resolves after
  the repair; the killed broker's return is an unclean election by Kafka's own count (KIP-966): it pages;
- the simulator plays the unclean-election scenario in accelerated time behind its JMX-exporter endpoints,
  and the raw exporter counter pages KafkaUncleanLeaderElection (a stand-in: the demo's Prometheus scrapes
  kobs's derived series, not the real nodes' exporters, which kobs collect reads);
- a derived-metrics exporter flips to offline partitions (rules' ``for:`` shortened to 1 s): the page
  arrives and the inhibited under-replicated page stays suppressed."""

from __future__ import annotations

import threading
import time

import pytest
import yaml
from derived_exporter import DerivedExporter
from waiting import wait_for

from alerts import check
from kobs import incidents
from kobs.incidents import INCIDENTS, Player
from peers import kafka_tools
from peers.pager import Pager, routed_to
from peers.process import HOST
from peers.prometheus import Alertmanager, Prometheus
from peers.stack import INCIDENT_TOPIC, PRODUCER, EmbeddedStack
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
            Alertmanager(tmp_path / "am", _routing(webhook)) as am,
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
            pages = _wait_for(lambda: [n.payload for n in webhook.pages()])
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
        _wait_for(lambda: prom.query('kobs_broker_up{job="kobs-exporter"}'))
        exporter.values["kobs_topic_offline_partitions"] = 3
        exporter.values["kobs_topic_under_replicated_seconds"] = 600

        def both_in_alertmanager():
            alerts = {a["labels"]["alertname"]: a for a in am.alerts()}
            names = {"KafkaOfflinePartitions", "KafkaUnderReplicatedPartitions"}
            return alerts if names <= set(alerts) else None

        alerts = _wait_for(both_in_alertmanager)
        pages = _wait_for(lambda: [n.payload for n in webhook.pages()])

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


def _query(stack: EmbeddedStack, expr: str) -> dict[str, float]:
    """The named label's value → sample of an instant query, e.g. topic → offline partitions."""
    return {
        "|".join(f"{k}={v}" for k, v in sorted(r["metric"].items()) if k in ("topic", "client_id")): float(
            r["value"][1]
        )
        for r in stack.prometheus.query(expr)
    }


def _elections_seen(stack: EmbeddedStack, derived: str) -> str:
    """For a derived count that differs from Kafka's: its changes over the last 15 minutes (time, value),
    each running node's controller gauge and election counter by Kafka's JMX tool, and the collector's
    broker scrapes of those 15 minutes, answered and failed by reason."""
    history = stack.prometheus.query('kobs_unclean_leader_elections_total{job="kobs-exporter"}[15m]')
    changes = [
        (t, v) for r in history for i, (t, v) in enumerate(r["values"]) if not i or v != r["values"][i - 1][1]
    ]
    beans = (
        "kafka.controller:type=KafkaController,name=ActiveControllerCount",
        "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
    )
    nodes = {
        node_id: {
            k: v
            for k, v in kafka_tools.jmx_values(node.jmx_address, *beans).items()
            if k.endswith(("Count", "Value"))
        }
        for node_id, node in stack.kafka.nodes.items()
        if node.running and node_id not in stack.kafka.paused
    }
    scrapes = {
        (name, r["metric"]["source"], r["metric"].get("reason", "")): round(float(r["value"][1]))
        for name in ("kobs_collector_scrape_duration_seconds_count", "kobs_collector_scrape_errors_total")
        for r in stack.prometheus.query(
            f'sum by (source, reason) (increase({name}{{source=~".*/broker-.*"}}[15m]))'
        )
    }
    seen = _query(stack, derived)
    return f"kobs counts {seen}, changes {changes}; the nodes say {nodes}; broker scrapes {scrapes}"


BROKER_RESOURCES = (
    "kobs_broker_cpu_cores", "kobs_broker_heap_used_bytes", "kobs_broker_heap_max_bytes",
    "kobs_broker_gc_time_ratio", "kobs_broker_request_handler_idle_ratio",
    "kobs_broker_network_processor_idle_ratio",
)  # fmt: skip


def _broker_resources(stack: EmbeddedStack) -> set[str]:
    """The demo cluster's brokers with a value for every broker resource gauge."""
    brokers = [
        {r["metric"]["broker"] for r in stack.prometheus.query(f'{m}{{job="kobs-exporter",cluster="demo"}}')}
        for m in BROKER_RESOURCES
    ]
    return set.intersection(*brokers)


# The pages a killed leader of replication-factor-1 partitions and a hung follower cause (docs/peers.md):
# the producer blocks (at risk first), its partitions go offline, URP on every topic the node holds, the
# node down for a minute, and the returning node's election counted as unclean by the controller (KIP-966).
# The canary's messages to a lost broker's own partition time out until its leadership moves.
INCIDENT_PAGES = {
    "KafkaProducerBlocked", "KafkaProducerAtRisk", "KafkaOfflinePartitions", "KafkaUnderReplicatedPartitions",
    "KafkaBrokerDown", "KafkaUncleanLeaderElection", "KafkaCanaryUnavailable",
}  # fmt: skip


def _canary_brokers(stack: EmbeddedStack, status: str) -> set[str]:
    """Brokers whose KafkaCanaryUnavailable alert the pager heard in ``status`` (firing or resolved)."""
    return {
        a["labels"]["broker"]
        for n in stack.pager.pages("KafkaCanaryUnavailable", status=status)
        for a in n.payload["alerts"]
        if a["status"] == status
    }


@pytest.mark.timeout(1200)
def test_real_incidents_page_and_resolve_and_kafka_agrees(tmp_path):
    """The demo's incidents on the real cluster with the shipped rules: each page arrives (the demo and
    ``docs/peers.md`` report how long after its cause; a test does not time it), names what Kafka's own
    tools show broken at that moment, and resolves once the broker is back."""
    stack = EmbeddedStack(tmp_path / "stack", fleet=False, group_wait="1s", group_interval="1s")
    lines: list[str] = []
    try:
        stack.start(progress=lambda _step: None)
        player = Player(stack, out=lines.append, wait_s=240)
        assert _wait_for(player.pipeline_live, timeout_s=240), "the pipeline never showed the producer"
        # The broker resource panels' data, from the real nodes' JMX through kobs collect and kobs stream:
        # every node's CPU, heap and thread pools, and the requests Kafka itself must be serving now
        # (the followers' fetches of replication, the producer's produce requests), none failing yet.
        # On a busy 2-core machine the stream is still working off the warm-up's backlog here (a CI run,
        # when the collector read the nodes over JMX with a query JVM each: not within 120 s).
        assert _wait_for(lambda: _broker_resources(stack) == {"1", "2", "3"}, timeout_s=300)
        requests = {
            (r["metric"]["broker"], r["metric"]["request"]): float(r["value"][1])
            for r in stack.prometheus.query('kobs_broker_requests_per_second{job="kobs-exporter"}')
        }
        assert all(requests.get((b, "Fetch"), 0) > 0 for b in ("1", "2", "3")), requests
        assert sum(v for (_, request), v in requests.items() if request == "Produce") > 0, requests
        kill, pause = INCIDENTS
        led_by_killed = incidents.led_by(stack, incidents.KILLED, INCIDENT_TOPIC)

        # 1. A broker of the replication-factor-1 topic dies: the producer blocks and it pages.
        _cause, paged_after = player.break_until_paged(kill)
        assert paged_after is not None, "\n".join(lines)
        offline = kafka_tools.describe_topics(
            stack.kafka.live_bootstrap, "--unavailable-partitions", topic=INCIDENT_TOPIC
        )
        assert {r.partition for r in offline} == set(led_by_killed)  # Kafka's own view of the outage
        client = kafka_tools.jmx_values(
            stack.producer.jmx_address, f"kafka.producer:type=producer-metrics,client-id={PRODUCER}"
        )
        prefix = f"kafka.producer:type=producer-metrics,client-id={PRODUCER}:"
        assert client[prefix + "waiting-threads"] >= 1  # the producer's own JMX: send() is blocked now
        assert client[prefix + "buffer-available-bytes"] < 16384
        derived = _query(stack, 'kobs_topic_offline_partitions{job="kobs-exporter",cluster="demo"}')
        assert derived[f"topic={INCIDENT_TOPIC}"] == len(offline)
        (page,) = stack.pager.pages("KafkaProducerBlocked")[:1]
        assert page.payload["alerts"][0]["labels"] == {
            "alertname": "KafkaProducerBlocked", "cluster": "demo", "client_id": PRODUCER, "severity": "page",
        }  # fmt: skip
        assert player.repair_until_resolved(kill) is not None, "\n".join(lines)
        assert not kafka_tools.describe_topics(stack.kafka.bootstrap, "--unavailable-partitions")
        assert _wait_for(lambda: stack.pager.pages("KafkaProducerBlocked", status="resolved"))
        # The killed node's partitions got their leader back through an unclean election, by Kafka's own
        # count (KIP-966: a replica that shut down uncleanly is no longer an eligible leader, and the
        # controller logs "using an unclean election"); kobs counts the same elections, and it pages.
        elections = kafka_tools.jmx_values(
            stack.kafka.nodes[1].jmx_address,  # a controller running all along: it counted every election
            "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
        )
        counted = elections["kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec:Count"]
        assert counted == len(led_by_killed)
        derived = 'sum(kobs_unclean_leader_elections_total{job="kobs-exporter",cluster="demo"})'
        # The count reaches kobs through kobs collect's scrapes of the nodes' exporters; when they were JMX
        # scrapes, they timed out for minutes on a busy 2-core machine after the restart (a CI run: not
        # within 120 s).
        wait_for(lambda: _query(stack, derived).get("") == counted, timeout_s=300)
        assert _query(stack, derived).get("") == counted, _elections_seen(stack, derived)
        (page,) = _wait_for(lambda: stack.pager.pages("KafkaUncleanLeaderElection"), timeout_s=120)[:1]
        assert page.payload["alerts"][0]["labels"] == {
            "alertname": "KafkaUncleanLeaderElection", "cluster": "demo", "severity": "page",
        }  # fmt: skip

        # 2. A follower hangs: its partitions are under-replicated and it pages.
        _cause, paged_after = player.break_until_paged(pause)
        assert paged_after is not None, "\n".join(lines)
        under = kafka_tools.describe_topics(stack.kafka.live_bootstrap, "--under-replicated-partitions")
        lagging_topics = {r.topic for r in under if incidents.PAUSED not in r.isr}
        paged_topics = {
            a["labels"]["topic"]
            for n in stack.pager.pages("KafkaUnderReplicatedPartitions")
            for a in n.payload["alerts"]
        }
        assert paged_topics and paged_topics <= lagging_topics  # every paged topic is one Kafka calls so
        assert player.repair_until_resolved(pause) is not None, "\n".join(lines)
        assert _wait_for(lambda: stack.pager.pages("KafkaUnderReplicatedPartitions", status="resolved"))
        assert _wait_for(
            lambda: not kafka_tools.describe_topics(stack.kafka.bootstrap, "--under-replicated-partitions"),
            timeout_s=60,
        )
        # The canary pages when its messages to a broker's partition were lost (Kafka moved the leadership
        # later than its timeout; not when the collector restarted meanwhile): each such page clears once
        # its losses have left the rule's 2-minute window. On a loaded machine the canary's consumer keeps
        # missing its timeout for a while after the repair (a CI run at 38 minutes for the suite: not resolved
        # within 240 s), so the wait allows 2 minutes more.
        paged = _canary_brokers(stack, "firing")
        assert _wait_for(lambda: paged <= _canary_brokers(stack, "resolved"), timeout_s=360), paged
        # Nothing else paged: only what docs/peers.md lists for these two causes, each Kafka's own view.
        paged = {n.alertname for n in stack.pager.pages()}
        beyond = [f"{a['annotations'].get('summary')} from {a['startsAt']}" for n in stack.pager.pages()
                  if n.alertname not in INCIDENT_PAGES for a in n.payload["alerts"]]  # fmt: skip
        assert paged <= INCIDENT_PAGES, f"pages beyond the incidents' own: {beyond}\n" + "\n".join(lines)
    finally:
        stack.stop()

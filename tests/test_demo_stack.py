"""The demo's stack (``peers.stack.EmbeddedStack``: three Kafka nodes, Kafka's Java producer, real
traffic, ``kobs collect`` and ``kobs stream``, a real Prometheus with the shipped rules and a real
Alertmanager with the shipped routing and timings, webhooks to a pager on loopback; no simulated fleet),
started once for the module, as a platform team runs kobs beside a cluster, with a planned restart's grace
of 180 s. In order, as an on-call week goes:
- a rolling restart of the three nodes pages nothing for replication risk; the replication-factor-1 topic's
  outage pages, naming the planned restart; Kafka counts no unclean election and neither does kobs;
- a throttled reassignment with Kafka's own tool pages nothing;
- a killed leader of replication-factor-1 partitions pages as one incident, naming the node, its first
  notification listing the offline topic and the blocked producer; Kafka's tools and the producer's JMX
  agree; the unclean election Kafka counts on its return is the one kobs counts, and joins the incident;
- a hung follower pages as one incident, naming the node;
- a planned restart that outlasts the grace pages when it does;
- then ``kobs bench freshness --config`` measures the same running deployment, its stream warm.

One stack for all: each start costs minutes of a 2-core machine (on a busy one the stream's first
micro-batch alone took 260 s), and each scenario leaves the cluster whole. How long after its cause each page
arrived is the demo's to print and docs/peers.md's to report: a test does not time it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient
from waiting import until, wait_for

from kobs import incidents
from kobs.incidents import INCIDENTS, Player
from peers import kafka_tools
from peers.stack import INCIDENT_TOPIC, PRODUCER, EmbeddedStack, create_topic

pytestmark = pytest.mark.peers

# over a restart here (10-15 s until every ISR is full on a quiet machine; 49 s, and 164 s once, on CI runs
# of two workers), under the default 10 minutes
GRACE_S = 180
ROLLING, CRASH, HANG = INCIDENTS
# What a planned restart of a replication-factor-1 topic's only replica may page: its outage (docs/metrics.md)
OUTAGE_PAGES = {
    "KafkaOfflinePartitions",
    "KafkaUnderMinIsrPartitions",
    "KafkaProducerBlocked",
    "KafkaProducerAtRisk",
}
UNCLEAN = "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"
# The tickets for replication risk planned work must not raise (a loaded run's collector may ticket its own
# slow scrapes, KobsCollectorScrapeFailing: that is about kobs, not the cluster's replication)
KAFKA_RISK_TICKETS = {"KafkaUnderReplicatedPartitions", "KafkaIsrFlapping", "KafkaIsrShrinkRateAboveBaseline"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    stack = EmbeddedStack(tmp_path_factory.mktemp("stack"), fleet=False, maintenance_grace_s=GRACE_S)
    try:
        yield stack.start(progress=lambda _step: None)
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def player(stack):
    lines: list[str] = []
    player = Player(stack, out=lines.append, quiet_s=0, hold_s=60, wait_s=240)
    player.lines = lines
    assert until(player.pipeline_live, timeout_s=300), "the pipeline never showed the producer"
    assert until(lambda: _broker_resources(stack) == {"1", "2", "3"}, timeout_s=300)
    return player


def _log(player) -> str:
    return "\n".join(player.lines)


def _alerts(notifications) -> list[dict]:
    return [a for n in notifications for a in n.payload["alerts"]]


def _kafka_unclean(stack: EmbeddedStack, node_id: int = 1) -> float:
    """Kafka's own unclean-election count, by its JMX tool on a node (every KRaft controller counts them)."""
    return kafka_tools.jmx_values(stack.kafka.nodes[node_id].jmx_address, UNCLEAN)[f"{UNCLEAN}:Count"]


def _derived_unclean(stack: EmbeddedStack) -> float | None:
    return _query(stack, 'sum(kobs_unclean_leader_elections_total{job="kobs-exporter",cluster="demo"})').get(
        ""
    )


# What on-call opens first, per node: request time, queues, metadata age, log dirs offline and disk space
PER_NODE = (
    'kobs_broker_request_latency_seconds{request="Produce",stage="total",quantile="0.99"}',
    "kobs_broker_request_queue_size", "kobs_broker_offline_log_dirs", "kobs_broker_metadata_lag_seconds",
    "kobs_log_dir_free_ratio",
)  # fmt: skip


@pytest.mark.timeout(600)
def test_the_requests_quorum_and_disk_rows_have_every_nodes_data_and_the_quorum_kafkas_leader(stack, player):
    def nodes(metric: str) -> set[str]:
        selector = (
            metric.replace("}", ',job="kobs-exporter",cluster="demo"}')
            if "{" in metric
            else (f'{metric}{{job="kobs-exporter",cluster="demo"}}')
        )
        return {r["metric"]["broker"] for r in stack.prometheus.query(selector)}

    assert until(lambda: all(nodes(m) == {"1", "2", "3"} for m in PER_NODE), timeout_s=300), {
        m: nodes(m) for m in PER_NODE
    }
    assert _query(stack, 'max(kobs_broker_offline_log_dirs{job="kobs-exporter"})') == {"": 0}
    leader = int(kafka_tools.quorum_status(stack.kafka.bootstrap)["LeaderId"])
    quorum = {"leader": "kobs_quorum_leader", "voters": "kobs_quorum_voters"}
    got = {
        k: _query(stack, f'max({m}{{job="kobs-exporter",cluster="demo"}})').get("") for k, m in quorum.items()
    }
    assert got == {"leader": leader, "voters": 3}
    assert _query(stack, 'max(kobs_quorum_leaderless_seconds{job="kobs-exporter",cluster="demo"})') == {"": 0}


@pytest.mark.timeout(900)
def test_a_rolling_restart_pages_only_the_outage_of_the_replication_factor_1_topic_naming_it(stack, player):
    """SIGTERM each node in turn, wait for its exit, start it, wait for full ISRs; then 2 minutes. No page or
    ticket for replication risk, the controller or the canary; an unclean election neither by Kafka's
    count nor by kobs's; each node in maintenance while it lasts. The orders partitions a node holds alone
    are offline while it is away: that pages (an outage), naming its planned restart."""
    unclean_before = _kafka_unclean(stack)
    outcome = player.play_one(1, ROLLING)
    notifications = [n for n in stack.pager.received if n.received_s >= outcome.cause_s]
    tickets = {
        name
        for n in notifications
        if n.receiver == "ticket"
        for name in (a["labels"]["alertname"] for a in n.payload["alerts"])
        if name in KAFKA_RISK_TICKETS
    }
    assert not tickets, f"tickets during planned work: {tickets}\n{_log(player)}"
    # Each node was in maintenance (a planned restart) while away, by the derived state Prometheus holds.
    window = f"{int(time.time() - outcome.cause_s)}s"
    seen = f'max_over_time(kobs_broker_maintenance{{cluster="demo"}}[{window}])'
    planned = _query(stack, f"max by (broker) ({seen})", ("broker",))
    assert planned == {"broker=1": 1, "broker=2": 1, "broker=3": 1}, f"{planned}\n{_log(player)}"
    for page in outcome.pages:
        assert set(page.payload["groupLabels"]) == {"cluster", "cause_broker"}, page.headline
        for alert in page.payload["alerts"]:
            labels = alert["labels"]
            assert labels["alertname"] in OUTAGE_PAGES, f"{page.headline}\n{_log(player)}"
            assert labels.get("topic", INCIDENT_TOPIC) == INCIDENT_TOPIC
            assert labels.get("client_id", PRODUCER) == PRODUCER
            summary = alert["annotations"]["summary"]
            assert "planned restart" in summary, f"{summary}\n{_log(player)}"
    assert len(outcome.incidents()) == len({p.payload["groupLabels"]["cause_broker"] for p in outcome.pages})
    # No unclean election: Kafka's count did not move (its witness node restarted too: it replays the
    # metadata log), and kobs counts what Kafka counts.
    assert _kafka_unclean(stack) == unclean_before
    assert wait_for(lambda: _derived_unclean(stack) == unclean_before, timeout_s=60), _derived_unclean(stack)


@pytest.mark.timeout(600)
def test_a_throttled_reassignment_pages_nothing(stack, player):
    """kafka-reassign-partitions adds a replica to each partition of a replication-factor-1 topic holding
    40 MB, throttled to 250 kB/s a broker: the new replicas catch up for over a minute, reassigning and not
    under-replicated (as under-replicated, each would page in 30 s: one replica left, min.insync.replicas).
    The topic is deleted after, leaving the cluster as it was."""
    player.settle()
    topic = f"moving-{uuid.uuid4().hex[:6]}"
    create_topic(stack.kafka.bootstrap, topic, 2, replication_factor=1)
    kafka_tools.run_tool(
        "kafka-producer-perf-test", "--topic", topic, "--num-records", "40000", "--record-size", "1000",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={stack.kafka.bootstrap}", "acks=1",
    )  # fmt: skip
    placed = {
        r.partition: r.replicas for r in kafka_tools.describe_topics(stack.kafka.bootstrap, topic=topic)
    }
    added = {p: next(b for b in (1, 2, 3) if b not in replicas) for p, replicas in placed.items()}
    moves = [{"topic": topic, "partition": p, "replicas": [*r, added[p]]} for p, r in placed.items()]
    time.sleep(15)  # the new topic's first metadata scrapes see it in sync
    started = time.time()
    with tempfile.NamedTemporaryFile("w", suffix=".json") as plan_file:
        json.dump({"version": 1, "partitions": moves}, plan_file)
        plan_file.flush()
        common = ("--bootstrap-server", stack.kafka.bootstrap, "--reassignment-json-file", plan_file.name)
        kafka_tools.run_tool("kafka-reassign-partitions", *common, "--execute", "--throttle", "250000")
        done = wait_for(
            lambda: (
                "still in progress"
                not in kafka_tools.run_tool("kafka-reassign-partitions", *common, "--verify")
            ),
            timeout_s=400,
            every_s=5,
        )  # --verify also removes the throttle once it is complete
    took = time.time() - started
    time.sleep(30)  # the pipeline's delay, a page's for: and group_wait
    window = f"{int(time.time() - started)}s"
    seen = f'max_over_time(kobs_topic_reassigning_partitions{{cluster="demo",topic="{topic}"}}[{window}])'
    reassigning = _query(stack, seen).get(f"topic={topic}")
    paged = [n.headline for n in stack.pager.news_since(started)]
    paged += [
        n.headline
        for n in stack.pager.received
        if n.receiver == "ticket"
        and n.received_s >= started
        and any(a["labels"]["alertname"] in KAFKA_RISK_TICKETS for a in n.payload["alerts"])
    ]
    admin = AdminClient({"bootstrap.servers": stack.kafka.bootstrap})  # kept: its futures need it alive
    admin.delete_topics([topic])[topic].result(60)
    assert done and took >= 60, f"the reassignment took {took:.0f} s"
    assert reassigning == 2, "kobs saw both partitions reassigning"
    assert not paged, paged


@pytest.mark.timeout(900)
def test_a_crash_pages_once_naming_the_broker_and_what_it_broke(stack, player):
    """SIGKILL of the node leading replication-factor-1 partitions that the producer writes: one incident,
    the node's, whose first notification lists the offline topic and the blocked producer; Kafka's tools and
    the producer's own JMX show the same at that moment; resolved after the restart, when Kafka counts the
    return as unclean elections (KIP-966) and kobs counts the same, in the same incident."""
    led = incidents.led_by(stack, incidents.KILLED, INCIDENT_TOPIC)
    unclean_before = _kafka_unclean(stack)
    checks = {}

    def at_the_page(player_):  # runs the break, then watches for the first page to cross-check Kafka
        said = incidents.kill_broker(player_)
        first = player_.wait(lambda: player_.pages_since(cause_s), 120)
        if first:
            checks["offline"] = {r.partition for r in kafka_tools.describe_topics(
                stack.kafka.live_bootstrap, "--unavailable-partitions", topic=INCIDENT_TOPIC)}  # fmt: skip
            prefix = f"kafka.producer:type=producer-metrics,client-id={PRODUCER}"
            checks["client"] = kafka_tools.jmx_values(stack.producer.jmx_address, prefix)
        return said

    cause_s = time.time()
    crash = incidents.Incident(CRASH.name, CRASH.title, CRASH.broker, at_the_page, CRASH.end)
    outcome = player.play_one(2, crash)
    incident = (("cause_broker", str(incidents.KILLED)), ("cluster", "demo"))
    assert outcome.incidents() == {incident}, f"{[n.headline for n in outcome.pages]}\n{_log(player)}"
    first = outcome.pages[0]
    alerts = {a["labels"]["alertname"]: a for a in first.payload["alerts"]}
    assert alerts["KafkaOfflinePartitions"]["labels"]["topic"] == INCIDENT_TOPIC, first.headline
    told = json.dumps(first.payload["alerts"])
    assert PRODUCER in told, f"the first notification lists the blocked producer: {told}"
    assert checks["offline"] == set(led)  # Kafka's own view of the outage at the page
    client = checks["client"]
    prefix = f"kafka.producer:type=producer-metrics,client-id={PRODUCER}:"
    assert client[prefix + "waiting-threads"] >= 1 or client[prefix + "buffer-available-bytes"] < 16384
    assert outcome.resolved_after_s is not None, _log(player)
    assert not kafka_tools.describe_topics(stack.kafka.bootstrap, "--unavailable-partitions")
    # Kafka counted the return of the killed node's partitions as unclean elections; kobs counts the same
    counted = _kafka_unclean(stack)
    assert counted == unclean_before + len(led)
    assert wait_for(lambda: _derived_unclean(stack) == counted, timeout_s=300), _derived_unclean(stack)
    unclean = until(
        lambda: [
            n for n in stack.pager.pages() if n.received_s > cause_s and "KafkaUncleanLeader" in n.headline
        ],
        timeout_s=120,
    )
    assert {tuple(sorted(n.payload["groupLabels"].items())) for n in unclean} == {incident}


@pytest.mark.timeout(900)
def test_a_hung_follower_pages_once_naming_the_broker(stack, player):
    """SIGSTOP of a node for a minute and a half: one incident, the node's (the controller fences it: a broker
    down that asked nothing), with what it broke; resolved after SIGCONT."""
    outcome = player.play_one(3, HANG)
    incident = (("cause_broker", str(incidents.PAUSED)), ("cluster", "demo"))
    assert outcome.incidents() == {incident}, f"{[n.headline for n in outcome.pages]}\n{_log(player)}"
    assert any("KafkaBrokerDown" in n.headline for n in outcome.pages), _log(player)
    assert outcome.resolved_after_s is not None, _log(player)
    assert until(
        lambda: not kafka_tools.describe_topics(stack.kafka.bootstrap, "--under-replicated-partitions"),
        timeout_s=120,
    )


@pytest.mark.timeout(900)
def test_a_planned_restart_that_outlasts_the_grace_pages_when_it_does(stack, player):
    """A node stopped with SIGTERM and kept down: nothing pages within the grace (180 s here) but the outage
    of the replication-factor-1 topic, naming the planned restart; then KafkaBrokerDown saying the restart
    outlasted its grace; it resolves once the node is back."""
    player.settle()
    stopped_s = time.time()
    stack.kafka.shut_down(1)
    try:
        page = wait_for(
            lambda: [n for n in stack.pager.news_since(stopped_s) if "KafkaBrokerDown" in n.headline],
            timeout_s=GRACE_S + 150,
        )
    finally:
        stack.kafka.start_node(1)
    assert page, _log(player)
    (first,) = page[:1]
    after = first.received_s - stopped_s
    assert after > GRACE_S, f"paged {after:.0f} s after the SIGTERM, within the grace"
    down = next(a for a in first.payload["alerts"] if a["labels"]["alertname"] == "KafkaBrokerDown")
    assert "outlasted the grace" in down["annotations"]["summary"]
    news = [n for n in stack.pager.news_since(stopped_s) if n.received_s < first.received_s]
    for alert in _alerts([n for n in news if n.received_s < stopped_s + GRACE_S]):
        assert alert["labels"]["alertname"] in OUTAGE_PAGES, alert["labels"]
        assert "planned restart" in alert["annotations"]["summary"], alert["annotations"]["summary"]
    for alert in _alerts([n for n in news if n.received_s >= stopped_s + GRACE_S]):  # past the grace
        assert alert["labels"].get("cause_broker") == "1", alert["labels"]  # e.g. its URP persisting
    held = {"alertname": "KafkaBrokerDown"}
    assert until(
        lambda: not [a for a in stack.alertmanager.alerts() if held.items() <= a["labels"].items()], 180
    )


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_kobs_bench_freshness_measures_the_running_deployments_live_scrapes(stack):
    """No timing is asserted: the figures are the benchmark's output. Each stage of a scrape comes after the
    one before, every kind of source is counted, and every offsets scrape's lag reached the gauges."""
    command = [sys.executable, "-m", "kobs.cli", "bench", "freshness", "--seconds", "35"]
    command += ["--config", str(stack.run_dir / "kobs.yaml")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=570)
    output = result.stdout
    assert result.returncode == 0, output + result.stderr
    assert "a running deployment, its metrics topic" in output  # read from its end: nothing started
    assert re.search(r"^caught up [\d.]+ s after the first micro-batch$", output, re.MULTILINE), output
    scrapes = re.search(r"measured 35 s once caught up: (\d+) scrapes of (\d+) sources", output)
    # In 35 s the offsets source (every 10 s: twice at least, so that two scrapes' lag is checked below,
    # even with one late or missed on a loaded machine: a run of two test workers saw one in 25 s),
    # each node's and the producer's exporter (every 15 and 5 s) report.
    assert scrapes and int(scrapes[1]) >= 4 and int(scrapes[2]) >= 3, output
    produced, readable, visible = (
        _figures(output, label)
        for label in (
            r"-> handed to the Kafka producer \(the records' timestamps\)",
            r"-> record readable on the metrics topic \(a confluent-kafka consumer\)",
            r"-> visible on the derived exporter",
        )
    )
    assert 0 < produced[0] <= readable[0] < visible[0]  # each stage comes after the one before
    assert re.search(r"p95 per kind of source: .*admin/offsets [\d.]+ s \(\d+\)", output), output
    assert produced[2] <= readable[2] <= visible[2]
    held, known = map(int, re.search(r"showed the lag of (\d+) of (\d+) offsets scrapes", output).groups())
    assert known >= 2 and held == known
    assert "target (" not in output  # the demo's targets are for the demo the command starts itself


def _figures(output: str, label: str) -> tuple[float, float, float]:
    match = re.search(rf"{label}: p50 ([\d.]+) s, p95 ([\d.]+) s, max ([\d.]+) s", output)
    assert match, f"no {label!r} line in:\n{output}"
    return tuple(float(x) for x in match.groups())


def _query(
    stack: EmbeddedStack, expr: str, keys: tuple[str, ...] = ("topic", "client_id")
) -> dict[str, float]:
    """``keys``' label values → sample of an instant query, e.g. ``topic=orders`` → offline partitions."""
    return {
        "|".join(f"{k}={v}" for k, v in sorted(r["metric"].items()) if k in keys): float(r["value"][1])
        for r in stack.prometheus.query(expr)
    }


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

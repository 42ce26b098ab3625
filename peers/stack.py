"""The demo's stack on loopback, as ``kobs demo`` runs it:

- **the real cluster** ``demo``: three Apache Kafka nodes (KRaft) holding the metrics topic (replication
  factor 3), real traffic on ``demo-orders`` (a producer, a consumer group that keeps up, one that lags,
  real commits) and ``web-frontend``, Kafka's own Java producer writing keyed records to ``orders``
  (6 partitions, replication factor 1: the incident topic); the nodes and the producer serve their metrics
  to the collector through the JMX exporter's agent (an HTTP scrape; jmxquery would start a JVM per
  scrape, which timed out for minutes on a busy 2-core host), their JMX open to Kafka's own tools;
- **a simulated fleet** ``simulated-fleet`` (optional): the simulator's 30 brokers and 3,000 partitions
  behind their JMX-exporter endpoints, with znodes in an embedded ZooKeeper — a second, separately named
  cluster, never the real cluster's brokers;
- Alertmanager with the shipped routing pointed at the stack's :class:`~peers.pager.Pager`, Prometheus
  with the shipped rules (runbook links open the stack's app) scraping the derived exporter, the collector,
  the real nodes' exporter agents and the fleet's endpoints (jobs ``kafka`` and ``simulated-kafka``, each
  series labelled with its cluster);
- Kafka Observatory itself: ``kobs collect``, ``kobs stream`` and ``kobs app`` on the configuration the
  stack writes to ``<run_dir>/kobs.yaml``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from alerts.runbooks import write_rules
from common.config import Config, load_config
from peers.kafka import KafkaCluster
from peers.keyed_producer import KeyedProducer
from peers.pager import Notification, Pager, routed_to
from peers.process import HOST, PORTS_ENV, ManagedProcess, free_port, http_ready, port_is_free
from peers.prometheus import Alertmanager, Prometheus
from peers.zookeeper import ZooKeeper
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario
from simulator.traffic import Traffic, TrafficSpec

REAL_CLUSTER = "demo"
FLEET_CLUSTER = "simulated-fleet"
INCIDENT_TOPIC = "orders"  # replication factor 1, written by the keyed Java producer
INCIDENT_PARTITIONS = 6
PRODUCER = "web-frontend"
# 500 keyed 1 KiB records/s into a 1 MiB buffer: with a third of the partitions lost, ~170 KiB/s piles up
# and send() blocks within seconds (Kafka's default 32 MiB would take over three minutes at this rate).
PRODUCER_SETTINGS = {"buffer.memory": 1024 * 1024, "max.block.ms": 60_000, "acks": "1"}
PRODUCER_RATE = 500
# Scrape often enough that each incident pages within a minute; the collector's defaults suit large clusters.
# The brokers' metrics every 5 s: the controllers' count of brokers in controlled shutdown must be read while
# a restarting node is away (5-20 s here) for its restart to be known as planned.
INTERVALS = {"metrics_s": 5, "offsets_s": 10, "metadata_s": 5, "producers_s": 5}
# Prometheus reads the brokers' own series (the real nodes' JMX-exporter agents, the fleet's endpoints) for
# the rules on raw metrics; their per-partition series (most of each page) reach the pipeline through the
# collector only.
BROKER_SCRAPE = {
    "scrape_interval": "15s",
    "metric_relabel_configs": [
        {"source_labels": ["__name__"], "regex": "kafka_log_log_.*", "action": "drop"},
    ],
}
# Conventional ports, used when free so that links and docs work; otherwise, or where KOBS_PORTS confines a
# process's ports (two test workers would race for them), any free port.
PREFERRED_PORTS = {
    "zookeeper": 2181, "prometheus": 9090, "alertmanager": 9093,
    "exporter": 9308, "self-metrics": 9309, "app": 8501,
}  # fmt: skip


def pick_port(name: str) -> int:
    preferred = PREFERRED_PORTS[name]
    return preferred if not os.environ.get(PORTS_ENV) and port_is_free(preferred) else free_port()


class KobsCommand(ManagedProcess):
    """A long-running ``kobs`` subcommand, ready once ``url`` answers."""

    def __init__(self, run_dir: Path, command: list[str], url: str, port: int, start_timeout_s: float = 60):
        self.url = url
        argv = [sys.executable, "-m", "kobs.cli", *command]
        super().__init__(f"kobs-{command[0]}", argv, run_dir, http_ready(url), None, start_timeout_s, [port])


def create_topic(
    bootstrap: str, name: str, partitions: int, replication_factor: int = 1, config: dict | None = None
) -> None:
    """Create a topic; an existing topic is fine, any other failure raises."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})  # warnings and worse only
    topic = NewTopic(name, partitions, replication_factor, config=config or {})
    future = admin.create_topics([topic], operation_timeout=10)[name]
    try:
        future.result(timeout=15)
    except Exception as exc:  # confluent-kafka raises KafkaException wrapping a KafkaError
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


@dataclass
class EmbeddedStack:
    run_dir: Path
    fleet: bool = True  # the simulated fleet beside the real cluster
    observers: bool = True  # Prometheus, Alertmanager, the pager and the app, which only read the pipeline
    group_wait: str | None = None  # Alertmanager's grouping delays (default: the shipped routing's)
    group_interval: str | None = None
    maintenance_grace_s: float | None = None  # how long a planned restart may last (default: the config's)
    on_notification: Callable[[Notification], None] | None = None  # each page or ticket as it arrives
    processes: list[ManagedProcess] = field(default_factory=list)
    kafka: KafkaCluster | None = None
    producer: KeyedProducer | None = None
    pager: Pager | None = None
    prometheus: Prometheus | None = None
    alertmanager: Alertmanager | None = None
    config: Config | None = None
    simulation: Runtime | None = None
    traffic: Traffic | None = None
    app_url: str | None = None  # where the app (and the runbooks the alerts link to) is served
    _stops: list[Callable[[], None]] = field(default_factory=list)  # what started, in that order

    def start(self, progress: Callable[[str], None] = print) -> EmbeddedStack:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start(progress)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, progress: Callable[[str], None]) -> None:
        self.kafka = KafkaCluster(self.run_dir / "kafka")
        self._stops.append(self.kafka.stop)
        self.kafka.start(progress)
        bootstrap = self.kafka.bootstrap
        names = ("exporter", "self-metrics", "app", "prometheus", "alertmanager")
        ports = {name: pick_port(name) for name in names}
        self.app_url = f"http://{HOST}:{ports['app']}/" if self.observers else None
        sinks = {
            "run_dir": str(self.run_dir),
            "exporter_address": f"{HOST}:{ports['exporter']}",
            "self_metrics_address": f"{HOST}:{ports['self-metrics']}",
        }
        progress(
            f"creating topics: {INCIDENT_TOPIC} (replication factor 1), demo-orders, the metrics topic ..."
        )
        create_topic(bootstrap, INCIDENT_TOPIC, INCIDENT_PARTITIONS, replication_factor=1)
        progress(
            f"starting {PRODUCER}: Kafka's Java producer, {PRODUCER_RATE} keyed records/s to {INCIDENT_TOPIC}"
        )
        self.producer = self._add(
            KeyedProducer(
                self.run_dir, bootstrap, INCIDENT_TOPIC, PRODUCER, PRODUCER_RATE, settings=PRODUCER_SETTINGS
            )
        )
        real = {
            "name": REAL_CLUSTER,
            "bootstrap_servers": bootstrap,
            "mode": "kraft",
            "exporters": [{"broker_id": i, "url": n.exporter_url} for i, n in self.kafka.nodes.items()],
            "producers": [
                {"client_id": PRODUCER, "url": self.producer.exporter_url, "topics": [INCIDENT_TOPIC]}
            ],
        }
        clusters = [real]
        if self.fleet:
            progress("starting ZooKeeper for the simulated fleet ...")
            zookeeper = self._add(ZooKeeper(self.run_dir, pick_port("zookeeper")))
            progress("starting the simulated fleet (30 brokers, 3,000 partitions) ...")
            self.simulation = Runtime(Simulation(load_scenario("fleet")), zookeeper=zookeeper.connect)
            self._stops.append(self.simulation.stop)
            self.simulation.start()
            clusters.append(
                {
                    "name": FLEET_CLUSTER,
                    "zookeeper": zookeeper.connect,
                    "exporters": [{"broker_id": b, "url": e.url} for b, e in self.simulation.brokers.items()],
                    "producers": [
                        {"client_id": c, "url": e.url} for c, e in self.simulation.producers.items()
                    ],
                }
            )
        doc = {
            "clusters": clusters,
            "metrics_topic": {"replication_factor": 3},
            "intervals": INTERVALS,
            **(
                {"alerts": {"maintenance_grace_s": self.maintenance_grace_s}}
                if self.maintenance_grace_s
                else {}
            ),
            "sinks": sinks,
            "app": {
                "prometheus_url": f"http://{HOST}:{ports['prometheus']}",
                "alertmanager_url": f"http://{HOST}:{ports['alertmanager']}" if self.observers else None,
            },
        }
        config_path = self.run_dir / "kobs.yaml"
        config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.config = load_config(config_path)
        topic = self.config.metrics_topic
        create_topic(bootstrap, topic.name, topic.partitions, topic.replication_factor)
        traffic = TrafficSpec()
        progress(f"starting real traffic on {traffic.topic}: a producer, a healthy and a lagging group ...")
        create_topic(bootstrap, traffic.topic, traffic.partitions, replication_factor=3)
        self.traffic = Traffic(bootstrap, traffic).start()
        self._stops.append(self.traffic.stop)
        if self.observers:
            self._start_observers(sinks, ports, progress)
        config = ["--config", str(config_path)]
        app = ["app", *config, "--port", str(ports["app"])]
        commands = [  # (arguments, readiness URL, its port, start timeout); Spark starts slowly
            (["collect", *config], f"http://{sinks['self_metrics_address']}/metrics", "self-metrics", 60),
            *([(app, self.app_url, "app", 60)] if self.observers else []),
            (["stream", *config], f"http://{sinks['exporter_address']}/metrics", "exporter", 180),
        ]
        for command, url, port, timeout_s in commands:
            progress(f"starting kobs {command[0]} ...")
            self._add(KobsCommand(self.run_dir, command, url, ports[port], timeout_s))

    def _start_observers(self, sinks: dict, ports: dict[str, int], progress: Callable[[str], None]) -> None:
        self.pager = Pager(self.on_notification).start()
        self._stops.append(self.pager.stop)
        progress("starting Alertmanager (pages and tickets go to the demo's pager) ...")
        routing = routed_to(self.pager.url, self.group_wait, self.group_interval)
        self.alertmanager = self._add(Alertmanager(self.run_dir, routing, port=ports["alertmanager"]))
        progress("starting Prometheus with the shipped alert rules (runbook links open the demo's app) ...")
        rules = write_rules(self.run_dir / "rules", f"{self.app_url}runbooks?alert={{alert}}")
        targets = {
            "kobs-exporter": [sinks["exporter_address"]],
            "kobs-collector": [sinks["self_metrics_address"]],
        }
        # The brokers' own pages, for the rules on raw metrics (grouped by cluster): job -> (cluster, targets)
        fleet = [url.removeprefix("http://").removesuffix("/metrics") for _, url in self.endpoints()]
        brokers = {"kafka": (REAL_CLUSTER, [node.exporter_address for node in self.kafka.nodes.values()])}
        if fleet:
            brokers["simulated-kafka"] = (FLEET_CLUSTER, fleet)
        targets |= {job: addresses for job, (_, addresses) in brokers.items()}
        self.prometheus = self._add(
            Prometheus(
                self.run_dir,
                targets,
                rule_files=rules,
                alertmanager=self.alertmanager.address,
                scrape_interval="5s",
                port=ports["prometheus"],
                target_labels={job: {"cluster": cluster} for job, (cluster, _) in brokers.items()},
                job_settings=dict.fromkeys(brokers, BROKER_SCRAPE),
            )
        )

    def _add(self, process: ManagedProcess) -> ManagedProcess:
        self.processes.append(process)
        self._stops.append(process.stop)
        return process.start()

    def endpoints(self) -> list[tuple[str, str]]:
        """(name, URL) of the simulated fleet's brokers' and producers' exporter endpoints."""
        return self.simulation.endpoints() if self.simulation else []

    def stop(self) -> None:
        """Stop what started, the last first: what reads before what it reads (kobs collect before the
        fleet it scrapes, which it would report down), Kafka last."""
        while self._stops:
            with contextlib.suppress(Exception):  # one that fails to stop must not keep the rest running
                self._stops.pop()()

    def describe(self) -> list[tuple[str, str]]:
        """(what, where) rows for people: addresses, URLs, PIDs and the run directory."""
        rows = []
        if self.kafka:
            for node_id, node in self.kafka.nodes.items():
                rows.append(
                    (
                        f"kafka broker {node_id} (pid {node.pid})",
                        f"{node.bootstrap}  JMX {node.jmx_address}  {node.exporter_url}",
                    )
                )
        for p in self.processes:
            where = getattr(p, "url", None) or getattr(p, "connect", None) or getattr(p, "jmx_address", "")
            rows.append((f"{p.name} (pid {p.pid})", where))
        if self.config:
            rows.append(("burrow-api (Burrow's v3 HTTP API)", f"http://{self.config.sinks.exporter_address}"))
        if self.pager:
            rows.append(("pager (Alertmanager webhooks)", self.pager.url))
        if self.app_url:
            rows.append(("runbooks (the alerts' links)", f"{self.app_url}runbooks"))
        if self.simulation:
            brokers = self.simulation.brokers
            first, last = min(brokers), max(brokers)
            rows.append(
                (f"simulated fleet: {len(brokers)} brokers", f"{brokers[first].url} .. {brokers[last].url}")
            )
        rows.append(("configuration", str(self.run_dir / "kobs.yaml")))
        rows.append(("logs and data", str(self.run_dir)))
        return rows

"""The embedded stack the demo runs on loopback: broker (with real traffic: a producer, a healthy and a
lagging consumer group), ZooKeeper, a simulated multi-broker cluster
(JMX-exporter endpoints, znodes in that ZooKeeper), Prometheus scraping it with the shipped alert rules,
Alertmanager with the shipped routing, and Kafka Observatory itself: ``kobs collect``, ``kobs stream``
and ``kobs app`` on the configuration the stack writes."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from alerts.check import ALERTMANAGER_CONFIG, rule_files
from common.config import Config, load_config
from peers.process import HOST, ManagedProcess, free_port, http_ready, port_is_free
from peers.prometheus import Alertmanager, Prometheus
from peers.tansu import TansuBroker
from peers.zookeeper import ZooKeeper
from simulator.runtime import Runtime
from simulator.scenario import Simulation, load_scenario
from simulator.traffic import Traffic, TrafficSpec

# Conventional ports, used when free so that links and docs work; otherwise any free port.
PREFERRED_PORTS = {
    "kafka": 9092, "zookeeper": 2181, "prometheus": 9090, "alertmanager": 9093,
    "exporter": 9308, "self-metrics": 9309, "app": 8501,
}  # fmt: skip


def pick_port(name: str) -> int:
    preferred = PREFERRED_PORTS[name]
    return preferred if port_is_free(preferred) else free_port()


class KobsCommand(ManagedProcess):
    """A long-running ``kobs`` subcommand, ready once ``url`` answers."""

    def __init__(self, run_dir: Path, command: list[str], url: str, port: int, start_timeout_s: float = 60):
        self.url = url
        argv = [sys.executable, "-m", "kobs.cli", *command]
        super().__init__(f"kobs-{command[0]}", argv, run_dir, http_ready(url), None, start_timeout_s, [port])


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 1) -> None:
    """Create a topic; an existing topic is fine, any other failure raises."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(name, partitions, replication_factor)], operation_timeout=10)[name]
    try:
        future.result(timeout=15)
    except Exception as exc:  # confluent-kafka raises KafkaException wrapping a KafkaError
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


@dataclass
class EmbeddedStack:
    run_dir: Path
    scenario: str = "rf1-incident"
    routing: dict | None = None  # Alertmanager configuration; the shipped routing by default
    observers: bool = True  # Prometheus, Alertmanager and the app, which read the pipeline but do not feed it
    processes: list[ManagedProcess] = field(default_factory=list)
    config: Config | None = None
    simulation: Runtime | None = None
    traffic: Traffic | None = None

    def start(self, progress: Callable[[str], None] = print) -> EmbeddedStack:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            progress("starting Kafka-protocol broker (tansu) ...")
            kafka = self._add(TansuBroker(self.run_dir, pick_port("kafka")))
            progress("starting ZooKeeper ...")
            zookeeper = self._add(ZooKeeper(self.run_dir, pick_port("zookeeper")))
            progress(f"starting the simulated cluster (scenario {self.scenario}) ...")
            self.simulation = Runtime(Simulation(load_scenario(self.scenario)), zookeeper=zookeeper.connect)
            self.simulation.start()
            ports = {name: pick_port(name) for name in ("exporter", "self-metrics", "app", "prometheus")}
            prometheus_url = f"http://{HOST}:{ports['prometheus']}"
            cluster = {
                "name": "demo",
                "bootstrap_servers": [kafka.bootstrap],
                "zookeeper": zookeeper.connect,
                "exporters": [{"broker_id": b, "url": e.url} for b, e in self.simulation.brokers.items()],
                "producers": [
                    {"client_id": c, "url": e.url, "topics": [self.simulation.sim.producers[c].spec.topic]}
                    for c, e in self.simulation.producers.items()
                ],
            }
            config_path = self.run_dir / "kobs.yaml"
            sinks = {
                "run_dir": str(self.run_dir),
                "exporter_address": f"{HOST}:{ports['exporter']}",
                "self_metrics_address": f"{HOST}:{ports['self-metrics']}",
            }
            doc = {"clusters": [cluster], "sinks": sinks, "app": {"prometheus_url": prometheus_url}}
            config_path.write_text(yaml.safe_dump(doc))
            self.config = load_config(config_path)
            if self.observers:
                progress("starting Alertmanager ...")
                routing = self.routing or yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
                alertmanager = self._add(Alertmanager(self.run_dir, routing, port=pick_port("alertmanager")))
                progress("starting Prometheus ...")
                simulated = [
                    url.removeprefix("http://").removesuffix("/metrics") for _, url in self.endpoints()
                ]
                targets = {
                    "kobs-exporter": [sinks["exporter_address"]],
                    "kobs-collector": [sinks["self_metrics_address"]],
                    "simulated-kafka": simulated,
                }
                self._add(
                    Prometheus(
                        self.run_dir,
                        targets,
                        rule_files=rule_files(),
                        alertmanager=alertmanager.address,
                        scrape_interval="5s",
                        port=ports["prometheus"],
                        # the raw rules group by cluster
                        target_labels={"simulated-kafka": {"cluster": cluster["name"]}},
                    )
                )
            topic = self.config.metrics_topic
            progress(f"creating metrics topic {topic.name} ({topic.partitions} partitions) ...")
            create_topic(kafka.bootstrap, topic.name, topic.partitions)
            traffic = TrafficSpec()
            progress(
                f"starting real traffic on {traffic.topic}: a producer, a healthy and a lagging group ..."
            )
            create_topic(kafka.bootstrap, traffic.topic, traffic.partitions)
            self.traffic = Traffic(kafka.bootstrap, traffic).start()
            config = ["--config", str(config_path)]
            app = ["app", *config, "--port", str(ports["app"])]
            commands = [  # (arguments, readiness URL, its port, start timeout); Spark starts slowly
                (["collect", *config], f"http://{sinks['self_metrics_address']}/metrics", "self-metrics", 60),
                *([(app, f"http://{HOST}:{ports['app']}/", "app", 60)] if self.observers else []),
                (["stream", *config], f"http://{sinks['exporter_address']}/metrics", "exporter", 180),
            ]
            for command, url, port, timeout_s in commands:
                progress(f"starting kobs {command[0]} ...")
                self._add(KobsCommand(self.run_dir, command, url, ports[port], timeout_s))
        except BaseException:
            self.stop()
            raise
        return self

    def _add(self, process: ManagedProcess) -> ManagedProcess:
        self.processes.append(process)
        return process.start()

    def endpoints(self) -> list[tuple[str, str]]:
        """(name, URL) of the simulated brokers' and producers' exporter endpoints."""
        return self.simulation.endpoints() if self.simulation else []

    def stop(self) -> None:
        if self.traffic:
            self.traffic.stop()
        if self.simulation:
            self.simulation.stop()
        for process in reversed(self.processes):
            with contextlib.suppress(Exception):
                process.stop()

    def describe(self) -> list[tuple[str, str]]:
        """(what, where) rows for people: addresses, URLs and the run directory."""
        rows = []
        for p in self.processes:
            where = getattr(p, "url", None) or getattr(p, "bootstrap", None) or getattr(p, "connect", "")
            rows.append((f"{p.name} (pid {p.pid})", where))
        rows += [(f"simulated {name}", url) for name, url in self.endpoints()]
        rows.append(("configuration", str(self.run_dir / "kobs.yaml")))
        rows.append(("logs and data", str(self.run_dir)))
        return rows

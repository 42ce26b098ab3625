"""Scenarios as data: a cluster, its topics, clients and timed faults, from YAML or the built-in set.

File format (every key optional except ``topics``; times in seconds of simulated time)::

    name: rf1-incident
    seed: 1
    tick_s: 0.1                 # one fetch round
    duration_s: 120
    brokers: 3                  # ids 0..N-1
    cluster: {replica_lag_time_max_s: 10, replica_lag_max_messages: null, min_insync_replicas: 1,
              unclean_leader_election: false, replica_fetch_max_bytes: 1048576, log_retention_check_s: 300,
              page_cache_bytes: null, disk_read_bytes_per_s: null, network_out_bytes_per_s: null,
              disk_bytes: null}       # the last four per broker; null = unlimited
    topics:    [{name: orders, partitions: 16, replication_factor: 1, message_bytes: 1024,
                 segment_bytes: 1073741824, retention_bytes: null, retention_s: 604800}]
    producers: [{client_id: web, topic: orders, messages_per_s: 16000, acks: "1"}]
    groups:    [{group: billing, topic: orders, members: 3}]
    events:    [{at: 30, action: kill_broker, broker: 1}]

Actions: ``kill_broker``/``start_broker`` (broker), ``slow_broker`` (broker, fetch_bytes_per_s or null),
``set_producer_rate`` (client_id, messages_per_s), ``set_group_mode`` (group, mode), ``rewind_group``
(group, messages), ``set_group_rate`` (group, messages_per_s).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simulator.cluster import Cluster
from simulator.consumer import MODES, ConsumerGroup, GroupSpec
from simulator.model import ClusterSettings, TopicSpec
from simulator.producer import Producer, ProducerSpec
from simulator.scenarios import BUILTIN_DIR, builtin_names

ACTIONS = {
    "kill_broker": ("broker",),
    "start_broker": ("broker",),
    "slow_broker": ("broker", "fetch_bytes_per_s"),
    "set_producer_rate": ("client_id", "messages_per_s"),
    "set_group_mode": ("group", "mode"),
    "set_group_rate": ("group", "messages_per_s"),
    "rewind_group": ("group", "messages"),
}


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the scenario and the problem."""


@dataclass(frozen=True)
class Event:
    at: float
    action: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    name: str
    topics: list[TopicSpec]
    description: str = ""
    seed: int = 0
    tick_s: float = 0.1
    duration_s: float = 300.0
    brokers: int = 3
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    producers: list[ProducerSpec] = field(default_factory=list)
    groups: list[GroupSpec] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    @classmethod
    def from_dict(cls, doc: dict[str, Any], where: str = "scenario") -> Scenario:
        try:
            return cls._parse(dict(doc))
        except (TypeError, ValueError, KeyError) as exc:
            raise ScenarioError(f"{where}: {exc}") from None

    @classmethod
    def _parse(cls, doc: dict[str, Any]) -> Scenario:
        doc["cluster"] = ClusterSettings(**doc.get("cluster", {}))
        doc["topics"] = [TopicSpec(**t) for t in doc.get("topics", [])]
        doc["producers"] = [
            ProducerSpec(**{**p, "acks": str(p.get("acks", "1"))}) for p in doc.get("producers", [])
        ]
        doc["groups"] = [GroupSpec(**g) for g in doc.get("groups", [])]
        doc["events"] = sorted((_event(e) for e in doc.get("events", [])), key=lambda e: e.at)
        unknown = set(doc) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}")
        if not doc["topics"]:
            raise ValueError("at least one topic is required")
        scenario = cls(**doc)
        scenario.check_references()
        return scenario

    def check_references(self) -> None:
        """Events and clients may only name brokers, topics, producers and groups that exist."""
        known = {
            "broker": set(range(self.brokers)),
            "client_id": {p.client_id for p in self.producers},
            "group": {g.group for g in self.groups},
        }
        topics = {t.name for t in self.topics}
        for client in [*self.producers, *self.groups]:
            if client.topic not in topics:
                raise ValueError(f"{client} uses unknown topic {client.topic!r}")
        for event in self.events:
            for key, names in known.items():
                if key in event.args and event.args[key] not in names:
                    raise ValueError(f"{event.action} at {event.at}: no {key} {event.args[key]!r}")

    def replace(self, **changes: Any) -> Scenario:
        """A copy with the given fields changed (``None`` leaves a field as it is)."""
        scenario = dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})
        try:
            scenario.check_references()
        except ValueError as exc:
            raise ScenarioError(f"{self.name}: {exc}") from None
        return scenario


def _event(raw: dict[str, Any]) -> Event:
    raw = dict(raw)
    at, action = float(raw.pop("at")), raw.pop("action")
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
    if set(raw) != set(ACTIONS[action]):
        raise ValueError(f"action {action} at {at} takes {', '.join(ACTIONS[action])}, got {sorted(raw)}")
    if action == "set_group_mode" and raw["mode"] not in MODES:
        raise ValueError(f"set_group_mode at {at}: mode must be one of {', '.join(MODES)}")
    return Event(at, action, raw)


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A built-in scenario by name, or a YAML file by path."""
    path = Path(name_or_path)
    if not path.suffix and (BUILTIN_DIR / f"{name_or_path}.yaml").exists():
        path = BUILTIN_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise ScenarioError(
            f"no scenario {str(name_or_path)!r}: give a file or one of {', '.join(builtin_names())}"
        )
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ScenarioError(f"{path}: the top level must be a mapping")
    return Scenario.from_dict(doc, str(path))


class Simulation:
    """A scenario running on a :class:`Cluster`: ``advance`` steps whole ticks and fires due events."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.cluster = Cluster(range(scenario.brokers), scenario.cluster, seed=scenario.seed)
        for spec in scenario.topics:
            self.cluster.create_topic(spec)
        self.producers = {p.client_id: Producer(p) for p in scenario.producers}
        self.groups = {g.group: ConsumerGroup(g) for g in scenario.groups}
        self.cluster.producers = list(self.producers.values())
        self.cluster.groups = list(self.groups.values())
        self._events = list(scenario.events)
        self.ticks = 0

    @property
    def now(self) -> float:
        return self.cluster.now

    def advance(self, seconds: float) -> None:
        """Steps ``round(seconds / tick_s)`` ticks."""
        for _ in range(round(seconds / self.scenario.tick_s)):
            self.tick()

    def tick(self) -> None:
        tick_s = self.scenario.tick_s
        self.ticks += 1
        while self._events and self._events[0].at <= round(self.ticks * tick_s - tick_s, 9):
            self._apply(self._events.pop(0))
        self.cluster.step(tick_s)

    def _apply(self, event: Event) -> None:
        a, c = event.args, self.cluster
        match event.action:
            case "kill_broker":
                c.kill_broker(a["broker"])
            case "start_broker":
                c.start_broker(a["broker"])
            case "slow_broker":
                c.slow_broker(a["broker"], a["fetch_bytes_per_s"])
            case "set_producer_rate":
                self.producers[a["client_id"]].messages_per_s = a["messages_per_s"]
            case "set_group_mode":
                self.groups[a["group"]].mode = a["mode"]
            case "set_group_rate":
                self.groups[a["group"]].messages_per_s = a["messages_per_s"]
            case "rewind_group":
                self.groups[a["group"]].rewind(a["messages"], c)

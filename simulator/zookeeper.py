"""Kafka's ZooKeeper layout, written from the model into a real ZooKeeper with kazoo.

``/brokers/ids/<id>`` (ephemeral, removed when the broker dies), ``/brokers/topics/<t>`` (assignment) and
``.../partitions/<p>/state`` (leader/ISR JSON), ``/controller`` (ephemeral) and ``/controller_epoch``, and
``/isr_change_notification/isr_change_<10 digits>`` (persistent sequential) for every notification a
broker's batcher wrote. Like the real controller, the publisher deletes notifications once "processed",
``notification_ttl_s`` simulated seconds after they were written (``None`` keeps them).
"""

from __future__ import annotations

import contextlib
import json
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from simulator.cluster import Cluster
from simulator.model import Partition

NOTIFICATIONS = "/isr_change_notification"
LISTENER_BASE_PORT = 9092  # advertised in the broker registrations; nothing listens there


def _json(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def partition_state(p: Partition) -> bytes:
    """The state znode, byte for byte like Kafka's (key order included)."""
    return _json(
        {
            "controller_epoch": p.controller_epoch,
            "leader": p.leader,
            "version": 1,
            "leader_epoch": p.leader_epoch,
            "isr": p.isr,
        }
    )


class ZooKeeperPublisher:
    def __init__(self, connect: str, cluster: Cluster, epoch_ms: int, notification_ttl_s: float | None = 1.0):
        self.cluster = cluster
        self.epoch_ms = epoch_ms
        self.notification_ttl_s = notification_ttl_s
        self.client = KazooClient(hosts=connect, timeout=15)
        self._registered: set[int] = set()
        self._controller: tuple[int, int] | None = None
        self._topics: set[str] = set()
        self._states: dict[tuple[str, int], bytes] = {}
        self._notes_written = 0
        self._changes_seen = 0
        self._live_notes: list[tuple[float, str]] = []

    def start(self) -> None:
        self.client.start(timeout=15)
        for path in ("/brokers/ids", "/brokers/topics", NOTIFICATIONS):
            self.client.ensure_path(path)
        self.sync()

    def stop(self) -> None:
        """Closes the session: the ephemeral broker and controller znodes go, as when a cluster stops."""
        self.client.stop()
        self.client.close()

    def _timestamp(self, sim_time: float) -> str:
        return str(self.epoch_ms + round(sim_time * 1000))

    def sync(self) -> None:
        """Writes everything that changed in the model since the last call."""
        self._sync_brokers()
        self._sync_controller()
        self._sync_topics()
        self._sync_notifications()

    def _sync_brokers(self) -> None:
        for broker in self.cluster.brokers.values():
            path = f"/brokers/ids/{broker.id}"
            if broker.alive and broker.id not in self._registered:
                port = LISTENER_BASE_PORT + broker.id
                registration = {
                    "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                    "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"],
                    "jmx_port": -1,
                    "host": "127.0.0.1",
                    "timestamp": self._timestamp(broker.registered_at),
                    "port": port,
                    "version": 4,
                }
                self.client.create(path, _json(registration), ephemeral=True)
                self._registered.add(broker.id)
            elif not broker.alive and broker.id in self._registered:
                self.client.delete(path)
                self._registered.discard(broker.id)

    def _sync_controller(self) -> None:
        current = (self.cluster.controller, self.cluster.controller_epoch)
        if current == self._controller:
            return
        controller, epoch = current
        with contextlib.suppress(NoNodeError):
            self.client.delete("/controller")
        if controller >= 0:
            elected_at = self.cluster.controller_changes[-1][0]
            doc = {"version": 1, "brokerid": controller, "timestamp": self._timestamp(elected_at)}
            self.client.create("/controller", _json(doc), ephemeral=True)
        try:
            self.client.create("/controller_epoch", str(epoch).encode())
        except NodeExistsError:
            self.client.set("/controller_epoch", str(epoch).encode())
        self._controller = current

    def _sync_topics(self) -> None:
        """New topics with all their partitions; afterwards only the partitions a change names (every change
        of leader, ISR or epochs is recorded in ``cluster.changes``). The writes are sent without waiting:
        ZooKeeper applies one session's requests in the order sent, so a parent sent first exists for its
        children (3,000 partitions take 1-2 s; a create that made its parents on failure took 8 s idle, and
        over 30 s on a loaded machine)."""
        pending, changed = [], self.cluster.changes[self._changes_seen :]
        self._changes_seen += len(changed)
        dirty = [self.cluster.topics[c.topic].partitions[c.partition] for c in changed]
        for name, topic in self.cluster.topics.items():
            if name not in self._topics:
                assignment = {
                    "version": 1,
                    "partitions": {str(p.index): p.replicas for p in topic.partitions},
                }
                root = f"/brokers/topics/{name}"
                pending.append(self.client.create_async(root, _json(assignment)))
                parents = [f"{root}/partitions", *(f"{root}/partitions/{p.index}" for p in topic.partitions)]
                pending += [self.client.create_async(path) for path in parents]
                self._topics.add(name)
                dirty += topic.partitions
        for p in dirty:
            state = partition_state(p)
            key = (p.topic, p.index)
            old = self._states.get(key)
            if old == state:
                continue
            path = f"/brokers/topics/{p.topic}/partitions/{p.index}/state"
            write = self.client.create_async if old is None else self.client.set_async
            pending.append(write(path, state))
            self._states[key] = state
        deadline = time.monotonic() + 60
        for result in pending:
            result.get(timeout=max(deadline - time.monotonic(), 1))

    def _sync_notifications(self) -> None:
        for note in self.cluster.notifications[self._notes_written :]:
            doc = {"version": 1, "partitions": [{"topic": t, "partition": i} for t, i in note.partitions]}
            path = self.client.create(f"{NOTIFICATIONS}/isr_change_", _json(doc), sequence=True)
            self._live_notes.append((note.ts, path))
        self._notes_written = len(self.cluster.notifications)
        if self.notification_ttl_s is None:
            return
        now = self.cluster.now
        while self._live_notes and now - self._live_notes[0][0] >= self.notification_ttl_s:
            self.client.delete(self._live_notes.pop(0)[1])

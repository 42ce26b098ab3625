"""Partition state, ISR and controller changes of a ZooKeeper-mode cluster, read from the znodes Kafka writes.

- Every ``full_diff_s`` each topic's assignment znode (``/brokers/topics/<t>``: its partitions and their
  replicas) and all partition state znodes (``.../partitions/<n>/state``) are read and diffed, each state
  read leaving a data watch on its znode. A malformed assignment is an error; that topic's partitions are
  then listed instead, keeping the replicas known before.
- Between full reads, a state znode's watch fires when it is written and the znode is read again (leaving
  the next watch): whoever wrote it, the controller (ISR changes a leader asked for with AlterPartition,
  leader elections, a broker's session expiring) or, before inter-broker protocol 2.7-IV2, the leader.
  ``/isr_change_notification`` is not read: brokers at that protocol or later never write it, older ones
  write it seconds after the state znode (batched), and the controller deletes it within milliseconds.
- ``/controller`` and ``/controller_epoch`` are watched; every new (controller, epoch) pair is an event,
  the first one at start (id -1 when there is no controller).

Both paths update one table of known states under a lock, each state with the zxid of its write, so a change
is reported once and an older read never replaces a newer one. A lost connection drops kazoo's watches, so
the next scrape does a full read, which sets them again. The first full read sets the baseline without
events. Every scrape with a session also emits the table as per-partition samples
(:func:`collectors.isr.partition_samples`, as the metadata source does in KRaft mode): ZooKeeper is the
authority for partition state. The source only reads: it writes no znode.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, SessionExpiredError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from collectors.isr import PartitionKey, PartitionState, isr_event, partition_samples
from collectors.source import Scrape, now_ms
from common.contract import Batch, Event

SOURCE = "zookeeper/isr"
TOPICS = "/brokers/topics"
IN_FLIGHT = 1_000  # znode reads pipelined at once in a full read


def parse_state(raw: bytes) -> PartitionState:
    """A partition state znode (``{"leader":1,"leader_epoch":7,"isr":[1,2],...}``); ValueError if bad."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("isr"), list):
        raise ValueError(f"not a partition state: {raw[:200]!r}")
    return PartitionState(int(doc["leader"]), tuple(int(b) for b in doc["isr"]), int(doc["leader_epoch"]))


def parse_assignment(raw: bytes) -> dict[int, tuple[int, ...]]:
    """Replicas per partition from a topic znode (``{"version":1,"partitions":{"0":[1,2]}}``); ValueError
    (or KeyError, TypeError) if malformed."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), dict):
        raise ValueError(f"not a topic assignment: {raw[:200]!r}")
    return {int(p): tuple(int(b) for b in replicas) for p, replicas in doc["partitions"].items()}


def state_path(key: PartitionKey) -> str:
    return f"{TOPICS}/{key[0]}/partitions/{key[1]}/state"


def state_key(path: str) -> PartitionKey:
    """``/brokers/topics/<t>/partitions/<n>/state`` → (t, n); a topic name has no ``/``."""
    topic, _, partition = path[len(TOPICS) + 1 : -len("/state")].partition("/partitions/")
    return topic, int(partition)


class ZooKeeperIsrSource:
    def __init__(self, cluster: str, connect: str, full_diff_s: float = 30.0, timeout_s: float = 10.0):
        self.cluster, self.name = cluster, SOURCE
        self.full_diff_s = full_diff_s
        self._connect = connect
        # reconnect forever: a ZooKeeper outage or a lost session must not end the source
        retry = {"max_tries": -1, "max_delay": 5.0}
        self._zk = KazooClient(hosts=connect, timeout=timeout_s, connection_retry=retry)
        self._lock = threading.Lock()
        self._states: dict[PartitionKey, PartitionState] = {}
        self._zxids: dict[PartitionKey, int] = {}  # the zxid of the write each known state was read from
        self._controller: tuple[int, int] | None = None
        self._events: list[Event] = []
        self._errors: list[str] = []
        self._next_full = 0.0

    def start(self) -> ZooKeeperIsrSource:
        self._zk.add_listener(self._on_state)
        self._zk.start()
        self._zk.DataWatch("/controller", lambda *_: self._on_controller())
        self._zk.DataWatch("/controller_epoch", lambda *_: self._on_controller())
        return self

    def stop(self) -> None:
        self._zk.stop()
        self._zk.close()

    def collect(self) -> Scrape:
        if not self._zk.connected:
            self._error(f"zookeeper_disconnected: no ZooKeeper session at {self._connect}; reconnecting")
        elif time.monotonic() >= self._next_full:
            self._next_full = time.monotonic() + self.full_diff_s
            self._full_diff()
        with self._lock:
            events, self._events = self._events, []
            errors, self._errors = self._errors, []
            # without a session the table may be stale: no partition state rather than an old one
            states = dict(self._states) if self._zk.connected else {}
        samples = tuple(partition_samples(states))
        return Scrape(Batch(self.cluster, SOURCE, now_ms(), samples, tuple(events)), errors)

    # -- reading and recording --------------------------------------------------------------------------
    def _get_many(self, paths: Iterable[str], watch: Any = None) -> Iterator[tuple[bytes, ZnodeStat] | None]:
        """The data and stat of each znode (None when it does not exist), read with up to ``IN_FLIGHT``
        requests pipelined on the session: one round trip per chunk instead of one per znode."""
        paths = iter(paths)
        while chunk := [self._zk.get_async(path, watch) for path in itertools.islice(paths, IN_FLIGHT)]:
            for request in chunk:
                try:
                    yield request.get()
                except NoNodeError:
                    yield None

    def _state(self, key: PartitionKey, raw: bytes) -> PartitionState | None:
        try:
            return parse_state(raw)
        except (ValueError, KeyError, TypeError) as exc:
            self._error(f"state of {key[0]}-{key[1]}: {exc}")
            return None

    def _assignment(self, topic: str, raw: bytes) -> dict[int, tuple[int, ...]]:
        """Replicas per partition of ``topic``; its partitions without replicas when malformed."""
        try:
            return parse_assignment(raw)
        except (ValueError, KeyError, TypeError) as exc:
            self._error(f"assignment of {topic}: {exc}")
            try:
                return {int(p): () for p in self._zk.get_children(f"{TOPICS}/{topic}/partitions")}
            except NoNodeError:
                return {}  # deleted while we read

    def _record(self, key: PartitionKey, state: PartitionState, zxid: int, ts_ms: int) -> None:
        """Under the lock: remember ``state``, written at ``zxid`` (with the replicas known before when it has
        none), and queue an event if it differs from the known one (none for a partition not known before);
        a state older than the known one is dropped (a full read that began before a watch's read)."""
        if zxid < self._zxids.get(key, -1):
            return
        old = self._states.get(key)
        if old is not None and not state.replicas:
            state = replace(state, replicas=old.replicas)
        self._states[key], self._zxids[key] = state, zxid
        event = isr_event(key[0], key[1], old, state, ts_ms) if old is not None else None
        if event is not None:
            self._events.append(event)

    def _error(self, reason: str) -> None:
        with self._lock:
            self._errors.append(reason)

    def _full_diff(self) -> None:
        ts, states = now_ms(), {}
        try:
            topics = self._zk.get_children(TOPICS)
            assignments = dict(zip(topics, self._get_many(f"{TOPICS}/{t}" for t in topics), strict=True))
            replicas = {
                (topic, partition): assigned
                for topic, read in assignments.items()
                if read is not None  # deleted while we read
                for partition, assigned in self._assignment(topic, read[0]).items()
            }
            reads = self._get_many(map(state_path, replicas), self._on_state_written)
            for key, read in zip(replicas, reads, strict=True):
                state = self._state(key, read[0]) if read is not None else None
                if state is not None:
                    states[key] = (replace(state, replicas=replicas[key]), read[1].mzxid)
        except NoNodeError:
            pass  # no topics yet
        except KazooException as exc:
            self._error(f"full read of partition states: {exc!r}")
            return
        with self._lock:
            for key, (state, zxid) in states.items():
                self._record(key, state, zxid, ts)
            for key in self._states.keys() - states.keys():
                del self._states[key], self._zxids[key]

    # -- watch callbacks (kazoo's event thread) ---------------------------------------------------------
    def _on_state(self, state: KazooState) -> None:
        if state != KazooState.CONNECTED:  # kazoo dropped every watch: read (and watch) everything again
            self._next_full = 0.0

    def _on_state_written(self, event: WatchedEvent) -> None:
        """A state znode's watch fired: read it again, leaving the next watch (deletions and lost
        connections are left to the next full read)."""
        if event.type == EventType.CHANGED:
            key, ts = state_key(event.path), now_ms()
            self._zk.get_async(event.path, self._on_state_written).rawlink(
                lambda request: self._on_state_read(key, request, ts)
            )

    def _on_state_read(self, key: PartitionKey, request: Any, ts_ms: int) -> None:
        try:
            raw, stat = request.get()
        except (NoNodeError, ConnectionLoss, SessionExpiredError):
            return  # deleted, or the connection went: the next full read has it
        except KazooException as exc:
            self._error(f"reading state of {key[0]}-{key[1]}: {exc!r}")
            return
        state = self._state(key, raw)
        if state is not None:
            with self._lock:
                self._record(key, state, stat.mzxid, ts_ms)

    def _on_controller(self) -> None:
        controller = self._json("/controller")
        epoch = self._json("/controller_epoch")
        controller_id = controller.get("brokerid", -1) if isinstance(controller, dict) else -1
        pair = (
            controller_id if isinstance(controller_id, int) else -1,
            epoch if isinstance(epoch, int) else 0,
        )
        with self._lock:
            if pair != self._controller:
                self._controller = pair
                fields = {"controller_id": pair[0], "controller_epoch": pair[1]}
                self._events.append(Event("controller_change", now_ms(), fields))

    def _json(self, path: str) -> Any:
        try:
            return json.loads(self._zk.get(path)[0])
        except NoNodeError:
            return None
        except (ValueError, KazooException) as exc:
            self._error(f"{path}: {exc!r}")
            return None

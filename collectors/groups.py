"""Consumer groups through the Admin API (list, describe, committed offsets), asked from a process of its own.

librdkafka (2.16) has three faults on the requests bound for a group's coordinator, each seen here on the
real cluster:

- a ListConsumerGroupOffsets answered NOT_COORDINATOR (the group's coordinator moved while the old one stays
  up: a preferred-leader election, a reassignment, a broker's controlled shutdown) makes librdkafka ask the
  client's own consumer group to look for the coordinator; an Admin client has none, and the process dies
  of a segmentation fault (``rd_kafka_handle_OffsetFetch``);
- a request that timed out while it waited for a coordinator is freed, and the process aborts on a failed
  assertion when a coordinator answers for it (its issue 4605): the requests carry librdkafka's longest
  timeout, an hour, and a group whose request is still out is not asked again;
- a client that got NOT_COORDINATOR keeps asking the broker it knew: a DescribeConsumerGroups was answered
  NOT_COORDINATOR every second for as long as it was asked.

So a :class:`GroupReader` runs the requests in a child process: a crash costs one scrape's groups, not the
collector, and the next child asks Kafka where the coordinators are now.

ListConsumerGroups asks every broker; with one down it fails at its request timeout, and returns the groups
of the brokers that answered along with that broker's error. It gets ``LISTING_SHARE`` of the read's time,
so that this partial answer comes in time to describe the groups and read their offsets (with the whole
time, a killed broker hid every group until it returned). A broker still loading its groups (a coordinator
that just started or took over partitions of ``__consumer_offsets``) answers COORDINATOR_LOAD_IN_PROGRESS,
or COORDINATOR_NOT_AVAILABLE: Kafka's Java Admin client asks it again until its timeout, librdkafka returns
the error at once, so the listing is asked again here, within its share.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError
from confluent_kafka.admin import AdminClient

from collectors.futures import wait_all

COORDINATOR_REQUEST_TIMEOUT_S = 3600.0  # librdkafka's longest: a coordinator's failover ends first
LISTING_SHARE = 0.5  # of a read's time, for ListConsumerGroups
LOADING = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
LOADING_RETRY_S = 0.25  # between listings while a broker loads its groups
REPLY_GRACE_S = 2.0  # beyond the read's timeout, for the child's pickling and the pipe


@dataclass(frozen=True)
class GroupInfo:
    group: str
    state: str  # lower case Kafka state: stable, empty, preparing_rebalance, ...
    members: int | None  # None when the broker did not describe the group
    assigned: tuple[tuple[str, int, str, str], ...] = ()  # (topic, partition, member client id, member host)


Offsets = Mapping[tuple[str, int], int]


@dataclass(frozen=True)
class GroupsRead:
    """One read: every listed group, the committed offsets of those that answered, and what went wrong."""

    groups: list[GroupInfo] = field(default_factory=list)
    committed: dict[str, Offsets] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class GroupRequests:
    """The Admin requests of one client, and the coordinator requests it still has out between reads."""

    def __init__(self, admin: AdminClient):
        self.admin = admin
        self._out: dict[tuple[str, str], Future] = {}  # (call, group) -> its request not answered yet

    def read(self, timeout_s: float) -> GroupsRead:
        deadline = time.monotonic() + timeout_s
        errors: list[str] = []
        states = self._listed(time.monotonic() + LISTING_SHARE * timeout_s, deadline, errors)
        ids = list(states)
        if not ids:
            return GroupsRead(errors=errors)
        described = self._answers(
            "describe_consumer_groups", self.admin.describe_consumer_groups, ids, deadline, errors
        )
        groups = [GroupInfo(g, states[g], None) for g in ids if g not in described]
        groups += [
            GroupInfo(g, states[g], len(d.members), _assigned(d.members)) for g, d in described.items()
        ]
        results = self._answers("list_consumer_group_offsets", self._committed, ids, deadline, errors)
        committed = {  # one string object per topic name: pickled once, and shared again in the parent
            group: {
                (sys.intern(tp.topic), tp.partition): tp.offset
                for tp in result.topic_partitions
                if tp.error is None
            }
            for group, result in results.items()
        }
        return GroupsRead(groups, committed, errors)

    def _listed(self, listing_end: float, deadline: float, errors: list[str]) -> dict[str, str]:
        """Group -> its state (lower case), from ListConsumerGroups; asked again by ``listing_end`` while a
        broker answers that it is loading its groups (the groups listed meanwhile are kept)."""
        states: dict[str, str] = {}
        while True:
            request_timeout = max(LOADING_RETRY_S, listing_end - time.monotonic())
            future = self.admin.list_consumer_groups(request_timeout=request_timeout)
            listed = wait_all({"groups": future}, deadline, "list_consumer_groups", errors)
            if not listed:
                return states
            states |= {g.group_id: g.state.name.lower() for g in listed["groups"].valid}
            failed = listed["groups"].errors
            loading = all(e.code() in LOADING for e in failed)  # KafkaErrors, not KafkaExceptions
            if not (failed and loading and time.monotonic() + LOADING_RETRY_S < listing_end):
                errors.extend(f"list_consumer_groups: {e}" for e in failed)
                return states
            time.sleep(LOADING_RETRY_S)

    def _answers(
        self,
        name: str,
        call: Callable[..., dict[str, Future]],
        groups: list[str],
        deadline: float,
        errors: list[str],
    ) -> dict[str, Any]:
        """Group -> the answer by ``deadline`` to its ``call`` (a request to its coordinator): the request
        still out from an earlier read, else a new one."""
        new = [g for g in groups if (name, g) not in self._out]
        if new:
            asked = call(new, request_timeout=COORDINATOR_REQUEST_TIMEOUT_S)
            self._out |= {(name, g): future for g, future in asked.items()}
        answers = wait_all({g: self._out[name, g] for g in groups}, deadline, name, errors)
        self._out = {key: future for key, future in self._out.items() if not future.done()}  # answers freed
        return answers

    def _committed(self, groups: list[str], request_timeout: float) -> dict[str, Future]:
        """``list_consumer_group_offsets`` of each group, one request each (the API takes one group)."""
        futures: dict[str, Future] = {}
        for group in groups:
            request = [ConsumerGroupTopicPartitions(group)]
            futures |= self.admin.list_consumer_group_offsets(request, request_timeout=request_timeout)
        return futures


def _assigned(members: Iterable) -> tuple[tuple[str, int, str, str], ...]:
    """(topic, partition, client id, host) of every partition assigned to one of ``members`` (the Admin
    API's ``MemberDescription``; the host as the coordinator saw it, ``/127.0.0.1``)."""
    return tuple(
        (tp.topic, tp.partition, m.client_id, m.host)
        for m in members
        for tp in (m.assignment.topic_partitions if m.assignment else ())
    )


def serve(conn: Connection) -> None:
    """The child: the Admin client's settings first, then one :class:`GroupsRead` per timeout received, until
    the parent closes its end (or is gone); then it exits at once, without tearing its client down
    (librdkafka's teardown with coordinator requests out is the path of its issue 4605)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        requests = GroupRequests(AdminClient(conn.recv()))
        conn.send("ready")
        while True:
            conn.send(requests.read(conn.recv()))
    except (EOFError, OSError):
        os._exit(0)


class GroupReader:
    """Reads a cluster's groups through a child process (``python -m collectors.groups``, :func:`serve`),
    replaced when it dies or overruns. ``read`` never raises for a fault of the cluster or of the child."""

    def __init__(self, settings: dict[str, Any]):
        self._settings = settings
        self._child: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._ready = False

    def read(self, timeout_s: float) -> GroupsRead:
        deadline = time.monotonic() + timeout_s
        try:
            if self._child is None:
                self._start()
            assert self._conn is not None
            if not self._ready:
                if not self._conn.poll(max(0.0, deadline - time.monotonic())):
                    return GroupsRead(errors=["groups_process: the child process is still starting"])
                self._conn.recv()
                self._ready = True
            self._conn.send(max(0.0, deadline - time.monotonic()))
            if not self._conn.poll(max(0.0, deadline - time.monotonic()) + REPLY_GRACE_S):
                self.stop()
                return GroupsRead(errors=[f"groups_process: no answer within {timeout_s:g} s; {REPLACED}"])
            return self._conn.recv()
        except (EOFError, OSError):
            return GroupsRead(errors=[f"groups_process: {self._died()}; {REPLACED}"])

    def _start(self) -> None:
        """A new interpreter (not a fork: this process runs librdkafka's threads; not multiprocessing's spawn,
        which runs the caller's main module again), talking over a socket pair."""
        ours, theirs = socket.socketpair()
        with ours, theirs:
            command = [sys.executable, "-m", "collectors.groups", str(theirs.fileno())]
            self._child = subprocess.Popen(command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
            self._conn = Connection(ours.detach())
        self._conn.send(self._settings)  # secrets stay off the command line
        self._ready = False

    def _died(self) -> str:
        """How the child ended (its exit status or signal); what is left of it is stopped."""
        code = None
        if self._child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._child.wait(1)
        self.stop()
        if code is None:
            return "the child process stopped answering"
        if code < 0:
            return f"the child process died of {signal.Signals(-code).name}"
        return f"the child process exited with status {code}"

    def stop(self) -> None:
        """End the child without waiting for its requests: killed, never asked to destroy its client
        (librdkafka's teardown with coordinator requests out is the path of its issue 4605)."""
        if self._conn is not None:
            self._conn.close()
        if self._child is not None:
            self._child.kill()  # no-op once it has ended
            self._child.wait()
        self._child, self._conn = None, None


REPLACED = "a new child process asks at the next scrape"

if __name__ == "__main__":
    # the child: its answers must unpickle as ``collectors.groups.GroupsRead``, not ``__main__.GroupsRead``
    from collectors import groups

    groups.serve(Connection(int(sys.argv[1])))

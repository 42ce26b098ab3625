"""Consumer-group and log offsets via the Admin API: what lag is computed from downstream.

Per scrape: list topics; the log start and end offsets of every partition (ListOffsets earliest and latest
through consumers' ``offsets_for_times``, ``LOG_OFFSETS_CHUNK`` partitions of one leader a call,
``PARALLEL_CALLS`` at a time on a consumer each: the Admin API's ``list_offsets`` makes a future per
partition, hundreds of MB at 100,000 partitions); meanwhile the consumer groups: state, members, the member
each assigned partition has and committed offsets, read in a child process (:mod:`collectors.groups`:
librdkafka crashes on some of these requests). Lag itself (end - committed) is left to the jobs, which also
see history. The topic listing goes out alone: it is the first step of the longest chain, and the broker
answers it sooner without the group requests.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing
from itertools import zip_longest

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from collectors.admin import admin_client, admin_settings, listing_error, topics
from collectors.futures import forget_frames
from collectors.groups import GroupInfo, GroupReader, Offsets
from collectors.source import Scrape, now_ms
from common import names
from common.config import Cluster
from common.contract import Batch, Sample
from common.kafka_clients import cluster_settings

SOURCE = "admin/offsets"
LOG_OFFSETS_CHUNK = 200  # partitions per offsets_for_times call: its CPU cost grows faster than linearly
PARALLEL_CALLS = 3  # offsets_for_times calls in flight, each on its own consumer (plus the group requests)
RETRY_PAUSE_S = 0.2  # before asking again for partitions whose leader moved
# Per-partition errors of a leader that moved since the client's metadata: asked again once.
MOVED = frozenset(
    (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
     KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT)
)  # fmt: skip
# Errors of the consumer's own stale metadata, per partition or for its whole call: a leader moved since
# (FENCED_LEADER_EPOCH: the old leader is asked with the old epoch), a broker behind the metadata read
# elsewhere (UNKNOWN_LEADER_EPOCH), no leader known (_UNKNOWN_PARTITION: after a broker restarts, the same
# consumer answered so from its cache scrape after scrape for minutes). Asked again once of a fresh
# consumer, and the stale one is replaced after the scrape.
STALE = frozenset(
    (KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError._UNKNOWN_PARTITION)
)
RETRIED = MOVED | STALE


def leader_chunks(tps: Mapping[tuple[str, int], int]) -> list[tuple[int, list[tuple[str, int]]]]:
    """The partitions in calls of at most ``LOG_OFFSETS_CHUNK``, each of one leader's partitions (partition ->
    leader in ``tps``), a call of each leader in turn."""
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp, leader in tps.items():
        by_leader.setdefault(leader, []).append(tp)
    per_leader = [
        [(leader, part[i : i + LOG_OFFSETS_CHUNK]) for i in range(0, len(part), LOG_OFFSETS_CHUNK)]
        for leader, part in sorted(by_leader.items())
    ]
    return [chunk for turn in zip_longest(*per_leader) for chunk in turn if chunk is not None]


def group_samples(committed: Mapping[str, Offsets], groups: Iterable[GroupInfo]) -> list[Sample]:
    """Committed offsets (a group's -1 "no commit" is left out), state, members and the member each assigned
    partition has, of every group."""
    samples = [
        Sample(names.GROUP_COMMITTED_OFFSET, {"group": group, "topic": topic, "partition": str(p)}, v)
        for group, offsets in sorted(committed.items())
        for (topic, p), v in sorted(offsets.items())
        if v >= 0
    ]
    for info in sorted(groups, key=lambda g: g.group):
        samples.append(Sample(names.GROUP_INFO, {"group": info.group, "state": info.state}, 1))
        if info.members is not None:
            samples.append(Sample(names.GROUP_MEMBERS, {"group": info.group}, info.members))
        samples += [
            Sample(
                names.GROUP_PARTITION_MEMBER,
                {"group": info.group, "topic": t, "partition": str(p), "client_id": client, "host": host},
                1,
            )
            for t, p, client, host in sorted(info.assigned)
        ]
    return samples


class OffsetsSource:
    """Admin API offsets of one cluster; ``collect()`` never raises for a fault of the cluster."""

    def __init__(self, cluster: Cluster, timeout_s: float = 10.0, admin: AdminClient | None = None):
        self.cluster = cluster
        self.name = SOURCE
        self.timeout_s = timeout_s
        self._admin = admin if admin is not None else admin_client(cluster)  # len(admin) 0 is falsy
        # log offsets via consumers' offsets_for_times: one result list per call, no future per partition;
        # one consumer per call in flight, as confluent-kafka runs the calls on one client one at a time
        self._settings = cluster_settings(cluster) | {"group.id": f"kobs-{cluster.name}-offsets"}
        self._consumers = [Consumer(self._settings) for _ in range(PARALLEL_CALLS)]
        self._stale: set[int] = set()  # consumers to replace after the scrape
        self._leaders: dict[str, tuple[int, ...]] = {}  # each topic's leaders by partition, last scrape
        self._groups = GroupReader(admin_settings(cluster))

    def collect(self) -> Scrape:
        ts, errors = now_ms(), []
        deadline = time.monotonic() + self.timeout_s
        try:
            listed = topics(self._admin, self.timeout_s)
        except Exception as exc:
            return Scrape(Batch(self.cluster.name, SOURCE, ts), [listing_error(exc)])
        # A partition without a leader (its only replicas down) is not asked: librdkafka waits for its leader
        # until the call's timeout, and the whole call fails, with the offsets of every partition in it.
        leaders = {(t, p): m.leader for t in sorted(listed) for p, m in sorted(listed[t].partitions.items())}
        tps = {tp: leader for tp, leader in leaders.items() if leader >= 0}
        if offline := len(leaders) - len(tps):
            errors.append(f"list_offsets: {offline} partitions have no leader (offline), not asked")
        if self._leaders_moved(listed):  # the consumers' metadata names old leaders: they would ask those
            self._renew(range(PARALLEL_CALLS))
        with ThreadPoolExecutor(PARALLEL_CALLS + 1, thread_name_prefix="kobs-offsets") as pool:
            groups = pool.submit(self._groups.read, deadline - time.monotonic())  # meanwhile, on a thread
            samples = self._log_offset_samples(pool, tps, deadline, errors)
            read = groups.result()
        samples += group_samples(read.committed, read.groups)
        self._renew(self._stale)
        self._stale.clear()
        return Scrape(Batch(self.cluster.name, SOURCE, ts, tuple(samples)), errors + read.errors)

    def _leaders_moved(self, listed: Mapping) -> bool:
        """Whether a partition listed in the last scrape has another leader now (an election, a broker
        fenced or back); remembers this scrape's leaders."""
        leaders = {t: tuple(m.leader for _, m in sorted(listed[t].partitions.items())) for t in listed}
        last, self._leaders = self._leaders, leaders
        return any(
            old[: len(leaders[t])] != leaders[t][: len(old)] for t, old in last.items() if t in leaders
        )

    def _renew(self, slots: Iterable[int]) -> None:
        """Replace these slots' consumers with fresh ones, which read the cluster's metadata afresh."""
        for i in sorted(slots):
            self._consumers[i].close()
            self._consumers[i] = Consumer(self._settings)

    def stop(self) -> None:
        """End the groups' child process (it also ends with this process)."""
        self._groups.stop()

    def _log_offset_samples(
        self, pool: ThreadPoolExecutor, tps: Mapping[tuple[str, int], int], deadline: float, errors: list[str]
    ) -> list[Sample]:
        """Earliest and latest offset of each partition (``tps``: partition -> leader); the blocking calls
        run on ``pool``, and the samples of each call are made while the later ones are out. Each call asks
        one leader's partitions, the leaders in turn, and gives up after half the scrape's time: a leader
        that does not answer (hung, or cut off from clients but not from the controller, which then keeps
        it leader) costs its own partitions' offsets, not every call's, and is not asked again that scrape."""
        silent: set[int] = set()  # leaders a call timed out on

        def fetch(
            i: int, spec: int, leader: int, chunk: list[tuple[str, int]]
        ) -> list[TopicPartition] | None:
            """One call, and once more for the partitions that failed with :data:`RETRIED` errors (right
            after a topic is created, or a leader moved or went away), time allowing; of a fresh consumer
            when the metadata was :data:`STALE` (its cache would answer again, not a broker), so a third
            time when the second answer was the stale one. None when ``leader`` is silent."""
            if leader in silent:
                return None
            until = min(deadline, time.monotonic() + self.timeout_s / 2)
            slot = i % PARALLEL_CALLS
            consumer, fresh = self._consumers[slot], False
            pending = [TopicPartition(t, p, spec) for t, p in chunk]
            answers: dict[tuple[str, int], TopicPartition] = {}
            with ExitStack() as owned:  # a fresh consumer, closed after the call
                for attempt in range(3):
                    if attempt:
                        if not pending or until - time.monotonic() < RETRY_PAUSE_S:
                            break
                        time.sleep(RETRY_PAUSE_S)
                    try:
                        found = consumer.offsets_for_times(
                            pending, timeout=max(0.0, until - time.monotonic())
                        )
                    except KafkaException as exc:  # the whole call: every partition is still pending
                        failure, codes = exc, {exc.args[0].code()}
                        if KafkaError._TIMED_OUT in codes:  # a silent leader, or the one its metadata names
                            silent.add(leader)
                            self._stale.add(slot)
                    else:
                        answers.update({(tp.topic, tp.partition): tp for tp in found})
                        failed = [tp for tp in found if tp.error is not None and tp.error.code() in RETRIED]
                        pending = [TopicPartition(tp.topic, tp.partition, spec) for tp in failed]
                        failure, codes = None, {tp.error.code() for tp in failed}
                    stale = bool(codes & STALE)
                    if stale:
                        self._stale.add(slot)
                    last = attempt == 2 or (attempt == 1 and (fresh or not stale))
                    if failure and (last or codes - RETRIED or until - time.monotonic() < 1):
                        raise failure
                    if last:
                        break
                    if stale and not fresh:
                        consumer = owned.enter_context(closing(Consumer(self._settings)))
                        fresh = True
            return list(answers.values())

        labels = {(t, p): {"topic": t, "partition": str(p)} for t, p in tps}  # one per partition: memory
        specs = ((names.PARTITION_START_OFFSET, OFFSET_BEGINNING), (names.PARTITION_END_OFFSET, OFFSET_END))
        chunks = leader_chunks(tps)
        work = [(name, spec, leader, c) for name, spec in specs for leader, c in chunks]
        calls = [
            (name, leader, len(c), pool.submit(fetch, i, spec, leader, c))
            for i, (name, spec, leader, c) in enumerate(work)
        ]
        samples: list[Sample] = []
        failures: Counter[str] = Counter()
        for name, leader, size, call in calls:
            try:
                result = call.result()
            except KafkaException as exc:
                forget_frames(exc)  # its traceback holds ``fetch``'s frame, and that this source
                failures[str(exc.args[0])] += size
                continue
            if result is None:
                failures[f"no call: broker {leader}, their leader, did not answer an earlier one"] += size
                continue
            for tp in result:
                if tp.error is None:
                    samples.append(Sample(name, labels[tp.topic, tp.partition], tp.offset))
                else:
                    failures[str(tp.error)] += 1
        errors.extend(f"list_offsets: {n} partitions failed with {reason}" for reason, n in failures.items())
        return samples

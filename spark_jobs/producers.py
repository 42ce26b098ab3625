"""Blocked producers: client-side buffer metrics and broker-side evidence of traffic that cannot be written.

Pure (no Spark). Kafka's producer appends records to a ``buffer.memory`` accumulator; batches for a
partition without a leader (or, with ``acks=all``, under ``min.insync.replicas``) stay there, and when a
new batch cannot be allocated ``send()`` blocks the caller (the replication-factor-1
incident). Two kinds of evidence:

- **Client side** (``producer/<client-id>`` sources): buffer available/total bytes, waiting threads,
  bufferpool wait ratio, send and error rates. *Blocked* when threads wait for buffer space
  (``waiting-threads > 0``) or the buffer is exhausted (less than one default ``batch.size``, 16 KiB,
  available: the buffer pool cannot hand out a new batch). Not the wait ratio: Kafka's ``BufferPool``
  records a wait's time when the wait ends, so the ratio stays near 0 while ``send()`` blocks and rises
  after the recovery (a real client: 0.005 during a 43 s block, 0.8 afterwards with waiting-threads 0 and
  97 % of its buffer free); it is kept as history. The *fill rate* is the growth of used bytes over the
  last minute of scrapes.
- **Broker side**, per topic: partitions without a leader (``kafka_partition_leader`` -1 or an
  ``isr_change`` event with leader -1) and partitions under min ISR (ISR count below
  ``kafka_topic_min_insync_replicas``, 1 when not reported) while the brokers refuse produce requests for
  the topic (``kafka_broker_failed_produce_requests_total`` rising: ``acks=all`` traffic is aimed at them).
  The bytes per second aimed at these *lost* partitions are the topic's bytes-in rate from before the loss
  times lost/partitions (keyed records spread evenly; keyless records since Kafka 2.4 avoid partitions
  without a leader, so this is the worst case). Partitions are those the metadata samples and events name:
  the metadata and ZooKeeper sources report every partition at each scrape.

Time to block = remaining buffer / fill rate: from an empty buffer that is ``buffer.memory /
bytes-per-second to the lost partitions``. A producer's broker-side fill rate is its share of the lost bytes
of the topics configured for it (``clusters[].producers[].topics``), split evenly between the producers
configured for the same topic; the client-side fill rate needs two scrapes but no configuration. The
metric is the smaller estimate, 0 when blocked, +Inf when the buffer is not filling.

Both gauges carry ``cause_broker``: the broker whose absence explains most of the lost partitions of the
producer's configured topics, by the ISR events (:meth:`~spark_jobs.isr_ledger.IsrLedger.culprit`), so the
page of a producer blocked by a broken broker travels with that broker's; "" when none is lost or the
events do not say.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter

import pyarrow as pa

from common import names
from spark_jobs.analysis import Derived, Evaluation, Observation, Samples, gathered
from spark_jobs.isr_ledger import IsrLedger
from spark_jobs.rates import CounterRates

log = logging.getLogger(__name__)
BATCH_SIZE = 16_384  # producer batch.size default: the buffer pool's unit of allocation
BUFFER_MEMORY = 32 * 1024 * 1024  # producer buffer.memory default, for producers not (yet) scraped
CLIENT_INPUTS = {
    names.PRODUCER_BUFFER_AVAILABLE_BYTES: "available",
    names.PRODUCER_BUFFER_TOTAL_BYTES: "total",
    names.PRODUCER_WAITING_THREADS: "waiting_threads",
    names.PRODUCER_BUFFERPOOL_WAIT_RATIO: "wait_ratio",
    names.PRODUCER_RECORD_SEND_RATE: "send_rate",
    names.PRODUCER_RECORD_ERROR_RATE: "error_rate",
}
BROKER_COUNTERS = {names.BYTES_IN, names.FAILED_PRODUCE_REQUESTS}
PARTITION_FIELDS = {names.PARTITION_LEADER: "leader", names.PARTITION_ISR: "isr"}  # of PartitionState

HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("client_id", pa.string()),  # null on topic rows
        ("topic", pa.string()),  # null on client rows
        ("at_s", pa.float64()),
        # client rows
        ("buffer_total_bytes", pa.float64()),
        ("buffer_available_bytes", pa.float64()),
        ("buffer_utilization", pa.float64()),
        ("waiting_threads", pa.float64()),
        ("wait_ratio", pa.float64()),
        ("send_rate", pa.float64()),
        ("error_rate", pa.float64()),
        ("client_fill_bytes_per_s", pa.float64()),
        ("broker_fill_bytes_per_s", pa.float64()),
        ("blocked", pa.bool_()),
        ("time_to_block_s", pa.float64()),
        # topic rows
        ("partitions", pa.int64()),
        ("offline_partitions", pa.int64()),
        ("under_min_isr_partitions", pa.int64()),
        ("bytes_in_per_s", pa.float64()),
        ("failed_produce_per_s", pa.float64()),
        ("lost_bytes_per_s", pa.float64()),
        ("lost_since_s", pa.float64()),
    ]
)


def time_to_block(remaining_bytes: float, fill_bytes_per_s: float | None) -> float:
    """Seconds until the buffer is full: 0 when it is, +Inf when not filling (or the rate is unknown)."""
    if remaining_bytes <= 0:
        return 0.0
    if fill_bytes_per_s is None or fill_bytes_per_s <= 0:
        return math.inf
    return remaining_bytes / fill_bytes_per_s


def _isr_change(o: Observation) -> tuple[str, str, int, int] | None:
    """(topic, partition, leader, ISR size) of an ``isr_change`` event; None when fields are missing."""
    try:
        event = o.event
        return str(event["topic"]), str(int(event["partition"])), int(event["leader"]), len(event["new_isr"])
    except (KeyError, TypeError, ValueError):
        return None


def _cause(lost: Counter) -> str:
    """The broker behind most of a producer's lost partitions (the smallest id of a tie), "" for none."""
    known = [(-count, int(broker), broker) for broker, count in lost.items() if broker]
    return min(known)[2] if known else ""


def is_blocked(waiting_threads: float, available_bytes: float) -> bool:
    return waiting_threads > 0 or available_bytes < BATCH_SIZE


@dataclass
class PartitionState:
    seen_s: float  # newest evidence about the partition
    changed_s: float  # when its leader or ISR size last changed
    leader: int | None = None  # None: not reported yet (an ISR size came first)
    isr: int | None = None


@dataclass
class TopicLoss:
    """Per topic: its bytes-in rate while nothing was lost, and since when partitions are lost."""

    healthy_bytes_in_per_s: float | None = None
    lost_since_s: float | None = None


@dataclass(frozen=True)
class TopicRisk:
    cluster: str
    topic: str
    partitions: int
    offline_partitions: int
    under_min_isr_partitions: int
    bytes_in_per_s: float | None
    failed_produce_per_s: float | None
    lost_bytes_per_s: float | None
    lost_since_s: float | None
    causes: Counter = field(default_factory=Counter)  # cause broker ("" unknown) -> lost partitions


@dataclass
class Client:
    t_s: float = -math.inf
    values: dict[str, float] = field(default_factory=dict)  # of the latest scrape, by CLIENT_INPUTS role
    used: deque = field(default_factory=deque)  # (t, used bytes) over the fill window


class ProducerAnalysis:
    """Blocked producers, their buffer utilisation and time to block."""

    table = "producers"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset(
        {*CLIENT_INPUTS, *BROKER_COUNTERS, *PARTITION_FIELDS, names.TOPIC_MIN_ISR, "isr_change"}
    )
    settings = ("topics", "client_stale_s")
    chunked = frozenset(PARTITION_FIELDS)  # a sample each per partition and scrape

    def __init__(
        self,
        topics: Mapping[tuple[str, str], Iterable[str]] | None = None,
        fill_window_s: float = 60.0,
        stale_s: float = 300.0,
        client_stale_s: float = 45.0,
    ):
        """``client_stale_s``: a producer not scraped for this long is forgotten, its gauges with it, so a
        page on a state nobody can see any more resolves (the collector's ticket says the scrape fails)."""
        self.topics = {key: tuple(value) for key, value in (topics or {}).items()}  # (cluster, client) ->
        self.fill_window_s, self.stale_s, self.client_stale_s = fill_window_s, stale_s, client_stale_s
        self.rates = CounterRates(window_s=60.0, stale_s=stale_s)
        self.clients: dict[tuple[str, str], Client] = {}
        self.partitions: dict[tuple[str, str, str], PartitionState] = {}
        self.min_isr: dict[tuple[str, str], float] = {}
        self.losses: dict[tuple[str, str], TopicLoss] = {}
        self.ledger = IsrLedger()  # which broker explains a lost partition
        self.now_s = -math.inf
        self.skipped = 0

    def observe(self, observations: Iterable[Observation | Samples]) -> None:
        """In time order (a batch holds several scrapes). Before partitions change state each topic's
        bytes-in rate is remembered while nothing is lost: a loss is measured against the rate before it."""
        skipped = 0
        for t_s, group in groupby(sorted(observations, key=attrgetter("t_s")), key=attrgetter("t_s")):
            group = gathered(group, self.chunked)
            if any(self._changes(o) for o in group if type(o) is Samples or o.event is not None):
                self._update_losses()
            for o in group:
                skipped += self._take_partitions(o) if type(o) is Samples else not self._apply(o)
            self.now_s = max(self.now_s, t_s)
        if skipped:
            self.skipped += skipped
            log.warning(
                "producers: skipped %d observations without the labels they need or not finite", skipped
            )
        self._forget_stale()
        self._update_losses()

    def _apply(self, o: Observation) -> bool:
        """Take one observation in; False when it is unusable (missing labels or fields, not finite)."""
        if o.event is not None:
            change = _isr_change(o)
            if change is None:
                return False
            topic, partition, leader, isr = change
            self._partition(o.cluster, o.t_s, topic, partition, names.PARTITION_LEADER, leader)
            self._partition(o.cluster, o.t_s, topic, partition, names.PARTITION_ISR, isr)
            self.ledger.apply(o.cluster, o.t_s, o.event)
        elif o.value is None or not math.isfinite(o.value):
            return False
        elif o.name in CLIENT_INPUTS:
            return self._client(o)
        elif o.name == names.TOPIC_MIN_ISR and "topic" in o.labels:
            self.min_isr[o.cluster, o.labels["topic"]] = o.value
        elif o.name in BROKER_COUNTERS and "broker" in o.labels and "topic" in o.labels:
            self.rates.add((o.cluster, o.labels["broker"], o.labels["topic"], o.name), o.t_s, o.value)
        else:
            return o.name in BROKER_COUNTERS and "broker" in o.labels  # a broker-wide counter: not ours
        return True

    def _changes(self, o: Observation | Samples) -> bool:
        """Whether ``o`` (an event, or leader or ISR samples) changes a known partition's leader or ISR
        size."""
        if type(o) is Samples:
            field_, partitions = PARTITION_FIELDS[o.name], self.partitions
            for topic, partition, value in zip(
                o.column("topic"), o.column("partition"), o.values, strict=True
            ):
                state = partitions.get((o.cluster, topic, partition))
                if state is not None and value is not None and value != getattr(state, field_):
                    return True
            return False
        change = _isr_change(o)
        if change is None:
            return False
        topic, partition, leader, isr = change
        state = self.partitions.get((o.cluster, topic, partition))
        return state is not None and (leader != state.leader or isr != state.isr)

    def _take_partitions(self, run: Samples) -> int:
        """Take a scrape's leader or ISR samples; how many were unusable (no topic or partition, not
        finite)."""
        complete = run.complete("topic", "partition")
        for topic, partition, value in complete:
            self._partition(run.cluster, run.t_s, topic, partition, run.name, value)
        return len(run.values) - len(complete)

    def _partition(
        self, cluster: str, t_s: float, topic: str, partition: str, name: str, value: float
    ) -> None:
        key = (cluster, topic, partition)
        state = self.partitions.get(key)
        if state is None:
            state = self.partitions[key] = PartitionState(t_s, t_s)
        elif t_s > state.seen_s:
            state.seen_s = t_s
        elif t_s < state.seen_s:
            return  # older than what we know
        field_ = PARTITION_FIELDS[name]
        if getattr(state, field_) != int(value):
            setattr(state, field_, int(value))
            state.changed_s = t_s

    def _client(self, o: Observation) -> bool:
        client_id = o.labels.get("client_id")
        if client_id is None:
            return False
        client = self.clients.setdefault((o.cluster, client_id), Client())
        if o.t_s < client.t_s:
            return True  # an older scrape than the one we hold
        if o.t_s > client.t_s:
            client.t_s, client.values = o.t_s, {}
        client.values[CLIENT_INPUTS[o.name]] = o.value
        values = client.values
        if "available" in values and "total" in values:
            used = client.used
            if used and used[-1][0] == o.t_s:
                used.pop()
            used.append((o.t_s, values["total"] - values["available"]))
            while len(used) > 2 and used[1][0] <= o.t_s - self.fill_window_s:
                used.popleft()
        return True

    def _forget_stale(self) -> None:
        since = self.now_s - self.stale_s
        self.rates.forget_stale(self.now_s)
        for key in [k for k, c in self.clients.items() if c.t_s < self.now_s - self.client_stale_s]:
            del self.clients[key]
        for key in [k for k, p in self.partitions.items() if p.seen_s < since and p.leader != -1]:
            del self.partitions[key]  # an offline partition stays offline until something says otherwise

    def _topics(self) -> Iterable[tuple[tuple[str, str], list[PartitionState], list, list, dict]]:
        """Per topic: its partition states, the offline ones and the under-min-ISR ones (each as
        (partition, state)), and its rates."""
        by_topic: dict[tuple[str, str], list[tuple[str, PartitionState]]] = defaultdict(list)
        for (cluster, topic, partition), state in self.partitions.items():
            by_topic[cluster, topic].append((partition, state))
        rates: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for (cluster, _, topic, counter), rate in self.rates.rates():
            rates[cluster, topic][counter] += rate
        for key, parts in sorted(by_topic.items()):
            min_isr = self.min_isr.get(key, 1)
            offline = [(p, s) for p, s in parts if s.leader == -1]
            under = [(p, s) for p, s in parts if s.leader != -1 and s.isr is not None and s.isr < min_isr]
            yield key, [s for _, s in parts], offline, under, rates.get(key, {})

    @staticmethod
    def _lost(offline: list, under: list, rates: Mapping[str, float]) -> list:
        """Partitions that take no writes: offline, and under min ISR while produce requests fail."""
        return offline + (under if rates.get(names.FAILED_PRODUCE_REQUESTS, 0) > 0 else [])

    def _update_losses(self) -> None:
        losses = {}
        for key, _, offline, under, rates in self._topics():
            loss = losses[key] = self.losses.get(key, TopicLoss())
            lost = self._lost(offline, under, rates)
            if not lost:
                loss.lost_since_s = None
                loss.healthy_bytes_in_per_s = rates.get(names.BYTES_IN, loss.healthy_bytes_in_per_s)
            elif loss.lost_since_s is None:
                loss.lost_since_s = min(s.changed_s for _, s in lost)
        self.losses = losses

    def _risks(self) -> list[TopicRisk]:
        risks = []
        for (cluster, topic), states, offline, under, rates in self._topics():
            loss = self.losses.get((cluster, topic), TopicLoss())
            lost = self._lost(offline, under, rates)
            lost_bytes = None
            if lost and loss.healthy_bytes_in_per_s is not None:
                lost_bytes = loss.healthy_bytes_in_per_s * len(lost) / len(states)
            culprits = (self.ledger.culprit(cluster, topic, p, s.leader == -1) for p, s in lost)
            causes = Counter("" if culprit is None else str(culprit) for culprit in culprits)
            risks.append(
                TopicRisk(
                    cluster,
                    topic,
                    len(states),
                    len(offline),
                    len(under),
                    rates.get(names.BYTES_IN),
                    rates.get(names.FAILED_PRODUCE_REQUESTS),
                    lost_bytes,
                    loss.lost_since_s if lost else None,
                    causes,
                )
            )
        return risks

    def evaluate(self) -> Evaluation:
        risks = self._risks()
        writers: dict[tuple[str, str], int] = defaultdict(int)  # (cluster, topic) -> producers configured
        for (cluster, _), topics in self.topics.items():
            for topic in topics:
                writers[cluster, topic] += 1
        fills: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(
            list
        )  # client -> (bytes/s, since)
        causes: dict[tuple[str, str], Counter] = defaultdict(Counter)  # client -> lost partitions by cause
        for risk in risks:
            for (cluster, client_id), topics in self.topics.items():
                if cluster == risk.cluster and risk.topic in topics:
                    causes[cluster, client_id] += risk.causes
                    if risk.lost_bytes_per_s is not None:
                        share = risk.lost_bytes_per_s / writers[cluster, risk.topic]
                        fills[cluster, client_id].append((share, risk.lost_since_s))
        history = [{k: v for k, v in vars(r).items() if k != "causes"} | {"at_s": self.now_s} for r in risks]
        metrics = []
        for cluster, client_id in sorted(self.clients.keys() | self.topics.keys()):
            row = self._client_row(cluster, client_id, fills.get((cluster, client_id), []))
            history.append(row)
            labels = (cluster, client_id, _cause(causes[cluster, client_id]))
            metrics.append(Derived("kobs_producer_time_to_block_seconds", labels, row["time_to_block_s"]))
            if row["blocked"] is not None:
                metrics.append(Derived("kobs_producer_blocked", labels, float(row["blocked"])))
            if row["buffer_utilization"] is not None:
                utilization = row["buffer_utilization"]
                metrics.append(
                    Derived("kobs_producer_buffer_utilization_ratio", (cluster, client_id), utilization)
                )
        return Evaluation(history, metrics)

    def _client_row(self, cluster: str, client_id: str, fills: list[tuple[float, float]]) -> dict:
        """One producer: client-side state when scraped, broker-side fill of its lost partitions if any."""
        client = self.clients.get((cluster, client_id), Client())
        values = client.values
        row = {"cluster": cluster, "client_id": client_id, "at_s": self.now_s}
        row.update({f"buffer_{k}_bytes" if k in ("total", "available") else k: v for k, v in values.items()})
        broker_fill = math.fsum(rate for rate, _ in fills) if fills else None
        blocked = utilization = client_fill = None
        available = BUFFER_MEMORY  # not scraped: Kafka's default buffer.memory, empty before the loss
        if "available" in values and "total" in values:
            available, total = values["available"], values["total"]
            utilization = 1 - available / total if total > 0 else None
            blocked = is_blocked(values.get("waiting_threads", 0), available)
            if len(client.used) >= 2:
                (t0, used0), (t1, used1) = client.used[0], client.used[-1]
                client_fill = (used1 - used0) / (t1 - t0)
        # what the lost partitions took since the loss or the client's last scrape, whichever is later
        remaining = available - math.fsum(
            rate * (self.now_s - max(since, client.t_s)) for rate, since in fills
        )
        estimate = min(time_to_block(available, client_fill), time_to_block(remaining, broker_fill))
        row.update(
            buffer_utilization=utilization,
            client_fill_bytes_per_s=client_fill,
            broker_fill_bytes_per_s=broker_fill,
            blocked=blocked,
            time_to_block_s=0.0 if blocked else estimate,
        )
        return row

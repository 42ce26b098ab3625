"""A producer client: ``send()`` into the ``buffer.memory`` accumulator, a sender draining it to leaders.

Per step: acknowledged ``acks=all`` batches free their memory (the HW passed them), batches older than
``delivery.timeout.ms`` expire as record errors, queued batches go to partitions that accept them, then the
application threads send this step's records. A record for a partition that accepts writes passes through
(``acks`` 0/1) or waits in flight for the HW (``acks=all``); one for a partition without a leader (or under
min ISR with ``acks=all``) stays in the buffer. When the next record does not fit, ``send()`` blocks; after
``max.block.ms`` it fails with a timeout and the thread moves on to its next record.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simulator.window import Window

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.model import Topic


@dataclass(frozen=True)
class ProducerSpec:
    client_id: str
    topic: str
    messages_per_s: float
    acks: str = "1"  # "0", "1" or "all"
    buffer_memory: int = 32 * 1024 * 1024
    max_block_ms: float = 60_000
    delivery_timeout_ms: float = 120_000
    threads: int = 1  # application threads calling send()
    partitioner: str = "keyed"  # keyed: hash(key) over all partitions; sticky: keyless, available ones only
    burst_every_s: float | None = None  # traffic bursts: every so often ...
    burst_length_s: float = 1.0  # ... for this long ...
    burst_messages_per_s: float = 0.0  # ... at this rate instead
    burst_start_s: float = 0.0

    def __post_init__(self) -> None:
        if self.acks not in ("0", "1", "all"):
            raise ValueError(f"acks must be 0, 1 or all, not {self.acks!r}")
        if self.partitioner not in ("keyed", "sticky"):
            raise ValueError(f"partitioner must be keyed or sticky, not {self.partitioner!r}")

    def in_burst(self, t: float) -> bool:
        if self.burst_every_s is None or t < self.burst_start_s:
            return False
        return (t - self.burst_start_s) % self.burst_every_s < self.burst_length_s


class Producer:
    """The accumulator of one client; per-partition amounts are arrays over the topic's partitions."""

    def __init__(self, spec: ProducerSpec):
        self.spec = spec
        self.messages_per_s = spec.messages_per_s
        self.queued: dict[int, deque[list[float]]] = {}  # partition -> [[created, messages], ...], non-empty
        self.in_flight: deque[tuple[np.ndarray, np.ndarray]] = deque()  # per write: (end offsets, messages)
        self.used_bytes = 0
        self.blocked_since: float | None = None
        self.sent_total = 0
        self.error_total = 0
        self.wait_s_total = 0.0
        self.send_rate, self.error_rate, self.wait_ratio = Window(), Window(), Window()
        self._carry = 0.0
        self._next = 0  # round-robin position of the keyed/sticky spread

    @property
    def blocked(self) -> bool:
        return self.blocked_since is not None

    @property
    def available_bytes(self) -> int:
        return self.spec.buffer_memory - self.used_bytes

    @property
    def waiting_threads(self) -> int:
        return self.spec.threads if self.blocked else 0

    def tick(self, cluster: Cluster, dt: float) -> None:
        topic = cluster.topics[self.spec.topic]
        size = topic.spec.message_bytes
        now = cluster.now
        accepts = cluster.accepting(topic, self.spec.acks == "all")
        sent = self._complete(cluster.state.hw[topic.rows], size)
        errors = self._expire(size, now)
        sent += self._drain(cluster, topic, accepts, size)
        ended = 0.0  # waits that ended this tick: Kafka's BufferPool records a wait when await returns
        if self.blocked and self.available_bytes >= size:
            ended += now - self.blocked_since
            self.blocked_since = None
        if not self.blocked:
            rate = self.spec.burst_messages_per_s if self.spec.in_burst(now) else self.messages_per_s
            demand = self._carry + rate * dt
            wanted = int(demand)
            self._carry = demand - wanted
            admitted, passed = self._send(cluster, topic, accepts, wanted, size)
            sent += passed
            if admitted < wanted:
                self.blocked_since = now - dt * (1 - admitted / wanted)
        if self.blocked:
            max_block = self.spec.max_block_ms / 1000
            while now - self.blocked_since >= max_block:  # send() gives up: a TimeoutException per thread
                errors += self.spec.threads
                ended += max_block
                self.blocked_since += max_block
        self.sent_total += sent
        self.error_total += errors
        self.wait_s_total += ended
        self.send_rate.add(now, dt, sent)
        self.error_rate.add(now, dt, errors)
        self.wait_ratio.add(now, dt, ended)

    def _complete(self, hw: np.ndarray, size: int) -> int:
        """acks=all: batches the HW has passed are acknowledged in order per partition, freeing memory."""
        done, waiting = 0, np.zeros(len(hw), bool)  # waiting: an earlier batch is not acknowledged yet
        for ends, messages in self.in_flight:
            pending = messages > 0
            acked = pending & (ends <= hw) & ~waiting
            waiting |= pending & ~acked
            done += int(messages[acked].sum())
            messages[acked] = 0
        while self.in_flight and not self.in_flight[0][1].any():
            self.in_flight.popleft()
        self.used_bytes -= done * size
        return done

    def _expire(self, size: int, now: float) -> int:
        expired = 0
        for index, batches in list(self.queued.items()):
            while batches and now - batches[0][0] >= self.spec.delivery_timeout_ms / 1000:
                expired += int(batches.popleft()[1])
            if not batches:
                del self.queued[index]
        self.used_bytes -= expired * size
        return expired

    def _drain(self, cluster: Cluster, topic: Topic, accepts: np.ndarray, size: int) -> int:
        """Queued batches go to partitions that accept writes again; a leader under min ISR rejects them."""
        messages = np.zeros(len(accepts), np.int64)
        for index in list(self.queued):
            if accepts[index]:
                messages[index] = sum(b[1] for b in self.queued.pop(index))
            elif (leader := topic.partitions[index].leader) >= 0 and cluster.brokers[leader].alive:
                cluster.meters.add("failed_produce", leader, topic.number, 1)
        return self._write(cluster, topic, messages, size) if messages.any() else 0

    def _write(self, cluster: Cluster, topic: Topic, messages: np.ndarray, size: int) -> int:
        """Sends to the leaders; returns the messages already complete (acks 0/1) and frees their memory."""
        ends = cluster.append_rows(topic, messages)
        if self.spec.acks == "all":
            self.in_flight.append((ends, messages))
            return 0
        total = int(messages.sum())
        self.used_bytes -= total * size
        return total

    def _spread(self, cluster: Cluster, topic: Topic, messages: int) -> np.ndarray:
        """Messages per partition: keyed records cover every partition, keyless ones the available ones."""
        counts = np.zeros(len(topic.partitions), np.int64)
        targets = np.arange(len(counts))
        if self.spec.partitioner == "sticky" and (live := cluster.live_leaders(topic.rows)).any():
            targets = np.flatnonzero(live)
        base, extra = divmod(messages, len(targets))
        start = self._next % len(targets)
        self._next = start + extra
        counts[targets] = base + ((np.arange(len(targets)) - start) % len(targets) < extra)
        return counts

    def _send(
        self, cluster: Cluster, topic: Topic, accepts: np.ndarray, wanted: int, size: int
    ) -> tuple[int, int]:
        """Admits records in order until the next one does not fit; returns (admitted, completed at once)."""
        counts = self._spread(cluster, topic, wanted)
        direct = accepts.copy()
        direct[list(self.queued)] = False  # behind queued batches
        holds = ~direct | (self.spec.acks == "all")  # keeps buffer memory after this step
        cost = int(counts[holds].sum()) * size
        take = counts
        if cost > self.available_bytes:
            take = (counts * (self.available_bytes / cost)).astype(np.int64)
        # records arrive interleaved: top up partition by partition while one more fits
        free = self.available_bytes - int(take[holds].sum()) * size
        short = np.flatnonzero(holds & (take < counts))
        take[short[: max(free // size, 0)]] += 1
        admitted = int(take.sum())
        self.used_bytes += admitted * size
        completed = self._write(cluster, topic, np.where(direct, take, 0), size) if take[direct].any() else 0
        queue = ~direct & (take > 0)
        for index in np.flatnonzero(queue) if queue.any() else ():
            self.queued.setdefault(int(index), deque()).append([cluster.now, int(take[index])])
        return admitted, completed

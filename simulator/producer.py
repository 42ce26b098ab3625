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

from simulator.window import Window

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.model import Partition


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
    def __init__(self, spec: ProducerSpec):
        self.spec = spec
        self.messages_per_s = spec.messages_per_s
        self.queued: dict[int, deque[list[float]]] = {}  # partition -> [[created, messages], ...]
        self.in_flight: dict[int, deque[tuple[int, int]]] = {}  # partition -> (end offset, messages)
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
        sent = errors = 0
        for p in topic.partitions:
            sent += self._complete(p, size)
            errors += self._expire(p, size, now)
            sent += self._drain(cluster, p, size)
        waited = 0.0
        if self.blocked and self.available_bytes >= size:
            self.blocked_since = None
        if self.blocked:
            waited = dt
        else:
            rate = self.spec.burst_messages_per_s if self.spec.in_burst(now) else self.messages_per_s
            demand = self._carry + rate * dt
            wanted = int(demand)
            self._carry = demand - wanted
            admitted, passed = self._send(cluster, topic.partitions, wanted, size)
            sent += passed
            if admitted < wanted:
                waited = dt * (1 - admitted / wanted)
                self.blocked_since = now - waited
        if self.blocked:
            max_block = self.spec.max_block_ms / 1000
            while now - self.blocked_since >= max_block:
                errors += self.spec.threads
                self.blocked_since += max_block
        self.sent_total += sent
        self.error_total += errors
        self.wait_s_total += waited
        self.send_rate.add(now, dt, sent)
        self.error_rate.add(now, dt, errors)
        self.wait_ratio.add(now, dt, waited)

    def _accepts(self, cluster: Cluster, p: Partition) -> bool:
        if self.spec.acks == "all":
            return cluster.accepts_acks_all(p)
        return cluster.has_live_leader(p)

    def _complete(self, p: Partition, size: int) -> int:
        flights = self.in_flight.get(p.index)
        done = 0
        while flights and flights[0][0] <= p.hw:
            done += flights.popleft()[1]
        self.used_bytes -= done * size
        return done

    def _expire(self, p: Partition, size: int, now: float) -> int:
        batches = self.queued.get(p.index)
        expired = 0
        while batches and now - batches[0][0] >= self.spec.delivery_timeout_ms / 1000:
            expired += int(batches.popleft()[1])
        self.used_bytes -= expired * size
        return expired

    def _drain(self, cluster: Cluster, p: Partition, size: int) -> int:
        batches = self.queued.get(p.index)
        if not batches:
            return 0
        if not self._accepts(cluster, p):
            if cluster.has_live_leader(p):  # under min ISR: the leader rejects the produce request
                c = cluster.counters[p.leader]
                c.add(c.failed_produce, p.topic, 1)
            return 0
        messages = int(sum(b[1] for b in batches))
        batches.clear()
        return self._write(cluster, p, messages, size)

    def _write(self, cluster: Cluster, p: Partition, messages: int, size: int) -> int:
        """Sends to the leader; returns the messages already complete (acks 0/1) and frees their memory."""
        end = cluster.append(p, messages)
        if self.spec.acks == "all":
            self.in_flight.setdefault(p.index, deque()).append((end, messages))
            return 0
        self.used_bytes -= messages * size
        return messages

    def _spread(
        self, cluster: Cluster, partitions: list[Partition], messages: int
    ) -> list[tuple[Partition, int]]:
        """Messages per partition: keyed records cover every partition, keyless ones the available ones."""
        targets = partitions
        if self.spec.partitioner == "sticky":
            targets = [p for p in partitions if cluster.has_live_leader(p)] or partitions
        base, extra = divmod(messages, len(targets))
        start = self._next % len(targets)
        self._next = start + extra
        counts = []
        for i, p in enumerate(targets):
            n = base + (1 if (i - start) % len(targets) < extra else 0)
            if n:
                counts.append((p, n))
        return counts

    def _send(self, cluster: Cluster, partitions: list[Partition], wanted: int, size: int) -> tuple[int, int]:
        """Admits records in order until the next one does not fit; returns (admitted, completed at once)."""
        counts = self._spread(cluster, partitions, wanted)
        direct = {p.index: self._accepts(cluster, p) and not self.queued.get(p.index) for p, _ in counts}
        holds = {i: not (ok and self.spec.acks != "all") for i, ok in direct.items()}  # keeps buffer memory
        cost = sum(n for p, n in counts if holds[p.index]) * size
        fraction = 1.0 if cost <= self.available_bytes else self.available_bytes / cost
        take = {p.index: int(n * fraction) for p, n in counts}
        free = self.available_bytes - sum(n for i, n in take.items() if holds[i]) * size
        for p, n in counts:  # records arrive interleaved: top up one by one while one more fits
            if holds[p.index] and take[p.index] < n and free >= size:
                take[p.index] += 1
                free -= size
        admitted = completed = 0
        for p, _ in counts:
            n = take[p.index]
            if not n:
                continue
            admitted += n
            self.used_bytes += n * size
            if direct[p.index]:
                completed += self._write(cluster, p, n, size)
            else:
                self.queued.setdefault(p.index, deque()).append([cluster.now, n])
        return admitted, completed

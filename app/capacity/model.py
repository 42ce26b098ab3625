"""Producer and consumer throughput as first-principles bounds on hardware and workload.

Every bound is a records-per-second ceiling set by one resource; the throughput is the smallest, and that
resource is the bottleneck. The formulas are explained in ``docs/capacity.md``; the CPU and wait constants
are fitted on published benchmarks (:mod:`app.capacity.calibration`). The default hardware and workload are
LinkedIn's 2014 benchmark, whose published figures the model reproduces within :data:`REFERENCE_FACTOR`.

Units: NIC speeds in decimal Gb/s (networking convention); disk bandwidth and every reported MB/s in
MiB (2**20 bytes), as LinkedIn reported 821,557 records/s of 100 bytes as "78.3 MB/s".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal

from common.errors import InputError

MIB = 2**20
GIB = 2**30
# TCP payload per Ethernet frame at MTU 1500: 1448 bytes (IP 20 + TCP 20 + timestamps 12) out of 1538 on the
# wire (frame 1500 + header 14 + FCS 4 + preamble 8 + inter-frame gap 12).
TCP_GOODPUT = 1448 / 1538
REPLICA_FETCH_MAX_BYTES = 2**20  # replica.fetch.max.bytes: what a follower fetches of a partition at most
REFERENCE_FACTOR = 1.5  # the model stays within this factor of every published reference figure
Acks = Literal["0", "1", "all"]
ACKS: tuple[Acks, ...] = ("0", "1", "all")


CapacityError = InputError  # the capacity model's input errors are the shared kind


LARGEST, SMALLEST = 1e12, 1e-9  # the magnitudes any input may have: beyond them the arithmetic overflows


def check_number(name: str, value: float, allow_zero: bool = False, label: str = "") -> None:
    """A model input must be a finite number > 0 (>= 0 with ``allow_zero``) between :data:`SMALLEST` and
    :data:`LARGEST` in magnitude: ``inf``, ``nan``, ``1e308`` or ``1e-320`` get a clear error, not a
    traceback or a silent ``nan`` in the answer. ``label`` prefixes the message (which producer, broker)."""
    if not math.isfinite(value):
        raise CapacityError(name, f"{label}must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        wanted = "must not be negative" if allow_zero else "must be greater than 0"
        raise CapacityError(name, f"{label}{wanted}, got {value!r}")
    if value and not SMALLEST <= value <= LARGEST:
        raise CapacityError(name, f"{label}must be between {SMALLEST:g} and {LARGEST:g}, got {value!r}")


def check_positive(obj: object, allow_zero: tuple[str, ...] = ()) -> None:
    """:func:`check_number` for every numeric field of a dataclass (``allow_zero``: fields that may be 0)."""
    for f in fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            check_number(f.name, value, f.name in allow_zero)


@dataclass(frozen=True)
class Hardware:
    """One broker's machine (all brokers alike); producers and consumers run on machines with the same NIC."""

    brokers: int = 3
    nic_gbps: float = 1.0
    disks: int = 6
    disk_mbps: float = 137.0  # sequential MiB/s of one disk; LinkedIn's six 7200 rpm SATA drives gave ~822
    disk_tb: float = 1.0  # capacity of one disk (decimal TB); LinkedIn did not publish theirs
    cores: int = 6
    clock_ghz: float = 2.5
    ram_gb: float = 32.0
    heap_gb: float = 6.0  # broker JVM heap; the rest of RAM is page cache
    # Every broker and client on this one machine (a laptop, the benchmark's local cluster): they share its
    # cores, its disk and its loopback instead of each having its own; ``heap_gb`` is then all brokers'.
    shared_machine: bool = False
    # On one machine the kernel's work per byte is its cores' too: moving a byte over loopback (both ends)
    # and writing one to disk, in cycles, as measured there; 0 when not known.
    loopback_cycles_per_byte: float = 0.0
    disk_cycles_per_byte: float = 0.0

    def __post_init__(self) -> None:
        check_positive(self, allow_zero=("loopback_cycles_per_byte", "disk_cycles_per_byte"))
        if self.heap_gb >= self.ram_gb:
            raise CapacityError(
                "heap_gb", f"heap ({self.heap_gb} GB) must be smaller than RAM ({self.ram_gb} GB)"
            )

    @property
    def goodput_bytes_per_s(self) -> float:
        """Application bytes per second one NIC carries in each direction."""
        return self.nic_gbps * 1e9 / 8 * TCP_GOODPUT

    @property
    def disk_bytes_per_s(self) -> float:
        return self.disks * self.disk_mbps * MIB

    @property
    def page_cache_bytes(self) -> float:
        return (self.ram_gb - self.heap_gb) * 1e9

    def kernel_cycles(self, stored_bytes: float, replicas: int) -> float:
        """On one machine, the kernel's cycles for a record's ``replicas``: each copy crosses loopback (from
        the producer to the leader, from the leader to a follower) and is written to disk."""
        return replicas * stored_bytes * (self.loopback_cycles_per_byte + self.disk_cycles_per_byte)


@dataclass(frozen=True)
class Codec:
    """A compression codec's CPU cycles per uncompressed byte, and how much it shrinks data."""

    ratio: float
    compress: float
    decompress: float


# Single-core speeds and ratios on the Silesia corpus from lz4's README (lzbench, Core i7-9700K at 4.9 GHz),
# as cycles per byte: 4.9e9 / (MB/s x 1e6). Kafka's defaults: lz4's fast compressor, gzip at zlib's level 6;
# zstd is level 1 there (Kafka's default, level 3, compresses slower).
_LZBENCH_HZ = 4.9e9
CODECS = {
    "none": Codec(1.0, 0.0, 0.0),
    "lz4": Codec(2.101, _LZBENCH_HZ / 780e6, _LZBENCH_HZ / 4970e6),
    "snappy": Codec(2.091, _LZBENCH_HZ / 565e6, _LZBENCH_HZ / 1950e6),
    "zstd": Codec(2.883, _LZBENCH_HZ / 515e6, _LZBENCH_HZ / 1380e6),
    "gzip": Codec(3.099, _LZBENCH_HZ / 36e6, _LZBENCH_HZ / 445e6),
}


@dataclass(frozen=True)
class Workload:
    """What clients do: message shape, durability settings, parallelism."""

    message_bytes: int = 100
    batch_bytes: int = 8196
    acks: Acks = "1"
    replication_factor: int = 1
    partitions: int = 6
    producers: int = 1  # producer threads, one per core of its own machine; 0: a consume-only workload
    consumers: int = 1  # consumer threads in one group, one per core of its own machine; 0: produce-only
    overhead_bytes: int = 22  # per-message framing on the wire and on disk
    backlog_gb: float = 0.0  # how far behind the consumers read (GB of payload); 0: they keep up
    compression: str = "none"  # compression.type: none, lz4, snappy, zstd, gzip
    compression_ratio: float = 0.0  # how much the codec shrinks these records; 0: its ratio on Silesia

    def __post_init__(self) -> None:
        if self.acks not in ACKS:
            raise CapacityError("acks", f"must be one of 0, 1, all, got {self.acks!r}")
        if self.compression not in CODECS:
            raise CapacityError(
                "compression", f"must be one of {', '.join(CODECS)}, got {self.compression!r}"
            )
        check_positive(self, allow_zero=("producers", "consumers", "backlog_gb", "compression_ratio"))
        if self.compression_ratio and self.compression == "none":
            raise CapacityError("compression_ratio", "applies to a codec: set compression too, or leave it 0")
        if self.producers == 0 and self.consumers == 0:
            raise CapacityError("producers", "0 producers and 0 consumers leave nothing to model")

    @property
    def wire_bytes(self) -> int:
        """A record's bytes before compression: payload and framing."""
        return self.message_bytes + self.overhead_bytes

    @property
    def codec(self) -> Codec:
        return CODECS[self.compression]

    @property
    def stored_bytes(self) -> float:
        """A record's bytes on the network and on disk, compressed when a codec is set."""
        return self.wire_bytes / (self.compression_ratio or self.codec.ratio)

    @property
    def batch_records(self) -> int:
        """Records per batch: the producer fills ``batch.size`` with compressed bytes."""
        return max(1, int(self.batch_bytes // self.stored_bytes))


@dataclass(frozen=True)
class CpuCosts:
    """CPU cycles per record, per byte and per record batch, and the waits of an acknowledgement.

    The defaults are calibrated on published benchmarks by :func:`app.capacity.calibration.fit` (each
    constant from the one published row where it decides the answer; ``docs/capacity.md`` says which and
    how far the rows held out are off); ``byte`` and ``rtt_ms`` are assumed, not fitted. Compression costs
    come from the codec (:data:`CODECS`)."""

    producer_record: float = 2614.0  # append under the accumulator's lock, CRC, size bookkeeping
    broker_record: float = 5613.0  # per replica: validate, assign the offset, append
    consumer_record: float = 792.0  # CRC check, decode, hand-over
    byte: float = 1.0  # per byte on each side: copies and CRC32C (~0.25 cycles/byte each)
    batch: float = 40000.0  # per record batch on each side: a request's framing, syscalls, wake-ups
    rtt_ms: float = 0.5  # produce request round trip on a LAN, leader append included
    follower_fetch_ms: float = 1.137  # one turn of a follower's fetch loop under load, its appends aside

    def __post_init__(self) -> None:
        check_positive(self)

    def producer_caller(self, wl: Workload) -> float:
        """Cycles per record of the thread calling ``send()``: the record's append, its bytes' copy and
        compression (the batch compresses as records are appended)."""
        return self.producer_record + (self.byte + wl.codec.compress) * wl.wire_bytes

    def producer_sender(self, wl: Workload) -> float:
        """Cycles per record of the producer's I/O thread, which ships whole batches."""
        return self.batch / wl.batch_records

    def broker(self, wl: Workload) -> float:
        """Cycles one replica's broker spends per record of ``wl``."""
        return self.broker_record + self.byte * wl.stored_bytes + self.batch / wl.batch_records

    def brokers(self, wl: Workload) -> float:
        """Cycles all replicas' brokers spend per record: the leader also decompresses every compressed
        batch to validate its records (followers append batches as they are)."""
        return wl.replication_factor * self.broker(wl) + wl.codec.decompress * wl.wire_bytes

    def consumer(self, wl: Workload) -> float:
        """Cycles a consumer thread spends per record (fetches are large: batches cost nothing extra)."""
        return self.consumer_record + (self.byte + wl.codec.decompress) * wl.wire_bytes

    def ack_wait_s(self, acks: Acks, followers: int) -> float:
        """How long a produce request waits: nothing (acks=0), the leader's round trip (1), or for acks=all
        also the followers: each is somewhere in its fetch loop when the batch lands, fetches it on its next
        turn (the last of ``f`` after f / (f + 1) of a turn, on average) and tells the leader it has it on
        the turn after, which moves the high watermark."""
        wait = 0.0 if acks == "0" else self.rtt_ms
        if acks == "all" and followers:
            wait += self.follower_fetch_ms * (1 + followers / (followers + 1))
        return wait / 1000


DEFAULT_COSTS = CpuCosts()


@dataclass(frozen=True)
class Bound:
    """A ceiling in records/s set by one resource; ``kind`` is network, cpu, disk or latency."""

    name: str
    kind: str
    records_per_s: float


@dataclass(frozen=True)
class Throughput:
    """Producer and consumer throughput with every bound considered; MB/s are payload MiB/s."""

    message_bytes: int
    produce_bounds: tuple[Bound, ...]
    consume_bounds: tuple[Bound, ...]

    @property
    def produce(self) -> Bound:
        return min(self.produce_bounds, key=lambda b: b.records_per_s)

    @property
    def consume(self) -> Bound:
        return min(self.consume_bounds, key=lambda b: b.records_per_s)

    @property
    def bottleneck(self) -> str:
        return f"produce: {self.produce.name}; consume: {self.consume.name}"

    def mb_per_s(self, records_per_s: float) -> float:
        return records_per_s * self.message_bytes / MIB

    def as_dict(self) -> dict[str, object]:
        return {
            "produce_records_per_s": round(self.produce.records_per_s),
            "produce_mb_per_s": round(self.mb_per_s(self.produce.records_per_s), 1),
            "consume_records_per_s": round(self.consume.records_per_s),
            "consume_mb_per_s": round(self.mb_per_s(self.consume.records_per_s), 1),
            "bottleneck": self.bottleneck,
            "produce_bounds": {b.name: round(b.records_per_s) for b in self.produce_bounds},
            "consume_bounds": {b.name: round(b.records_per_s) for b in self.consume_bounds},
        }


def throughput(hw: Hardware, wl: Workload, costs: CpuCosts = DEFAULT_COSTS) -> Throughput:
    """All producer and consumer bounds for ``wl`` on ``hw``; raises :class:`CapacityError` on bad input.

    A side without clients (``producers`` or ``consumers`` 0) has the one bound "no producers" (or
    consumers) of 0 records/s."""
    rf = wl.replication_factor
    if rf > hw.brokers:
        raise CapacityError(
            "replication_factor", f"{rf} exceeds the {hw.brokers} brokers — use at most {hw.brokers}"
        )
    produce = _produce_bounds(hw, wl, costs) if wl.producers else [Bound("no producers", "none", 0.0)]
    consume = _consume_bounds(hw, wl, costs) if wl.consumers else [Bound("no consumers", "none", 0.0)]
    return Throughput(wl.message_bytes, tuple(produce), tuple(consume))


def _produce_bounds(hw: Hardware, wl: Workload, costs: CpuCosts) -> list[Bound]:
    rf, size, cycles_per_s = wl.replication_factor, wl.stored_bytes, hw.clock_ghz * 1e9
    # A producer's two threads run on cores of their own: the slower of them paces it.
    caller, sender, brokers = costs.producer_caller(wl), costs.producer_sender(wl), costs.brokers(wl)
    producer = max(caller, sender)
    if hw.shared_machine:  # every copy of a record crosses the one loopback and lands on the one disk
        produce = [
            Bound("producer CPU", "cpu", wl.producers * cycles_per_s / producer),  # a thread, a core
            Bound("loopback", "network", hw.goodput_bytes_per_s / (size * rf)),
            Bound("disk", "disk", hw.disk_bytes_per_s / (size * rf)),
            Bound(
                "machine CPU",
                "cpu",
                hw.cores * cycles_per_s / (caller + sender + brokers + hw.kernel_cycles(size, rf)),
            ),
        ]
    else:
        # Brokers that hold any replica share the load; with fewer replicas than brokers some sit idle.
        loaded = min(hw.brokers, wl.partitions * rf)
        produce = [
            Bound("producer NIC", "network", wl.producers * hw.goodput_bytes_per_s / size),
            Bound("producer CPU", "cpu", wl.producers * cycles_per_s / producer),
            # Each record enters the cluster rf times: once from the producer, rf - 1 times by replication.
            Bound("broker NIC in", "network", loaded * hw.goodput_bytes_per_s / (size * rf)),
            Bound("broker disk", "disk", loaded * hw.disk_bytes_per_s / (size * rf)),
            Bound("broker CPU", "cpu", loaded * hw.cores * cycles_per_s / brokers),
        ]
        # ... and leaves it rf - 1 times to the followers, and once more to a group reading along.
        copies_out = rf - 1 + (1 if wl.consumers else 0)
        if copies_out:
            produce.append(
                Bound(
                    "broker NIC out to followers, group",
                    "network",
                    loaded * hw.goodput_bytes_per_s / (size * copies_out),
                )
            )
    wait_s = costs.ack_wait_s(wl.acks, rf - 1)
    if wait_s:
        # A broker serves one request of a connection at a time (more in flight only wait in its socket):
        # per producer and wait, one request to each leader, one batch of each of its partitions.
        per_wait = wl.partitions * wl.batch_records
        produce.append(Bound(f"acks={wl.acks} wait", "latency", wl.producers * per_wait / wait_s))
    if wl.acks == "all" and rf > 1:
        # A follower's fetch brings at most replica.fetch.max.bytes of each partition per turn of its loop,
        # and its fetcher thread appends what it brought before it fetches again.
        per_turn = REPLICA_FETCH_MAX_BYTES / size
        turn_s = costs.follower_fetch_ms / 1000 + per_turn * costs.broker(wl) / cycles_per_s
        produce.append(Bound("followers' fetch", "latency", wl.partitions * per_turn / turn_s))
    return produce


def _consume_bounds(hw: Hardware, wl: Workload, costs: CpuCosts) -> list[Bound]:
    size, cycles_per_s = wl.stored_bytes, hw.clock_ghz * 1e9  # bytes a record takes on the network, disk
    active = min(wl.consumers, wl.partitions)  # members beyond the partition count sit idle
    per_thread = cycles_per_s / costs.consumer(wl)
    if hw.shared_machine:
        consume = [
            Bound("loopback", "network", hw.goodput_bytes_per_s / size),
            Bound("consumer CPU", "cpu", min(active, hw.cores) * per_thread),
        ]
    else:
        consume = [
            Bound("consumer NIC", "network", active * hw.goodput_bytes_per_s / size),
            Bound("consumer CPU", "cpu", active * per_thread),
            Bound(
                "broker NIC out", "network", min(hw.brokers, wl.partitions) * hw.goodput_bytes_per_s / size
            ),
        ]
    if reads_from_disk(hw, wl):
        leaders = 1 if hw.shared_machine else min(hw.brokers, wl.partitions)
        consume.append(Bound("broker disk reads", "disk", leaders * hw.disk_bytes_per_s / size))
    return consume


def reads_from_disk(hw: Hardware, wl: Workload) -> bool:
    """Whether the consumers read older data than the page cache holds: every replica's writes pass
    through a broker's page cache (LRU), so a broker keeps the last ``page cache`` bytes of all of them."""
    held = hw.page_cache_bytes * (
        1 if hw.shared_machine else min(hw.brokers, wl.partitions * wl.replication_factor)
    )
    return wl.backlog_gb * 1e9 * wl.stored_bytes / wl.message_bytes * wl.replication_factor > held

"""The throughput model's constants fitted on published Kafka benchmarks, and its error on the rows held out.

Each fitted constant of :class:`~app.capacity.model.CpuCosts` comes from the one published figure where it
alone decides the answer, solved in closed form (:func:`fit`); every other published row is held out and
only compared (:func:`report`). Sources, hardware and why each row is where it is: docs/capacity.md.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Literal

from app.capacity.model import DEFAULT_COSTS, MIB, CpuCosts, Hardware, Workload, throughput

SOURCES = {
    "linkedin-2014": "Kreps, LinkedIn 2014, 'Benchmarking Apache Kafka: 2 Million Writes Per Second (On "
    "Three Cheap Machines)', engineering.linkedin.com; commands: gist.github.com/jkreps/c7ddb4041ef62a900e6c",
    "netdb-2011": "Kreps, Narkhede, Rao, 'Kafka: a Distributed Messaging System for Log Processing', "
    "NetDB 2011",
    "guo-2015": "Jason Guo, 'Kafka设计解析（五）- Kafka性能测试方法及Benchmark报告', jasongj.com, 2015-12-31",
    "alphahinex-2022": "AlphaHinex, 'Kafka 性能测试', alphahinex.github.io, 2022-06-19 (Kafka 2.4.1)",
    "confluent-2020": "Nikhil, Chandar, Confluent 2020, 'Benchmarking Apache Kafka, Apache Pulsar, and "
    "RabbitMQ: Which is the Fastest?' (result file default-sync.json)",
    "streamnative-2020": "Li, Guo, StreamNative 2020, 'A More Accurate Perspective on Pulsar's Performance "
    "Compared to Kafka': github.com/streamnative/openmessaging-benchmark, branch blog, "
    "results/max_throughput",
    "vanlightly-2023": "Vanlightly 2023, 'Kafka vs Redpanda Performance - Part 5: Reaching the limits of the "
    "NVMe drive', jack-vanlightly.com",
    "kafka-pr-9401": "apache/kafka pull request 9401 (KAFKA-9628), comment of 2020-11-17",
}

# The machines of the published runs (brokers; clients have the same NIC).
LINKEDIN = Hardware()  # 3 x (6 cores 2.5 GHz, 6 SATA disks, 32 GB, 1 GbE)
NETDB = Hardware(brokers=1, disks=3, cores=8, clock_ghz=2.0, ram_gb=16.0)  # 6 disks in RAID 10: 3 write
I3EN_2XL = Hardware(nic_gbps=25, disks=2, disk_mbps=655e6 / 2 / MIB, cores=8, clock_ghz=3.1, ram_gb=64)
I3EN_6XL = Hardware(nic_gbps=25, disks=2, disk_mbps=1e9 / MIB, cores=24, clock_ghz=3.1, ram_gb=192)
# Guo 2015 states neither network nor disk. Its 3 consumers moved 705 MiB/s, over 2 Gb/s a machine: 10 GbE
# assumed; its 10 KB run wrote 250 MiB/s to each broker: that disk speed assumed. Its 1000 B and 10 KB runs
# are left out, as what bound them is one of these two.
GUO = Hardware(nic_gbps=10, disks=1, disk_mbps=250, cores=8, clock_ghz=2.8, ram_gb=16, heap_gb=1)
M5A_XL = Hardware(
    brokers=1, nic_gbps=10, disks=1, disk_mbps=250, cores=4, clock_ghz=2.5, ram_gb=16, heap_gb=1
)

LINKEDIN_RUN = Workload(message_bytes=100, batch_bytes=8196, partitions=6, producers=1, consumers=0)
OMB_RUN = Workload(message_bytes=1024, batch_bytes=2**20, acks="all", replication_factor=3, partitions=100)


@dataclass(frozen=True)
class Published:
    """One published throughput figure with the hardware and workload it was measured on."""

    name: str
    source: str  # a key of SOURCES
    hardware: Hardware
    workload: Workload
    side: Literal["produce", "consume"]
    records_per_s: float
    approximate: bool = False  # read off a chart, or "around" in the text
    note: str = ""  # what the model misses there, when it does

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "source": self.source, "side": self.side, "approximate": self.approximate,
            "published_records_per_s": round(self.records_per_s), "note": self.note,
            "hardware": asdict(self.hardware), "workload": asdict(self.workload),
        }  # fmt: skip

    @property
    def cycles_per_record(self) -> float:
        """The clock cycles one core had per published record."""
        return self.hardware.clock_ghz * 1e9 / self.records_per_s

    def model(self, costs: CpuCosts) -> float:
        answer = throughput(self.hardware, self.workload, costs)
        return (answer.produce if self.side == "produce" else answer.consume).records_per_s


# --- the figures each constant is fitted on ------------------------------------------------------------

# 10-byte messages: "the CPU becomes the bottleneck" (the producer's lock, per record), batches of ~4,000.
CALLER_ROW = Published(
    "10 B messages, 1 producer, RF 3, batch 128000",
    "linkedin-2014",
    LINKEDIN,
    replace(LINKEDIN_RUN, message_bytes=10, batch_bytes=128_000, replication_factor=3),
    "produce",
    945_000,
    approximate=True,
)
# One message per request ("batch size 1"): the producer's per-batch work decides it.
BATCH_ROW = Published(
    "batch size 1, 200 B, no acks",
    "netdb-2011",
    NETDB,
    Workload(message_bytes=200, batch_bytes=222, acks="0", partitions=1, producers=1, consumers=0),
    "produce",
    50_000,
)


@dataclass(frozen=True)
class BrokerCpu:
    """A published broker CPU reading at a known rate: the cycles a broker spends per record."""

    source: str
    cores_busy: float
    clock_ghz: float
    records_per_s: float
    workload: Workload

    @property
    def cycles_per_record(self) -> float:
        return self.cores_busy * self.clock_ghz * 1e9 / self.records_per_s


OLD_PRODUCER_BATCH = 200  # messages a batch of the old Scala producer (Guo 2015): batch.num.messages

# Not a throughput: one broker's CPU (top: ~248 % of 8 vCPU at 2.8 GHz) receiving ~1.17 M records/s of
# 100 B, RF 1; the old Scala producer's default batches of 200 messages are assumed.
BROKER_CPU = BrokerCpu(
    "guo-2015", 2.48, 2.8, 1.17e6, Workload(message_bytes=100, batch_bytes=OLD_PRODUCER_BATCH * 122)
)
# One consumer thread reading 100 B records faster than any other published consumer: its CPU decides it.
CONSUMER_ROW = Published(
    "1 consumer, 100 B", "guo-2015", GUO, replace(LINKEDIN_RUN, producers=0, consumers=1), "consume",
    3_064_256,
)  # fmt: skip
# acks=all with the Java producer's defaults (batch.size 16384): the wait decides it, for a broker serves one
# request of a connection at a time. The rate does not depend on the hardware (not published), only on the
# batches a request carries and the wait.
FOLLOWER_FETCH_ROW = Published(
    "acks=all, RF 3, 100 B, defaults",
    "alphahinex-2022",
    LINKEDIN,
    replace(LINKEDIN_RUN, batch_bytes=16_384, acks="all", replication_factor=3),
    "produce",
    335_629,
)


def fit(assumed: CpuCosts = DEFAULT_COSTS) -> CpuCosts:
    """The constants that make the model meet each fitted figure exactly; ``byte`` and ``rtt_ms`` stay as
    ``assumed``."""
    producer_record = CALLER_ROW.cycles_per_record - assumed.byte * CALLER_ROW.workload.wire_bytes
    # batch size 1: every record is a batch of its own, shipped by the producer's I/O thread
    batch = BATCH_ROW.cycles_per_record * BATCH_ROW.workload.batch_records
    wl = BROKER_CPU.workload
    broker_record = BROKER_CPU.cycles_per_record - assumed.byte * wl.wire_bytes - batch / wl.batch_records
    consumer_record = CONSUMER_ROW.cycles_per_record - assumed.byte * CONSUMER_ROW.workload.wire_bytes
    run = FOLLOWER_FETCH_ROW.workload
    in_flight = run.partitions * run.batch_records  # one request per connection at a time
    followers = run.replication_factor - 1  # the wait is rtt + fetch turn x (1 + f / (f + 1))
    wait_ms = in_flight / FOLLOWER_FETCH_ROW.records_per_s * 1000 - assumed.rtt_ms
    follower_fetch_ms = wait_ms / (1 + followers / (followers + 1))
    return replace(
        assumed,
        producer_record=producer_record,
        broker_record=broker_record,
        consumer_record=consumer_record,
        batch=batch,
        follower_fetch_ms=follower_fetch_ms,
    )


FITTED = (CALLER_ROW, BATCH_ROW, CONSUMER_ROW, FOLLOWER_FETCH_ROW)

# --- every other published figure, held out --------------------------------------------------------------


def _linkedin(
    name: str,
    records_per_s: float,
    side: str = "produce",
    note: str = "",
    approximate: bool = False,
    **changes,
) -> Published:
    """A row of LinkedIn 2014's runs: its hardware, its producer run with ``changes``."""
    run = replace(LINKEDIN_RUN, **changes)
    return Published(name, "linkedin-2014", LINKEDIN, run, side, records_per_s, approximate, note)


def _guo(name: str, records_per_s: float, side: str = "produce", **changes) -> Published:
    """A row of Guo 2015's runs: 3 brokers, 6 partitions, the old asynchronous producer's batches."""
    run = replace(LINKEDIN_RUN, **changes)
    run = replace(run, batch_bytes=OLD_PRODUCER_BATCH * run.wire_bytes)
    return Published(name, "guo-2015", GUO, run, side, records_per_s)


def _omb(
    name: str,
    source: str,
    hw: Hardware,
    records_per_s: float,
    note: str = "",
    approximate: bool = False,
    **changes,
) -> Published:
    """A row of an OpenMessaging Benchmark run: 1 KB records, RF 3, 1 MB batches unless ``changes`` say."""
    return Published(
        name, source, hw, replace(OMB_RUN, **changes), "produce", records_per_s, approximate, note
    )


ONE_PARTITION = "what holds one partition back at acks=1 is not modelled"
HELD_OUT = (
    _linkedin("1 producer, RF 1, acks=1", 821_557),
    _linkedin("1 producer, RF 3, acks=1", 786_980, replication_factor=3),
    _linkedin("1 producer, RF 3, acks=all, batch 64000", 421_823, replication_factor=3, acks="all",
              batch_bytes=64_000,
              note="Kafka 0.8's followers took ~37 ms to acknowledge, 3x the wait fitted from 2022"),
    _linkedin("3 producers, RF 3, acks=1", 2_024_032, replication_factor=3, producers=3,
              note="needs 193 MiB/s into each broker's 1 GbE NIC: the followers cannot have kept up"),
    _linkedin("1 producer and 1 consumer at once, RF 3", 795_064, replication_factor=3, consumers=1),
    _linkedin("1 consumer, RF 3", 940_521, "consume", replication_factor=3, producers=0, consumers=1),
    _linkedin("3 consumers, RF 3", 2_615_968, "consume", replication_factor=3, producers=0, consumers=3),
    *(
        _linkedin(f"{size:,} B messages, batch 128000", rate, approximate=True, message_bytes=size,
                  batch_bytes=128_000, replication_factor=3)
        for size, rate in ((100, 690_000), (1000, 94_000), (10_000, 9_700), (100_000, 1_060))
    ),
    Published("batch size 50, 200 B, no acks", "netdb-2011", NETDB,
              replace(BATCH_ROW.workload, batch_bytes=50 * 222), "produce", 400_000),
    Published("1 consumer, 200 B", "netdb-2011", NETDB, replace(BATCH_ROW.workload, producers=0, consumers=1),
              "consume", 22_000,
              note="the 2011 consumer waited for each fetch of ~1000 messages: not modelled"),
    _guo("1 producer, RF 1, async, 100 B", 1_279_589),
    _guo("3 consumers, 100 B", 7_369_117, "consume", producers=0, consumers=3),
    *(
        _guo(f"3 producers, RF {rf}, async, {size:,} B", rate, message_bytes=size, replication_factor=rf,
             producers=3)
        for rf, size, rate in (
            (1, 10, 6_066_716), (1, 100, 3_378_267), (2, 100, 2_233_095), (3, 100, 1_778_465),
        )
    ),
    _omb("4 producers, RF 3, acks=all, 1 KB, 100 partitions", "confluent-2020", I3EN_2XL, 618_991,
         producers=4, consumers=4),
    *(
        _omb(f"2 producers, RF 3, acks={acks}, 1 KB, {parts} partition{'s' * (parts > 1)}",
             "streamnative-2020", I3EN_2XL, rate, note, acks=acks, partitions=parts, producers=2, consumers=2)
        for acks, parts, rate, note in (
            ("1", 100, 629_336, ""), ("all", 100, 505_389, ""),
            ("1", 1, 314_671, ONE_PARTITION), ("all", 1, 185_361, ""),
        )
    ),
    _omb("10 producers, RF 3, acks=1, 1 KB, 288 partitions", "vanlightly-2023", I3EN_6XL, 1900 * MIB / 1024,
         approximate=True, acks="1", batch_bytes=131_072, partitions=288, producers=10, consumers=10),
    Published("1 producer, RF 1, acks=1, 256 B", "kafka-pr-9401", M5A_XL,
              Workload(message_bytes=256, batch_bytes=16_384, partitions=10, producers=1, consumers=0),
              "produce", 826_004),
)  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    row: Published
    model: float

    @property
    def ratio(self) -> float:
        return self.model / self.row.records_per_s

    @property
    def factor(self) -> float:
        """How far off, either way: 1.0 is exact, 2.0 is half or double."""
        return max(self.ratio, 1 / self.ratio)


def compare(rows: tuple[Published, ...], costs: CpuCosts) -> list[Comparison]:
    return [Comparison(row, row.model(costs)) for row in rows]


def error(comparisons: list[Comparison]) -> tuple[float, float]:
    """The median and the worst factor over ``comparisons``."""
    factors = [c.factor for c in comparisons]
    return statistics.median(factors), max(factors)


def report(costs: CpuCosts) -> str:
    """Every published row with the model's answer, fitted rows first, and the hold-out error."""
    lines = []
    for title, rows in (("fitted on", FITTED), ("held out", HELD_OUT)):
        lines.append(f"{title}:")
        for c in compare(rows, costs):
            mark = "~" if c.row.approximate else " "
            lines.append(
                f"  {c.row.source:<17} {c.row.name:<52} published {mark}{c.row.records_per_s:>11,.0f}  "
                f"model {c.model:>11,.0f}  x{c.ratio:.2f}" + (f"  ({c.row.note})" if c.row.note else "")
            )
    median, worst = error(compare(HELD_OUT, costs))
    lines.append(
        f"held out: median x{median:.2f}, worst x{worst:.2f} ({len(HELD_OUT)} rows; ~ read off a chart)"
    )
    return "\n".join(lines)


def confidence(costs: CpuCosts = DEFAULT_COSTS) -> str:
    """How far to trust a throughput answer, shown beside every one: the error on the published rows held
    out, and against a real Kafka on a 2-core machine (``kobs bench capacity``, docs/capacity.md)."""
    held_out = compare(HELD_OUT, costs)
    median, worst = error(held_out)
    return (
        f"Estimates, fitted on {len(FITTED)} published benchmark figures. On {len(held_out)} others held "
        f"out: median x{median:.2f} off, {sum(c.factor <= 2 for c in held_out)} within x2, worst "
        f"x{worst:.0f} (`kobs whatif calibration`). Against a real 3-node Kafka on one 2-core machine "
        "(`kobs bench capacity`, four machines): 0.50-1.39x with 100 B messages, 0.70-1.37x with 1 KB at "
        "acks=all, 0.75-1.81x with 1 KB at RF 1, 0.6-1.0x for a consumer in its steady state; the "
        "machines' Kafka differ about 2x in CPU cycles per record (docs/capacity.md)."
    )

"""This machine as the capacity model's hardware: cores from the OS; the clock the cores run at, loopback as
the network and the disk's sequential write speed, all measured; and the local cluster's brokers, heaps and
page cache. Beside them, not a model input: how much of a lone core's work each core does when all are busy
(``core_share``; about half when two virtual cores are one physical core's hyperthreads), which the clock
does not show.

Everything runs on one machine here: the three brokers and the perf tools share its cores, its loopback and
its disk, which :meth:`Machine.hardware` says to the model (``shared_machine``).
"""

from __future__ import annotations

import os
import platform
import resource
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from app.capacity.model import MIB, Hardware
from peers import jvm

BROKERS = 3
BROKER_HEAP_GB = 384 * 2**20 / 1e9  # peers.kafka's -Xmx384m
CHUNK = 1 << 20
CORE_PROBE = Path(__file__).with_name("CoreProbe.java")


@dataclass(frozen=True)
class Machine:
    cores: int
    clock_ghz: float
    clock_source: str  # "measured", or where the nominal figure came from
    core_share: float  # each core's work with all of them busy, of a lone core's (1.0: cores of their own)
    ram_gb: float
    loopback_gbps: float
    loopback_cycles_per_byte: float  # the kernel's, both ends
    disk_mbps: float
    disk_cycles_per_byte: float

    def hardware(self) -> Hardware:
        return Hardware(
            brokers=BROKERS,
            nic_gbps=self.loopback_gbps,
            disks=1,
            disk_mbps=self.disk_mbps,
            cores=self.cores,
            clock_ghz=self.clock_ghz,
            ram_gb=self.ram_gb,
            heap_gb=BROKERS * BROKER_HEAP_GB,
            shared_machine=True,
            loopback_cycles_per_byte=self.loopback_cycles_per_byte,
            disk_cycles_per_byte=self.disk_cycles_per_byte,
        )

    def text(self) -> str:
        return (
            f"{BROKERS} brokers on one machine of {self.cores} cores at {self.clock_ghz:.2f} GHz "
            f"({self.clock_source}), each doing {self.core_share:.2f} of a lone core's work when all are "
            f"busy (measured), {self.ram_gb:.0f} GB RAM, loopback {self.loopback_gbps:.1f} Gb/s at "
            f"{self.loopback_cycles_per_byte:.2f} cycles per byte, disk {self.disk_mbps:.0f} MiB/s "
            f"sequential writes at {self.disk_cycles_per_byte:.2f} cycles per byte (measured)"
        )


def measure(scratch: Path) -> Machine:
    cores = os.cpu_count() or 1
    clock, source = core_clock_ghz(cores)
    loopback, disk = steadiest(loopback_transfer), steadiest(lambda: disk_writes(scratch))
    return Machine(
        cores=cores,
        clock_ghz=clock,
        clock_source=source,
        core_share=core_share(cores),
        ram_gb=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9,
        loopback_gbps=loopback.bytes_per_s * 8 / 1e9,
        loopback_cycles_per_byte=loopback.cpu_s_per_byte * clock * 1e9,
        disk_mbps=disk.bytes_per_s / MIB,
        disk_cycles_per_byte=disk.cpu_s_per_byte * clock * 1e9,
    )


def core_clock_ghz(cores: int) -> tuple[float, str]:
    """The clock ``cores`` busy cores run at, and where the figure comes from. Measured on x86-64, where a
    multiply's cycles are known (``CoreProbe.java clock``): a virtual machine's /proc/cpuinfo gives the
    nominal clock, and turbo runs faster (a test machine: 2.6 GHz stated, 4.0 measured). Elsewhere the
    nominal."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        return float(_core_probe("clock", cores)), "measured"
    return nominal_clock_ghz(), "nominal, /proc/cpuinfo"


def _core_probe(probe: str, threads: int) -> str:
    """What ``CoreProbe.java`` prints for ``probe`` ("clock" or "share") run on ``threads`` threads."""
    argv = ["java", "-cp", str(jvm.compiled(CORE_PROBE)), CORE_PROBE.stem, probe, str(threads)]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def core_share(cores: int) -> float:
    """How much of one lone core's work each of ``cores`` busy cores does (``CoreProbe.java share``)."""
    return float(_core_probe("share", cores))


def nominal_clock_ghz() -> float:
    """The fastest core's clock as /proc/cpuinfo states it (2.0 GHz when it says nothing)."""
    try:
        mhz = [float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]  # fmt: skip
    except (OSError, ValueError):
        mhz = []
    return max(mhz) / 1000 if mhz else 2.0


@dataclass(frozen=True)
class Transfer:
    """How fast bytes moved, and the CPU seconds (this process's, the kernel's work for it included) each
    byte took."""

    bytes_per_s: float
    cpu_s_per_byte: float


def steadiest(probe: Callable[[], Transfer], trials: int = 3) -> Transfer:
    """Of ``trials`` runs of ``probe``, the one with the median CPU per byte: a single run can meet a burst
    of other work on the machine (one right after an install measured 282 MiB/s written at 9.84 cycles per
    byte, the runs after it 990-1218 MiB/s at 0.97-1.54)."""
    runs = sorted((probe() for _ in range(trials)), key=lambda run: run.cpu_s_per_byte)
    return runs[trials // 2]


def loopback_transfer(megabytes: int = 512) -> Transfer:
    """TCP over 127.0.0.1: one thread sends ``megabytes`` MiB, another reads them."""
    server = socket.create_server(("127.0.0.1", 0))
    received = 0

    def drain() -> None:
        nonlocal received
        conn, _ = server.accept()
        with conn:
            while chunk := conn.recv(CHUNK):
                received += len(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    payload = bytes(CHUNK)
    began, cpu = time.perf_counter(), _own_s()
    with socket.create_connection(server.getsockname()) as client:
        for _ in range(megabytes):
            client.sendall(payload)
    reader.join()
    elapsed, cpu = time.perf_counter() - began, _own_s() - cpu
    server.close()
    return Transfer(received / elapsed, cpu / received)


def disk_writes(scratch: Path, megabytes: int = 256) -> Transfer:
    """Sequential writes of ``megabytes`` MiB in 1 MiB blocks to a file under ``scratch``, fsynced."""
    path = scratch / "disk-probe"
    payload = os.urandom(CHUNK)
    began, cpu = time.perf_counter(), _own_s()
    with open(path, "wb", buffering=0) as out:
        for _ in range(megabytes):
            out.write(payload)
        os.fsync(out.fileno())
    elapsed, cpu = time.perf_counter() - began, _own_s() - cpu
    path.unlink()
    written = megabytes * CHUNK
    return Transfer(written / elapsed, cpu / written)


@dataclass(frozen=True)
class CpuMark:
    """CPU seconds spent so far at one moment: by the perf tools, by the whole machine, by this process."""

    at_s: float
    tools_s: float
    busy_s: float
    own_s: float


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds spent between two marks ``seconds`` apart: by the perf tools, and by everything else on
    the machine (the brokers, on a quiet machine), this process left out; ``records``: the records they
    were spent on."""

    tools_s: float
    rest_s: float
    records: float
    seconds: float

    @classmethod
    def between(cls, first: CpuMark, last: CpuMark, records: float) -> CpuUse:
        tools_s = last.tools_s - first.tools_s
        rest_s = last.busy_s - first.busy_s - tools_s - (last.own_s - first.own_s)
        return cls(tools_s, rest_s, records, last.at_s - first.at_s)

    @property
    def cores_busy(self) -> float:
        """How many cores the tools and the rest kept busy on average: all of them when CPU bound the row."""
        return (self.tools_s + self.rest_s) / self.seconds if self.seconds else 0.0


def cpu_mark(tools: Iterable[int]) -> CpuMark:
    """Now, for the perf tools of process ids ``tools`` (running, or exited and not yet waited for)."""
    return CpuMark(time.monotonic(), sum(_process_s(pid) for pid in tools), _machine_busy_s(), _own_s())


def _process_s(pid: int) -> float:
    """User and system seconds of process ``pid`` (/proc/PID/stat; 0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine_busy_s() -> float:
    """Seconds all cores were busy since boot (/proc/stat: every state but idle and iowait)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")

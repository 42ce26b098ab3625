"""This machine as the capacity model's hardware: cores and clock from the OS, loopback as the network and
the disk's sequential write speed, both measured, and the local cluster's brokers, heaps and page cache.

Everything runs on one machine here: the three brokers and the perf tools share its cores, its loopback and
its disk, which :meth:`Machine.hardware` says to the model (``shared_machine``).
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.capacity.model import Hardware

BROKERS = 3
BROKER_HEAP_GB = 384 * 2**20 / 1e9  # peers.kafka's -Xmx384m
CHUNK = 1 << 20


@dataclass(frozen=True)
class Machine:
    cores: int
    clock_ghz: float
    ram_gb: float
    loopback_gbps: float
    disk_mbps: float

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
        )

    def text(self) -> str:
        return (
            f"{BROKERS} brokers on one machine of {self.cores} cores at {self.clock_ghz:.2f} GHz, "
            f"{self.ram_gb:.0f} GB RAM, loopback {self.loopback_gbps:.1f} Gb/s, disk "
            f"{self.disk_mbps:.0f} MiB/s sequential writes (measured)"
        )


def measure(scratch: Path) -> Machine:
    return Machine(
        cores=os.cpu_count() or 1,
        clock_ghz=clock_ghz(),
        ram_gb=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9,
        loopback_gbps=loopback_gbps(),
        disk_mbps=disk_mbps(scratch),
    )


def clock_ghz() -> float:
    """The fastest core's current clock from /proc/cpuinfo (2.0 GHz when it says nothing)."""
    try:
        mhz = [float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("cpu MHz")]  # fmt: skip
    except (OSError, ValueError):
        mhz = []
    return max(mhz) / 1000 if mhz else 2.0


def loopback_gbps(megabytes: int = 512) -> float:
    """TCP goodput over 127.0.0.1: one thread sends ``megabytes`` MiB, another reads them."""
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
    began = time.perf_counter()
    with socket.create_connection(server.getsockname()) as client:
        for _ in range(megabytes):
            client.sendall(payload)
    reader.join()
    elapsed = time.perf_counter() - began
    server.close()
    return received * 8 / elapsed / 1e9


def disk_mbps(scratch: Path, megabytes: int = 256) -> float:
    """Sequential writes of ``megabytes`` MiB in 1 MiB blocks to a file under ``scratch``, fsynced."""
    path = scratch / "disk-probe"
    payload = os.urandom(CHUNK)
    began = time.perf_counter()
    with open(path, "wb", buffering=0) as out:
        for _ in range(megabytes):
            out.write(payload)
        os.fsync(out.fileno())
    elapsed = time.perf_counter() - began
    path.unlink()
    return megabytes / elapsed


@dataclass(frozen=True)
class CpuMark:
    """CPU seconds spent so far at one moment: by the perf tools, by the whole machine, by this process."""

    at_s: float
    tools_s: float
    busy_s: float
    own_s: float


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds spent between two marks: by the perf tools, and by everything else on the machine (the
    brokers, on a quiet machine), this process left out; ``records``: the records they were spent on."""

    tools_s: float
    rest_s: float
    records: float

    @classmethod
    def between(cls, first: CpuMark, last: CpuMark, records: float) -> CpuUse:
        tools_s = last.tools_s - first.tools_s
        rest_s = last.busy_s - first.busy_s - tools_s - (last.own_s - first.own_s)
        return cls(tools_s, rest_s, records)


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

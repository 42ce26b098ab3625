"""Peak memory and CPU time of this process and everything it started (Spark's JVM, its Python workers).

Wall-clock figures on a shared machine depend on the neighbours; CPU seconds much less, so benchmarks print
both, split by kind of process (this driver, JVMs, other Python processes).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Collection
from pathlib import Path

from peers.process import live_processes

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def tree(root: int, exclude: Collection[int] = ()) -> dict[int, tuple[str, list[str]]]:
    """Command name and ``/proc/<pid>/stat`` fields (those after the name) of ``root`` and its
    descendants, leaving out the processes in ``exclude`` and theirs."""
    stats: dict[int, tuple[str, list[str]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # the process ended
            head, tail = stat.read_text().rsplit(")", 1)
            stats[int(stat.parent.name)] = head.split("(", 1)[1], tail.split()
    members, grew = {root}, True
    while grew:
        more = {pid for pid, (_, fields) in stats.items() if int(fields[1]) in members}
        more -= members | set(exclude)
        members |= more
        grew = bool(more)
    return {pid: stats[pid] for pid in members if pid in stats}


def usage(root: int, exclude: Collection[int] = ()) -> tuple[int, Counter[str]]:
    """Resident bytes of the process tree and its CPU seconds (user + system, with reaped children's)
    by kind: ``driver`` (``root``), ``JVM``, ``Python workers``."""
    rss, cpu = 0, Counter()
    for pid, (name, fields) in tree(root, exclude).items():
        kind = "driver" if pid == root else "JVM" if name == "java" else "Python workers"
        rss += int(fields[21]) * PAGE
        cpu[kind] += sum(int(f) for f in fields[11:15]) / TICK
    return rss, cpu


class Usage:
    """``with Usage() as used:`` samples the tree every ``every_s``: ``used.peak_rss``, ``used.cpu_s``
    (CPU seconds by kind since the start), ``used.loads`` (the machine's load average: the neighbours').

    Call :meth:`sample` at the end of the measured work, while the processes still live. Servers started
    with ``peers`` (the benchmark's broker) are not counted, nor is the sampling itself (reading ``/proc``
    costs ms per sample, seconds of the driver's CPU over a run).
    """

    def __init__(self, every_s: float = 0.2):
        self.every_s = every_s
        self.peak_rss, self.cpu_s = 0, Counter()
        self.loads: list[float] = []  # the machine's 1-minute load average at each sample
        self._pid = os.getpid()
        self._exclude = {p.pid for p in live_processes()}
        self._cpu0 = usage(self._pid, self._exclude)[1]
        self._sampling_s = 0.0  # CPU seconds the sampling thread spent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="usage", daemon=True)

    def __enter__(self) -> Usage:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        rss, cpu = usage(self._pid, self._exclude)
        self.peak_rss = max(self.peak_rss, rss)
        self.loads.append(os.getloadavg()[0])
        cpu["driver"] -= self._sampling_s
        for kind, seconds in cpu.items():
            self.cpu_s[kind] = max(self.cpu_s[kind], seconds - self._cpu0[kind])

    def _run(self) -> None:
        began = time.thread_time()
        while True:
            self.sample()
            self._sampling_s = time.thread_time() - began
            if self._stop.wait(self.every_s):
                return

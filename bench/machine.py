"""The machine a benchmark ran on, printed with every figure so numbers are never quoted without it."""

from __future__ import annotations

import os
import platform
import sys


def describe() -> str:
    """One line: CPU model, cores, memory, OS and Python."""
    return (
        f"machine: {_cpu_model()}, {os.cpu_count()} cores, {_memory_gb():.0f} GB RAM, "
        f"{platform.system()} {platform.release()}, Python {sys.version.split()[0]}"
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30

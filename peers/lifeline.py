"""A watchdog that ends our servers when the Python process that started them dies without stopping them.

``atexit`` and signal handlers do not run on SIGKILL or a crash of the interpreter, and every server runs in
its own session (``peers.process``), so nothing else would end it. The first server started launches one small
watchdog process per Python process, joined by a pipe: the parent writes ``+<pgid> <start>`` when it starts a
server (``start``: the group leader's start time, so a process that later reuses the number is never taken for
it) and ``-<pgid>`` when it stops one (a watchdog someone ended is replaced at the next line, and told all
that is held). The parent holds the only write end; when it dies, for any reason, the kernel closes it, the
watchdog reads end-of-file and ends each group still listed: SIGTERM (and SIGCONT, for a stopped one), then
SIGKILL after a grace period. The watchdog ignores Ctrl-C and runs in its own session, so the parent's orderly
stop on Ctrl-C is never raced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

GRACE_S = 5.0

_lock = threading.Lock()
_held: dict[int, str] = {}  # pgid -> its leader's start time: what the watchdog must end
_write_fd: int | None = None
_watchdog: subprocess.Popen | None = None  # kept, so that it is never collected as a forgotten child


def hold(pgid: int) -> None:
    """The watchdog will end process group ``pgid`` (led by the process of that number, started now) if this
    process dies before :func:`release`."""
    with _lock:
        _held[pgid] = _started(pgid)
        _tell(f"+{pgid} {_held[pgid]}\n")


def release(pgid: int) -> None:
    """Process group ``pgid`` was stopped by its owner: the watchdog forgets it."""
    with _lock:
        _held.pop(pgid, None)
        _tell(f"-{pgid}\n")


def _tell(line: str) -> None:
    """Write ``line`` to the watchdog; the first time, or if someone ended it, to a new one told all held."""
    global _write_fd
    try:
        if _write_fd is not None:
            os.write(_write_fd, line.encode())
            return
    except BrokenPipeError:
        os.close(_write_fd)
    _write_fd = _start_watchdog()
    os.write(_write_fd, "".join(f"+{pgid} {started}\n" for pgid, started in _held.items()).encode())


def _start_watchdog() -> int:
    global _watchdog
    read_fd, write_fd = os.pipe()  # both close-on-exec: only the watchdog gets the read end, as its stdin
    _watchdog = subprocess.Popen(
        [sys.executable, "-m", "peers.lifeline"],
        stdin=read_fd,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(read_fd)
    return write_fd


def _watch() -> None:
    """The watchdog: keep the listed groups until end-of-file, then end those still listed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    groups: dict[int, str] = {}
    for line in sys.stdin:
        pgid, _, started = line[1:].strip().partition(" ")
        if line.startswith("+"):
            groups[int(pgid)] = started
        else:
            groups.pop(int(pgid), None)
    # A leader still running under its number but started at another time is a newcomer; a group whose leader
    # exited may still have our processes (the number cannot be reused while any of them lives).
    _end({pgid for pgid, started in groups.items() if _started(pgid) in (started, "")})


def _started(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/<pid>/stat``); "" if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]


def _end(groups: set[int]) -> None:
    for signum in (signal.SIGTERM, signal.SIGCONT):
        for pgid in groups:
            _signal(pgid, signum)
    deadline = time.monotonic() + GRACE_S
    while groups and time.monotonic() < deadline:
        time.sleep(0.1)
        groups = {pgid for pgid in groups if _signal(pgid, 0)}
    for pgid in groups:
        _signal(pgid, signal.SIGKILL)


def _signal(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; whether it still had a process."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


if __name__ == "__main__":
    _watch()

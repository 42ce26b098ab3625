"""``peers.lifeline``: servers started through ``peers.process`` end when the Python process that started
them is SIGKILLed (no ``atexit``, no signal handler runs): a hung (SIGSTOPped) one too, one started from a
thread that has ended, and those started before someone ended the watchdog itself; the kernel's /proc says
which processes remain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sockets import descendants
from waiting import wait_for

OWNER = """
import signal, sys, threading, time
from pathlib import Path
from peers.process import ManagedProcess

def server(name):
    return ManagedProcess(name, ["sleep", "600"], Path(sys.argv[1]), lambda: True).start()

servers = [server("sleeper-1"), server("sleeper-2")]
servers[1].send_signal(signal.SIGSTOP)  # a hung server
server("stopped").stop()  # stopped by its owner
print(*(s.pid for s in servers), flush=True)
sys.stdin.readline()  # meanwhile the watchdog is killed
later = []  # started from a thread that then ends, as the demo's incidents restart a broker
thread = threading.Thread(target=lambda: later.append(server("sleeper-3")))
thread.start()
thread.join()
print(later[0].pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running or stopped; not gone and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(pid)


def _watchdog(pid: int, not_this: int | None = None) -> int:
    """The one watchdog among ``pid``'s descendants (other than ``not_this``), waited for: ``Popen`` returns
    once the child's exec closed its close-on-exec pipe, a moment before the kernel sets the new program's
    command line, which reads empty until then (a run under the suite's load looked in that moment)."""

    def one() -> list[int]:
        found = [p for p in descendants({pid}) - {not_this} if b"peers.lifeline" in _cmdline(p)]
        return found if len(found) == 1 else []

    watchdogs = wait_for(one, timeout_s=15, every_s=0.01)
    assert watchdogs, {p: _cmdline(p) for p in descendants({pid})}
    return watchdogs[0]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # exited meanwhile
        return b""


def test_servers_end_when_the_process_that_started_them_is_killed(tmp_path):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        pids = [int(pid) for pid in owner.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
        watchdog = _watchdog(owner.pid)
        os.kill(watchdog, signal.SIGKILL)  # someone ends the watchdog: the next start brings a new one
        _wait_gone(watchdog)  # a line written before the kernel closed its pipe is read by no one
        owner.stdin.write("go on\n")
        owner.stdin.flush()
        pids.append(int(owner.stdout.readline()))
        _watchdog(owner.pid, not_this=watchdog)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in pids if _alive(pid)], "servers outlived their killed owner"
    finally:
        if owner.poll() is None:
            os.killpg(owner.pid, signal.SIGKILL)

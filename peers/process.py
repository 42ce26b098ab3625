"""Start, watch and stop one server process we own: loopback port, log file, readiness, stop by PID.

Every process is started in its own session (process group) so stopping it also ends its children, and
is remembered in a registry so that nothing outlives the Python process that started it (``atexit``; and
``peers.lifeline`` when that process is killed) and tests can assert that no server is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from peers import lifeline

HOST = "127.0.0.1"
_LIVE: dict[int, ManagedProcess] = {}


class PeerError(RuntimeError):
    """A peer failed to start or become ready; the message carries the tail of its log."""


LOWEST_PORT = 10_000
PORTS_ENV = "KOBS_PORTS"  # LOW-HIGH: the ports free_port picks from (each test worker gets its own)
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, not handed out before by this process,
    and below the kernel's ephemeral range: a port the OS picks for ``bind(0)`` comes from the range it
    also gives outgoing connections, and one of those (a client connecting to an earlier broker) once took
    a broker's port in the moment between picking it and the broker binding it."""
    lowest, highest = port_range()
    for _ in range(1000):
        port = random.randrange(lowest, highest)
        if port not in _HANDED_OUT and port_is_free(port):
            _HANDED_OUT.add(port)
            return port
    raise PeerError(f"no free TCP port on {HOST} between {lowest} and {highest}")


def port_range() -> tuple[int, int]:
    """The ports (lowest, highest excluded) :func:`free_port` picks from: ``KOBS_PORTS`` when set (processes
    starting peers side by side, such as the test suite's workers, each take their own range: two picking
    the same port before either binds it would collide), else from 10000 to the kernel's ephemeral range."""
    setting = os.environ.get(PORTS_ENV)
    if not setting:
        return LOWEST_PORT, ephemeral_low()
    low, _, high = setting.partition("-")
    if not (low.isdigit() and high.isdigit() and 1024 <= int(low) < int(high) <= 65_536):
        raise PeerError(f"{PORTS_ENV}={setting!r}: write it as LOW-HIGH in 1024-65536, such as 10000-20000")
    return int(low), int(high)


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default, 32768, when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` now (connections in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def tcp_ready(port: int) -> Callable[[], bool]:
    def check() -> bool:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
            return True
        return False

    return check


def http_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
        return False

    return check


def live_processes() -> list[ManagedProcess]:
    """Processes started here and not yet stopped."""
    return [p for p in _LIVE.values() if p.running]


class ManagedProcess:
    """One server process: ``start()`` waits for readiness, ``stop()`` ends it by PID (TERM, then KILL)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        run_dir: Path,
        ready: Callable[[], bool],
        env: dict[str, str] | None = None,
        start_timeout_s: float = 30.0,
        ports: Sequence[int] = (),
    ):
        self.name = name
        self.argv = list(argv)
        self.run_dir = Path(run_dir)
        self.log_path = self.run_dir / f"{name}.log"
        self._ready = ready
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._ports = tuple(ports)  # must be free before start, else readiness could see another server
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        """The exit status once it has exited (negative: the signal that ended it), else None."""
        return self._proc.poll() if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ManagedProcess:
        """Launch and wait until ready (or raise ``PeerError``)."""
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> ManagedProcess:
        """Start the process without waiting: peers that need each other to become ready (a KRaft
        quorum) are all launched first, then each waited for with :meth:`wait_ready`."""
        taken = [port for port in self._ports if not port_is_free(port)]
        if taken:
            raise PeerError(f"{self.name}: port {taken[0]} on {HOST} is already in use; pick another port")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.run_dir,
                env={**os.environ, **(self._env or {})},
                start_new_session=True,
            )
        _LIVE[self._proc.pid] = self
        lifeline.hold(self._proc.pid)
        return self

    def wait_ready(self) -> ManagedProcess:
        deadline = time.monotonic() + self._start_timeout_s
        while not self._ready():
            if not self.running:
                raise PeerError(f"{self.name} exited with code {self._proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise PeerError(
                    f"{self.name} not ready after {self._start_timeout_s:.0f}s: {self.log_tail()}"
                )
            time.sleep(0.05)
        return self

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the process group (SIGSTOP and SIGCONT make a hung server and revive it)."""
        if self.running:
            os.killpg(self._proc.pid, signum)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ends the process group we started (SIGTERM, then SIGKILL after ``timeout_s``)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
                os.killpg(proc.pid, signal.SIGCONT)  # a stopped (SIGSTOP) process acts on TERM once continued
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if _LIVE.pop(proc.pid, None) is not None:
            lifeline.release(proc.pid)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            return "(no log)"
        return " | ".join(text) or "(empty log)"

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for proc in list(_LIVE.values()):
        proc.stop(timeout_s=5)

"""An embedded ZooKeeper 3.8 (Debian's ``zookeeper`` package), standalone, with optional remote JMX."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from peers.jvm import jmx_flags
from peers.process import HOST, ManagedProcess, free_port

_JARS = (
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "slf4j-simple",
    "netty-all",
    "commons-cli",
    "metrics-core",
    "snappy-java",
)
CLASSPATH = ":".join(f"/usr/share/java/{jar}.jar" for jar in _JARS)


def _srvr_ok(port: int) -> bool:
    """ZooKeeper's ``srvr`` four-letter word answers once the server serves requests."""
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1) as sock:
        sock.sendall(b"srvr")
        return b"Mode:" in sock.recv(4096)
    return False


class ZooKeeper(ManagedProcess):
    def __init__(self, run_dir: Path, port: int | None = None, jmx_port: int | None = None):
        self.port = port or free_port()
        self.jmx_port = jmx_port
        run_dir = Path(run_dir)
        data_dir = run_dir / "zookeeper-data"
        data_dir.mkdir(parents=True, exist_ok=True)
        cfg = run_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime=500\ndataDir={data_dir}\nclientPort={self.port}\nclientPortAddress={HOST}\n"
            "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,mntr\nmaxSessionTimeout=60000\n"
        )
        argv = ["java", "-Xmx256m", *(jmx_flags(jmx_port) if jmx_port else [])]
        argv += ["-cp", CLASSPATH, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)]
        ports = [self.port, *([jmx_port] if jmx_port else [])]
        super().__init__("zookeeper", argv, run_dir, lambda: _srvr_ok(self.port), ports=ports)

    @property
    def connect(self) -> str:
        return f"{HOST}:{self.port}"

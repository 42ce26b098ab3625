"""A JVM serving Kafka-named MBeans over JMX/RMI: the real peer for the JMX source.

``peers/KafkaBeans.java`` is compiled with the local ``javac`` at first use into a cache directory keyed by
the source's hash. One JVM serves any number of brokers, each on its own 127.0.0.1 port with its own MBean
server (``service:jmx:rmi:///jndi/rmi://127.0.0.1:PORT/jmxrmi``, no SSL; with ``credentials`` every
endpoint requires that user and password, as a broker's JMX password file would), so a test module pays
for one JVM start. Beans are given as ``{port: ["KIND OBJECT_NAME ATTR=VALUE ...", ...]}`` (see the Java
file for the kinds).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from peers.process import ManagedProcess, tcp_ready

SOURCE = Path(__file__).with_name("KafkaBeans.java")
READY = b"kafka-beans ready"


def compiled_classes() -> Path:
    """The directory holding the compiled ``KafkaBeans`` classes, compiling them on first use."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kobs" / f"kafka-beans-{digest}"
    if not (cache / "KafkaBeans.class").exists():
        cache.parent.mkdir(parents=True, exist_ok=True)
        build = tempfile.mkdtemp(dir=cache.parent)
        subprocess.run(["javac", "-d", build, str(SOURCE)], check=True, capture_output=True)
        try:
            os.rename(build, cache)  # atomic; a concurrent compile of the same source may have won
        except OSError:
            shutil.rmtree(build)
    return cache


class KafkaBeans(ManagedProcess):
    def __init__(
        self, run_dir: Path, beans: Mapping[int, Sequence[str]], credentials: tuple[str, str] | None = None
    ):
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        argv = ["java", "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", str(compiled_classes()), "KafkaBeans"]
        for port, lines in beans.items():
            path = run_dir / f"beans-{port}.txt"
            path.write_text("\n".join(lines) + "\n")
            argv += [str(port), str(path)]
        self.ports = list(beans)
        env = {"KAFKA_BEANS_CREDENTIALS": ":".join(credentials)} if credentials else {}
        super().__init__("kafka-beans", argv, run_dir, self._ready, ports=self.ports, env=env)

    def _ready(self) -> bool:
        return READY in self.log_path.read_bytes() and all(tcp_ready(p)() for p in self.ports)

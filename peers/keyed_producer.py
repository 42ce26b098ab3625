"""A real Java producer application: Kafka's own client (``peers/KeyedProducer.java``) writing keyed records
at a steady rate. Its ``kafka.producer:type=producer-metrics`` beans are served twice, as producer apps
do: over JMX on a free loopback port, and by the Prometheus JMX exporter's Java agent over HTTP
(``deploy/jmx-exporter-producer.yaml`` names them as the producers source expects).

When a broker dies and the partitions of some keys lose their leader, their records pile up in the
``buffer.memory`` accumulator until ``send()`` blocks: the incident the platform pages on. Its log prints
sent / acknowledged / failed counts and the slowest ``send()`` every 5 s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from peers import jvm
from peers.process import HOST, ManagedProcess, free_port, tcp_ready

SOURCE = Path(__file__).with_name("KeyedProducer.java")
READY = b"keyed-producer ready"


class KeyedProducer(ManagedProcess):
    def __init__(
        self,
        run_dir: Path,
        bootstrap: str,
        topic: str,
        client_id: str,
        messages_per_s: float,
        message_bytes: int = 1024,
        keys: int = 1000,
        settings: Mapping[str, object] | None = None,
    ):
        self.client_id, self.topic = client_id, topic
        self.jmx_port, self.exporter_port = free_port(), free_port()
        classes = jvm.compiled(SOURCE, "kafka")
        argv = [
            "java", "-Xmx128m", "-XX:+UseSerialGC", *jvm.jmx_flags(self.jmx_port),
            jvm.exporter_agent(self.exporter_port, "jmx-exporter-producer.yaml"),
            "-cp", f"{classes}:{jvm.classpath('kafka')}", "KeyedProducer",
            bootstrap, topic, client_id, str(messages_per_s), str(message_bytes), str(keys),
            *(f"{key}={value}" for key, value in (settings or {}).items()),
        ]  # fmt: skip
        ports = [self.jmx_port, self.exporter_port]
        super().__init__(f"producer-{client_id}", argv, run_dir, self._ready, ports=ports)

    @property
    def jmx_address(self) -> str:
        return f"{HOST}:{self.jmx_port}"

    @property
    def exporter_url(self) -> str:
        """Its metrics in the Prometheus format, served by the JMX exporter's Java agent."""
        return f"http://{HOST}:{self.exporter_port}/metrics"

    def _ready(self) -> bool:
        return READY in self.log_path.read_bytes() and all(
            tcp_ready(port)() for port in (self.jmx_port, self.exporter_port)
        )

    def last_report(self) -> dict[str, int]:
        """The newest 5-second line of its log as numbers (``sent``, ``acked``, ``failed``,
        ``send_timeouts``, ``slowest_send_ms``); empty before the first."""
        for line in reversed(self.log_path.read_text(errors="replace").splitlines()):
            if line.startswith("sent="):
                return {k: int(v) for k, v in (field.split("=") for field in line.split())}
        return {}

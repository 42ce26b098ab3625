"""A simulation behind its wire formats: exporters per broker and producer, znodes in ZooKeeper, a clock.

``advance`` runs simulated time as fast as possible (tests); ``run`` paces it at ``speed`` × real time
(the demo). Wire state is refreshed after every tick; a dead broker's exporter stops answering, as the
JMX agent inside a dead JVM would, and answers again on the same port when the broker returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from simulator.exporter import BrokerCollector, Endpoint, ProducerCollector
from simulator.scenario import Simulation
from simulator.zookeeper import ZooKeeperPublisher


class Runtime:
    def __init__(
        self,
        sim: Simulation,
        zookeeper: str | None = None,
        epoch_ms: int | None = None,
        notification_ttl_s: float | None = 1.0,
    ):
        self.sim = sim
        self.lock = threading.Lock()
        cluster = sim.cluster
        self.brokers = {
            b: Endpoint(f"broker-{b}", BrokerCollector(cluster, b, self.lock)) for b in cluster.brokers
        }
        self.producers = {
            client_id: Endpoint(f"producer-{client_id}", ProducerCollector(p, self.lock))
            for client_id, p in sim.producers.items()
        }
        epoch_ms = round(time.time() * 1000) if epoch_ms is None else epoch_ms
        self.zookeeper = (
            ZooKeeperPublisher(zookeeper, cluster, epoch_ms, notification_ttl_s) if zookeeper else None
        )

    def start(self) -> Runtime:
        try:
            for endpoint in self.producers.values():
                endpoint.start()
            self._sync()
            if self.zookeeper:
                self.zookeeper.start()
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for endpoint in [*self.brokers.values(), *self.producers.values()]:
            endpoint.stop()
        if self.zookeeper and self.zookeeper.client.connected:
            self.zookeeper.stop()

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def endpoints(self) -> list[tuple[str, str]]:
        return [(e.name, e.url) for e in [*self.brokers.values(), *self.producers.values()]]

    def advance(self, seconds: float) -> None:
        """Runs ``seconds`` of simulated time, refreshing the wire after every tick."""
        for _ in range(round(seconds / self.sim.scenario.tick_s)):
            self._tick()

    def run(self, speed: float, duration_s: float | None, on_tick: Callable[[], None] | None = None) -> None:
        """Ticks at ``speed`` simulated seconds per wall second, for ``duration_s`` simulated seconds."""
        tick_s = self.sim.scenario.tick_s
        started, ticks = time.monotonic(), 0
        while duration_s is None or ticks * tick_s < duration_s:
            self._tick()
            ticks += 1
            if on_tick:
                on_tick()
            delay = started + ticks * tick_s / speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _tick(self) -> None:
        with self.lock:
            self.sim.tick()
        self._sync()

    def _sync(self) -> None:
        for broker_id, endpoint in self.brokers.items():
            if self.sim.cluster.brokers[broker_id].alive:
                endpoint.start()
            else:
                endpoint.stop()
        if self.zookeeper and self.zookeeper.client.connected:
            with self.lock:
                self.zookeeper.sync()

"""Test helper: one scrape of a simulated cluster as the pipeline would hand it to an analysis.

Each live broker's and producer's JMX-exporter page goes through the collectors' exposition parser (a dead
broker's endpoint refuses connections, so it is not scraped), plus each partition's leader as the Admin API
reports it (-1 without a live leader); only the names in ``inputs`` are kept, as the pipeline does.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, generate_latest

from collectors.exposition import DEFAULT_MAPPING, parse_exposition
from common import names
from simulator.exporter import BrokerCollector, ProducerCollector
from simulator.scenario import Simulation
from spark_jobs.analysis import Observation


def scrape_simulation(sim: Simulation, inputs: frozenset[str], cluster: str = "sim") -> list[Observation]:
    lock = threading.Lock()
    pages = [
        (BrokerCollector(sim.cluster, b, lock), {"broker": str(b)})
        for b, broker in sim.cluster.brokers.items()
        if broker.alive
    ]
    pages += [(ProducerCollector(p, lock), {}) for p in sim.producers.values()]
    observations = []
    for collector, labels in pages:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        for s in parse_exposition(generate_latest(registry).decode(), DEFAULT_MAPPING, labels):
            if s.name in inputs:
                observations.append(
                    Observation(s.name, cluster, "exporter", dict(s.labels), sim.now, s.value, None)
                )
    for p in sim.cluster.partitions:
        leader = p.leader if sim.cluster.has_live_leader(p) else -1
        labels = {"topic": p.topic, "partition": str(p.index)}
        observations.append(
            Observation(names.PARTITION_LEADER, cluster, "admin", labels, sim.now, leader, None)
        )
    return [o for o in observations if o.name in inputs]

"""Properties every step of the model must keep; ``violations`` names each one that is broken."""

from __future__ import annotations

from simulator.cluster import Cluster


def violations(cluster: Cluster) -> list[str]:
    found = []
    alive = {b.id for b in cluster.brokers.values() if b.alive}
    for p in cluster.partitions:
        where = f"t={cluster.now} {p.name}"
        low = [r for r in p.isr if p.leo[r] < p.hw]
        if low:
            found.append(f"{where}: HW {p.hw} above the LEO of ISR members {low}")
        if p.leader >= 0 and p.leader not in p.isr and not p.unclean:
            found.append(f"{where}: leader {p.leader} not in ISR {p.isr} after a clean election")
        if not 1 <= len(p.isr) <= len(p.replicas) or len(set(p.isr)) != len(p.isr):
            found.append(f"{where}: ISR {p.isr} is not 1..{len(p.replicas)} distinct replicas")
        if not cluster.has_live_leader(p) and cluster.controller >= 0 and alive & set(p.isr):
            found.append(f"{where}: offline although ISR members {sorted(alive & set(p.isr))} are alive")
    for producer in cluster.producers:
        size = cluster.topics[producer.spec.topic].spec.message_bytes
        if producer.blocked and producer.available_bytes >= size:
            found.append(
                f"t={cluster.now} {producer.spec.client_id}: blocked with {producer.available_bytes} B free"
            )
        if not 0 <= producer.used_bytes <= producer.spec.buffer_memory:
            found.append(
                f"t={cluster.now} {producer.spec.client_id}: buffer use {producer.used_bytes} out of range"
            )
    return found

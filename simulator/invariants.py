"""Properties every step of the model must keep; ``violations`` names each one that is broken."""

from __future__ import annotations

import numpy as np

from simulator.cluster import Cluster


def violations(cluster: Cluster) -> list[str]:
    """Checked on all partitions at once; each broken one is then described partition by partition."""
    st, alive = cluster.state, cluster.alive_slots()
    replica, in_isr = st.broker >= 0, st.isr_rank >= 0
    checks = {
        "HW above the LEO of an ISR member": (in_isr & (st.leo < st.hw)).any(axis=0),
        "log start above the HW": st.log_start > st.hw,
        "leader not in the ISR after a clean election": (st.leader >= 0)
        & ~((st.broker == st.leader) & in_isr).any(axis=0)
        & ~st.unclean,
        "ISR is not 1..RF replicas": ((in_isr & ~replica).any(axis=0) | ~in_isr.any(axis=0)),
        "offline although an ISR member is alive": ~alive[st.leader]
        & (cluster.controller >= 0)
        & (in_isr & alive[st.broker]).any(axis=0),
    }
    found = []
    for problem, broken in checks.items():
        for row in np.flatnonzero(broken) if broken.any() else ():
            p = cluster.partitions[row]
            leo = {r: p.leo[r] for r in p.replicas}
            found.append(
                f"t={cluster.now} {p.name}: {problem} (leader {p.leader}, ISR {p.isr}, HW {p.hw}, LEO {leo})"
            )
    for group in cluster.groups:
        rows = cluster.topics[group.spec.topic].rows
        if group.mode == "active" and len(group.position):
            # only an unclean election lowers a HW, so only then may a position stand above it
            beyond = (group.position > st.hw[rows]) & alive[st.leader[rows]] & ~st.unclean[rows]
            if beyond.any():
                found.append(
                    f"t={cluster.now} {group.spec.group}: read beyond the HW of {np.flatnonzero(beyond)}"
                )
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

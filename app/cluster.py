"""The current replica placement of a watched cluster, from its metadata (Admin API), for the what-ifs."""

from __future__ import annotations

from collections.abc import Mapping

from collectors.admin import admin_client
from common.config import Cluster
from common.errors import InputError
from common.placement import Assignment


def live_placement(cluster: Cluster, timeout_s: float = 5.0) -> Mapping[str, Assignment]:
    """topic -> partition -> replicas (preferred leader first) of every non-internal topic."""
    if not cluster.bootstrap_servers:
        raise InputError(
            "cluster", f"{cluster.name}: no bootstrap_servers configured — its topics are unknown"
        )
    try:
        topics = admin_client(cluster).list_topics(timeout=timeout_s).topics
    except Exception as exc:  # KafkaException: the cluster did not answer in time
        servers = ",".join(cluster.bootstrap_servers)
        raise InputError(
            "cluster", f"{cluster.name}: no metadata from {servers} ({exc}) — is the cluster reachable?"
        ) from None
    return {
        name: {p: list(meta.replicas) for p, meta in sorted(topic.partitions.items())}
        for name, topic in sorted(topics.items())
        if not name.startswith("__")
    }

"""The current replica placement of a watched cluster, from its metadata (Admin API), for the what-ifs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from common.config import Cluster, ConfigError
from common.errors import InputError
from common.kafka_clients import cluster_settings, metadata
from common.placement import Assignment


def live_placement(cluster: Cluster, timeout_s: float = 5.0) -> Mapping[str, Assignment]:
    """topic -> partition -> replicas (preferred leader first) of every non-internal topic.

    Connects with the cluster's ``security`` settings; InputError naming the cause when the cluster refuses
    the login or the certificates, or does not answer, or its password variable is not set.
    """
    if not cluster.bootstrap_servers:
        raise InputError("cluster", f"{cluster.name}: no bootstrap_servers set — its topics are unknown")
    try:
        settings = cluster_settings(cluster) | {"client.id": f"kobs-{cluster.name}"}
        topics = metadata(settings, f"clusters[{cluster.name}]", timeout_s).topics
    except ConfigError as exc:  # AccessError among them
        raise InputError("cluster", str(exc)) from None
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


def cluster_shape(placement: Mapping[str, Assignment]) -> dict[str, int]:
    """The what-if's sizing inputs a live cluster's placement fixes: brokers holding replicas, partitions
    over all topics, and the most common replication factor (ties: the larger)."""
    replicas = [r for topic in placement.values() for r in topic.values()]
    if not replicas:
        raise InputError("cluster", "the cluster has no topics yet: its shape is unknown")
    factors = Counter(len(r) for r in replicas)
    return {
        "brokers": len({b for r in replicas for b in r}),
        "partitions": len(replicas),
        "replication_factor": max(factors, key=lambda f: (factors[f], f)),
    }

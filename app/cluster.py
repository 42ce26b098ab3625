"""The current replica placement of a watched cluster, from its metadata (Admin API), for the what-ifs."""

from __future__ import annotations

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

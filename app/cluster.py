"""A watched cluster as the what-ifs' starting point: its replica placement and shape (Admin API
metadata), and its produced traffic as the jobs measure it (Prometheus)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from common.config import Cluster, ConfigError
from common.errors import InputError
from common.kafka_clients import cluster_settings, metadata
from common.placement import Assignment

MIB = 2**20


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


def traffic_queries(cluster: str) -> dict[str, str]:
    """PromQL for a cluster's produced bytes per second (the jobs' 1-minute rates summed over topics) and its
    bytes and messages produced in the last 5 minutes (their ratio is the mean message size, whatever
    ``increase()`` extrapolates for series younger than the window)."""
    where = f'{{cluster="{cluster}"}}'
    return {
        "bytes_in_per_s": f"sum(kobs_topic_bytes_in_per_second{where})",
        "bytes_in_5m": f"sum(increase(kobs_topic_bytes_in_total{where}[5m]))",
        "messages_in_5m": f"sum(increase(kobs_topic_messages_in_total{where}[5m]))",
    }


def traffic_shape(
    bytes_in_per_s: float | None, bytes_in_5m: float | None = None, messages_in_5m: float | None = None
) -> dict[str, float]:
    """The what-if's traffic inputs a cluster's measured figures fix: produced MiB/s and the mean message size
    (bytes as the brokers count them, record and batch headers included); none while idle or unknown."""
    if not bytes_in_per_s or bytes_in_per_s <= 0:
        return {}
    shape: dict[str, float] = {"ingress_mbps": bytes_in_per_s / MIB}
    if bytes_in_5m and messages_in_5m and bytes_in_5m > 0 and messages_in_5m > 0:
        shape["message_bytes"] = max(1, round(bytes_in_5m / messages_in_5m))
    return shape

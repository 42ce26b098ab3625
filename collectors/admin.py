"""Admin API plumbing: one client per watched cluster; waiting on many futures under one deadline."""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient

from common.config import Cluster
from common.kafka_clients import cluster_settings

K = TypeVar("K", bound=Hashable)


def admin_client(cluster: Cluster) -> AdminClient:
    return AdminClient(cluster_settings(cluster) | {"client.id": f"kobs-{cluster.name}"})


def wait_all(futures: Mapping[K, Future], deadline: float, what: str, errors: list[str]) -> dict[K, Any]:
    """Results of the futures that finish by ``deadline`` (monotonic); one error line per failure kind."""
    results: dict[K, Any] = {}
    failures: dict[str, int] = {}
    for key, future in futures.items():
        try:
            results[key] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # KafkaException, TimeoutError: both are faults of the watched cluster
            reason = f"{type(exc).__name__}: {exc}"
            failures[reason] = failures.get(reason, 0) + 1
    errors.extend(f"{what}: {n} failed with {reason}" for reason, n in failures.items())
    return results


def partitions(admin: AdminClient, timeout_s: float) -> dict[str, list[int]]:
    """Partition ids of every non-internal topic (names starting with ``__`` are Kafka's own)."""
    topics = admin.list_topics(timeout=timeout_s).topics
    return {name: sorted(t.partitions) for name, t in topics.items() if not name.startswith("__")}

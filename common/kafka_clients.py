"""librdkafka settings for the platform's Kafka clients, built in one place from configuration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.config import Cluster, Config, Security, secret

SECRET_KEYS = ("sasl.password", "ssl.key.password")


def client_settings(
    servers: list[str], security: Security, extra: Mapping[str, Any] | None = None, where: str = "cluster"
) -> dict[str, Any]:
    """Connection and security settings; secrets are read from the environment here, never stored."""
    settings: dict[str, Any] = {
        "bootstrap.servers": ",".join(servers),
        "security.protocol": security.protocol,
    }
    optional = {
        "sasl.mechanism": security.sasl_mechanism,
        "sasl.username": security.sasl_username,
        "sasl.password": secret(security.sasl_password_env, f"{where}.security.sasl_password_env"),
        "ssl.ca.location": security.ssl_ca_location,
        "ssl.certificate.location": security.ssl_certificate_location,
        "ssl.key.location": security.ssl_key_location,
        "ssl.key.password": secret(security.ssl_key_password_env, f"{where}.security.ssl_key_password_env"),
    }
    settings.update({k: v for k, v in optional.items() if v is not None})
    settings.update(extra or {})
    return settings


def cluster_settings(cluster: Cluster) -> dict[str, Any]:
    """Admin/consumer settings for a watched cluster (its ``client_properties`` win)."""
    return client_settings(
        cluster.bootstrap_servers, cluster.security, cluster.client_properties, f"clusters[{cluster.name}]"
    )


def metrics_producer_settings(config: Config) -> dict[str, Any]:
    """Producer settings for the metrics topic: batched, compressed, idempotent, never blocking long."""
    base = client_settings(config.metrics_bootstrap, config.metrics_topic.security, where="metrics_topic")
    return base | {
        "client.id": "kobs-collector",
        "enable.idempotence": True,
        "compression.type": "lz4",
        "linger.ms": 50,
        "message.timeout.ms": 30000,
    }


def redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy safe to log: secret values replaced."""
    return {k: ("***" if k in SECRET_KEYS else v) for k, v in settings.items()}

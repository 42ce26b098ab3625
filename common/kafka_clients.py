"""librdkafka settings for the platform's Kafka clients, built in one place from configuration, and the
check that they work (:func:`check_access`): a cluster that refuses the login or the certificates is a
configuration error named in one line, not a stream of librdkafka log lines and a "transport failure"."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata
from cryptography.hazmat.primitives import serialization

from common.config import Cluster, Config, ConfigError, Security, secret
from common.java import quoted

# librdkafka's own log lines up to CRIT only: while a cluster is unreachable each client logs a FAIL line per
# connection attempt (about 90 a second in kobs collect). The same errors reach the code (error callbacks,
# exceptions), which logs one line per change of state; ``kobs -v`` shows librdkafka's lines again.
LIBRDKAFKA_LOG_LEVEL = 2
# How long every kobs client waits for one broker's answer before it drops the connection and asks again,
# there or elsewhere (librdkafka: 30 s a request, 60 s a socket; Kafka's Java client: 30 s). A hung broker
# (SIGSTOPped, in a long GC pause: its sockets still open) otherwise held each request for that long: the
# metadata sources were blind for a minute, the metrics producer's records failed into the spool with every
# source's records behind them, and each micro-batch of kobs stream waited. Kafka fences a silent broker
# after 9 s by default, so the next attempt finds its partitions' new leaders.
HUNG_BROKER_TIMEOUT_MS = 10_000
# How long a new connection may take to be ready (TCP, TLS, SASL and the ApiVersionRequest that opens it;
# librdkafka: 30 s). A hung broker accepts connections (its kernel does) and answers nothing: a request
# queued for the new connection waited for the ApiVersionRequest's timeout, HUNG_BROKER_TIMEOUT_MS.
CONNECTION_SETUP_TIMEOUT_MS = 5_000
log = logging.getLogger(__name__)


def client_settings(
    servers: list[str], security: Security, extra: Mapping[str, Any] | None = None, where: str = "cluster"
) -> dict[str, Any]:
    """Connection and security settings; secrets are read from the environment here, never stored."""
    settings: dict[str, Any] = {
        "bootstrap.servers": ",".join(servers),
        "security.protocol": security.protocol,
        "log_level": LIBRDKAFKA_LOG_LEVEL if not log.isEnabledFor(logging.DEBUG) else 7,
        "socket.connection.setup.timeout.ms": CONNECTION_SETUP_TIMEOUT_MS,
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


JAAS_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_client_settings(servers: list[str], security: Security, where: str) -> dict[str, str]:
    """The settings of :func:`client_settings` for Kafka's Java client (Spark's Kafka source): the SASL login
    as a JAAS line, the PEM files as PEM trust and key stores (the key and its chain as values, so secret
    values: Spark redacts them, ``spark_jobs.stream.spark_session``)."""
    settings = {"bootstrap.servers": ",".join(servers), "security.protocol": security.protocol}
    if security.sasl_mechanism:
        module = JAAS_LOGIN_MODULES.get(security.sasl_mechanism)
        if module is None:
            raise ConfigError(
                f"config error: {where}.security.sasl_mechanism {security.sasl_mechanism} is not supported"
                " by kobs stream's Kafka source (Kafka's Java client): use PLAIN or SCRAM there"
            )
        password = secret(security.sasl_password_env, f"{where}.security.sasl_password_env") or ""
        settings["sasl.mechanism"] = security.sasl_mechanism
        settings["sasl.jaas.config"] = (
            f"{module} required username={quoted(security.sasl_username or '')} password={quoted(password)};"
        )
    if security.ssl_ca_location:
        settings["ssl.truststore.type"] = "PEM"
        settings["ssl.truststore.location"] = security.ssl_ca_location
    if security.ssl_certificate_location and security.ssl_key_location:
        settings["ssl.keystore.type"] = "PEM"
        settings["ssl.keystore.certificate.chain"] = _read(security.ssl_certificate_location, where)
        key_password = secret(security.ssl_key_password_env, f"{where}.security.ssl_key_password_env")
        settings["ssl.keystore.key"] = _pkcs8(security.ssl_key_location, key_password, where)
    return settings


def _pkcs8(path: str, password: str | None, where: str) -> str:
    """The client key as unencrypted PKCS#8 PEM, the one form Java's PEM key store reads whatever the file
    holds (it reads no PKCS#1 key, and no key encrypted with PBES2, openssl's default)."""
    try:
        key = serialization.load_pem_private_key(
            _read(path, where).encode(), password.encode() if password is not None else None
        )
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"config error: {where}.security: cannot read the key {path}: {exc}") from None
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode()


def _read(path: str, where: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config error: {where}.security: cannot read {path}: {exc}") from None


def cluster_settings(cluster: Cluster) -> dict[str, Any]:
    """Admin/consumer settings for a watched cluster (its ``client_properties`` win)."""
    return client_settings(
        cluster.bootstrap_servers, cluster.security, cluster.client_properties, f"clusters[{cluster.name}]"
    )


def metrics_topic_settings(config: Config) -> dict[str, Any]:
    """Connection and security settings for the metrics topic's cluster."""
    return client_settings(config.metrics_bootstrap, config.metrics_topic.security, where="metrics_topic")


def metrics_producer_settings(config: Config) -> dict[str, Any]:
    """Producer settings for the metrics topic: batched, compressed, idempotent, never blocking long. A
    produce request to a hung leader is retried at the new one within ``message.timeout.ms``."""
    return metrics_topic_settings(config) | {
        "client.id": "kobs-collector",
        "enable.idempotence": True,
        "compression.type": "lz4",
        "linger.ms": 50,
        "message.timeout.ms": 30000,
        "request.timeout.ms": HUNG_BROKER_TIMEOUT_MS,
        "socket.timeout.ms": HUNG_BROKER_TIMEOUT_MS,
    }


class AccessError(ConfigError):
    """The cluster refused the configured login or certificates, or librdkafka refused the settings."""


class LoginRefused(AccessError):
    """The cluster refused the configured login or certificates (the settings themselves were taken)."""


class _DebugLog:
    """A librdkafka ``logger``: its lines go to this module's log at debug level (``kobs -v`` shows them).
    Only for clients that are polled: librdkafka queues their log lines until then."""

    def log(self, _level: int, fmt: str, *args: object) -> None:
        log.debug(fmt, *args)


def refusal(error: KafkaError) -> bool:
    """Whether a client error says the cluster refused us (not that it is down): SASL authentication, a
    TLS handshake that failed here (certificate not trusted) or there (our certificate refused)."""
    if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
        return True
    return error.code() == KafkaError._TRANSPORT and "SSL routines" in error.str()


def cause(error: KafkaError) -> str:
    """The reason of a client error without librdkafka's broker prefix and timing suffix."""
    text = error.str()
    _, _, reason = text.partition("/bootstrap: ")
    reason = reason or text.split("]: ", 1)[-1]
    return reason.split(" (after ", 1)[0]


def metadata(
    settings: Mapping[str, Any], where: str, timeout_s: float = 5.0, topic: str | None = None
) -> ClusterMetadata:
    """Cluster metadata (one topic's or all) through a short-lived admin client. Asking for a topic never
    creates it: brokers with ``auto.create.topics.enable`` (Kafka's default) create a topic a client asks
    metadata for, with the broker's defaults, and librdkafka's admin client asks so unless told not to.

    Raises :class:`LoginRefused` as soon as the cluster refuses the login or the certificates,
    :class:`AccessError` when librdkafka refuses the settings (a key file it cannot read);
    ``KafkaException`` when the cluster does not answer (down, or no answer in ``timeout_s``).
    """
    errors: list[KafkaError] = []
    servers = settings.get("bootstrap.servers", "?")
    try:
        admin = AdminClient(
            {**settings, "allow.auto.create.topics": False, "error_cb": errors.append, "logger": _DebugLog()}
        )
    except KafkaException as exc:
        raise AccessError(f"{where}: the client settings are refused: {exc.args[0].str()}") from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return admin.list_topics(topic, timeout=max(0.1, min(0.5, deadline - time.monotonic())))
        except KafkaException as exc:
            failure = exc
        admin.poll(0)  # serves the queued errors (and log lines)
        refused = [e for e in errors if refusal(e)]
        if refused:
            raise LoginRefused(
                f"{where}: cannot connect to {servers}: {cause(refused[0])} — check {where}.security"
            ) from None
        down = any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors)
        if down or time.monotonic() >= deadline:
            raise failure


def check_access(settings: Mapping[str, Any], where: str, timeout_s: float = 5.0) -> None:
    """:class:`AccessError` naming the cause when ``settings`` cannot work against their cluster. A cluster
    that is down or slow passes: that is an outage, which the caller rides out."""
    with contextlib.suppress(KafkaException):
        metadata(settings, where, timeout_s)


def check_config_access(config: Config, timeout_s: float = 5.0) -> list[LoginRefused]:
    """:func:`check_access` of the metrics topic and of every cluster with Admin API access at once (each
    distinct set of settings once): the watched clusters that refuse the login or the certificates are
    returned, in configuration order; the metrics topic's refusal, and settings librdkafka refuses, are
    raised."""
    checks: dict[str, tuple[str, dict[str, Any]]] = {}
    for where, settings in [
        (
            "metrics_topic",
            metrics_topic_settings(config),
        ),
        *((f"clusters[{c.name}]", cluster_settings(c)) for c in config.clusters if c.bootstrap_servers),
    ]:
        checks.setdefault(repr(sorted(settings.items())), (where, settings))
    with ThreadPoolExecutor(len(checks), thread_name_prefix="kobs-access") as pool:
        done = [pool.submit(check_access, settings, where, timeout_s) for where, settings in checks.values()]
    refused = []
    for (where, _), future in zip(checks.values(), done, strict=True):
        try:
            future.result()
        except LoginRefused as error:
            if where == "metrics_topic":
                raise
            refused.append(error)
    return refused

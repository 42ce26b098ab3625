"""Disk space of every broker's log directories, from the Admin API: DescribeLogDirs, version 4 and later
(Kafka 3.3+), answers each log directory's total and usable bytes (the broker's own ``getTotalSpace`` and
``getUsableSpace`` of the directory's filesystem). Kafka serves no JMX metric for it.

confluent-kafka's admin client has no DescribeLogDirs, so this source asks with kafka-python's, with the
cluster's security settings; it asks for no partitions (their sizes come from the brokers' log beans). A
directory that failed answers an error code and no space: it is left out (the brokers' offline log
directory count reports it). Brokers are asked one after the other, each within the client's request
timeout: a broker that does not answer is an error line naming it, costs this source that long, and the
other brokers' directories are still reported.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from collectors.admin import REFUSED, refusal_text
from collectors.source import Scrape, now_ms
from common import names
from common.config import Cluster, secret
from common.contract import Batch, Sample
from common.kafka_clients import HUNG_BROKER_TIMEOUT_MS

SOURCE = "admin/log_dirs"
# kafka-python's own log lines up to CRITICAL only (as librdkafka's): a broker down logs an ERROR line per
# connection attempt; the source reports one error line a scrape instead
logging.getLogger("kafka").setLevel(logging.CRITICAL)


def client_settings(cluster: Cluster, timeout_s: float) -> dict[str, Any]:
    """kafka-python's names for the cluster's connection and security settings (secrets from the
    environment); ValueError for a SASL mechanism it cannot log in with here."""
    security, where = cluster.security, f"clusters[{cluster.name}].security"
    if security.sasl_mechanism == "OAUTHBEARER":
        raise ValueError(f"{where}.sasl_mechanism OAUTHBEARER: the log dirs source cannot log in with it")
    timeout_ms = min(HUNG_BROKER_TIMEOUT_MS, int(timeout_s * 1000))
    settings = {
        "bootstrap_servers": list(cluster.bootstrap_servers),
        "client_id": "kobs-log-dirs",
        "security_protocol": security.protocol,
        "request_timeout_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,  # a refused login only ever times out (30 s by default)
        "sasl_mechanism": security.sasl_mechanism,
        "sasl_plain_username": security.sasl_username,
        "sasl_plain_password": secret(security.sasl_password_env, f"{where}.sasl_password_env"),
        "ssl_cafile": security.ssl_ca_location,
        "ssl_certfile": security.ssl_certificate_location,
        "ssl_keyfile": security.ssl_key_location,
        "ssl_password": secret(security.ssl_key_password_env, f"{where}.ssl_key_password_env"),
    }
    return {k: v for k, v in settings.items() if v is not None}


def space_samples(answers: list[dict]) -> list[Sample]:
    """Total and usable bytes of each log directory that answered without error, labelled by broker and
    path (``describe_log_dirs`` answers: a dict per broker with its ``log_dirs``)."""
    samples = []
    for answer in answers:
        for entry in answer["log_dirs"]:
            if entry["error_code"] != 0 or entry.get("total_bytes", -1) < 0:
                continue  # a failed directory (KAFKA_STORAGE_ERROR), or a broker before Kafka 3.3
            labels = {"broker": str(answer["broker"]), "log_dir": entry["log_dir"]}
            samples += [
                Sample(names.LOG_DIR_TOTAL_BYTES, labels, float(entry["total_bytes"])),
                Sample(names.LOG_DIR_USABLE_BYTES, labels, float(entry["usable_bytes"])),
            ]
    return samples


class LogDirSource:
    """The log directories' disk space of one cluster's brokers; never raises for a cluster fault."""

    def __init__(self, cluster: Cluster, timeout_s: float = 10.0, watched: AdminClient | None = None):
        """``watched``: the cluster's Admin API client (confluent-kafka), whose word on a refused login or
        certificate names the cause where kafka-python only times out."""
        self.cluster, self.name, self.timeout_s = cluster, SOURCE, timeout_s
        self._settings = client_settings(cluster, timeout_s)  # a configuration error stops the start
        self._watched = watched
        self._admin: KafkaAdminClient | None = None

    def collect(self) -> Scrape:
        ts, answers, errors = now_ms(), [], []
        try:
            if self._admin is None:
                self._admin = KafkaAdminClient(**self._settings)
            brokers = sorted(b["broker_id"] for b in self._admin.describe_cluster()["brokers"])
        except Exception as exc:  # kafka-python's errors: no broker reachable, a timeout, a refused login
            self.close()  # a fresh client next time: it reconnects and relearns the brokers
            refused = refusal_text(self._watched) if self._watched is not None else None
            error = f"{REFUSED}: {refused}" if refused else f"describe_log_dirs: {exc}"
            return Scrape(Batch(self.cluster.name, SOURCE, ts), [error])
        for broker in brokers:  # one broker's failure costs only its own directories
            try:
                answers += self._admin.describe_log_dirs(topic_partitions={}, brokers=[broker])
            except Exception as exc:
                errors.append(f"describe_log_dirs: broker {broker}: {exc}")
        return Scrape(Batch(self.cluster.name, SOURCE, ts, tuple(space_samples(answers))), errors)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

"""``kobs maintenance check``: before a planned restart of a broker, what it would break on the live cluster.

The I/O around :func:`kobs.maintenance.restart_impact`: reads every partition's leader, replicas and ISR,
and the ``min.insync.replicas`` of the topics the broker is in sync for, through the Admin API (the
cluster's security settings apply; bounded timeouts), then prints the findings most severe first, ending
with a verdict, or as one JSON document. Kafka's internal topics (``__consumer_offsets``, ...) are not
checked.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from collectors.admin import LISTING_TIMEOUT_S, admin_client, cluster_view
from collectors.futures import wait_all
from collectors.isr import PartitionKey, PartitionState
from collectors.metadata import min_isr, partition_states, request_topic_configs
from common.config import Cluster, Config
from kobs.maintenance import ProducerFinding, RestartImpact, TopicFinding, restart_impact

EXIT_SAFE, EXIT_UNSAFE, EXIT_CANNOT_TELL = 0, 1, 2
CONFIGS_TIMEOUT_S = 10.0  # describe_configs of the topics the broker is in sync for


class CheckError(Exception):
    """The check cannot run; ``str()`` is one line naming the option or key and the fix."""


def run_check(config: Config, cluster_name: str, broker: int, as_json: bool) -> int:
    """Print the findings; 0 when the restart is safe, 1 when it is not, 2 when the check cannot tell."""
    try:
        cluster = find_cluster(config, cluster_name)
        impact = impact_now(cluster, broker)
    except CheckError as exc:
        print(f"kobs maintenance check: {exc}", file=sys.stderr)
        return EXIT_CANNOT_TELL
    print(render_json(cluster.name, impact) if as_json else "\n".join(render_text(impact)))
    return EXIT_SAFE if impact.safe else EXIT_UNSAFE


def impact_now(cluster: Cluster, broker: int) -> RestartImpact:
    """What a restart of ``broker`` would break on the live ``cluster`` now (CheckError if it cannot tell)."""
    partitions, topics_min_isr = read_cluster(admin_client(cluster), cluster.name, broker)
    return restart_impact(broker, partitions, topics_min_isr, producer_topics(cluster))


def find_cluster(config: Config, name: str) -> Cluster:
    """The configured cluster ``name``, with the Admin API access the check needs."""
    clusters = {c.name: c for c in config.clusters}
    if name not in clusters:
        known = ", ".join(clusters)
        raise CheckError(f"--cluster {name}: no such cluster in the configuration — pass one of: {known}")
    if not clusters[name].bootstrap_servers:
        raise CheckError(
            f"--cluster {name}: clusters[{name}].bootstrap_servers is not set — add its brokers (host:port) "
            "there: the check reads partition state through the Admin API"
        )
    return clusters[name]


def read_cluster(
    admin: AdminClient, cluster_name: str, broker: int
) -> tuple[dict[PartitionKey, PartitionState], dict[str, int]]:
    """Every partition's state, and the ``min.insync.replicas`` of the topics ``broker`` is in sync for."""
    try:
        view = cluster_view(admin, LISTING_TIMEOUT_S)
    except KafkaException as exc:
        raise CheckError(
            f"cannot reach cluster {cluster_name}: {exc.args[0].str()} — check that its brokers are up and "
            f"clusters[{cluster_name}].bootstrap_servers"
        ) from None
    if broker not in view.brokers:
        listed = ", ".join(map(str, sorted(view.brokers)))
        raise CheckError(
            f"--broker {broker}: cluster {cluster_name} lists brokers {listed} — pass one of them (a broker "
            "that is down already is not listed)"
        )
    failed = sorted(name for name, topic in view.topics.items() if topic.error is not None)
    if failed:
        error = view.topics[failed[0]].error
        raise CheckError(f"cluster {cluster_name}: no metadata for topic {failed[0]} ({error}) — try again")
    partitions = partition_states(view.topics)
    in_sync = sorted({topic for (topic, _), state in partitions.items() if broker in state.isr})
    futures = request_topic_configs(admin, in_sync, CONFIGS_TIMEOUT_S)
    errors: list[str] = []
    described = wait_all(futures, time.monotonic() + CONFIGS_TIMEOUT_S, "describe_configs", errors)
    if errors:
        raise CheckError(f"cluster {cluster_name}: cannot read min.insync.replicas: {errors[0]}")
    return partitions, min_isr({resource.name: config for resource, config in described.items()})


def producer_topics(cluster: Cluster) -> dict[str, set[str]]:
    """The topics each configured producer writes, by client id."""
    topics: dict[str, set[str]] = {}
    for producer in cluster.producers:
        topics.setdefault(producer.client_id, set()).update(producer.topics)
    return topics


def render_text(impact: RestartImpact) -> list[str]:
    """A line per finding, most severe first, then the verdict."""
    acks = "(kobs cannot see a producer's acks)"
    lines = [_line("offline", _partitions(f) + _shrunk(f, impact.broker)) for f in impact.offline]
    lines += [_line("producer blocks", _writes(p)) for p in impact.producers_blocked]
    lines += [_line("under min ISR", _partitions(f)) for f in impact.under_min_isr]
    lines += [
        _line("blocks if acks=all", f"{_writes(p)} {acks}") for p in impact.producers_blocked_if_acks_all
    ]
    lines += [
        _line("at min ISR", f"{_partitions(f)}: one more lost replica puts them under")
        for f in impact.at_min_isr
    ]
    return [*lines, _line("leadership", _leadership(impact)), impact.verdict]


def render_json(cluster_name: str, impact: RestartImpact) -> str:
    """The findings, the verdict and whether the restart is safe, as one JSON document."""
    document = {"cluster": cluster_name, **dataclasses.asdict(impact)}
    return json.dumps(document | {"safe": impact.safe, "verdict": impact.verdict}, indent=2)


def _partitions(finding: TopicFinding) -> str:
    ids = ", ".join(map(str, finding.partitions))
    return (
        f"{finding.topic}: partitions {ids} (replication factor {finding.replication_factor}, "
        f"min.insync.replicas {finding.min_insync_replicas})"
    )


def _shrunk(finding: TopicFinding, broker: int) -> str:
    """Why a replicated partition goes offline: its ISR has already shrunk to the broker alone."""
    return f"; ISR already shrunk to broker {broker} alone" if finding.replication_factor > 1 else ""


def _line(label: str, text: str) -> str:
    return f"{label:<20} {text}"


def _writes(producer: ProducerFinding) -> str:
    return f"{producer.client_id}: writes {', '.join(producer.topics)}"


def _leadership(impact: RestartImpact) -> str:
    leads = f"broker {impact.broker} leads {impact.leads} partition{'s' if impact.leads != 1 else ''}"
    return leads + (
        ": a controlled shutdown moves their leadership to in-sync followers first" if impact.leads else ""
    )

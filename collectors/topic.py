"""The metrics topic exists before the first record: created when missing, for brokers with auto-create off.

The check describes that one topic (``describe_topics``, which never auto-creates it, unlike a metadata
request naming it; listing every topic instead would cost a metadata request of every partition on a large
cluster at each start and each probe during an outage) and creates it with the configured partitions and
replication factor if it is absent. A cluster that does not
answer is not an error here (the publisher spools until it does); a cluster that refuses is a
:class:`TopicError` naming the cause and the fix.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

_FIXES = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "grant the collector CREATE on it, or create it yourself",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "grant the collector CREATE on the cluster, or create it",
    KafkaError.INVALID_REPLICATION_FACTOR: "set metrics_topic.replication_factor to at most the broker count",
    KafkaError.INVALID_PARTITIONS: "set metrics_topic.partitions to a count the cluster accepts",
    KafkaError.POLICY_VIOLATION: "create it as the cluster's topic policy requires",
}
_UNREACHABLE = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
}


class TopicError(RuntimeError):
    """The cluster refused to create the metrics topic; ``str()`` is one line with the fix."""


def refusal(topic: str, partitions: int, replication_factor: int, error: KafkaError) -> str:
    fix = _FIXES.get(error.code(), "create it yourself")
    return (
        f"cannot create metrics topic {topic!r} ({partitions} partitions, replication factor "
        f"{replication_factor}): {error.name()}: {error.str()} — {fix}"
    )


def ensure_topic(
    admin: AdminClient, topic: str, partitions: int, replication_factor: int, timeout_s: float
) -> bool:
    """True when the topic exists or was just created; False when the cluster gave no answer in time.

    Raises TopicError when the cluster refuses to create it.
    """
    try:
        if _exists(admin, topic, timeout_s):
            return True
        future = admin.create_topics(
            [NewTopic(topic, partitions, replication_factor)],
            request_timeout=timeout_s,
            operation_timeout=timeout_s,
        )[topic]
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:  # created meanwhile by someone else
            return True
        if error.code() in _UNREACHABLE:
            return False
        raise TopicError(refusal(topic, partitions, replication_factor, error)) from None
    except TimeoutError:
        return False
    return True


def _exists(admin: AdminClient, topic: str, timeout_s: float) -> bool:
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        raise
    return True

"""Test helper: offsets-collector batches in the event contract, produced to a topic of the real broker."""

from __future__ import annotations

from confluent_kafka import Producer

from common.contract import Batch, Sample, encode
from common.names import GROUP_COMMITTED_OFFSET, PARTITION_END_OFFSET, PARTITION_START_OFFSET


def offsets_batch(
    ts_ms: int, ends: dict[str, int], commits: dict[tuple[str, str], int], topic: str = "orders"
) -> Batch:
    """One scrape of cluster "prod": ``ends`` partition -> end offset (log start 0), ``commits``
    (group, partition) -> committed offset, all on ``topic``."""
    samples = [
        sample
        for partition, end in ends.items()
        for sample in (
            Sample(PARTITION_START_OFFSET, {"topic": topic, "partition": partition}, 0),
            Sample(PARTITION_END_OFFSET, {"topic": topic, "partition": partition}, end),
        )
    ]
    samples += [
        Sample(GROUP_COMMITTED_OFFSET, {"group": group, "topic": topic, "partition": partition}, committed)
        for (group, partition), committed in commits.items()
    ]
    return Batch("prod", "admin/offsets", ts_ms, tuple(samples))


def produce(bootstrap: str, topic: str, batches: list[Batch | bytes]) -> None:
    """One Kafka record per batch (raw bytes: a record that fails the contract), all with the offsets
    source's key; one record per Kafka batch, as tansu reports the end offset as the last batch's first
    offset + 1."""
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    key = next(b for b in batches if isinstance(b, Batch)).key
    for batch in batches:
        producer.produce(topic, batch if isinstance(batch, bytes) else encode(batch), key=key)
    assert producer.flush(10) == 0

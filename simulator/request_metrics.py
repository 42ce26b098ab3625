"""Stand-in ``RequestMetrics`` percentiles of Produce requests, from what the model knows.

The model has no request objects, handler or network threads: records reach the leaders within a tick. So
the stages it does not determine (request queue, local, response queue, response send) are fixed figures
of a healthy broker on a LAN (``BASE_MS``), and the one it does, remote time (an ``acks=all`` request
waiting in purgatory for the in-sync followers), adds the model's catch-up time of the slowest in-sync
follower (``Cluster.isr_catch_up_s``) to a healthy follower round trip. A broker takes one Produce request
per producer whose topic has a partition it leads (records go out every tick to every such partition); a
percentile is the nearest rank over those requests of this moment, not Kafka's 5-minute reservoir, and
total time is the sum of the stages' figures at that percentile. Without such requests every figure is
0, as an empty histogram reads.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.cluster import Cluster

QUANTILES = ("0.50", "0.99", "0.999")
# ms at p50, p99, p999 of each stage of a healthy broker's Produce; remote time only for acks=all
BASE_MS = {
    "requestqueuetimems": (0.0, 1.0, 2.0),
    "localtimems": (1.0, 2.0, 4.0),
    "remotetimems": (1.0, 2.0, 4.0),
    "responsequeuetimems": (0.0, 0.0, 1.0),
    "responsesendtimems": (0.0, 1.0, 1.0),
}
STAGES = ("totaltimems", *BASE_MS)


def _waits(cluster: Cluster, broker_id: int) -> list[float | None]:
    """Per producer whose topic has a partition the broker leads: seconds its request waits for followers
    beyond a round trip (the slowest catch-up among those partitions that take acks=all writes), or
    ``None`` for acks 0 and 1 (no remote time)."""
    waits: list[float | None] = []
    if not cluster.brokers[broker_id].alive:
        return waits
    catch_up = None
    for producer in cluster.producers:
        topic = cluster.topics[producer.spec.topic]
        led = cluster.state.leader[topic.rows] == broker_id
        if not led.any():
            continue
        if producer.spec.acks != "all":
            waits.append(None)
            continue
        catch_up = cluster.isr_catch_up_s() if catch_up is None else catch_up
        accepting = led & cluster.accepting(topic, acks_all=True)
        waits.append(float(catch_up[topic.rows][accepting].max(initial=0.0)))
    return waits


def produce_ms(cluster: Cluster, broker_id: int) -> dict[str, tuple[float, ...]]:
    """Each stage's (and the total's) ms at each of ``QUANTILES``."""
    waits = _waits(cluster, broker_id)
    if not waits:
        return {stage: (0.0,) * len(QUANTILES) for stage in STAGES}
    figures: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for i, q in enumerate(QUANTILES):
        remote = sorted(0.0 if w is None else BASE_MS["remotetimems"][i] + 1000 * w for w in waits)
        stages = {**{s: ms[i] for s, ms in BASE_MS.items()}, "remotetimems": remote[_rank(q, len(waits))]}
        figures["totaltimems"].append(sum(stages.values()))
        for stage, value in stages.items():
            figures[stage].append(value)
    return {stage: tuple(values) for stage, values in figures.items()}


def _rank(quantile: str, n: int) -> int:
    """The nearest-rank index of ``quantile`` among ``n`` sorted values."""
    return max(math.ceil(float(quantile) * n) - 1, 0)

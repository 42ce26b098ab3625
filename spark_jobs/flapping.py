"""Flapping ISR as an analysis: ISR change events → brokers that keep leaving and rejoining ISRs, and why.

Pure (no Spark). A *flap* is a broker rejoining the ISR of a partition it was seen leaving
(``spark_jobs.isr_ledger``: each change once, whichever source reported it). A (partition, broker) pair
starts flapping at the flap that makes ``flaps`` flaps within ``window_s`` (defaults 3 in 10 minutes) and,
hysteresis, stops only after ``clear_after_s`` (default 15 minutes) without a flap: a pair flapping every
4 minutes stays flapping instead of toggling as flaps leave the window.

Attribution, while any pair flaps, over the cluster's flaps in the last ``max(window_s, clear_after_s)``
(as long as a flapping state can last without a new flap): when one broker rejoined in more than half of
them, the cause is ``one_broker`` (a slow or stuck broker: disk, GC pauses, network); otherwise
``many_brokers`` (followers everywhere fall behind at once: traffic bursts, or a lag threshold such as
0.8's ``replica.lag.max.messages`` set too low).

"Now" is the newest observation of the cluster; partition-leader and broker partition-count samples are
read only to advance it, so a flapping state clears while no ISR changes arrive.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from common import names
from common.metrics import FLAPPING_CAUSE
from spark_jobs.analysis import Derived, Evaluation, Observation, Samples, gathered
from spark_jobs.isr_ledger import IsrLedger, Transition

CLOCK_INPUTS = (names.PARTITION_LEADER, names.PARTITION_COUNT)
HISTORY_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("at_s", pa.float64()),
        ("topic", pa.string()),
        ("partition", pa.string()),
        ("broker", pa.string()),
        ("flaps", pa.int64()),  # within window_s
        ("flapping", pa.bool_()),
        ("last_flap_s", pa.float64()),
        ("cause", pa.string()),  # the cluster's attribution, a key of FLAPPING_CAUSE
    ]
)


@dataclass
class _Pair:
    flaps: deque = field(default_factory=deque)  # times of the flaps within the attribution horizon
    last_s: float = -math.inf
    flapping: bool = False


@dataclass
class _Cluster:
    now_s: float = -math.inf
    brokers: set[str] = field(default_factory=set)  # reporting or named in ISR events: a series each


class FlappingAnalysis:
    """Flapping (partition, broker) pairs per broker, each broker's share of the flaps, and the cause."""

    table = "isr_flapping"
    history_schema = HISTORY_SCHEMA
    inputs = frozenset(("isr_change", *CLOCK_INPUTS))
    settings = ("flaps", "window_s", "clear_after_s")
    chunked = frozenset(CLOCK_INPUTS)  # a leader sample per partition and scrape

    def __init__(self, flaps: int = 3, window_s: float = 600.0, clear_after_s: float = 900.0):
        self.flaps, self.window_s, self.clear_after_s = flaps, window_s, clear_after_s
        self.ledger = IsrLedger()
        self.clusters: dict[str, _Cluster] = defaultdict(_Cluster)
        self.pairs: dict[tuple[str, str, str, str], _Pair] = {}  # (cluster, topic, partition, broker)

    @property
    def horizon_s(self) -> float:
        """How long flaps are kept: as long as they count in the window or keep a pair flapping."""
        return max(self.window_s, self.clear_after_s)

    def observe(self, observations: Iterable[Observation | Samples]) -> None:
        for o in sorted(gathered(observations, self.chunked), key=lambda o: o.t_s):
            cluster = self.clusters[o.cluster]
            cluster.now_s = max(cluster.now_s, o.t_s)
            if type(o) is Samples:  # the clock's samples: a scrape's time, and the brokers they name
                cluster.brokers.update(broker for broker in o.column("broker") if broker is not None)
            elif o.event is not None and (transition := self.ledger.apply(o.cluster, o.t_s, o.event)):
                cluster.brokers |= {str(b) for b in transition.isr | transition.left}
                self._flaps(transition)

    def _flaps(self, t: Transition) -> None:
        for broker in t.rejoined:
            pair = self.pairs.setdefault((t.cluster, t.topic, t.partition, str(broker)), _Pair())
            self._age(pair, t.t_s)
            pair.flaps.append(t.t_s)
            pair.last_s = t.t_s
            pair.flapping = pair.flapping or self._in_window(pair, t.t_s) >= self.flaps

    def _in_window(self, pair: _Pair, now_s: float) -> int:
        return sum(1 for t_s in pair.flaps if t_s > now_s - self.window_s)

    def _age(self, pair: _Pair, now_s: float) -> None:
        """Drop flaps older than the horizon; clear the state after ``clear_after_s`` without a flap."""
        while pair.flaps and pair.flaps[0] <= now_s - self.horizon_s:
            pair.flaps.popleft()
        if now_s - pair.last_s >= self.clear_after_s:
            pair.flapping = False

    def evaluate(self) -> Evaluation:
        history: list[dict[str, Any]] = []
        metrics: list[Derived] = []
        for key, pair in list(self.pairs.items()):
            self._age(pair, self.clusters[key[0]].now_s)
            if not pair.flaps and not pair.flapping:
                del self.pairs[key]
        for name, cluster in sorted(self.clusters.items()):
            pairs = {k: p for k, p in sorted(self.pairs.items()) if k[0] == name}
            flapping = Counter(k[3] for k, p in pairs.items() if p.flapping)
            flaps = Counter()
            for k, p in pairs.items():
                flaps[k[3]] += len(p.flaps)
            total = sum(flaps.values())
            cause = attribute(flaps) if flapping else "none"
            for broker in sorted(cluster.brokers):
                labels = (name, broker)
                metrics.append(Derived("kobs_isr_flapping_partitions", labels, flapping[broker]))
                share = flaps[broker] / total if total else 0.0
                metrics.append(Derived("kobs_isr_flap_share_ratio", labels, share))
            metrics.append(Derived("kobs_cluster_isr_flapping_cause", (name,), FLAPPING_CAUSE[cause]))
            history += [
                {
                    "cluster": name, "at_s": cluster.now_s, "topic": topic, "partition": partition,
                    "broker": broker, "flaps": self._in_window(p, cluster.now_s), "flapping": p.flapping,
                    "last_flap_s": p.last_s, "cause": cause,
                }
                for (_, topic, partition, broker), p in pairs.items()
            ]  # fmt: skip
        return Evaluation(history, metrics)


def attribute(flaps_by_broker: Counter) -> str:
    """``one_broker`` when one broker is behind more than half of the flaps, else ``many_brokers``."""
    total = sum(flaps_by_broker.values())
    top = max(flaps_by_broker.values(), default=0)
    return "one_broker" if total and top * 2 > total else "many_brokers"

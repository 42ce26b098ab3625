"""The controller's part: who is controller, and leader elections when brokers fail or come back.

ZooKeeper-mode behaviour: the controller is the lowest-id live broker once the previous one is gone, and
every failover bumps ``controller_epoch``. On a broker failure the controller elects a new leader from the
live ISR (in replica order); when none is left the partition goes offline (leader -1) and keeps its last
ISR member, unless unclean election lets any live replica lead. It also removes a dead follower from the
ISR. Every controller-made change bumps the leader epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.model import Partition


def elect_controller(cluster: Cluster) -> None:
    """Keeps a live controller, or none when every broker is down; a new controller bumps the epoch."""
    if cluster.controller >= 0 and cluster.brokers[cluster.controller].alive:
        return
    alive = [b.id for b in cluster.brokers.values() if b.alive]
    cluster.controller = min(alive) if alive else -1
    if alive:
        cluster.controller_epoch += 1
    cluster.controller_changes.append((cluster.now, cluster.controller, cluster.controller_epoch))


def on_broker_failure(cluster: Cluster, broker_id: int) -> None:
    cluster.brokers[broker_id].alive = False
    elect_controller(cluster)
    if cluster.controller < 0:
        return  # no controller: partition state stays as it was
    for p in cluster.partitions_of(broker_id):
        if p.leader == broker_id:
            p.leader = -1
            if not _elect_leader(cluster, p):
                old = list(p.isr)
                p.isr = p.isr if len(p.isr) == 1 else [r for r in p.isr if r != broker_id]
                _controller_wrote(cluster, p, old)
        elif broker_id in p.isr:
            old = list(p.isr)
            p.isr = [r for r in p.isr if r != broker_id]
            _controller_wrote(cluster, p, old)
    elect_offline(cluster)


def on_broker_startup(cluster: Cluster, broker_id: int) -> None:
    broker = cluster.brokers[broker_id]
    broker.alive = True
    broker.registered_at = cluster.now
    cluster.restart_batcher(broker_id)
    elect_controller(cluster)
    for p in cluster.partitions_of(broker_id):
        if p.leader >= 0:
            cluster.become_follower(p, broker_id)
    elect_offline(cluster)


def elect_offline(cluster: Cluster) -> None:
    """Elects a leader for every partition without a live one, where the rules allow it."""
    for p in cluster.partitions:
        if not cluster.has_live_leader(p):
            _elect_leader(cluster, p)


def _elect_leader(cluster: Cluster, p: Partition) -> bool:
    alive = cluster.brokers
    live_isr = [r for r in p.replicas if r in p.isr and alive[r].alive]
    live = [r for r in p.replicas if alive[r].alive]
    unclean = not live_isr
    if unclean and not (cluster.topics[p.topic].unclean_leader_election and live):
        return False
    new = live[0] if unclean else live_isr[0]
    old = list(p.isr)
    p.leader, p.unclean = new, unclean
    p.isr = [new] if unclean else [r for r in p.isr if alive[r].alive]
    if unclean:
        cluster.messages_lost += max(p.leo.values()) - p.leo[new]
        p.hw = min(p.hw, p.leo[new])
        cluster.counters[cluster.controller].unclean_elections += 1
    cluster.counters[cluster.controller].leader_elections += 1
    for r in p.replicas:
        if r != new and alive[r].alive:
            cluster.become_follower(p, r)
    _controller_wrote(cluster, p, old)
    return True


def _controller_wrote(cluster: Cluster, p: Partition, old_isr: list[int]) -> None:
    p.leader_epoch += 1
    p.controller_epoch = cluster.controller_epoch
    cluster.record_change(p, old_isr, by=cluster.controller, by_controller=True)

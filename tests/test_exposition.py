"""What the exporter serves: critical-group marks and the cardinality bounds (spark_jobs.exposition)."""

from __future__ import annotations

from common.config import Config
from common.metrics import GROUP_STATUS
from spark_jobs.analysis import Derived
from spark_jobs.exposition import ExpositionPolicy, expose

NONE_DROPPED = {"partitions_per_group": 0, "max_series": 0}
PER_PARTITION = (
    "kobs_consumergroup_lag_messages",
    "kobs_consumergroup_lag_seconds",
    "kobs_consumergroup_partition_status",
    "kobs_consumergroup_lost_messages",
)


def group(cluster: str, name: str, partitions: dict[str, tuple[str, int]], status="OK") -> list[Derived]:
    """The lag series of one group: ``partitions`` maps partition -> (Burrow status, lag in messages)."""
    derived = [Derived("kobs_consumergroup_status", (cluster, name), GROUP_STATUS[status])]
    for partition, (partition_status, lag) in partitions.items():
        labels = (cluster, name, "orders", partition)
        derived += [
            Derived("kobs_consumergroup_lag_messages", labels, lag),
            Derived("kobs_consumergroup_lag_seconds", labels, lag / 10),
            Derived("kobs_consumergroup_partition_status", labels, GROUP_STATUS[partition_status]),
            Derived("kobs_consumergroup_lost_messages", labels, 0),
        ]
    return derived


def served(derived: list[Derived], name: str) -> dict[tuple[str, ...], float]:
    return {d.labels: d.value for d in derived if d.name == name}


def test_every_known_group_is_marked_critical_or_not_by_name_or_pattern_per_cluster():
    derived = (
        group("prod", "billing", {"0": ("OK", 0)})
        + group("prod", "payments-eu", {"0": ("OK", 0)})
        + group("prod", "analytics", {"0": ("OK", 0)})
        + group("staging", "billing", {"0": ("OK", 0)})
    )
    policy = ExpositionPolicy({"prod": ("billing", "payments-*")})
    shown, dropped = expose(derived, policy)
    assert served(shown, "kobs_consumergroup_critical") == {
        ("prod", "analytics"): 0,
        ("prod", "billing"): 1,
        ("prod", "payments-eu"): 1,
        ("staging", "billing"): 0,  # critical_groups are per cluster
    }
    assert dropped == NONE_DROPPED and len(shown) == len(derived) + 4


def test_critical_groups_come_from_each_clusters_configuration():
    config = Config.model_validate(
        {
            "clusters": [
                {"name": "prod", "bootstrap_servers": "b:9092", "critical_groups": ["billing", "pay-*"]},
                {"name": "dev", "bootstrap_servers": "d:9092"},
            ],
            "sinks": {"exporter_partitions_per_group": 3, "exporter_max_series": 500},
        }
    )
    assert ExpositionPolicy.from_config(config) == ExpositionPolicy(
        {"prod": ("billing", "pay-*"), "dev": ()}, 3, 500
    )


def test_partitions_per_group_keeps_the_worst_partitions_by_status_then_lag():
    derived = group(
        "prod",
        "billing",
        {"0": ("OK", 10), "1": ("WARN", 5), "2": ("STOP", 1), "3": ("OK", 1000)},
        status="ERR",
    ) + group("prod", "ledger", {"0": ("OK", 7)})
    shown, dropped = expose(derived, ExpositionPolicy(partitions_per_group=2))
    # STOP (code 3) outranks WARN (1), which outranks any OK partition however large its lag.
    assert set(served(shown, "kobs_consumergroup_lag_messages")) == {
        ("prod", "billing", "orders", "2"),
        ("prod", "billing", "orders", "1"),
        ("prod", "ledger", "orders", "0"),  # a group with fewer partitions keeps them all
    }
    assert all(len(served(shown, name)) == 3 for name in PER_PARTITION)
    # Group series stay: the group is still ERR, and still marked (not critical here).
    assert served(shown, "kobs_consumergroup_status") == {("prod", "billing"): 2, ("prod", "ledger"): 0}
    assert len(served(shown, "kobs_consumergroup_critical")) == 2
    # partitions 0 and 3 of billing, four series each
    assert dropped == {"partitions_per_group": 2 * len(PER_PARTITION), "max_series": 0}


def test_max_series_leaves_out_the_finest_grained_series_first_and_counts_them():
    topic_level = [Derived("kobs_topic_offline_partitions", ("prod", t), 0) for t in ("a", "b")]
    cluster_level = [Derived("kobs_cluster_active_controllers", ("prod",), 1)]
    lag = group("prod", "billing", {"0": ("OK", 3), "1": ("OK", 4)})  # 1 group + 8 partition series
    derived = topic_level + lag + cluster_level
    shown, dropped = expose(derived, ExpositionPolicy(max_series=6))
    # 13 series with the critical mark: the cluster (1 label), the 2 topics, the group status and mark
    # (2 labels) come first; one partition series fills the cap of 6, in their original order.
    critical = Derived("kobs_consumergroup_critical", ("prod", "billing"), 0)
    assert shown == [*topic_level, lag[0], lag[1], *cluster_level, critical]
    assert dropped == {"partitions_per_group": 0, "max_series": 13 - 6}


def test_without_bounds_nothing_is_dropped():
    derived = group("prod", "billing", {str(p): ("OK", p) for p in range(50)})
    shown, dropped = expose(derived, ExpositionPolicy())
    assert (len(shown), dropped) == (len(derived) + 1, NONE_DROPPED)


def test_each_bound_counts_what_it_left_out():
    """Both bounds cut: the per-group one first, the cap counts only what it cut after that."""
    derived = group("prod", "billing", {str(p): ("OK", p) for p in range(5)})  # 1 + 20 + critical = 22
    shown, dropped = expose(derived, ExpositionPolicy(partitions_per_group=2, max_series=5))
    # 2 partitions x 4 series + the group status and mark = 10 after the first bound; the cap keeps 5.
    assert dropped == {"partitions_per_group": 3 * len(PER_PARTITION), "max_series": 10 - 5}
    assert len(shown) == 5


def test_a_partitions_member_series_is_kept_or_left_out_with_its_lag_series():
    derived = group("prod", "billing", {"0": ("STOP", 1), "1": ("OK", 10)}, status="ERR")
    derived += [
        Derived(
            "kobs_consumergroup_partition_member", ("prod", "billing", "orders", p, "app-1", "/10.0.0.7"), 1
        )
        for p in ("0", "1")
    ]
    shown, dropped = expose(derived, ExpositionPolicy(partitions_per_group=1))
    assert set(served(shown, "kobs_consumergroup_partition_member")) == {
        ("prod", "billing", "orders", "0", "app-1", "/10.0.0.7")  # the STOP partition's, as its lag's
    }
    assert dropped["partitions_per_group"] == len(PER_PARTITION) + 1  # partition 1: its lag and its member

"""Live data for the app's tests: derived-metric series for tests/derived_exporter.py, Parquet history laid
out as the Spark jobs write it, and an app configuration pointing at both."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml


def write_batch(history: Path, table: str, batch_id: int, rows: dict, committed: bool = True) -> None:
    """A batch as Spark lays it out: part files under batch_id=N, and _SUCCESS once committed."""
    where = history / table / f"batch_id={batch_id}"
    where.mkdir(parents=True)
    pq.write_table(pa.table(rows), where / "part-00000.parquet")
    if committed:
        (where / "_SUCCESS").touch()


def by(label: str, values: dict[str, float]) -> list[tuple[dict[str, str], float]]:
    return [({label: key}, value) for key, value in values.items()]


SERIES = {
    "kobs_broker_up": by("broker", {"1": 1, "2": 0, "3": 1}),
    # orders has two cause series: 3 partitions offline for 90 s put down to broker 2, 2 for 60 s to no
    # known broker; the pages show the topic's sum (5) and longest time (90 s)
    "kobs_topic_offline_partitions": [
        ({"topic": "orders", "cause_broker": "2"}, 3),
        ({"topic": "orders", "cause_broker": ""}, 2),
        ({"topic": "payments"}, 0),
    ],
    "kobs_topic_offline_seconds": [
        ({"topic": "orders", "cause_broker": "2"}, 90),
        ({"topic": "orders", "cause_broker": ""}, 60),
        ({"topic": "payments"}, 0),
    ],
    "kobs_topic_replication_factor": by("topic", {"orders": 1, "payments": 3}),
    "kobs_isr_flapping_partitions": by("broker", {"1": 2, "3": 0}),
    "kobs_consumergroup_status": by("group", {"billing": 2, "analytics": 0}),  # ERR: its partitions STOP
    "kobs_consumergroup_lag_messages": [
        ({"group": "billing", "partition": "0"}, 700),
        ({"group": "billing", "partition": "1"}, 500),
        ({"group": "analytics", "partition": "0"}, 0),
    ],
    "kobs_consumergroup_lag_seconds": by("group", {"billing": 1800, "analytics": 0}),
    "kobs_consumergroup_catchup_eta_seconds": by("group", {"billing": math.inf, "analytics": 0}),
    "kobs_consumergroup_members": by("group", {"billing": 0, "analytics": 3}),  # billing: nobody consumes
    "kobs_producer_blocked": by("client_id", {"web": 1, "batch": 0, "etl": 0}),
    "kobs_producer_time_to_block_seconds": by("client_id", {"web": 0, "batch": 120, "etl": math.inf}),
    "kobs_producer_buffer_utilization_ratio": by("client_id", {"web": 1.0, "batch": 0.6, "etl": 0.1}),
    "kobs_broker_disk_runway_days": by("broker", {"1": 5, "2": math.inf, "3": 30}),
    "kobs_broker_stored_bytes": by("broker", {"1": 2e11, "2": 1e11, "3": 3e11}),
    "kobs_topic_bytes_in_per_second": by("topic", {"orders": 2e6, "payments": 1e6}),
    "kobs_broker_cpu_cores": by("broker", {"1": 1.9, "3": 0.4}),
    "kobs_broker_heap_used_bytes": by("broker", {"1": 3e8, "3": 1e8}),
    "kobs_broker_heap_max_bytes": by("broker", {"1": 4e8, "3": 4e8}),
    "kobs_broker_request_handler_idle_ratio": by("broker", {"1": 0.12, "3": 0.9}),  # broker 1 saturated
    "kobs_broker_network_processor_idle_ratio": by("broker", {"1": 0.6, "3": 0.95}),
}


# A rolling restart on c1: broker 2 left by controlled shutdown 40 s ago, its leaders moved to brokers 1
# and 3; the 12 orders partitions it followed are under-replicated and one replica from min ISR, put down to
# broker 2; payments adds replicas in a reassignment, which is no trouble.
ROLLING_RESTART = {
    "kobs_broker_up": by("broker", {"1": 1, "2": 0, "3": 1}),
    "kobs_broker_maintenance": by("broker", {"1": 0, "2": 1, "3": 0}),
    "kobs_broker_maintenance_seconds": by("broker", {"1": 0, "2": 40, "3": 0}),
    "kobs_broker_leader_partitions": by("broker", {"1": 9, "2": 0, "3": 9}),
    "kobs_broker_out_of_isr_partitions": by("broker", {"1": 0, "2": 12, "3": 0}),
    **{
        f"kobs_topic_{state}_{unit}": [
            ({"topic": "orders", "cause_broker": "2"}, value),
            ({"topic": "orders", "cause_broker": ""}, 0),
            ({"topic": "payments"}, 0),
        ]
        for state in ("under_replicated", "shrunk_to_min_isr")
        for unit, value in (("partitions", 12), ("seconds", 40))
    },
    "kobs_topic_reassigning_partitions": by("topic", {"orders": 0, "payments": 4}),
    "kobs_topic_replication_factor": by("topic", {"orders": 3, "payments": 3}),
}


def lag_rows(at_s: float, billing: list[int]) -> dict:
    partitions = [str(p) for p in range(len(billing))]
    n = len(billing) + 1
    return {
        "cluster": ["c1"] * n,
        "group": ["billing"] * len(billing) + ["analytics"],
        "topic": ["orders"] * n,
        "partition": [*partitions, "0"],
        "at_s": [at_s] * n,
        "committed": [1000] * n,
        "end_offset": [1000 + lag for lag in billing] + [1000],
        "lag_messages": [*billing, 0],
        "lag_seconds": [lag / 10 for lag in billing] + [0.0],
        "lost_messages": [0] * n,
        "status": ["STOP"] * len(billing) + ["OK"],
    }


def write_history(history: Path) -> None:
    now = time.time()
    for batch, lags in enumerate(([100, 50], [400, 300], [700, 500])):
        write_batch(history, "lag", batch, lag_rows(now - 60 + 20 * batch, lags))
    write_batch(history, "lag", 3, lag_rows(now, [9999, 9999]), committed=False)  # still being written
    # Produce throughput falls 0.1 MB/s per GB stored: y = 60 - 0.1 x, the same line on every broker. Each
    # batch also has a per-topic row per broker (as spark_jobs/throughput.py writes), off that line.
    for batch, stored_gb in enumerate((100, 200, 300)):
        write_batch(
            history,
            "throughput",
            batch,
            {
                "cluster": ["c1"] * 4,
                "broker": ["1", "3", "1", "3"],
                "topic": [None, None, "orders", "orders"],
                "at_s": [now + batch] * 4,
                "bytes_in_per_s": [(60 - 0.1 * stored_gb) * 1e6] * 2 + [50e6, 1e6],
                "stored_bytes": [stored_gb * 1e9] * 2 + [1e9, 90e9],
            },
        )


def write_config(
    path: Path, prometheus_url: str, run_dir: Path, refresh_s: float = 60, alertmanager_url: str | None = None
) -> Path:
    doc = {
        "clusters": [{"name": "c1", "bootstrap_servers": ["127.0.0.1:9092"], "broker_disk_bytes": 10**12}],
        "sinks": {"run_dir": str(run_dir)},
        "app": {
            "prometheus_url": prometheus_url,
            "refresh_s": refresh_s,
            "alertmanager_url": alertmanager_url,
        },
    }
    path.write_text(yaml.safe_dump(doc))
    return path

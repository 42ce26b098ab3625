"""``kobs stream`` on a real Spark standalone cluster gives local mode's derived results.

The cluster is Spark's own: a master and two workers started from PySpark's ``bin/spark-class`` on
127.0.0.1 (``peers.spark``). The same recorded workload (``bench.workload``: every analysis fed, a flapping
follower, a controller failover) goes through the query in this process on ``local[2]`` and through
``kobs stream --master spark://...`` in a subprocess; both must leave the same Parquet history of every
analysis and serve the same values.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from test_stream_restart import served

from bench.stream import produce
from bench.workload import Shape, Workload
from common.config import Config, Spark
from peers.process import free_port
from peers.spark import SparkStandalone
from spark_jobs.stream import QUERY, STATE_PARTITIONS, pipeline, start_query

pytestmark = [pytest.mark.peers, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[1]
SHAPE = Shape(brokers=3, partitions=60, groups=2, rounds=4)


def config_for(run_dir: Path, topic: str, bootstrap: str, per_batch: int) -> Config:
    return Config.model_validate(
        {
            "clusters": [{"name": SHAPE.cluster, "bootstrap_servers": [bootstrap]}],
            "metrics_topic": {"name": topic, "max_records_per_batch": per_batch},
            "sinks": {"run_dir": str(run_dir), "exporter_address": f"127.0.0.1:{free_port()}"},
        }
    )


def history(run_dir: Path) -> dict[str, list[dict]]:
    """Every history row of every analysis, by table and batch directory. A batch's rows in any order: it
    follows the order in which the batch's records reached the driver, which depends on the read tasks."""
    return {
        f"{part.parent.name}/{part.name}": sorted(
            pq.read_table(part / "part-0.parquet").to_pylist(), key=repr
        )
        for part in sorted((run_dir / "history").glob("*/batch_id=*"))
    }


def state_partitions(config: Config) -> int:
    """The state partitions of the query's checkpoint (its stateful step is operator 0)."""
    operator = config.sinks.checkpoint_dir / QUERY / "state" / "0"
    return sum(path.name.isdigit() for path in operator.iterdir())


@pytest.mark.timeout(900)
def test_a_standalone_cluster_derives_what_local_mode_derives(spark, kafka_cluster, tmp_path):
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    records, *_ = produce(kafka_cluster.bootstrap, topic, [Workload(SHAPE)])
    per_batch = math.ceil(records / SHAPE.rounds)

    local_config = config_for(tmp_path / "local", topic, kafka_cluster.bootstrap, per_batch)
    local = pipeline(local_config)
    query = start_query(spark, local_config, local, available_now=True)
    query.awaitTermination(300)
    assert query.exception() is None

    config = config_for(tmp_path / "cluster", topic, kafka_cluster.bootstrap, per_batch)
    config = config.model_copy(update={"spark": Spark(auth_secret_env="KOBS_TEST_SPARK_SECRET")})
    config_file = tmp_path / "kobs.yaml"
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    with SparkStandalone(tmp_path / "spark", workers=2) as cluster:  # its RPC authenticated
        command = [sys.executable, "-m", "kobs.cli", "stream", "--config", str(config_file)]
        command += ["--master", cluster.url, "--available-now"]
        env = os.environ | {"PYTHONPATH": str(ROOT), "KOBS_TEST_SPARK_SECRET": cluster.secret}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        executors = cluster.executor_logs()

    # The work ran in the workers' executors, one on each worker, each finishing read-and-decode tasks.
    assert {log.parents[2].name for log in executors} == {"worker-1", "worker-2"}
    assert all("Finished task" in log.read_text() for log in executors)
    expected = history(tmp_path / "local")
    assert len(expected) >= 5 * (SHAPE.rounds - 1)  # every analysis wrote rows in most batches
    assert history(tmp_path / "cluster") == expected
    assert served(pipeline(config), config) == served(local, local_config)
    # Local mode keeps one state partition per core; a cluster master, whose executors may register after
    # the query starts, the fixed default.
    assert state_partitions(local_config) == 2
    assert state_partitions(config) == STATE_PARTITIONS

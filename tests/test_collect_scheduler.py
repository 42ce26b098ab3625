"""Which sources a configuration runs: partition state and every ISR change come from exactly one source."""

from __future__ import annotations

import pytest

from collectors.metadata import MetadataSource
from collectors.scheduler import _Connected, build_jobs
from common.config import Config


@pytest.mark.parametrize(
    ("cluster", "zookeeper_watch", "metadata_partition_state"),
    [
        ({}, False, True),  # no ZooKeeper: the metadata diff is the only way to see state and changes
        ({"zookeeper": "127.0.0.1:2181"}, True, False),  # auto with ZooKeeper: its znodes are the truth
        ({"zookeeper": "127.0.0.1:2181", "mode": "zookeeper"}, True, False),
        ({"zookeeper": "127.0.0.1:2181", "mode": "kraft"}, False, True),  # a migrated cluster
    ],
)
def test_partition_state_comes_from_one_source(cluster, zookeeper_watch, metadata_partition_state):
    config = Config.model_validate(
        {"clusters": [{"name": "c", "bootstrap_servers": ["127.0.0.1:9"], **cluster}]}
    )
    jobs = build_jobs(config)
    assert any(isinstance(job.source, _Connected) for job in jobs) == zookeeper_watch
    (metadata,) = [job.source for job in jobs if isinstance(job.source, MetadataSource)]
    assert metadata.partition_state == metadata_partition_state

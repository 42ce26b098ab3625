"""Which sources a configuration runs: partition state and every ISR change come from exactly one source."""

from __future__ import annotations

import logging
import threading
import weakref
from collections import Counter

import pytest
from gc_off import cyclic_collector_off

from collectors.metadata import MetadataSource
from collectors.publisher import Publisher
from collectors.scheduler import Job, Scheduler, _Connected, build_jobs, next_due
from collectors.self_metrics import SelfMetrics
from collectors.source import Scrape, now_ms
from collectors.spool import Spool
from common.config import Config
from common.contract import Batch


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


@pytest.mark.parametrize(
    ("due", "now", "expected"),
    [
        (0.0, 100.0, 110.0),  # first scrape: the grid starts now
        (110.0, 110.04, 120.0),  # started a tick late: the grid does not drift
        (110.0, 119.99, 120.0),  # a slow scrape that still ended within its interval
        (110.0, 125.0, 135.0),  # overran a whole interval: a new grid from now
    ],
)
def test_sources_are_due_on_a_fixed_grid_of_their_interval(due, now, expected):
    assert next_due(due, 10.0, now) == pytest.approx(expected)


def test_a_clusters_admin_api_sources_share_one_client():
    # One client is what lets them share one metadata request (collectors.admin.topics). An AdminClient
    # with nothing queued has len() 0 and is falsy, so `admin or new_client()` would quietly make two.
    config = Config.model_validate({"clusters": [{"name": "c", "bootstrap_servers": ["127.0.0.1:9"]}]})
    sources = {
        job.source.name: job.source for job in build_jobs(config) if job.source.name.startswith("admin/")
    }
    assert sources["admin/offsets"]._admin is sources["admin/metadata"]._admin
    assert set(sources) == {"admin/offsets", "admin/metadata", "admin/log_dirs"}  # log dirs: kafka-python


class BuggySource:
    """A source with a bug: its ``collect`` raises (the real sources report a cluster's faults as errors)."""

    name = "buggy"

    def collect(self):
        raise RuntimeError("a bug")


def test_a_source_that_raises_is_counted_and_its_exception_keeps_nothing_alive(tmp_path):
    # The exception, kept by its future, held through its traceback the scheduler's frame that read it, and
    # that frame the future: a reference cycle that kept the scheduler, its sources and their clients alive
    # until Python's cyclic collector ran.
    job = Job("c", BuggySource(), interval_s=60)
    publisher = Publisher({"bootstrap.servers": "127.0.0.1:9"}, "metrics", Spool(tmp_path, 1 << 20))
    scheduler = Scheduler([job], publisher, SelfMetrics(publisher, [job.label]))
    scheduler.run(threading.Event(), once=True)
    assert job.errors == Counter(exception=1) and job.last_errors == ["exception: RuntimeError('a bug')"]
    held = weakref.ref(scheduler)
    with cyclic_collector_off():
        del scheduler
        assert held() is None


class ScriptedSource:
    """A source whose scrapes fail or succeed as scripted (each entry: its errors); the last stops the run
    (its own result is not read)."""

    name = "scripted"

    def __init__(self, script: list[list[str]], stop: threading.Event):
        self.script, self.done = list(script), stop

    def collect(self):
        errors = self.script.pop(0)
        if not self.script:
            self.done.set()
        return Scrape(Batch("c", self.name, now_ms(), ()), errors)


def test_a_failing_source_is_logged_once_per_change_of_reason_and_counted_at_every_scrape(tmp_path, caplog):
    timeout, refused = ["fetch: Local: Timed out"], ["refused: SASL authentication failed"]
    stop = threading.Event()
    job = Job("c", ScriptedSource([timeout, timeout, timeout, [], refused, refused, timeout, []], stop), 0.01)
    publisher = Publisher({"bootstrap.servers": "127.0.0.1:9"}, "metrics", Spool(tmp_path, 1 << 20))
    with caplog.at_level(logging.INFO, logger="collectors.scheduler"):
        Scheduler([job], publisher, SelfMetrics(publisher, [job.label])).run(stop)
    assert [r.getMessage() for r in caplog.records] == [
        "c/scripted: fetch: Local: Timed out",
        "c/scripted: scraped again",
        "c/scripted: refused: SASL authentication failed",
        "c/scripted: fetch: Local: Timed out",
    ]
    assert job.errors == Counter(fetch=4, refused=2)


def test_a_cluster_refusing_the_login_is_asked_less_often_until_it_accepts(tmp_path):
    refused, stop = ["refused: SASL authentication failed"], threading.Event()
    job = Job("c", ScriptedSource([refused, refused, refused, []], stop), 0.01)
    publisher = Publisher({"bootstrap.servers": "127.0.0.1:9"}, "metrics", Spool(tmp_path, 1 << 20))
    Scheduler([job], publisher, SelfMetrics(publisher, [job.label])).run(stop)
    assert job.refused_wait_s == pytest.approx(4 * 0.01)  # the interval, doubled twice
    job.source = ScriptedSource([[], []], stop)
    stop.clear()
    Scheduler([job], publisher, SelfMetrics(publisher, [job.label])).run(stop)
    assert job.refused_wait_s == 0  # accepted: asked on the interval again

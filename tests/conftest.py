"""Shared fixtures: real peers on loopback, one per test session, stopped (and checked) at the end."""

from __future__ import annotations

import os

import pytest

from peers.kafka import KafkaCluster
from peers.process import LOWEST_PORT, PORTS_ENV, ephemeral_low, live_processes
from peers.zookeeper import ZooKeeper


def pytest_configure(config):
    """Each of ``make test``'s workers (pytest-xdist) picks its servers' ports from a range of its own, and so
    do the processes it starts: two workers picking the same port before either bound it would collide."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...
    if worker and PORTS_ENV not in os.environ:
        index, count = int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
        share = (ephemeral_low() - LOWEST_PORT) // count
        low = LOWEST_PORT + index * share
        os.environ[PORTS_ENV] = f"{low}-{low + share}"


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory):
    """A real 3-node Kafka cluster (KRaft) shared by the session: tests that break a node restore it."""
    with KafkaCluster(tmp_path_factory.mktemp("kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    with ZooKeeper(tmp_path_factory.mktemp("zookeeper")) as zk:
        yield zk


def pytest_sessionfinish(session, exitstatus):
    """No server process may outlive the suite: fail the run if one did."""
    leftovers = live_processes()
    if leftovers:
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in leftovers)
        session.config.get_terminal_writer().line(
            f"server processes outlived the test suite: {names}", red=True
        )
        for process in leftovers:
            process.stop()
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the test session (one starts in 6-8 s; a session per module cost the
    suite over a minute), as ``kobs stream`` builds it (Spark's Kafka source among its jars): 2 cores, so 2
    state partitions. A test that changes its configuration puts it back; none leaves a query running."""
    from spark_jobs.stream import spark_session

    session = spark_session("local[2]", app="kobs-tests")
    yield session
    left = [query.name for query in session.streams.active]
    session.stop()
    assert not left, f"streaming queries left running: {left}"

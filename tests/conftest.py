"""Shared fixtures: real peers on loopback, one per test session, stopped (and checked) at the end."""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from types import CodeType, ModuleType

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


# What starts a server process, a JVM or a browser: a test that reaches one of these (itself, through its
# fixtures or the helpers it calls) is marked ``peers``, one that uses the Spark session ``spark``; a module
# whose tests start one in a subprocess says so itself (``pytestmark``). ``make check`` runs the others.
SERVER_MODULES = (
    "peers.kafka", "peers.kafka_tools", "peers.keyed_producer", "peers.prometheus", "peers.spark",
    "peers.stack", "peers.tansu", "peers.zookeeper", "peers.lifeline", "browser", "playwright",
)  # fmt: skip
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    """Mark each test by what it starts: ``peers`` when it reaches a server (:data:`SERVER_MODULES`),
    ``spark`` when it uses the Spark session; derived here so that no file has to remember to say so."""
    for item in items:
        functions = [item.function]
        for name in item.fixturenames:
            functions += [d.func for d in item._fixtureinfo.name2fixturedefs.get(name, ())]
        if "spark" in item.fixturenames:
            item.add_marker(pytest.mark.spark)
        if any(_reaches_a_server(f.__code__, f.__globals__, set()) for f in functions):
            item.add_marker(pytest.mark.peers)


def _reaches_a_server(code: CodeType, scope: dict, seen: set[int]) -> bool:
    """Whether ``code`` names something of :data:`SERVER_MODULES`, directly or through a function of the
    tests' own modules that it calls (its inner functions and lambdas too)."""
    for name in code.co_names:
        value = scope.get(name)
        if value is None or id(value) in seen:
            continue
        seen.add(id(value))
        module = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None) or ""
        if module.startswith(SERVER_MODULES):
            return True
        ours = inspect.isfunction(value) and Path(value.__code__.co_filename).parent == TESTS
        if ours and _reaches_a_server(value.__code__, value.__globals__, seen):
            return True
    inner = (c for c in code.co_consts if isinstance(c, CodeType))
    return any(_reaches_a_server(c, scope, seen) for c in inner)


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

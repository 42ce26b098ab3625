"""Shared fixtures: real peers on loopback, one per test session, stopped (and checked) at the end."""

from __future__ import annotations

import pytest

from peers.kafka import KafkaBroker
from peers.process import live_processes
from peers.zookeeper import ZooKeeper


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


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

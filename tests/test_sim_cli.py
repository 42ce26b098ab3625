"""``kobs simulate`` end to end: it prints where the exporters listen, runs, and stops what it started."""

from __future__ import annotations

from kobs.cli import main


def test_simulate_runs_a_scenario_and_prints_its_endpoints(capsys):
    code = main(
        ["simulate", "--scenario", "controller-failover", "--speed", "1000", "--duration", "5", "--seed", "3"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "'controller-failover' (3 brokers, seed 3)" in out
    for name in ("broker-0", "broker-1", "broker-2", "producer-orders-api"):
        assert f"{name}" in out
    assert out.count("http://127.0.0.1:") == 4
    assert "stopped at t=5 s" in out


def test_simulate_rejects_unknown_scenarios_and_impossible_overrides(capsys, tmp_path):
    assert main(["simulate", "--scenario", "no-such-thing"]) == 2
    assert "rf1-incident" in capsys.readouterr().err  # the message lists the built-ins
    # rf1-incident kills broker 1: a one-broker cluster cannot run it.
    assert main(["simulate", "--scenario", "rf1-incident", "--brokers", "1"]) == 2
    assert "no broker 1" in capsys.readouterr().err


def test_bench_simulate_prints_its_figures_against_the_baseline(capsys):
    # A small cluster for a moment: the test checks what the benchmark reports, never how fast it ran.
    code = main(
        ["bench", "simulate", "--brokers", "3", "--partitions", "30", "--seconds", "1", "--repeat", "1"]
    )
    out = capsys.readouterr().out
    assert code in (0, 1)  # 1: below the 10x target, which a loaded test machine may well be
    assert out.startswith("machine: ")
    assert "cluster: 3 brokers, 30 partitions in 10 topics (RF 3)" in out
    assert "baseline: real time = 1x; target: >= 10x" in out
    assert "x real time by the wall clock (best run)" in out and "x by CPU time" in out
    # Broker 1 dies at 1/3 s: the controller elects new leaders for the partitions it led (10 of 30).
    assert "10 leader elections" in out


def test_bench_simulate_refuses_impossible_settings(capsys):
    assert main(["bench", "simulate", "--brokers", "2"]) == 2
    assert "--brokers must be at least 3" in capsys.readouterr().err

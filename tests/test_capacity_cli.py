"""``kobs whatif``: JSON answers from Kafka's rules and the published figures, and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kobs.cli import main

ROOT = Path(__file__).resolve().parents[1]


def whatif(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["whatif", *args])
    out, err = capsys.readouterr()
    return code, out, err


def answer(capsys, *args: str) -> dict:
    code, out, err = whatif(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_assign_prints_the_worked_example(capsys):
    got = answer(
        capsys, "assign", "--brokers", "0,1,2,3,4", "--partitions", "10", "--replication-factor", "3"
    )
    assert got["0"] == [0, 1, 2] and got["1"] == [1, 2, 3] and got["4"] == [4, 0, 1]
    assert got["5"] == [0, 2, 3] and got["9"] == [4, 1, 2] and len(got) == 10


def test_assign_replication_factor_above_brokers_exits_non_zero(capsys):
    code, out, err = whatif(capsys, "assign", "--brokers", "0,1,2", "--replication-factor", "4")
    assert code != 0 and out == ""
    assert err.startswith("kobs whatif: --replication-factor: 4 is outside 1..3")


def test_coordinator(capsys):
    assert answer(capsys, "coordinator", "--group", "test_group_1") == {"partition": 30}


def test_throughput_defaults_are_linkedin_and_match_its_figures(capsys):
    got = answer(capsys, "throughput")
    assert 821_557 / 1.5 <= got["produce_records_per_s"] <= 821_557 * 1.5
    assert 78.3 / 1.5 <= got["produce_mb_per_s"] <= 78.3 * 1.5
    assert 940_521 / 1.5 <= got["consume_records_per_s"] <= 940_521 * 1.5
    for side in ("produce", "consume"):  # the bottleneck names each side's smallest bound
        bounds = got[f"{side}_bounds"]
        assert f"{side}: {min(bounds, key=bounds.get)}" in got["bottleneck"]


def test_throughput_what_if_more_brokers_lifts_a_broker_bound(capsys):
    args = ["throughput", "--producers", "10", "--partitions", "60", "--replication-factor", "3"]
    got = answer(capsys, *args, "--what-if", "brokers=6")
    # Ten producers outrun three brokers' NICs; doubling the brokers doubles that bound.
    assert got["what_if"]["produce_records_per_s"] == pytest.approx(
        2 * got["produce_records_per_s"], rel=1e-6
    )


def test_quota_follows_the_ckafka_rules(capsys):
    got = answer(capsys, "quota", "--limit-mbps", "100", "--broker", "0=1:60", "--broker", "1=1:40")
    assert got["allocation_mbps"] == {"0": 60.0, "1": 46.0} and got["produce_blocked"] is False
    full = answer(
        capsys, "quota", "--limit-mbps", "100", "--broker", "0=2:1", "--broker", "1=2:1", "--storage-full"
    )
    assert full["allocation_mbps"] == {"0": 50.0, "1": 50.0} and full["produce_blocked"] is True


def test_broker_failure_reproduces_the_incident(capsys):
    got = answer(
        capsys,
        "broker-failure",
        "--brokers",
        "0,1,2",
        "--partitions",
        "16",
        "--replication-factor",
        "1",
        "--broker",
        "1",
        "--producer",
        "web=1",
    )
    assert got["offline_partitions"] == [1, 4, 7, 10, 13]
    # 32 MiB buffer / (5/16 MiB/s aimed at the dead broker) = 102.4 s.
    assert got["producers"]["web"]["seconds_to_block"] == pytest.approx(102.4)


def test_size_reports_growth(capsys):
    got = answer(
        capsys,
        "size",
        "--ingress-mbps",
        "200",
        "--retention-hours",
        "1",
        "--read-behind-s",
        "1",
        "--partitions",
        "60",
        "--disk-tb",
        "100",
        "--growth-pct",
        "50",
    )
    assert got["brokers_needed"] == 10 and got["growth"]["brokers_needed"] == 14  # see test_capacity_sizing
    assert got["binding_resource"] == "NIC in"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["throughput", "--brokers", "0"], "--brokers"),
        (["throughput", "--message-bytes", "-5"], "--message-bytes"),
        (["throughput", "--what-if", "colour=blue"], "--what-if"),
        (["size", "--headroom", "1.5"], "--headroom"),
        (["broker-failure", "--broker", "7"], "--broker"),
        (["quota", "--limit-mbps", "0", "--broker", "0=1:1"], "--limit-mbps"),
        # Not numbers the model can work with: once tracebacks (OverflowError) or a silent nan answer.
        (["throughput", "--nic-gbps", "inf"], "--nic-gbps"),
        (["throughput", "--disk-mbps", "1e308"], "--disk-mbps"),
        (["throughput", "--nic-gbps", "1e-320"], "--nic-gbps"),
        (["size", "--ingress-mbps", "inf"], "--ingress-mbps"),
        (["size", "--retention-hours", "1e308"], "--retention-hours"),
        (["size", "--ingress-mbps", "1e-320"], "--ingress-mbps"),
        (["throughput", "--what-if", "disk-mbps=nan"], "--disk-mbps"),
        (["quota", "--limit-mbps", "nan", "--broker", "0=1:1"], "--limit-mbps"),
        (["quota", "--limit-mbps", "10", "--broker", "0=1:inf"], "--broker"),
    ],
)
def test_bad_input_names_the_option_and_exits_2(capsys, args, option):
    code, out, err = whatif(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith(f"kobs whatif: {option}: ")


@pytest.mark.parametrize("rate", ["-1", "nan", "inf", "1e-320", "1e308"])
def test_malformed_values_are_refused_by_the_parser(capsys, rate):
    with pytest.raises(SystemExit) as exc:
        main(["whatif", "broker-failure", "--broker", "1", "--producer", f"web={rate}"])
    assert exc.value.code == 2
    assert f"argument --producer: 'web={rate}': producer web: MiB/s " in capsys.readouterr().err


def test_table_output_and_help_through_the_entry_point():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "kobs.cli", "whatif"]
    table = subprocess.run(
        [*run, "broker-failure", "--broker", "1", "--producer", "web=1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert table.returncode == 0 and "102.4 s" in table.stdout and "1, 4, 7, 10, 13" in table.stdout
    helped = subprocess.run(
        [*run, "throughput", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "sequential MiB/s of ONE disk" in helped.stdout and "(default: 3)" in helped.stdout

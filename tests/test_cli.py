"""The installed ``kobs`` entry point: help on every subcommand, clear config errors."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from peers.process import free_port

KOBS = str(Path(sys.executable).with_name("kobs"))
SUBCOMMANDS = [
    "demo",
    "collect",
    "maintenance",
    "simulate",
    "stream",
    "whatif",
    "dashboards",
    "alerts",
    "app",
    "bench",
]


def kobs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KOBS, *args], capture_output=True, text=True, timeout=60)


def test_top_level_help_lists_every_subcommand():
    result = kobs("--help")
    assert result.returncode == 0
    for name in SUBCOMMANDS:
        assert f"\n    {name}" in result.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(name):
    result = kobs(name, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: kobs {name}")


@pytest.mark.parametrize(
    "name, option",
    [
        ("capacity", "--json"),
        ("collect", "--groups"),
        ("freshness", "--config"),
        ("simulate", "--tick"),
        ("stream", "--master"),
    ],
)
def test_every_benchmark_has_help_with_its_own_options(name, option):
    result = kobs("bench", name, "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: kobs bench {name}")
    assert option in result.stdout


def test_the_parser_of_every_command_loads_no_spark_pandas_or_numpy():
    """A benchmark's module loads when its benchmark is parsed: `kobs --help` or `kobs collect` must not
    pay for the Spark and pandas imports of `kobs bench stream` (about a second of every call), nor for
    the simulator's numpy (~60 ms)."""
    check = (
        "import sys; from kobs.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('pyspark', 'pandas', 'numpy') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_collect_documents_config_and_once():
    out = kobs("collect", "--help").stdout
    assert "--config" in out and "--once" in out


def test_stream_help_states_the_stop_grace_and_restart_waits_the_code_uses():
    from spark_jobs.stream import BATCH_GRACE_S, RESTART_BACKOFF_S, TOPIC_POLL_S

    out = " ".join(kobs("stream", "--help").stdout.split())
    assert f"the batch under way finish (up to {BATCH_GRACE_S:g} s)" in out
    assert f"a wait of {RESTART_BACKOFF_S[0]:g} s, doubled up to a minute" in out
    assert RESTART_BACKOFF_S[1] == 60
    assert f"looked for every {TOPIC_POLL_S:g} s" in out


def test_bad_config_is_one_line_naming_the_key_and_exits_non_zero(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("clusters:\n- name: prod\n  bootstrap_servers: [broker-1]\n")
    result = kobs("collect", "--config", str(path), "--once")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kobs: config error in {path}: clusters[0].bootstrap_servers[0]: 'broker-1' is not host:port"
        " — write it like 127.0.0.1:9092"
    ]


def test_a_demo_run_dir_holding_an_earlier_run_is_one_line_before_anything_starts(tmp_path):
    (tmp_path / "kobs.yaml").write_text("clusters: []\n")  # what every demo run leaves there
    result = kobs("demo", "--run-dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kobs demo: --run-dir {tmp_path} is not empty (an earlier run's data?): give a new or empty "
        "directory"
    ]
    assert result.stdout == ""  # nothing was started


def test_unknown_subcommand_is_refused():
    result = kobs("frobnicate")
    assert result.returncode == 2 and "invalid choice: 'frobnicate'" in result.stderr


@pytest.mark.parametrize(
    ("command", "key"), [("collect", "self_metrics_address"), ("stream", "exporter_address")]
)
def test_a_taken_port_is_one_line_naming_the_key_before_anything_starts(tmp_path, command, key):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        path = tmp_path / "kobs.yaml"
        sinks = {"run_dir": str(tmp_path / "run"), key: address}
        cluster = {"name": "a", "bootstrap_servers": ["127.0.0.1:9"]}
        path.write_text(yaml.safe_dump({"clusters": [cluster], "sinks": sinks}))
        result = kobs(command, "--config", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kobs: config error: sinks.{key} {address} is in use (another kobs process?) — stop what listens "
        "there or choose another port"
    ]


def test_a_missing_secret_is_one_line_before_any_connection(tmp_path):
    path = tmp_path / "kobs.yaml"
    cluster = {
        "name": "a",
        "bootstrap_servers": ["127.0.0.1:9"],
        "jmx": [{"broker_id": 1, "address": "127.0.0.1:8"}],
        "jmx_auth": {"username": "u", "password_env": "KOBS_TEST_UNSET_JMX_PASSWORD"},
    }
    path.write_text(yaml.safe_dump({"clusters": [cluster], "sinks": {"run_dir": str(tmp_path / "run")}}))
    result = kobs("collect", "--config", str(path), "--once")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [  # no connection error before it (113 lines once)
        "kobs: config error: clusters[a].jmx_auth.password_env names environment variable "
        "KOBS_TEST_UNSET_JMX_PASSWORD, which is not set"
    ]


def test_an_unknown_client_property_is_one_line_naming_it(tmp_path):
    path = tmp_path / "kobs.yaml"
    cluster = {"name": "a", "bootstrap_servers": ["127.0.0.1:9"], "client_properties": {"no.such.key": 1}}
    path.write_text(yaml.safe_dump({"clusters": [cluster], "sinks": {"run_dir": str(tmp_path / "run")}}))
    result = kobs("collect", "--config", str(path), "--once")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "kobs collect: clusters[a]: the client settings are refused: "
        'No such configuration property: "no.such.key"'
    ]


def test_an_unreachable_cluster_costs_a_few_log_lines_not_one_per_connection_attempt(tmp_path):
    """Once librdkafka logged a FAIL line per connection attempt of every client: about 90 a second."""
    path = tmp_path / "kobs.yaml"
    sinks = {"run_dir": str(tmp_path / "run"), "self_metrics_address": f"127.0.0.1:{free_port()}"}
    cluster = {"name": "a", "bootstrap_servers": [f"127.0.0.1:{free_port()}"]}  # nothing listens there
    path.write_text(yaml.safe_dump({"clusters": [cluster], "sinks": sinks}))
    process = subprocess.Popen([KOBS, "collect", "--config", str(path)], stderr=subprocess.PIPE, text=True)
    time.sleep(12)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0
    lines = stderr.strip().splitlines()
    assert any("unreachable" in line for line in lines)  # said once, when it became so
    assert len(lines) <= 10, lines


def test_a_checkpoint_of_the_version_with_the_analyses_in_the_driver_is_one_line_naming_the_way_out(tmp_path):
    """What that version left (Spark's offset and commit logs, the driver's snapshots, no state store): Spark
    cannot resume it with the stateful step, so kobs stream says so before starting Spark."""
    checkpoint = tmp_path / "run" / "checkpoints" / "stream"
    for part in ("offsets/0", "commits/0", "analyses/batch-0.pickle"):
        (checkpoint / part).parent.mkdir(parents=True, exist_ok=True)
        (checkpoint / part).write_text("")
    path = tmp_path / "kobs.yaml"
    sinks = {"run_dir": str(tmp_path / "run"), "exporter_address": f"127.0.0.1:{free_port()}"}
    path.write_text(
        yaml.safe_dump({"clusters": [{"name": "a", "bootstrap_servers": ["127.0.0.1:9"]}], "sinks": sinks})
    )
    result = kobs("stream", "--config", str(path), "--available-now")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "kobs: checkpoint error: it has committed batches but no state store (an older kobs); kobs stream "
        f"cannot resume from {checkpoint}: run kobs stream --reset-state to set it aside and start over from "
        "the metrics topic's earliest record (the history is kept)"
    ]

"""The installed ``kobs`` entry point: help on every subcommand, clear config errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

KOBS = str(Path(sys.executable).with_name("kobs"))
SUBCOMMANDS = ["demo", "collect", "simulate", "stream", "whatif", "dashboards", "alerts", "app", "bench"]


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


def test_collect_documents_config_and_once():
    out = kobs("collect", "--help").stdout
    assert "--config" in out and "--once" in out


def test_bad_config_is_one_line_naming_the_key_and_exits_non_zero(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("clusters:\n- name: prod\n  bootstrap_servers: [broker-1]\n")
    result = kobs("collect", "--config", str(path), "--once")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kobs: config error in {path}: clusters[0].bootstrap_servers[0]: 'broker-1' is not host:port"
        " — write it like 127.0.0.1:9092"
    ]


def test_unknown_subcommand_is_refused():
    result = kobs("frobnicate")
    assert result.returncode == 2 and "invalid choice: 'frobnicate'" in result.stderr

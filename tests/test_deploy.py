"""The docker-compose stack and its configuration files are valid for the real tools that read them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from common.config import load_config

ROOT = Path(__file__).parents[1]


def test_compose_file_validates_offline():
    result = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    expected = {"kafka", "spark-master", "spark-worker", "collectors", "streaming", "app"}
    assert expected | {"prometheus", "alertmanager", "grafana"} <= set(services)
    assert services["collectors"]["command"] == ["collect", "--config", "/etc/kobs/kobs.yaml"]


def test_compose_configuration_is_valid_kobs_config():
    config = load_config(ROOT / "deploy" / "kobs.yaml", environ={})
    assert config.clusters[0].bootstrap_servers == ["kafka:9092"] and config.clusters[0].mode == "kraft"


def test_alertmanager_routing_passes_amtool():
    result = subprocess.run(
        ["amtool", "check-config", str(ROOT / "deploy" / "alertmanager.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr

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


def test_compose_prometheus_config_passes_promtool_and_loads_the_shipped_rules():
    result = subprocess.run(
        ["promtool", "check", "config", str(ROOT / "deploy" / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (pattern,) = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["rule_files"]
    shipped = sorted(p.name for p in (ROOT / "alerts").glob(Path(pattern).name))
    assert shipped and all(name.endswith(".rules.yml") for name in shipped)

"""The docker-compose stack: valid for the real tools that read it, and every port, URL, topic, path and
command in it agrees with deploy/, the shipped provisioning and kobs's own command line and configuration.

No Docker engine runs here: ``docker-compose config`` validates and normalises the file offline, and the
tests read its output."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from common.config import load_config
from kobs.cli import build_parser

ROOT = Path(__file__).parents[1]
DEPLOY = ROOT / "deploy"
KOBS_IMAGE = "kafka-observatory:latest"
ONE_SHOT = {"metrics-topic", "dashboards", "alert-rules"}  # run once at start, then exit


def _compose_config(**environ: str) -> subprocess.CompletedProcess:
    """``docker-compose config`` with only these variables besides PATH."""
    return subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"], **environ},
    )


@pytest.fixture(scope="module")
def services() -> dict:
    result = _compose_config(GRAFANA_ADMIN_PASSWORD="s3cret-for-the-test", SPARK_AUTH_SECRET="spark-s3cret")
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)["services"]


def _published(service: dict) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each port, as docker-compose 1.29 normalises it
    (``127.0.0.1:9093:9093/tcp``)."""
    rows = []
    for port in service.get("ports", []):
        host, published, target = port.split("/")[0].rsplit(":", 2)
        rows.append((host, int(published), int(target)))
    return rows


@pytest.fixture(scope="module")
def config():
    return load_config(DEPLOY / "kobs.yaml", environ={})


def _mounts(service: dict) -> dict[str, str]:
    """Container path -> source (a named volume, or a path relative to the repository)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        mounts[target] = str(Path(source).relative_to(ROOT)) if source.startswith("/") else source
    return mounts


def _container_ports(service: dict) -> set[int]:
    return {target for _host, _published, target in _published(service)}


def _option(command: list[str], name: str) -> str:
    """The value of ``--name=value`` or ``--name value`` in a command."""
    for i, arg in enumerate(command):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return command[i + 1]
    raise AssertionError(f"{name} not in {command}")


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _prometheus_targets() -> dict[str, list[str]]:
    doc = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    return {job["job_name"]: job["static_configs"][0]["targets"] for job in doc["scrape_configs"]}


def test_the_stack_has_every_part_with_health_checks(services):
    kafka = {"kafka-1", "kafka-2", "kafka-3"}
    parts = {"spark-master", "spark-worker", "collectors", "streaming", "app", "prometheus", "alertmanager"}
    assert kafka | parts | {"grafana"} | ONE_SHOT <= set(services)
    for name, service in services.items():
        assert name in ONE_SHOT or service.get("healthcheck", {}).get("test"), f"{name}: no health check"
    for name in kafka:
        env = services[name]["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller" and env["KAFKA_JMX_PORT"]
        assert f"{env['KAFKA_NODE_ID']}@{name}:9093" in env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")


def test_every_kobs_service_runs_a_valid_kobs_command_line(services):
    """Parsed by kobs's own argument parser: an unknown option (say ``kobs app --bind``) is refused."""
    kobs_services = {n: s for n, s in services.items() if s["image"] == KOBS_IMAGE and "entrypoint" not in s}
    assert {"collectors", "streaming", "app", "dashboards"} <= set(kobs_services)
    parser = build_parser()
    for name, service in kobs_services.items():
        args = parser.parse_args(service["command"])  # exits (status 2) on a bad command line
        if getattr(args, "config", None):
            assert _mounts(service)[str(args.config)] == "deploy/kobs.yaml", name
    with pytest.raises(SystemExit):
        parser.parse_args(["app", "--bind", "0.0.0.0"])


def test_every_kobs_service_is_given_the_time_its_own_stop_takes(services):
    """Docker sends SIGKILL 10 s after SIGTERM unless told otherwise; kobs stream's stop may take the batch
    under way's grace and Spark's stop timeout, the collector's its flush."""
    from collectors.cli import FLUSH_S
    from spark_jobs.stream import BATCH_GRACE_S, STOP_TIMEOUT_S

    longest_s = max(BATCH_GRACE_S + STOP_TIMEOUT_S, FLUSH_S)
    for name, service in services.items():
        if service["image"] == KOBS_IMAGE and name not in ONE_SHOT:
            grace = re.fullmatch(r"(\d+)s", service.get("stop_grace_period", "10s"))
            assert grace and int(grace.group(1)) > longest_s, (name, service.get("stop_grace_period"))


def test_data_lives_in_named_volumes(services, config):
    for name in ("kafka-1", "kafka-2", "kafka-3"):
        assert _mounts(services[name])[services[name]["environment"]["KAFKA_LOG_DIRS"]] == f"{name}-data"
    for name in (
        "collectors",
        "streaming",
        "spark-worker",
    ):  # spool, checkpoints, history; executors write too
        assert _mounts(services[name])[str(config.sinks.run_dir)] == "kobs-data", name
        assert services[name]["environment"]["KOBS__SINKS__RUN_DIR"] == str(config.sinks.run_dir)
    tsdb = next(
        a.split("=")[1] for a in services["prometheus"]["command"] if a.startswith("--storage.tsdb.path")
    )
    assert _mounts(services["prometheus"])[tsdb] == "prometheus-data"
    storage = next(
        a.split("=")[1] for a in services["alertmanager"]["command"] if a.startswith("--storage.path")
    )
    assert _mounts(services["alertmanager"])[storage] == "alertmanager-data"
    assert _mounts(services["grafana"])["/var/lib/grafana"] == "grafana-data"


def test_kafka_addresses_and_metrics_topic_agree_with_the_configuration(services, config):
    (cluster,) = config.clusters
    for server in cluster.bootstrap_servers:
        host, port = server.split(":")
        assert f"PLAINTEXT://{server}" in services[host]["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(
            ","
        )
        assert f"PLAINTEXT://:{port}" in services[host]["environment"]["KAFKA_LISTENERS"].split(",")
    for jmx in cluster.jmx:
        host, port = jmx.address.split(":")
        env = services[host]["environment"]
        assert (env["KAFKA_NODE_ID"], env["KAFKA_JMX_HOSTNAME"], env["KAFKA_JMX_PORT"]) == (
            jmx.broker_id,
            host,
            int(port),
        )
    command = services["metrics-topic"]["command"]
    topic = config.metrics_topic
    assert _option(command, "--topic") == topic.name
    assert int(_option(command, "--partitions")) == topic.partitions
    assert int(_option(command, "--replication-factor")) == topic.replication_factor
    assert _option(command, "--bootstrap-server").split(",") == topic.bootstrap_servers
    assert set(topic.bootstrap_servers) <= {f"{name}:9092" for name in services if name.startswith("kafka-")}
    assert "--if-not-exists" in command


def test_prometheus_alertmanager_grafana_and_spark_addresses_agree(services, config):
    targets = _prometheus_targets()
    assert targets["kobs-exporter"] == [f"streaming:{_port(config.sinks.exporter_address)}"]
    assert targets["kobs-collector"] == [f"collectors:{_port(config.sinks.self_metrics_address)}"]
    for host in (target.split(":")[0] for job in targets.values() for target in job):
        assert host in services, f"Prometheus scrapes {host}, which is no compose service"
    prometheus = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    (alertmanager,) = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert int(alertmanager.split(":")[1]) in _container_ports(services[alertmanager.split(":")[0]])
    datasource = yaml.safe_load((ROOT / "dashboards/provisioning/datasource.yml").read_text())["datasources"][
        0
    ]
    url = urlsplit(datasource["url"])
    assert url.hostname == "prometheus" and url.port in _container_ports(services["prometheus"])
    master = services["spark-master"]["command"]
    master_url = f"spark://{_option(master, '--host')}:{_option(master, '--port')}"
    assert _option(services["streaming"]["command"], "--master") == master_url
    assert master_url in services["spark-worker"]["command"]


def test_prometheus_loads_the_generated_rules_and_alertmanager_the_shipped_routing(services):
    prometheus_mounts = _mounts(services["prometheus"])
    (pattern,) = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["rule_files"]
    rules_dir = str(Path(pattern).parent)
    command = services["alert-rules"]["command"]
    assert command[:2] == ["alerts", "generate"] and _option(command, "--out") == rules_dir
    assert prometheus_mounts[rules_dir] == _mounts(services["alert-rules"])[rules_dir] == "alert-rules"
    assert services["prometheus"]["depends_on"]["alert-rules"] == {
        "condition": "service_completed_successfully"
    }
    shipped = sorted((ROOT / "alerts").glob(Path(pattern).name))
    assert shipped and all(p.name.endswith(".rules.yml") for p in shipped)
    config_file = _option(services["alertmanager"]["command"], "--config.file")
    assert _mounts(services["alertmanager"])[config_file] == "alerts/alertmanager.yml"
    result = subprocess.run(
        ["promtool", "check", "config", str(DEPLOY / "prometheus.yml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_grafana_loads_the_dashboards_the_stack_generates(services):
    provider = yaml.safe_load((ROOT / "dashboards/provisioning/dashboards.yml").read_text())["providers"][0]
    path = provider["options"]["path"]
    grafana = _mounts(services["grafana"])
    assert grafana["/etc/grafana/provisioning"] == "dashboards/provisioning"
    command = services["dashboards"]["command"]
    assert command[:2] == ["dashboards", "generate"] and _option(command, "--out") == path
    assert grafana[path] == _mounts(services["dashboards"])[path] == "dashboards"
    assert services["grafana"]["depends_on"]["dashboards"]["condition"] == "service_completed_successfully"


def test_the_image_holds_every_package_the_project_installs():
    """The Dockerfile copies each top-level package pyproject.toml includes (pip install . needs them)."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {pattern.rstrip("*") for pattern in include["include"]}
    copied = set(re.findall(r"^COPY (\w+) \1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert packages <= copied, f"Dockerfile does not copy {packages - copied}"


def test_every_port_is_published_on_loopback_unless_told_otherwise(services):
    published = {name: _published(service) for name, service in services.items() if "ports" in service}
    assert published and all(host == "127.0.0.1" for rows in published.values() for host, _, _ in rows)
    moved = yaml.safe_load(
        _compose_config(
            GRAFANA_ADMIN_PASSWORD="x", SPARK_AUTH_SECRET="y", KOBS_PUBLISH_ADDRESS="192.0.2.10"
        ).stdout
    )["services"]
    assert {host for service in moved.values() for host, _, _ in _published(service)} == {"192.0.2.10"}


def test_grafana_has_no_default_password(services):
    result = _compose_config(SPARK_AUTH_SECRET="y")
    assert result.returncode != 0 and "set GRAFANA_ADMIN_PASSWORD" in result.stderr
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret-for-the-test"


def test_spark_authenticates_its_rpc_with_a_secret_the_stack_has_no_default_for(services):
    """The master, the worker and the driver share SPARK_AUTH_SECRET; the driver is reached by its name."""
    result = _compose_config(GRAFANA_ADMIN_PASSWORD="x")
    assert result.returncode != 0 and "set SPARK_AUTH_SECRET" in result.stderr
    for name in ("spark-master", "spark-worker"):
        environment = services[name]["environment"]
        assert environment["SPARK_DAEMON_JAVA_OPTS"] == "-Dspark.authenticate=true"
        assert environment["_SPARK_AUTH_SECRET"] == "spark-s3cret"
    config = load_config(ROOT / "deploy" / "kobs.yaml")
    assert services["streaming"]["environment"][config.spark.auth_secret_env] == "spark-s3cret"
    assert (services["streaming"]["hostname"], config.spark.authenticate) == (config.spark.driver_host, True)


def test_the_spark_ui_is_served_only_where_published(services):
    streaming = services["streaming"]
    assert _option(streaming["command"], "--spark-ui-port") == "4040"
    assert _published(streaming) == [("127.0.0.1", 4040, 4040)]

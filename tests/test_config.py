"""Configuration: defaults, files, environment overrides, secrets, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from collectors.scheduler import build_jobs
from common.config import Config, ConfigError, load_config, require_secrets
from common.kafka_clients import cluster_settings

REFERENCE = Path(__file__).parents[1] / "docs" / "reference-config.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kobs.yaml"
    path.write_text(text)
    return path


def test_no_file_gives_the_embedded_demo_defaults():
    config = load_config(environ={})
    assert [(c.name, c.bootstrap_servers) for c in config.clusters] == [("demo", ["127.0.0.1:9092"])]
    assert config.metrics_topic.name == "kobs.metrics" and config.metrics_bootstrap == ["127.0.0.1:9092"]


def test_reference_config_loads_and_documents_every_key():
    config = load_config(REFERENCE, environ={"KOBS_PROD_EU_PASSWORD": "s3cret"})
    assert config.clusters[0].exporters[0].url == "http://broker-2.example.com:7071/metrics"
    documented = set(_keys(yaml.safe_load(REFERENCE.read_text())))

    def fields(model) -> set[str]:
        out = set()
        for name, info in model.model_fields.items():
            out.add(name)
            for arg in [info.annotation, *getattr(info.annotation, "__args__", ())]:
                for inner in [arg, *getattr(arg, "__args__", ())]:
                    if isinstance(inner, type) and hasattr(inner, "model_fields"):
                        out |= fields(inner)
        return out

    assert fields(Config) - documented == set()


def _keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _keys(item)


def test_environment_overrides_file_values(tmp_path):
    path = write(tmp_path, "clusters: [{name: a, bootstrap_servers: 'h1:9092,h2:9093'}]\n")
    env = {"KOBS__METRICS_TOPIC__PARTITIONS": "12", "KOBS__CLUSTERS__0__BOOTSTRAP_SERVERS": "h3:9094"}
    config = load_config(path, environ=env)
    assert config.metrics_topic.partitions == 12
    assert config.clusters[0].bootstrap_servers == ["h3:9094"]
    assert load_config(path, environ={}).clusters[0].bootstrap_servers == ["h1:9092", "h2:9093"]


def test_secrets_come_from_the_environment_and_stay_out_of_the_configs_repr(tmp_path):
    path = write(
        tmp_path,
        "clusters:\n- name: a\n  bootstrap_servers: [h:9092]\n"
        "  security: {protocol: SASL_SSL, sasl_mechanism: PLAIN, sasl_username: u, sasl_password_env: PW}\n",
    )
    cluster = load_config(path, environ={}).clusters[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PW", "hunter2")
        settings = cluster_settings(cluster)
    assert settings["sasl.password"] == "hunter2" and settings["security.protocol"] == "SASL_SSL"
    assert "hunter2" not in repr(cluster)
    with pytest.raises(
        ConfigError, match="sasl_password_env names environment variable PW, which is not set"
    ):
        cluster_settings(cluster)


ONE = "clusters: [{name: a, bootstrap_servers: [h:1]"  # a valid cluster, left open for one more key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "clusters: [{name: a, bootstrap_server: [h:1]}]",
            "clusters[0].bootstrap_server: unknown key — did you mean",
        ),
        (
            "clusters: [{name: a, bootstrap_servers: [localhost]}]",
            "bootstrap_servers[0]: 'localhost' is not host:port",
        ),
        ("clusters: [{name: a, bootstrap_servers: [h:99999]}]", "'h:99999' is not host:port"),
        (ONE + "}]\nintervals: {metrics_s: soon}", "intervals.metrics_s: 'soon' is invalid"),
        (ONE + "}]\nintervals: {metrics_s: 0}", "intervals.metrics_s: Input should be greater than 0"),
        (
            ONE + ", exporters: [{broker_id: 1, url: 'ftp://x'}]}]",
            "exporters[0].url: 'ftp://x' is not an http(s) URL",
        ),
        (ONE + ", producers: [{client_id: p}]}]", "clusters[0].producers[0]: set exactly one of url or jmx"),
        (ONE + "}, {name: a, bootstrap_servers: [h:2]}]", "cluster names must be unique"),
        (ONE + ", mode: zk}]", "clusters[0].mode: 'zk' is invalid"),
        (ONE + ", mode: zookeeper}]", "clusters[0]: mode zookeeper needs the ZooKeeper connect string"),
        (
            ONE + ", exporter_names: {my_urp: kafka_broker_underreplicated_partitions}}]",
            "clusters[0].exporter_names: my_urp: 'kafka_broker_underreplicated_partitions' is not a "
            "canonical metric name — did you mean 'kafka_broker_under_replicated_partitions'?",
        ),
        (
            ONE + ", exporter_names: {my-urp: kafka_broker_under_replicated_partitions}}]",
            "clusters[0].exporter_names: 'my-urp' is not a Prometheus series name",
        ),
        (
            ONE + ", security: {protocol: SSL, sasl_mechanism: PLAIN}}]",
            "security: sasl_mechanism: used only with protocol SASL_PLAINTEXT or SASL_SSL, not SSL",
        ),
        (
            ONE + ", security: {ssl_ca_location: /ca.pem}}]",
            "security: ssl_ca_location: used only with protocol SSL or SASL_SSL, not PLAINTEXT",
        ),
        (
            ONE + ", security: {protocol: SASL_SSL}}]",
            "clusters[0].security: protocol SASL_SSL needs sasl_mechanism",
        ),
        (
            ONE + ", security: {protocol: SASL_PLAINTEXT, sasl_mechanism: SCRAM-SHA-512, sasl_username: u}}]",
            "sasl_mechanism SCRAM-SHA-512 needs sasl_username and sasl_password_env",
        ),
        (
            ONE + ", security: {protocol: SSL, ssl_certificate_location: /c.pem}}]",
            "a client certificate needs both ssl_certificate_location and ssl_key_location",
        ),
        ("clusters: []", "clusters: List should have at least 1 item"),
        ("clusters: [{name: a}]", "clusters[0]: nothing to watch — set bootstrap_servers (Admin API) or"),
        (
            "clusters: [{name: a, exporters: [{broker_id: 1, url: 'http://h:1/metrics'}]}]",
            "the metrics topic has no brokers — set metrics_topic.bootstrap_servers or a cluster's",
        ),
        ("metrics_topic: {name: x}", "clusters: required key is missing"),
        ("- just\n- a list", "the top level must be a mapping"),
        ("clusters: [{name: a\n", "not valid YAML at line"),
    ],
)
def test_invalid_config_is_one_line_naming_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_cluster_without_admin_access_is_watched_through_its_other_sources(tmp_path):
    text = (
        "clusters: [{name: fleet, exporters: [{broker_id: 1, url: 'http://h:1/metrics'}]},"
        " {name: real, bootstrap_servers: 'b:1,b:2'}]"
    )
    config = load_config(write(tmp_path, text), environ={})
    assert config.clusters[0].bootstrap_servers is None
    assert config.metrics_bootstrap == ["b:1", "b:2"]  # the first cluster that has brokers to write to
    jobs = {(job.cluster, job.source.name) for job in build_jobs(config)}
    assert ("fleet", "exporter/broker-1") in jobs
    assert not any(cluster == "fleet" and name.startswith("admin/") for cluster, name in jobs)
    assert ("real", "admin/offsets") in jobs


def test_missing_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml", environ={})


def test_a_file_that_is_not_text_or_not_a_file_is_one_line(tmp_path):
    binary = tmp_path / "kobs.yaml"
    binary.write_bytes(b"\xc8\x00\xff binary")
    for path, message in (
        (binary, f"config error in {binary}: not UTF-8 text (byte 0)"),
        (tmp_path, f"config error: {tmp_path} is a directory — pass a YAML file to --config"),
    ):
        with pytest.raises(ConfigError) as info:
            load_config(path, environ={})
        assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_an_environment_override_that_is_not_yaml_names_the_variable(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(None, environ={"KOBS__INTERVALS__METRICS_S": "[1, 2"})
    assert str(info.value).startswith("config error: KOBS__INTERVALS__METRICS_S='[1, 2': ")
    assert "\n" not in str(info.value)


def test_every_missing_secret_is_named_before_anything_connects(tmp_path):
    """A secret is read when its client is built; ``require_secrets`` reads them all at start."""
    text = (
        "clusters:\n"
        "- {name: a, bootstrap_servers: ['127.0.0.1:9'], jmx: [{broker_id: 1, address: '127.0.0.1:8'}],\n"
        "   jmx_auth: {username: u, password_env: A_JMX}}\n"
        "- {name: b, bootstrap_servers: ['127.0.0.1:9'], security: {protocol: SASL_PLAINTEXT,\n"
        "   sasl_mechanism: PLAIN, sasl_username: u, sasl_password_env: B_SASL}}\n"
    )
    config = load_config(write(tmp_path, text), environ={})
    for environ, key, variable in (
        ({}, "clusters[a].jmx_auth.password_env", "A_JMX"),
        ({"A_JMX": "x"}, "clusters[b].security.sasl_password_env", "B_SASL"),
    ):
        with pytest.raises(ConfigError) as info:
            require_secrets(config, environ)
        unset = f"config error: {key} names environment variable {variable}, which is not set"
        assert str(info.value) == unset
    require_secrets(config, {"A_JMX": "x", "B_SASL": "y"})

"""Configuration: one YAML file describing the clusters to watch and where results go.

Every key is documented in ``docs/reference-config.yaml``. Loading order: built-in defaults (the embedded
demo), then the file, then ``KOBS__``-prefixed environment variables (``KOBS__METRICS_TOPIC__NAME=x``,
``KOBS__CLUSTERS__0__BOOTSTRAP_SERVERS=host:9092``; values are parsed as YAML scalars). Secrets are never
written in the file: keys ending in ``_env`` name the environment variable that holds them.
Invalid input raises :class:`ConfigError` with one line naming the key and the fix.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from common import names

ENV_PREFIX = "KOBS__"
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9._-]+):(\d{1,5})$")


class ConfigError(ValueError):
    """Invalid configuration; ``str()`` is one line naming the key and the fix."""


def _host_port(value: str) -> str:
    match = _HOST_PORT.match(value)
    if not match or not 0 < int(match.group(2)) < 65536:
        raise ValueError(f"{value!r} is not host:port — write it like 127.0.0.1:9092")
    return value


def _http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s:]+(:\d{1,5})?(/\S*)?$", value):
        raise ValueError(f"{value!r} is not an http(s) URL — write it like http://broker-1:7071/metrics")
    return value


def _zk_connect(value: str) -> str:
    hosts, _, chroot = value.partition("/")
    for host in hosts.split(","):
        _host_port(host)
    if chroot and not re.match(r"^[\w./-]+$", chroot):
        raise ValueError(f"ZooKeeper chroot /{chroot!r} has invalid characters")
    return value


_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def _exporter_names(value: dict[str, str]) -> dict[str, str]:
    """Exporter series name → canonical name (``common/names.py``); one line naming a bad entry."""
    canonical = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
    for series, target in value.items():
        if not _METRIC_NAME.match(series):
            raise ValueError(f"{series!r} is not a Prometheus series name — write it like kafka_server_x_y")
        if target not in canonical:
            close = difflib.get_close_matches(target, canonical, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "use a name from docs/contract.md"
            raise ValueError(f"{series}: {target!r} is not a canonical metric name — {hint}")
    return value


def _comma_list(value: Any) -> Any:
    """``"a:1,b:2"`` and ``["a:1,b:2"]`` (a bootstrap string put in a list) both mean ``["a:1", "b:2"]``."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        return value
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


HostPort = Annotated[str, AfterValidator(_host_port)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
Servers = Annotated[list[HostPort], BeforeValidator(_comma_list), Field(min_length=1)]
Seconds = Annotated[float, Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Security(_Model):
    """Client security passed through to librdkafka; secrets come from environment variables."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = None
    sasl_username: str | None = None
    sasl_password_env: str | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password_env: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Security:
        """Settings the protocol would silently ignore (a login over SSL, certificates over PLAINTEXT) or
        that it cannot work without (SASL with no mechanism: librdkafka would try GSSAPI) are refused."""
        sasl, tls = self.protocol.startswith("SASL_"), self.protocol.endswith("SSL")
        given = {k for k, v in self.model_dump().items() if v is not None and k != "protocol"}
        for wanted, prefix, protocols in (
            (sasl, "sasl_", "SASL_PLAINTEXT or SASL_SSL"),
            (tls, "ssl_", "SSL or SASL_SSL"),
        ):
            ignored = sorted(k for k in given if k.startswith(prefix))
            if ignored and not wanted:
                keys = ", ".join(ignored)
                raise ValueError(
                    f"{keys}: used only with protocol {protocols}, not {self.protocol} — change the "
                    f"protocol or remove {keys}"
                )
        if sasl and self.sasl_mechanism is None:
            raise ValueError(
                f"protocol {self.protocol} needs sasl_mechanism (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN)"
            )
        if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
            self.sasl_username and self.sasl_password_env
        ):
            raise ValueError(
                f"sasl_mechanism {self.sasl_mechanism} needs sasl_username and sasl_password_env"
            )
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise ValueError("a client certificate needs both ssl_certificate_location and ssl_key_location")
        return self


class JmxAuth(_Model):
    """The JMX user of a cluster's brokers and producers (``com.sun.management.jmxremote.password.file``)."""

    username: str = Field(min_length=1)
    password_env: str = Field(min_length=1)  # the environment variable holding the password


class JmxEndpoint(_Model):
    broker_id: int = Field(ge=0)
    address: HostPort


class ExporterEndpoint(_Model):
    broker_id: int = Field(ge=0)
    url: HttpUrl


class ProducerEndpoint(_Model):
    """A producer application's metrics: a JMX port or a JMX-exporter URL (exactly one)."""

    client_id: str
    url: HttpUrl | None = None
    jmx: HostPort | None = None
    topics: list[str] = []  # what it writes: lets broker-side evidence estimate when it blocks

    @model_validator(mode="after")
    def _one_source(self) -> ProducerEndpoint:
        if (self.url is None) == (self.jmx is None):
            raise ValueError("set exactly one of url or jmx")
        return self


class Canary(_Model):
    """The cluster's end-to-end canary (``collectors/canary.py``): one message to each of its partitions,
    one led by each broker, every ``interval_s``; a message not read back within ``timeout_s`` is lost."""

    enabled: bool = True
    topic: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")] = "kobs-canary"
    interval_s: Seconds = 1.0
    timeout_s: Seconds = 10.0
    replication_factor: int | None = Field(default=None, ge=1)  # None: 3, or fewer brokers if fewer
    availability_slo: float = Field(default=0.99, gt=0, lt=1)  # share read back within timeout_s, 2 minutes
    latency_slo_s: Seconds = 1.0  # 99th percentile of the end-to-end latency, 5 minutes


class Cluster(_Model):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    bootstrap_servers: Servers | None = None  # None: no Admin API access (offsets, metadata) to this cluster
    mode: Literal["auto", "zookeeper", "kraft"] = "auto"
    zookeeper: Annotated[str, AfterValidator(_zk_connect)] | None = None
    security: Security = Security()
    client_properties: dict[str, str | int | float | bool] = {}
    critical_groups: list[str] = []  # consumer group names or shell patterns whose trouble pages
    jmx: list[JmxEndpoint] = []
    jmx_auth: JmxAuth | None = None  # for every JMX endpoint of the cluster, brokers' and producers'
    exporters: list[ExporterEndpoint] = []
    producers: list[ProducerEndpoint] = []
    broker_disk_bytes: int | None = Field(default=None, gt=0)  # each broker's log.dirs capacity, for runway
    exporter_names: Annotated[dict[str, str], AfterValidator(_exporter_names)] = {}
    canary: Canary = Canary()  # runs only with bootstrap_servers

    @model_validator(mode="after")
    def _zookeeper_for_zookeeper_mode(self) -> Cluster:
        if self.mode == "zookeeper" and self.zookeeper is None:
            raise ValueError("mode zookeeper needs the ZooKeeper connect string — set zookeeper: host:2181")
        if not (self.bootstrap_servers or self.zookeeper or self.jmx or self.exporters or self.producers):
            raise ValueError(
                "nothing to watch — set bootstrap_servers (Admin API) or zookeeper, jmx, exporters, producers"
            )
        return self

    @property
    def isr_from_zookeeper(self) -> bool:
        """Partition state and ISR changes come from ZooKeeper's znodes (else from Admin API metadata)."""
        return self.zookeeper is not None and self.mode != "kraft"


# At most 5,000 samples a record (common.contract), so at most a million samples a batch. Measured on a
# backlog of 6.4 M samples (docs/benchmarks.md): batches of 200 read it as fast as one batch of everything,
# in half its memory.
RECORDS_PER_BATCH = 200


class MetricsTopic(_Model):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")] = "kobs.metrics"
    partitions: int = Field(default=6, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    bootstrap_servers: Servers | None = None  # default: the first cluster's
    security: Security = Security()
    # Kafka records per kobs stream micro-batch, so a backlog (a stream that was down, a new checkpoint on a
    # topic holding days of records) is read in bounded batches; null: everything available in one.
    max_records_per_batch: int | None = Field(default=RECORDS_PER_BATCH, ge=1)


class Intervals(_Model):
    metrics_s: Seconds = 15.0
    offsets_s: Seconds = 10.0
    metadata_s: Seconds = 30.0
    producers_s: Seconds = 15.0


class Flapping(_Model):
    """A broker flaps in an ISR at ``flaps`` rejoins within ``window_s``; cleared after a quiet spell."""

    flaps: int = Field(default=3, ge=1)
    window_s: Seconds = 600.0
    clear_after_s: Seconds = 900.0


class Lag(_Model):
    """Burrow's ``allowed-lag``: a partition whose lag is at most this is OK, and a commit within it counts as
    caught up; per group name pattern (``fnmatch``, the first that matches) or for every group."""

    allowed_lag: int = Field(default=0, ge=0)
    allowed_lag_by_group: dict[str, Annotated[int, Field(ge=0)]] = {}


class Analytics(_Model):
    flapping: Flapping = Flapping()
    lag: Lag = Lag()


class Alerts(_Model):
    """What the derived metrics tell the alert rules beyond the facts: how long planned work may last."""

    maintenance_grace_s: Seconds = 600.0  # a planned restart pages once it lasts longer (away or catching up)


class Sinks(_Model):
    run_dir: Path = Path("var")
    spool_max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    exporter_address: HostPort = "127.0.0.1:9308"
    self_metrics_address: HostPort = "127.0.0.1:9309"
    exporter_partitions_per_group: int | None = Field(default=None, ge=1)
    exporter_max_series: int | None = Field(default=None, ge=1)

    @property
    def spool_dir(self) -> Path:
        return self.run_dir / "spool"

    @property
    def history_dir(self) -> Path:
        return self.run_dir / "history"

    @property
    def dead_letter_dir(self) -> Path:
        return self.run_dir / "dead-letter"

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"


class App(_Model):
    """Where the Streamlit app reads live state and firing alerts, and how often its pages refresh."""

    prometheus_url: HttpUrl = "http://127.0.0.1:9090"
    alertmanager_url: HttpUrl | None = "http://127.0.0.1:9093"  # null: no firing alerts in the header
    refresh_s: Seconds = 10.0


class Spark(_Model):
    """How ``kobs stream``'s driver meets a cluster master's executors; a local master uses none of it (its
    driver binds 127.0.0.1)."""

    driver_host: str = "127.0.0.1"  # the address executors reach the driver at (spark.driver.host)
    bind_address: str | None = None  # the address it listens on (spark.driver.bindAddress); None: driver_host
    authenticate: bool = True  # Spark's RPC authentication (spark.authenticate) with a cluster master
    auth_secret_env: str | None = None  # the variable holding a spark:// cluster's shared secret


class Config(_Model):
    clusters: list[Cluster] = Field(min_length=1)
    metrics_topic: MetricsTopic = MetricsTopic()
    intervals: Intervals = Intervals()
    analytics: Analytics = Analytics()
    alerts: Alerts = Alerts()
    sinks: Sinks = Sinks()
    app: App = App()
    spark: Spark = Spark()

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        names = [c.name for c in self.clusters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"cluster names must be unique; {duplicates} repeat")
        return self

    @model_validator(mode="after")
    def _metrics_topic_reachable(self) -> Config:
        if not self.metrics_bootstrap:
            raise ValueError(
                "the metrics topic has no brokers — set metrics_topic.bootstrap_servers or a cluster's "
                "bootstrap_servers"
            )
        return self

    @property
    def metrics_bootstrap(self) -> list[str]:
        """Where the metrics topic lives: its own servers, else the first cluster's that has them."""
        watched = (c.bootstrap_servers for c in self.clusters if c.bootstrap_servers)
        return self.metrics_topic.bootstrap_servers or next(watched, [])


DEFAULTS: dict[str, Any] = {"clusters": [{"name": "demo", "bootstrap_servers": ["127.0.0.1:9092"]}]}


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Defaults, then ``path`` (if given), then ``KOBS__`` environment overrides, validated."""
    environ = os.environ if environ is None else environ
    where = "defaults" if path is None else str(path)
    raw: dict[str, Any] = DEFAULTS if path is None else _read_yaml(Path(path))
    raw = _apply_env(raw, environ)
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"config error in {where}: {_describe(exc)}") from None


def require_secrets(config: Config, environ: Mapping[str, str] | None = None) -> None:
    """ConfigError naming the first ``*_env`` key whose environment variable is unset, before anything
    connects (otherwise a missing secret shows only when its client is built, after other work began). The
    Kafka clients' secrets: ``spark``'s is kobs stream's alone, read before it starts Spark."""

    def walk(node: Any, where: str) -> None:
        if isinstance(node, BaseModel):
            for name in type(node).model_fields:
                if node is config and name == "spark":
                    continue
                value = getattr(node, name)
                key = f"{where}.{name}" if where else name
                if name.endswith("_env") and isinstance(value, str):
                    secret(value, key, environ)
                else:
                    walk(value, key)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}[{getattr(item, 'name', i)}]")

    walk(config, "")


def secret(environ_name: str | None, key: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of a secret named by an ``*_env`` key; a clear error when the variable is unset."""
    if environ_name is None:
        return None
    value = (os.environ if environ is None else environ).get(environ_name)
    if value is None:
        raise ConfigError(f"config error: {key} names environment variable {environ_name}, which is not set")
    return value


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"config error: file {path} not found — pass an existing file to --config"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"config error: {path} is a directory — pass a YAML file to --config") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config error in {path}: not UTF-8 text (byte {exc.start}) — is it the YAML configuration?"
        ) from None
    except OSError as exc:
        raise ConfigError(f"config error: cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(
            f"config error in {path}: not valid YAML{at}: {_one_line(getattr(exc, 'problem', None) or exc)}"
        ) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(
            f"config error in {path}: the top level must be a mapping of keys, not a list/value"
        )
    return doc


def _apply_env(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    doc: Any = yaml.safe_load(yaml.safe_dump(raw))  # deep copy of plain data
    for name, text in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        node = doc
        for i, part in enumerate(path):
            last = i == len(path) - 1
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(f"config error: {name}: no list item {part} to override")
                part = int(part)
            elif not isinstance(node, dict):
                raise ConfigError(f"config error: {name}: {'.'.join(path[:i])} is not a mapping")
            if last:
                node[part] = _env_value(name, text)
            else:
                if isinstance(node, dict) and part not in node:
                    node[part] = {}
                node = node[part]
    return doc


def _env_value(name: str, text: str) -> Any:
    """A ``KOBS__`` variable's value, parsed as YAML (``5``, ``[a, b]``, ``{k: v}``, ``true``)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = _one_line(getattr(exc, "problem", None) or exc)
        raise ConfigError(
            f"config error: {name}={text!r}: {problem} — quote it, or write a YAML value like 5, [a, b]"
        ) from None


def _all_keys() -> set[str]:
    keys: set[str] = set()
    for model in (Config, Cluster, Security, JmxEndpoint, ExporterEndpoint, ProducerEndpoint, MetricsTopic):
        keys.update(model.model_fields)
    keys.update(Intervals.model_fields, Sinks.model_fields, App.model_fields)
    return keys


def _one_line(text: object) -> str:
    """A parser's message on one line (PyYAML's span several)."""
    return " ".join(str(text).split())


def _key(part: object) -> str:
    """A key as an error shows it: as written when plain, quoted when it holds spaces, newlines, ..."""
    text = str(part)
    return text if re.fullmatch(r"[\w.-]+", text) else repr(text)


def _describe(exc: ValidationError) -> str:
    # A misspelt key shows up twice (unknown + missing): name the misspelling, it is the fix.
    error = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    loc = ""
    for part in error["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{_key(part)}" if loc else _key(part))
    kind, message = error["type"], error["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        key = str(error["loc"][-1])
        close = difflib.get_close_matches(key, _all_keys(), n=1)
        hint = f"did you mean {close[0]!r}?" if close else "remove it (see docs/reference-config.yaml)"
        return f"{loc}: unknown key — {hint}"
    if kind == "missing":
        return f"{loc}: required key is missing — add it (see docs/reference-config.yaml)"
    shown = repr(error["input"]) if not isinstance(error["input"], dict | list) else "value"
    if kind.endswith("_type") or kind.endswith("_parsing") or kind == "literal_error":
        return f"{loc}: {shown} is invalid — {message}"
    return f"{loc or 'config'}: {message}"

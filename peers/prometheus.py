"""Embedded Prometheus and Alertmanager (Debian packages) on loopback, with small HTTP API helpers."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from peers.process import HOST, ManagedProcess, free_port, http_ready


def http_json(url: str, data: bytes | None = None, timeout_s: float = 10.0) -> Any:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.load(response)


class _PrometheusServer(ManagedProcess):
    """A Prometheus-family server: YAML config in the run dir, loopback listener, ``/-/ready`` check."""

    def __init__(self, name: str, run_dir: Path, config: dict[str, Any], flags: list[str], port: int | None):
        self.port = port or free_port()
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        config_path = run_dir / f"{name}.yml"
        config_path.write_text(yaml.safe_dump(config))
        argv = [name, f"--config.file={config_path}", f"--web.listen-address={self.address}", *flags]
        super().__init__(name, argv, run_dir, http_ready(f"{self.url}/-/ready"), ports=[self.port])

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


class Prometheus(_PrometheusServer):
    """Prometheus scraping ``scrape_targets`` (job name -> list of host:port) every ``scrape_interval``;
    ``target_labels`` (job name -> labels) are added to every series of that job's targets, and
    ``job_settings`` (job name -> scrape config keys, e.g. its own ``scrape_interval``) to its config."""

    def __init__(
        self,
        run_dir: Path,
        scrape_targets: dict[str, list[str]] | None = None,
        rule_files: list[Path] | None = None,
        alertmanager: str | None = None,
        scrape_interval: str = "1s",
        port: int | None = None,
        target_labels: dict[str, dict[str, str]] | None = None,
        job_settings: dict[str, dict[str, Any]] | None = None,
    ):
        labels, settings = target_labels or {}, job_settings or {}
        config: dict[str, Any] = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [
                {
                    "job_name": job,
                    "static_configs": [{"targets": targets, "labels": labels.get(job, {})}],
                    **settings.get(job, {}),
                }
                for job, targets in (scrape_targets or {}).items()
            ],
            "rule_files": [str(p) for p in rule_files or []],
        }
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        flags = [f"--storage.tsdb.path={Path(run_dir) / 'prometheus-data'}", "--web.enable-lifecycle"]
        super().__init__("prometheus", run_dir, config, flags, port)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; returns the result vector (raises on a query error)."""
        doc = http_json(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        if doc.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {doc}")
        return doc["data"]["result"]


class Alertmanager(_PrometheusServer):
    """Alertmanager with a given routing config, kept off the network (no cluster listener)."""

    def __init__(self, run_dir: Path, config: dict[str, Any] | None = None, port: int | None = None):
        config = config or {"route": {"receiver": "null"}, "receivers": [{"name": "null"}]}
        flags = [f"--storage.path={Path(run_dir) / 'alertmanager-data'}", "--cluster.listen-address="]
        super().__init__("prometheus-alertmanager", run_dir, config, flags, port)

    def alerts(self) -> list[dict[str, Any]]:
        return http_json(f"{self.url}/api/v2/alerts")

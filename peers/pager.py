"""A pager on loopback: receives Alertmanager's webhook notifications, the last hop of every page.

The shipped routing (``alerts/alertmanager.yml``) posts pages to ``/page`` and tickets to ``/ticket`` of a
bridge; :func:`routed_to` points those webhooks at a :class:`Pager`, which keeps every notification with
the time it arrived and hands it to ``on_notification`` (the demo prints it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

from alerts.check import ALERTMANAGER_CONFIG
from peers.process import HOST


@dataclass(frozen=True)
class Notification:
    receiver: str  # the URL path without "/": page or ticket
    payload: dict[str, Any]  # Alertmanager's webhook body (status, groupLabels, alerts, ...)
    received_s: float  # time.time() at arrival

    @property
    def alertname(self) -> str:
        return self.payload["groupLabels"].get("alertname", "")

    @property
    def headline(self) -> str:
        """What a pager shows first: the incident (its group: a cluster and the broker that caused it, or an
        alert name) and each alert in it, e.g. ``demo, broker 2: KafkaBrokerDown; KafkaOfflinePartitions
        orders; KafkaProducerBlocked web-frontend``."""
        group = self.payload["groupLabels"]
        where = group.get("cluster", "")
        if "cause_broker" in group:
            where += f", broker {group['cause_broker']}"
        alerts = []
        for alert in self.payload["alerts"]:
            labels = alert["labels"]
            about = labels.get("topic") or labels.get("client_id") or labels.get("group") or ""
            alerts.append(f"{labels['alertname']} {about}".rstrip())
        return f"{where}: {'; '.join(sorted(set(alerts)))}"


class Pager(ThreadingHTTPServer):
    """Collects webhook notifications; start with ``with Pager() as pager:`` or ``start()``/``stop()``."""

    def __init__(self, on_notification: Callable[[Notification], None] | None = None):
        self.received: list[Notification] = []
        self._on_notification = on_notification
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                notification = Notification(self.path.strip("/"), json.loads(body), time.time())
                outer.received.append(notification)
                self.send_response(200)
                self.end_headers()
                if outer._on_notification:
                    outer._on_notification(notification)

            def log_message(self, *_args: object) -> None:
                pass

        super().__init__((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server_address[1]}"

    def pages(self, alertname: str | None = None, status: str | None = "firing") -> list[Notification]:
        """Page notifications in arrival order, of ``alertname``'s group (None: any) whose status is
        ``status`` (None: any). A group's notification is firing while any of its alerts fires."""
        return [
            n
            for n in list(self.received)
            if n.receiver == "page"
            and status in (None, n.payload["status"])
            and (alertname is None or n.alertname == alertname)
        ]

    def news_since(self, since_s: float) -> list[Notification]:
        """The firing page notifications received since ``since_s`` that tell of an alert fired since then:
        not a group's update that only repeats or resolves older alerts (an unclean election's page, held 10
        minutes, keeps its broker's group notifying)."""
        since = datetime.fromtimestamp(since_s, UTC)
        return [
            n
            for n in self.pages()
            if n.received_s >= since_s
            and any(
                a["status"] == "firing" and datetime.fromisoformat(a["startsAt"]) >= since
                for a in n.payload["alerts"]
            )
        ]

    def start(self) -> Pager:
        threading.Thread(target=self.serve_forever, name="pager", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> Pager:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def routed_to(pager_url: str, group_wait: str | None = None, group_interval: str | None = None) -> dict:
    """The shipped Alertmanager routing with every webhook pointed at ``pager_url`` (``/<receiver>``);
    tests shorten the grouping delays."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    if group_wait:
        config["route"]["group_wait"] = group_wait
        for route in config["route"].get("routes", []):
            route.pop("group_wait", None)
    if group_interval:
        config["route"]["group_interval"] = group_interval
        for route in config["route"].get("routes", []):
            route.pop("group_interval", None)
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = f"{pager_url}/{receiver['name']}"
    return config

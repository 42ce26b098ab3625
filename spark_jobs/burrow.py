"""Burrow's HTTP API (v3), read-only, answered from the lag analysis's latest evaluation.

Teams with scripts, dashboards and notifiers on LinkedIn Burrow point them at ``kobs stream``'s exporter
address instead: the same paths, JSON shapes and status names (Burrow's ``core/protocol`` and
``core/internal/httpserver``). Pure: :func:`respond` maps a path to a status code and a JSON object;
:class:`BurrowApi` is the WSGI adapter the exporter's server mounts under ``/v3/`` and ``/burrow/``.

Served:

- ``GET /v3/kafka``: the configured clusters;
- ``GET /v3/kafka/{cluster}/consumer``: the groups with committed offsets in that cluster;
- ``GET /v3/kafka/{cluster}/consumer/{group}/status``: the group's status with its partitions that are not
  OK; ``…/lag``: with every partition. An unknown group is ``NOTFOUND`` with HTTP 404, as in Burrow;
- ``GET /burrow/admin``: the health check, ``GOOD``.

Burrow's other paths (cluster and consumer detail, topics, config, log level, DELETE) answer 404 with
Burrow's "invalid request type" body. Offsets are polled, not read from ``__consumer_offsets``: a commit's
``timestamp`` is when the collector saw it, the same as its ``observedAt``. ``owner`` (the member's host)
and ``client_id`` are the partition's member in the newest offsets scrape, empty when it has none (as
Burrow sends them).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from spark_jobs.lag_status import Commit, group_status

JsonObject = dict[str, Any]
Rows = Mapping[str, Sequence[Mapping[str, Any]]]  # cluster -> the lag analysis's partition rows
NOT_FOUND = 404


def respond(path: str, clusters: Sequence[str], rows: Rows, host: str) -> tuple[int, JsonObject | str]:
    """Status code and body of a GET of ``path`` (as sent: percent-escaped UTF-8, so that a group named
    ``team/a`` is one segment, ``team%2Fa``), given the configured ``clusters`` and each one's latest lag
    rows (``spark_jobs.lag_tracker.PartitionLag`` fields); ``host`` names the responder as Burrow does."""
    segments = [unquote(s) for s in path.rstrip("/").split("/")]
    request = {"url": "/".join(segments), "host": host}
    match segments[1:]:
        case ["burrow", "admin"]:
            return 200, "GOOD"
        case ["v3", "kafka"]:
            return 200, {"error": False, "message": "cluster list returned", "clusters": list(clusters),
                         "request": request}  # fmt: skip
        case ["v3", "kafka", cluster, "consumer"] if cluster in clusters:
            groups = sorted({row["group"] for row in rows.get(cluster, ())})
            return 200, {"error": False, "message": "consumer list returned", "consumers": groups,
                         "request": request}  # fmt: skip
        case ["v3", "kafka", _, "consumer"]:
            return NOT_FOUND, {"error": True, "message": "cluster not found", "request": request}
        case ["v3", "kafka", cluster, "consumer", group, ("status" | "lag") as which]:
            mine = [row for row in rows.get(cluster, ()) if row["group"] == group]
            status = consumer_status(cluster, group, mine, show_all=which == "lag")
            code = NOT_FOUND if status["status"] == "NOTFOUND" else 200
            return code, {"error": False, "message": "consumer status returned", "status": status,
                          "request": request}  # fmt: skip
    return NOT_FOUND, {"error": True, "message": "invalid request type", "result": {}}


def consumer_status(cluster: str, group: str, rows: Sequence[Mapping], show_all: bool) -> JsonObject:
    """Burrow's ``ConsumerGroupStatus`` of one group from its partition rows (none: ``NOTFOUND``).

    As Burrow's evaluator: the group is its worst partition, STOP/STALL/REWIND counted as ``ERR``;
    ``complete`` is the share of partitions whose window is full; ``maxlag`` the partition with the most
    current lag (the first in topic and partition order on a tie); ``totallag`` the sum; without
    ``show_all`` only partitions that are not OK are listed."""
    if not rows:
        return {"cluster": cluster, "group": group, "status": "NOTFOUND", "complete": 1.0, "partitions": [],
                "partition_count": 0, "maxlag": None, "totallag": 0}  # fmt: skip
    ordered = sorted(rows, key=lambda row: (row["topic"], int(row["partition"])))
    partitions = [partition_status(row) for row in ordered]
    return {
        "cluster": cluster,
        "group": group,
        "status": group_status(p["status"] for p in partitions),
        "complete": sum(p["complete"] == 1 for p in partitions) / len(partitions),
        "partitions": partitions if show_all else [p for p in partitions if p["status"] != "OK"],
        "partition_count": len(partitions),
        "maxlag": max(partitions, key=lambda p: p["current_lag"]),  # max keeps the first of equals
        "totallag": sum(p["current_lag"] for p in partitions),
    }


def partition_status(row: Mapping[str, Any]) -> JsonObject:
    """Burrow's ``PartitionStatus`` of one lag row."""
    return {
        "topic": row["topic"],
        "partition": int(row["partition"]),
        "owner": row.get("owner", ""),
        "client_id": row.get("client_id", ""),
        "status": row["status"],
        "start": consumer_offset(row.get("start")),
        "end": consumer_offset(row.get("end")),
        "current_lag": row["lag_messages"],
        "complete": row.get("complete", 0.0),
    }


def consumer_offset(commit: Commit | None) -> JsonObject | None:
    """Burrow's ``ConsumerOffset``: a polled commit's time is both when it was made and when it was seen.
    None (JSON null, as Burrow allows) for a row restored from a snapshot older than these fields."""
    if commit is None:
        return None
    offset, at_ms, lag = commit
    return {"offset": offset, "timestamp": at_ms, "observedAt": at_ms, "lag": lag}


class BurrowApi:
    """WSGI app answering :func:`respond` for the rows ``latest()`` returns at each request."""

    prefixes = ("/v3/", "/burrow/")

    def __init__(self, clusters: Iterable[str], latest: Callable[[], Rows]):
        self.clusters = list(clusters)
        self.latest = latest
        self.host = socket.gethostname()

    def __call__(self, environ: dict, start_response: Callable) -> list[bytes]:
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            code, body = 405, {"error": True, "message": "read-only: only GET is served", "result": {}}
        else:
            code, body = respond(raw_path(environ), self.clusters, self.latest(), self.host)
        text, kind = (body, "text/plain") if isinstance(body, str) else (json.dumps(body), "application/json")
        payload = text.encode()
        reason = {200: "OK", NOT_FOUND: "Not Found", 405: "Method Not Allowed"}[code]
        start_response(f"{code} {reason}", [("Content-Type", kind), ("Content-Length", str(len(payload)))])
        return [payload]


def raw_path(environ: dict) -> str:
    """The request's path as sent: ``RAW_URI`` without its query where the server gives it; else
    ``PATH_INFO`` escaped again (a WSGI server decodes it as Latin-1; an escaped ``/`` is lost there)."""
    if raw := environ.get("RAW_URI"):
        return raw.split("?", 1)[0]
    return quote(environ.get("PATH_INFO", "/").encode("latin-1"), safe="/")

"""Alertmanager's API for the header of every live page: the alerts that notify people now.

Only active alerts that are neither silenced nor inhibited, as the pager sees them. Any failure to get an
answer raises :class:`AlertmanagerUnavailable` with one line naming the URL and the fix.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class AlertmanagerUnavailable(RuntimeError):
    """Alertmanager did not answer; ``str()`` names the URL and what to check."""


@dataclass(frozen=True)
class Firing:
    alertname: str
    severity: str  # "page" or "ticket" in the shipped rules
    summary: str
    since_s: float  # Unix seconds the alert started firing
    runbook_url: str


def firing(url: str, timeout_s: float = 5.0) -> list[Firing]:
    """The alerts Alertmanager notifies about now."""
    base = url.rstrip("/")
    query = f"{base}/api/v2/alerts?active=true&silenced=false&inhibited=false"
    try:
        with urllib.request.urlopen(query, timeout=timeout_s) as response:
            return [_firing(alert) for alert in json.load(response)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        reason = (
            f"HTTP {exc.code}" if isinstance(exc, urllib.error.HTTPError) else getattr(exc, "reason", exc)
        )
        raise AlertmanagerUnavailable(
            f"Alertmanager at {base} is not answering ({reason}): firing alerts unknown. "
            "Point app.alertmanager_url in the configuration at it."
        ) from None


def _firing(alert: dict[str, Any]) -> Firing:
    labels, annotations = alert["labels"], alert.get("annotations", {})
    return Firing(
        alertname=labels["alertname"],
        severity=labels.get("severity", "ticket"),
        summary=annotations.get("summary", ""),
        since_s=datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00")).timestamp(),
        runbook_url=annotations.get("runbook_url", ""),
    )

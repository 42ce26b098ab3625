"""The loopback pager tells the notifications that bring news from a group's updates: Alertmanager sends a
group's notification again when any alert in it changes, with every alert it holds (``startsAt`` is when
Prometheus fired each). Notifications are posted over HTTP in Alertmanager's webhook format."""

from __future__ import annotations

import json
import time
import urllib.request
from datetime import UTC, datetime

from peers.pager import Pager


def _post(pager: Pager, broker: str, *alerts: tuple[str, str, float]) -> None:
    """A page notification of broker's group holding ``alerts``: (name, status, fired at)."""
    labels = {"cluster": "demo", "cause_broker": broker}
    status = "firing" if any(s == "firing" for _, s, _ in alerts) else "resolved"
    payload = {
        "receiver": "page",
        "status": status,
        "groupLabels": labels,
        "alerts": [
            {
                "status": s,
                "labels": {**labels, "alertname": name},
                "startsAt": datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"),
            }
            for name, s, at in alerts
        ],
    }
    request = urllib.request.Request(f"{pager.url}/page", json.dumps(payload).encode(), method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def test_only_notifications_of_alerts_fired_since_are_news():
    with Pager() as pager:
        before = time.time() - 60
        _post(pager, "2", ("KafkaOfflinePartitions", "firing", before))
        since = time.time()
        # broker 2's group again: its outage resolved, the unclean election it held still firing
        _post(
            pager,
            "2",
            ("KafkaOfflinePartitions", "resolved", before),
            ("KafkaUncleanLeaderElection", "firing", before),
        )
        _post(pager, "3", ("KafkaBrokerDown", "firing", since + 1))  # a new incident
        _post(
            pager,
            "2",
            ("KafkaUncleanLeaderElection", "firing", before),
            ("KafkaBrokerDown", "firing", since + 2),
        )
        news = pager.news_since(since)
        assert [n.headline for n in news] == [
            "demo, broker 3: KafkaBrokerDown",
            "demo, broker 2: KafkaBrokerDown; KafkaUncleanLeaderElection",  # news joining an open group
        ]
        assert len(pager.pages()) == 4  # every firing notification is still kept
        assert pager.news_since(time.time()) == []

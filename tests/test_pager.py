"""The loopback pager counts incidents as a pager service does (one open incident per Alertmanager group key,
as PagerDuty's dedup key): a group's firing notifications after the first update its incident, a resolved one
closes it. Notifications are posted over HTTP in Alertmanager's webhook format."""

from __future__ import annotations

import json
import time
import urllib.request

from peers.pager import Pager


def _post(pager: Pager, broker: str, status: str, *alertnames: str) -> None:
    labels = {"cluster": "demo", "cause_broker": broker}
    payload = {
        "receiver": "page",
        "status": status,
        "groupKey": f'{{}}/{{cause_broker=~".+"}}:{{cause_broker="{broker}", cluster="demo"}}',
        "groupLabels": labels,
        "alerts": [{"status": status, "labels": {**labels, "alertname": a}} for a in alertnames],
    }
    request = urllib.request.Request(f"{pager.url}/page", json.dumps(payload).encode(), method="POST")
    urllib.request.urlopen(request, timeout=5).read()


def test_an_update_of_an_incident_opened_before_is_no_new_incident():
    with Pager() as pager:
        _post(pager, "2", "firing", "KafkaOfflinePartitions")
        _post(pager, "2", "firing", "KafkaOfflinePartitions", "KafkaUncleanLeaderElection")
        since = time.time()
        _post(pager, "2", "firing", "KafkaUncleanLeaderElection")  # broker 2's earlier incident, updated
        _post(pager, "3", "firing", "KafkaBrokerDown")  # opens broker 3's
        _post(pager, "3", "firing", "KafkaBrokerDown", "KafkaOfflinePartitions")  # updates it
        opened = pager.opened_since(since)
        assert [n.headline for n in opened] == [
            "demo, broker 3: KafkaBrokerDown",
            "demo, broker 3: KafkaBrokerDown; KafkaOfflinePartitions",
        ]
        assert len(pager.pages()) == 5  # every firing notification is still kept


def test_a_group_that_resolved_and_fires_again_is_a_new_incident():
    with Pager() as pager:
        _post(pager, "1", "firing", "KafkaOfflinePartitions")
        _post(pager, "1", "resolved", "KafkaOfflinePartitions")
        since = time.time()
        _post(pager, "1", "firing", "KafkaBrokerDown")
        assert [n.headline for n in pager.opened_since(since)] == ["demo, broker 1: KafkaBrokerDown"]
        assert pager.opened_since(time.time()) == []

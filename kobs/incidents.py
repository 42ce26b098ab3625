"""The demo's incidents, played for real on the real cluster, each step printed as it happens.

1. **A broker of a replication-factor-1 topic dies** (SIGKILL): its ``orders`` partitions have no other
   replica, ``web-frontend``'s keyed records for them pile up in its buffer, ``send()`` blocks, and
   KafkaProducerBlocked pages. The broker is restarted; the partitions return and the buffer drains.
2. **A follower hangs** (SIGSTOP, as in a long GC pause or a stuck disk): the leaders drop it from their
   ISRs after ``replica.lag.time.max.ms``, partitions are under-replicated, and
   KafkaUnderReplicatedPartitions pages (or KafkaBrokerDown, which inhibits it, where that fires first).
   SIGCONT: it catches up and the ISRs expand.

Each incident starts once the previous one's page resolved (or gave up waiting), and reports how long
after its cause the page arrived at the pager, against the one-minute target.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from peers.pager import Notification
from peers.stack import INCIDENT_TOPIC, PRODUCER, EmbeddedStack

PAGE_TARGET_S = 60.0
KILLED, PAUSED = 2, 3  # the broker each incident breaks


@dataclass(frozen=True)
class Incident:
    title: str
    alert: str  # the page it must raise
    begin: Callable[[EmbeddedStack], str]  # breaks something; returns what happened, for people
    end: Callable[[EmbeddedStack], str]  # repairs it


@dataclass(frozen=True)
class Outcome:
    title: str
    alert: str
    cause_s: float  # time.time() of the break
    paged_after_s: float | None  # None: no page within the wait
    resolved_after_s: float | None  # after the repair


def led_by(stack: EmbeddedStack, broker: int, topic: str) -> list[int]:
    metadata = AdminClient({"bootstrap.servers": stack.kafka.bootstrap}).list_topics(topic, timeout=10)
    return sorted(p for p, m in metadata.topics[topic].partitions.items() if m.leader == broker)


def kill_broker(stack: EmbeddedStack) -> str:
    lost = led_by(stack, KILLED, INCIDENT_TOPIC)
    pid = stack.kafka.nodes[KILLED].pid
    stack.kafka.kill(KILLED)
    return (
        f"broker {KILLED} (pid {pid}) killed with SIGKILL: {INCIDENT_TOPIC} partitions {lost} have no other "
        f"replica; {PRODUCER}'s records for them pile up in its buffer until send() blocks"
    )


def restart_broker(stack: EmbeddedStack) -> str:
    stack.kafka.restart(KILLED)
    pid = stack.kafka.nodes[KILLED].pid
    return (
        f"broker {KILLED} restarted (pid {pid}): its partitions have a leader again, elected uncleanly by "
        "Kafka's count (a killed broker's log may have lost writes), which pages too"
    )


def pause_broker(stack: EmbeddedStack) -> str:
    pid = stack.kafka.nodes[PAUSED].pid
    stack.kafka.pause(PAUSED)
    lag_s = stack.kafka.settings["replica.lag.time.max.ms"] / 1000
    return (
        f"broker {PAUSED} (pid {pid}) stopped with SIGSTOP, a hung JVM: the leaders of the partitions it "
        f"follows drop it from their ISRs after replica.lag.time.max.ms ({lag_s:g} s)"
    )


def resume_broker(stack: EmbeddedStack) -> str:
    stack.kafka.resume(PAUSED)
    return f"broker {PAUSED} continued with SIGCONT: it catches up and rejoins the ISRs"


INCIDENTS = (
    Incident(
        "a broker of a replication-factor-1 topic dies", "KafkaProducerBlocked", kill_broker, restart_broker
    ),
    Incident("a follower hangs", "KafkaUnderReplicatedPartitions", pause_broker, resume_broker),
)


class Player:
    """Plays ``incidents`` on ``stack`` one after the other, printing each step with the time since start."""

    def __init__(
        self,
        stack: EmbeddedStack,
        out: Callable[[str], None] = print,
        incidents: tuple[Incident, ...] = INCIDENTS,
        quiet_s: float = 30.0,  # between incidents, and before the first once the pipeline is live
        hold_s: float = 30.0,  # how long a break lasts after its page
        wait_s: float = 180.0,  # the longest wait for a page, and for its resolution
        settle_s: float = 70.0,  # a page group's interval (1 min in the shipped routing) and a margin
    ):
        self.stack, self.out, self.incidents = stack, out, incidents
        self.quiet_s, self.hold_s, self.wait_s, self.settle_s = quiet_s, hold_s, wait_s, settle_s
        self.started_s = time.time()
        self.stopped = threading.Event()

    def say(self, text: str) -> None:
        elapsed = int(time.time() - self.started_s)
        self.out(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {text}")

    def play(self) -> list[Outcome]:
        outcomes = []
        self.say("incidents: waiting for the pipeline's first derived metrics of the real cluster ...")
        if not self._wait(self.pipeline_live, self.wait_s):
            self.say("incidents: the pipeline shows nothing yet; playing them anyway")
        for number, incident in enumerate(self.incidents, 1):
            if self.stopped.wait(self.quiet_s):
                return outcomes
            outcomes.append(self._play(number, incident))
        if not self.stopped.is_set():
            self.say("incidents: all played; the stack keeps running until Ctrl-C")
        return outcomes

    def _play(self, number: int, incident: Incident) -> Outcome:
        self.say(f"incident {number}: {incident.title}")
        self.settle(incident)
        cause_s, page = self.break_until_paged(incident)
        paged_after = page.received_s - cause_s if page else None
        if self.stopped.wait(self.hold_s):  # stopping: the stack goes down with the break in place
            return Outcome(incident.title, incident.alert, cause_s, paged_after, None)
        resolved_after = self.repair_until_resolved(incident)
        return Outcome(incident.title, incident.alert, cause_s, paged_after, resolved_after)

    def settle(self, incident: Incident) -> None:
        """Wait until Alertmanager holds no ``incident.alert`` from before (an earlier incident's), then one
        page group interval, so that its group has sent its last notification and is closed: the new page
        then goes out after ``group_wait``, not at that group's next interval."""
        settled = self._wait(lambda: not self._held(incident.alert), self.wait_s)
        if settled and any(n.alertname == incident.alert for n in self.stack.pager.received):
            alert, wait_s = incident.alert, self.settle_s
            self.say(f"  waiting {wait_s:.0f} s for Alertmanager to close the last {alert} group first")
            self.stopped.wait(wait_s)

    def break_until_paged(self, incident: Incident) -> tuple[float, Notification | None]:
        """Break; wait for the page. (time of the break, the page or None): the alert's own, or the page of
        an alert that inhibits it (:meth:`page_for`)."""
        cause_s = time.time()
        self.say("  " + incident.begin(self.stack))
        page = self._wait(lambda: self.page_for(incident.alert, cause_s), self.wait_s)
        if self.stopped.is_set():
            pass  # stopping: say nothing more
        elif page:
            paged_after = page.received_s - cause_s
            verdict = "within" if paged_after <= PAGE_TARGET_S else "OVER"
            covering = f", which inhibits {incident.alert}" if page.alertname != incident.alert else ""
            aim = f"{verdict} the 60 s aim"
            self.say(f"  {page.alertname} paged {paged_after:.0f} s after the cause{covering} ({aim})")
        else:
            self.say(f"  no {incident.alert} page within {self.wait_s:.0f} s")
        return cause_s, page

    def repair_until_resolved(self, incident: Incident) -> float | None:
        """Repair; wait until Alertmanager holds the alert no more. Seconds from the repair, or None.

        The pager hears of it at the group's next ``group_interval`` (1 minute for pages as shipped)."""
        repaired_s = time.time()
        self.say("  " + incident.end(self.stack))
        resolved = self._wait(lambda: not self._held(incident.alert), self.wait_s)
        resolved_after = time.time() - repaired_s if resolved else None
        if resolved and not self.stopped.is_set():
            self.say(
                f"  {incident.alert} resolved {resolved_after:.0f} s after the repair (the pager is told at "
                "the alert group's next interval)"
            )
        return resolved_after

    def _held(self, alert: str) -> bool:
        """Alertmanager holds ``alert``, firing or suppressed (an inhibited alert still keeps its group)."""
        try:
            alerts = self.stack.alertmanager.alerts()
        except OSError:  # Alertmanager busy: ask again
            return True
        return any(a["labels"]["alertname"] == alert for a in alerts)

    def page_for(self, alert: str, since_s: float) -> Notification | None:
        """The first page since ``since_s`` that told of ``alert``: its own, or, while Alertmanager holds
        every such alert inhibited, the page of an alert inhibiting it (alerts/alertmanager.yml: a broker
        down covers its partitions' under-replication; whichever fires first pages)."""
        if own := self._notified(alert, "firing", since_s):
            return own
        try:
            held = self.stack.alertmanager.alerts()
        except OSError:  # Alertmanager busy: ask again
            return None
        names = {a["fingerprint"]: a["labels"]["alertname"] for a in held}
        alerts = [a for a in held if a["labels"]["alertname"] == alert]
        if not alerts or not all(a["status"]["inhibitedBy"] for a in alerts):
            return None  # not firing yet, or one of them may still page
        inhibiting = {names.get(f) for a in alerts for f in a["status"]["inhibitedBy"]}
        pages = [page for name in inhibiting if name and (page := self._notified(name, "firing", since_s))]
        return min(pages, key=lambda page: page.received_s, default=None)

    def _notified(self, alert: str, status: str, since_s: float) -> Notification | None:
        found = [n for n in self.stack.pager.pages(alert, status) if n.received_s >= since_s]
        return found[0] if found else None

    def pipeline_live(self) -> bool:
        query = f'kobs_producer_blocked{{job="kobs-exporter",cluster="demo",client_id="{PRODUCER}"}}'
        try:
            return bool(self.stack.prometheus.query(query))
        except Exception:  # Prometheus not answering yet
            return False

    def _wait(self, check, timeout_s: float):
        deadline = time.monotonic() + timeout_s
        while not self.stopped.is_set():
            found = check()
            if found or time.monotonic() > deadline:
                return found
            self.stopped.wait(1.0)
        return None

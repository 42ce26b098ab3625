"""The demo's planned work and incidents, played for real on the real cluster, each step printed as it comes.

- **rolling-restart**: the most common event of a Kafka team's week. Each node in turn is stopped with SIGTERM
  (a controlled shutdown: it moves its leaders away first), waited for, started again after an upgrade's
  pause, and waited for until every ISR is full. Nothing pages for replication risk; the replication-factor-1
  topic ``orders`` goes offline while the node holding a partition of it is away, and that outage pages,
  naming the planned restart (``kobs maintenance check`` says so before each restart).
- **broker-crash**: a broker of ``orders`` dies (SIGKILL): its partitions have no other replica,
  ``web-frontend``'s keyed records for them pile up in its buffer, ``send()`` blocks. One page names the
  broker and lists the offline topic and the blocked producer. The broker is restarted; the partitions
  return and the buffer drains (Kafka counts the return as an unclean election, KIP-966: that pages too).
- **follower-hang**: a follower hangs (SIGSTOP, as in a long GC pause or a stuck disk): the controller
  fences it, its partitions are under-replicated. One page names the broker. SIGCONT: it catches up.

Each one starts once the pages of the one before have resolved (or the wait gave up), and reports every
page notification it caused: how long after the cause, and which broker it names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from kobs.maintenance_check import CheckError, impact_now
from peers import kafka_tools
from peers.pager import Notification
from peers.stack import INCIDENT_TOPIC, PRODUCER, EmbeddedStack

PAGE_TARGET_S = 60.0
# A rolling restart waits this long between a node's exit and its start, as an upgrade's install would: the
# demo's nodes start again in a few seconds, and a broker away for less than the controllers' reading interval
# (5 s here) cannot be told from a crash (docs/analytics.md#replication-health).
UPGRADE_PAUSE_S = 10.0
KILLED, PAUSED = 2, 3  # the broker each incident breaks
QUIET_AFTER_S = 120.0  # how long after planned work ends a page still counts against it
# Pages that tell of an event, firing for a fixed time after it, not of a state a repair ends.
EVENT_PAGES = frozenset({"KafkaUncleanLeaderElection"})


@dataclass(frozen=True)
class Incident:
    name: str  # for ``kobs demo --incidents``
    title: str
    broker: int | None  # the broker it breaks, whose id its page must name; None: planned work on every node
    begin: Callable[[Player], str]  # breaks (or works); returns what happened, for people
    end: Callable[[Player], str]  # repairs it ("" for planned work, which repairs itself)


@dataclass(frozen=True)
class Outcome:
    name: str
    cause_s: float  # time.time() of the break (the first SIGTERM of planned work)
    pages: tuple[Notification, ...]  # the firing page notifications from the cause until the end
    resolved_after_s: float | None  # after the repair; None: not resolved within the wait

    def paged_after_s(self) -> float | None:
        return self.pages[0].received_s - self.cause_s if self.pages else None

    def incidents(self) -> set[tuple[str, ...]]:
        """The page groups (Alertmanager's group labels) notified: one per incident as the pager sees it."""
        return {tuple(sorted(n.payload["groupLabels"].items())) for n in self.pages}


def led_by(stack: EmbeddedStack, broker: int, topic: str) -> list[int]:
    metadata = AdminClient({"bootstrap.servers": stack.kafka.bootstrap}).list_topics(topic, timeout=10)
    return sorted(p for p, m in metadata.topics[topic].partitions.items() if m.leader == broker)


def in_sync(stack: EmbeddedStack) -> bool:
    """Every partition's ISR is its whole replica set, by Kafka's own tool."""
    return not kafka_tools.describe_topics(stack.kafka.bootstrap, "--under-replicated-partitions")


def rolling_restart(player: Player) -> str:
    stack = player.stack
    for node_id, node in stack.kafka.nodes.items():
        if player.stopped.is_set():
            break
        player.say(f"  kobs maintenance check: {maintenance_verdict(stack, node_id)}")
        pid, started = node.pid, time.time()
        stack.kafka.shut_down(node_id)
        took = time.time() - started
        player.say(f"  node {node_id} (pid {pid}) stopped with SIGTERM, a controlled shutdown: it exited "
                   f"after {took:.0f} s; starting it again in {UPGRADE_PAUSE_S:.0f} s")  # fmt: skip
        player.stopped.wait(UPGRADE_PAUSE_S)  # cut short when the demo stops: the cluster is left whole
        stack.kafka.start_node(node_id)
        full = player.wait(lambda: in_sync(stack), player.wait_s)
        verdict = (
            f"every ISR full {time.time() - started:.0f} s after its SIGTERM" if full else "ISRs not full"
        )
        player.say(f"  node {node_id} back (pid {node.pid}): {verdict}")
    return "rolling restart done"


def maintenance_verdict(stack: EmbeddedStack, broker: int) -> str:
    """``kobs maintenance check``'s verdict on restarting ``broker`` of the real cluster now."""
    try:
        return impact_now(stack.config.clusters[0], broker).verdict
    except CheckError as exc:
        return str(exc)


def kill_broker(player: Player) -> str:
    stack = player.stack
    lost = led_by(stack, KILLED, INCIDENT_TOPIC)
    pid = stack.kafka.nodes[KILLED].pid
    stack.kafka.kill(KILLED)
    return (
        f"broker {KILLED} (pid {pid}) killed with SIGKILL: {INCIDENT_TOPIC} partitions {lost} have no other "
        f"replica; {PRODUCER}'s records for them pile up in its buffer until send() blocks"
    )


def restart_broker(player: Player) -> str:
    player.stack.kafka.restart(KILLED)
    pid = player.stack.kafka.nodes[KILLED].pid
    return (
        f"broker {KILLED} restarted (pid {pid}): its partitions have a leader again, elected uncleanly by "
        "Kafka's count (a killed broker's log may have lost writes), which pages too"
    )


def pause_broker(player: Player) -> str:
    stack = player.stack
    pid = stack.kafka.nodes[PAUSED].pid
    stack.kafka.pause(PAUSED)
    timeout_s = stack.kafka.settings["broker.session.timeout.ms"] / 1000
    return (
        f"broker {PAUSED} (pid {pid}) stopped with SIGSTOP, a hung JVM: the controller fences it after "
        f"broker.session.timeout.ms ({timeout_s:g} s) without a controlled shutdown"
    )


def resume_broker(player: Player) -> str:
    player.stack.kafka.resume(PAUSED)
    return f"broker {PAUSED} continued with SIGCONT: it catches up and rejoins the ISRs"


INCIDENTS = (
    Incident("rolling-restart", "a planned rolling restart of every node", None, rolling_restart,
             lambda _: ""),
    Incident("broker-crash", "a broker of a replication-factor-1 topic dies", KILLED, kill_broker,
             restart_broker),
    Incident("follower-hang", "a follower hangs", PAUSED, pause_broker, resume_broker),
)  # fmt: skip
NAMES = tuple(incident.name for incident in INCIDENTS)


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
    ):
        self.stack, self.out, self.incidents = stack, out, incidents
        self.quiet_s, self.hold_s, self.wait_s = quiet_s, hold_s, wait_s
        self.started_s = time.time()
        self.stopped = threading.Event()

    def say(self, text: str) -> None:
        elapsed = int(time.time() - self.started_s)
        self.out(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {text}")

    def play(self) -> list[Outcome]:
        outcomes = []
        self.say("incidents: waiting for the pipeline's first derived metrics of the real cluster ...")
        if not self.wait(self.pipeline_live, self.wait_s):
            self.say("incidents: the pipeline shows nothing yet; playing them anyway")
        for number, incident in enumerate(self.incidents, 1):
            if self.stopped.wait(self.quiet_s):
                return outcomes
            outcomes.append(self.play_one(number, incident))
        if not self.stopped.is_set():
            self.say("incidents: all played; the stack keeps running until Ctrl-C")
        return outcomes

    def play_one(self, number: int, incident: Incident) -> Outcome:
        self.say(f"{number}. {incident.title} ({incident.name})")
        self.settle()
        cause_s = time.time()
        self.say("  " + incident.begin(self))
        if incident.broker is None:  # planned work: whatever pages in the quiet time after it counts
            self.stopped.wait(QUIET_AFTER_S)
            outcome = Outcome(incident.name, cause_s, self.pages_since(cause_s), None)
        else:
            first = self.wait(lambda: self.pages_since(cause_s), self.wait_s)
            if not first and not self.stopped.is_set():
                self.say(f"  no page within {self.wait_s:.0f} s")
            if self.stopped.wait(self.hold_s):
                return Outcome(incident.name, cause_s, self.pages_since(cause_s), None)
            repaired_s = time.time()
            self.say("  " + incident.end(self))
            resolved = self.wait(lambda: not self.paging(incident.broker), self.wait_s)
            resolved_after = time.time() - repaired_s if resolved else None
            outcome = Outcome(incident.name, cause_s, self.pages_since(cause_s), resolved_after)
        if not self.stopped.is_set():
            self.report(incident, outcome)
        return outcome

    def report(self, incident: Incident, outcome: Outcome) -> None:
        """One line on the pages, one per incident (page group) paged."""
        pages = outcome.pages
        if not pages:
            self.say("  nothing paged")
            return
        after = outcome.paged_after_s()
        aim = (
            ""
            if incident.broker is None
            else f" ({'within' if after <= PAGE_TARGET_S else 'OVER'} the 60 s aim)"
        )
        groups = outcome.incidents()
        self.say(f"  {len(pages)} page notification(s) in {len(groups)} incident(s), the first {after:.0f} s "
                 f"after the cause{aim}:")  # fmt: skip
        for group in sorted(groups):
            first = next(n for n in pages if tuple(sorted(n.payload["groupLabels"].items())) == group)
            self.say(f"    {first.headline}")
        if outcome.resolved_after_s is not None:
            self.say(f"  resolved {outcome.resolved_after_s:.0f} s after the repair")

    def settle(self) -> None:
        """Wait until Alertmanager holds no page of a state from before, so that what pages next is the next
        incident's (each incident is a group of its own: its broker's)."""
        if not self.wait(lambda: not self.paging(), self.wait_s) and not self.stopped.is_set():
            self.say("  earlier pages still firing; going on")

    def paging(self, broker: int | None = None) -> bool:
        """Alertmanager holds a page of a state (not of an event, :data:`EVENT_PAGES`), firing or suppressed
        (an inhibited one still keeps its group); of ``broker``'s incident only, when given."""
        try:
            alerts = self.stack.alertmanager.alerts()
        except OSError:  # Alertmanager busy: ask again
            return True
        return any(
            labels.get("severity") == "page"
            and labels["alertname"] not in EVENT_PAGES
            and (broker is None or labels.get("cause_broker") == str(broker))
            for labels in (a["labels"] for a in alerts)
        )

    def pages_since(self, since_s: float) -> tuple[Notification, ...]:
        """The page notifications since ``since_s`` that tell of an alert fired since then (not a group's
        update that only repeats older alerts, such as an unclean election's page held 10 minutes)."""
        return tuple(self.stack.pager.news_since(since_s))

    def pipeline_live(self) -> bool:
        query = f'kobs_producer_blocked{{job="kobs-exporter",cluster="demo",client_id="{PRODUCER}"}}'
        try:
            return bool(self.stack.prometheus.query(query))
        except Exception:  # Prometheus not answering yet
            return False

    def wait(self, check, timeout_s: float):
        """``check()`` once a second until it is truthy, ``timeout_s`` passes or the player is stopped; its
        last value (None when stopped). A node that ends itself meanwhile is started again, and said so."""
        deadline = time.monotonic() + timeout_s
        while not self.stopped.is_set():
            for node_id, code in self.stack.kafka.revive():
                self.say(f"  node {node_id} ended itself (exit code {code}; its log says why): started again")
            found = check()
            if found or time.monotonic() > deadline:
                return found
            self.stopped.wait(1.0)
        return None

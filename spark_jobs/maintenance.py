"""Planned broker restarts told from crashes: which brokers are away, whether they asked to leave, since when.

Pure (no Spark). A broker is *away* from the first metadata scrape that no longer lists it (fenced or
unregistered: the cluster's own word) until the first that lists it again. Whether it asked to leave comes
from the controllers: in KRaft every controller serves how many brokers are registered as in controlled
shutdown (``ControlledShutdownBrokerCount``). A broker counts there from its shutdown request (a SIGTERM,
while it moves its leaders away) until it registers again, so it stays counted for as long as it is away; a
crash (SIGKILL), a hang (SIGSTOP) or a cut network is fenced for missed heartbeats and never counts.

A controller reading taken while brokers are away classifies those not yet classified (but for a reading of an
away broker's own controller, which serves 0 while it starts again, before it has read the metadata):
*planned* when the count covers them as well as the away brokers already known planned, *unplanned* when it
covers none of them (only readings taken once the broker was fenced say that: before, a planned broker may not
have asked yet). A count that covers some of them but not all cannot say which: they are unplanned, since
losing a second broker during maintenance is an incident. A broker that leaves and returns between two
readings stays unclassified, which pages like a crash would; so do clusters whose controllers are not scraped.

A planned departure is *maintenance* from the scrape that saw it leave until it is back and in every ISR
again, for at most the grace (``alerts.maintenance_grace_s``); past the grace it is *overdue*. Until the
next reading after it left classifies it, a departure is *unexplained* (where controllers are read at all,
for at most ``EXPLAIN_WAIT_S``): the pages its partitions cause wait for that word so as to name the cause.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

NONE, PLANNED, OVERDUE = 0, 1, 2  # kobs_broker_maintenance
MAX_READINGS = 1_000  # controller readings kept per cluster (three controllers every 5 s: over 25 minutes)
KEEP_READINGS_S = 600.0  # and for this long at least: the metadata scrape a reading explains may come later
# A departure no reading has classified is unexplained for at most this long: the controllers are read every
# metrics interval (15 s by default), and KafkaBrokerDown waits 30 s for the same word.
EXPLAIN_WAIT_S = 30.0


@dataclass
class Departure:
    last_listed_s: float  # the last metadata scrape that listed the broker
    left_s: float  # the first that did not
    back_s: float | None = None  # the first that listed it again
    planned: bool | None = None  # None: no controller reading has said yet

    def spans(self, t_s: float) -> bool:
        """A reading at ``t_s`` may see this departure: the broker was last listed before it, not yet back."""
        return self.last_listed_s < t_s and (self.back_s is None or t_s < self.back_s)


@dataclass
class Departures:
    """The away brokers of one cluster and the controllers' readings that classify them."""

    away: dict[str, Departure] = field(default_factory=dict)
    readings: list[tuple[float, float, str]] = field(default_factory=list)  # (time, brokers in controlled
    # shutdown, the node that served it), in time order

    def __setstate__(self, state: dict) -> None:
        state["readings"] = [(*r, "")[:3] for r in state["readings"]]  # stored before readings named a node
        self.__dict__.update(state)

    def listing(self, t_s: float, listed_s: Mapping[str, float]) -> None:
        """A metadata scrape at ``t_s``; ``listed_s`` maps every broker ever listed to its newest listing."""
        for broker, newest in listed_s.items():
            departure = self.away.get(broker)
            if newest < t_s and (departure is None or departure.back_s is not None):  # gone again: anew
                self.away[broker] = Departure(last_listed_s=newest, left_s=t_s)
            elif newest == t_s and departure is not None and departure.back_s is None:
                departure.back_s = t_s

    def reading(self, t_s: float, in_controlled_shutdown: float, node: str) -> None:
        insort(self.readings, (t_s, in_controlled_shutdown, node))
        if len(self.readings) > MAX_READINGS:
            del self.readings[: len(self.readings) - MAX_READINGS]

    def classify(self) -> None:
        """Apply the readings, oldest first, to the departures not yet classified (a reading may arrive in an
        earlier micro-batch than the metadata scrape that shows the departure it explains)."""
        if not any(d.planned is None for d in self.away.values()):
            return
        for t_s, count, node in self.readings:
            if node in self.away and self.away[node].spans(t_s):
                continue  # the node is starting again: its controller has not read the metadata yet
            spanning = [d for d in self.away.values() if d.spans(t_s)]
            gone = [d for d in spanning if t_s >= d.left_s]  # fenced by then: counted if it asked to leave
            leaving = [d for d in spanning if t_s < d.left_s]  # maybe still asking, maybe not yet
            room = count - sum(d.planned is True for d in spanning)
            unknown = [d for d in gone if d.planned is None]
            for departure in unknown:
                departure.planned = room >= len(unknown)
            if unknown and room >= len(unknown):
                room -= len(unknown)
            unsure = [d for d in leaving if d.planned is None]
            if unsure and room >= len(unsure):  # the count covers them too: they asked to leave
                for departure in unsure:
                    departure.planned = True

    def settle(self, catching_up: Collection[str]) -> None:
        """Forget departures that are over: the broker is back and in every ISR it left."""
        for broker in [b for b, d in self.away.items() if d.back_s is not None and b not in catching_up]:
            del self.away[broker]
        if self.readings:
            keep_from = min((d.last_listed_s for d in self.away.values()), default=self.readings[-1][0])
            keep_from = min(keep_from, self.readings[-1][0] - KEEP_READINGS_S)
            self.readings = [r for r in self.readings if r[0] >= keep_from]

    def unexplained(self, broker: str, now_s: float) -> bool:
        """The broker is away, controllers are read and none has said yet whether it asked to leave; for at
        most ``EXPLAIN_WAIT_S`` after the scrape that saw it leave."""
        departure = self.away.get(broker)
        return (
            departure is not None
            and departure.planned is None
            and departure.back_s is None
            and bool(self.readings)
            and now_s - departure.left_s < EXPLAIN_WAIT_S
        )

    def state(self, broker: str, now_s: float, grace_s: float) -> tuple[int, float]:
        """(maintenance code, seconds since it left) of a broker: NONE and 0 unless it left planned."""
        departure = self.away.get(broker)
        if departure is None or departure.planned is not True:
            return NONE, 0.0
        seconds = max(0.0, now_s - departure.left_s)
        return (PLANNED if seconds <= grace_s else OVERDUE), seconds

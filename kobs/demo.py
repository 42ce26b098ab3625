"""``kobs demo``: bring up the embedded stack, say what runs where, play the incidents on the real cluster
(unless told not to), run until Ctrl-C or the duration, stop cleanly."""

from __future__ import annotations

import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from kobs.incidents import INCIDENTS, NAMES, Player
from peers.pager import Notification
from peers.process import PeerError
from peers.stack import EmbeddedStack


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def describe_notification(notification: Notification) -> str:
    """The notification's headline (its incident), then one line per alert, as a pager would show them."""
    kind = notification.receiver.upper()
    lines = [f"{kind} {notification.payload['status']}: {notification.headline}"]
    for alert in notification.payload["alerts"]:
        labels = alert["labels"]
        where = " ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("alertname", "severity"))
        text = alert["annotations"].get("summary", "")
        lines.append(f"  {alert['status']}: {labels['alertname']} {{{where}}} {text}".rstrip())
    return "\n".join(lines)


def run_demo(
    run_dir: Path | None = None,
    duration_s: float | None = None,
    incidents: tuple[str, ...] = NAMES,
    fleet: bool = True,
) -> int:
    """``incidents``: the names of :data:`kobs.incidents.INCIDENTS` to play, in that order."""
    run_dir = run_dir or Path("var") / f"demo-{datetime.now():%Y%m%d-%H%M%S}"
    if run_dir.is_dir() and any(run_dir.iterdir()):  # an earlier run's Kafka logs and znodes clash
        print(f"kobs demo: --run-dir {run_dir} is not empty (an earlier run's data?): give a new or empty "
              "directory", file=sys.stderr)  # fmt: skip
        return 2
    signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill PID` stops as cleanly as Ctrl-C

    def show(notification: Notification) -> None:
        print(f"[pager] {describe_notification(notification)}", flush=True)

    stack = EmbeddedStack(run_dir.resolve(), fleet=fleet, on_notification=show)
    player, code = None, 0
    try:
        stack.start(progress=lambda step: print(f"  {step}", flush=True))
        print("\nKafka Observatory demo is running:", flush=True)
        for what, where in stack.describe():
            print(f"  {what:<36} {where}", flush=True)
        print("\nPress Ctrl-C to stop.", flush=True)
        if incidents:
            chosen = tuple(next(i for i in INCIDENTS if i.name == name) for name in incidents)
            player = Player(stack, out=lambda line: print(line, flush=True), incidents=chosen)
            playing = threading.Thread(target=player.play, name="incidents", daemon=True)
            playing.start()
        if stack.simulation:
            stack.simulation.run(speed=1.0, duration_s=duration_s)  # real time, until Ctrl-C or the duration
        else:
            time.sleep(duration_s if duration_s is not None else float("inf"))
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
    except PeerError as exc:  # a server that would not start: its log's tail says why
        print(f"kobs demo: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        if player:
            player.stopped.set()
            playing.join(timeout=120)  # a repair under way (a broker restarting) finishes first
        stack.stop()
    print("demo stopped; everything it started has exited.", flush=True)
    return code

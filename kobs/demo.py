"""``kobs demo``: bring up the embedded stack, say what runs where, run until Ctrl-C, stop cleanly."""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path

from peers.stack import EmbeddedStack


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_demo(run_dir: Path | None = None, duration_s: float | None = None) -> int:
    run_dir = run_dir or Path("var") / f"demo-{datetime.now():%Y%m%d-%H%M%S}"
    signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill PID` stops as cleanly as Ctrl-C
    stack = EmbeddedStack(run_dir.resolve())
    try:
        stack.start(progress=lambda step: print(f"  {step}", flush=True))
        print("\nKafka Observatory demo is running:", flush=True)
        for what, where in stack.describe():
            print(f"  {what:<28} {where}", flush=True)
        print("\nPress Ctrl-C to stop.", flush=True)
        stack.simulation.run(speed=1.0, duration_s=duration_s)  # real time, until Ctrl-C or the duration
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
    finally:
        stack.stop()
    print("demo stopped; everything it started has exited.", flush=True)
    return 0

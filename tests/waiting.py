"""Test helper: waiting for a real peer to reach a state."""

from __future__ import annotations

import time

from peers.process import PeerError


def wait_for(check, timeout_s: float, every_s: float = 1.0):
    """Poll ``check()`` until it returns something truthy; that value, or the last one at the deadline.
    A tool that fails while the cluster moves (a request to a paused node timing out) is asked again."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = check()
        except PeerError:
            found = None
        if found or time.monotonic() > deadline:
            return found
        time.sleep(every_s)

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


def until(check, timeout_s: float = 30.0):
    """``wait_for`` polling every 0.2 s, failing the test if ``check()`` never returned something truthy."""
    found = wait_for(check, timeout_s, every_s=0.2)
    assert found, f"condition not reached within {timeout_s:g} s"
    return found


def asked_last(admin) -> int:
    """The node an Admin client's metadata requests go to: the one that answered its last."""
    return until(lambda: max(admin.list_topics(timeout=10).orig_broker_id, 0), timeout_s=30)  # -1: bootstrap

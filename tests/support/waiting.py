"""Polling until something happens, for the tests that watch a worker process or a running app."""
from __future__ import annotations

import time


def wait_for(predicate, timeout: float = 30.0, what: str = "condition", *, every: float = 0.05):
    """Poll `predicate` until it returns something truthy (returned), or fail saying what did not happen in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

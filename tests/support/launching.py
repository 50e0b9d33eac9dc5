"""Starting the app in a test: `launch(demo, **kwargs)` is `demo.launch(**kwargs)` with a patient startup check.

Gradio's launch asks the new server for its page with a 3 s timeout and refuses to start when one try times out
("When localhost is not accessible, a shareable link must be created"). The lab's page is large, and on a busy 2-core
machine its first render can take longer than that: here the server gets a minute to answer.
"""
from __future__ import annotations

import time

import httpx
from gradio import networking

ANSWERED = (200, 401, 301, 302, 303, 307, 308)  # what Gradio's own check takes for a server that is up


def patient_url_ok(url: str, within_s: float = 60.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if httpx.head(url, timeout=20, verify=False).status_code in ANSWERED:
                return True
        except (httpx.ConnectError, httpx.TimeoutException):
            pass
        time.sleep(0.5)
    return False


def launch(demo, **kwargs):
    """`demo.launch(**kwargs)`, with the startup check above; returns what launch returns."""
    check = networking.url_ok
    networking.url_ok = patient_url_ok
    try:
        return demo.launch(**kwargs)
    finally:
        networking.url_ok = check

"""A free loopback port, for the tests that start a server of their own (the session's app, a fuzzed app, a trainer's
DDP rendezvous)."""
from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

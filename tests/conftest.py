"""Shared fixtures: an isolated lab home per test session, a running app and a client for the app tests, and one
intra-op thread for the modules that ask for it."""
from __future__ import annotations

import os

import pytest

from tests.support.ports import free_port


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread for the whole module, restored afterwards. Tiny models (and decoding them, a chain of
    small ops) gain nothing from intra-op threads, and on a busy 2-core machine OpenMP spin-waits cost ~100x. A module
    opts in with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def client(running_app):
    """A gradio_client `Client` on the running app (modules that need trained runs first define their own)."""
    from gradio_client import Client

    url, _ = running_app
    return Client(url, verbose=False)


@pytest.fixture(scope="session", autouse=True)
def lab_home_dir(tmp_path_factory):
    """One lab home for the whole test session, so cached corpora and tokenizers are reused across tests. Set for
    every test (autouse): a test that builds a Trainer without naming a home then caches the matmul probe here, never
    in the user's ~/.pretraining-lab."""
    home = tmp_path_factory.mktemp("lab-home")
    os.environ["PRETRAINING_LAB_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def running_app(lab_home_dir):
    """The real app, launched on a free loopback port without blocking; yields its URL."""
    from app.main import build_app, launch_kwargs

    demo = build_app(lab_home_dir)
    demo.queue()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_kwargs(demo))
    yield f"http://127.0.0.1:{port}/", demo
    demo.close()


@pytest.fixture(scope="session")
def lab_jobs(running_app):
    """The running app's training job manager (`demo.lab_jobs`). Closed at the end of the session, before the app
    itself, so that no trainer outlives the tests (closing stops them with a checkpoint)."""
    _, demo = running_app
    yield demo.lab_jobs
    demo.lab_jobs.close(timeout=20)

"""The root conftest: the `slow` marker, and the shared fixtures: an isolated lab home per test session, a running app
and a client for the app tests, and one intra-op thread for the modules that ask for it.

`python -m pytest -m "not slow"` is the fast loop (under three minutes on two cores) that still covers every stage;
`python -m pytest` (CI) runs everything. `slow` marks what takes seconds because it trains (more than a step or two,
through the CLI or a fixture that trains tiny runs), builds or serves the page (the `running_app` fixture, marked here
for every test that asks for it, or an app or server of its own), drives a browser, starts a Python process that imports
torch, builds a big corpus, or fuzzes. A test that uses a module-scoped fixture which trains is slow too, whichever test
runs first and pays for it. A mark that is not registered here is an error, not a warning: a typo such as
`@pytest.mark.slwo` would otherwise put a slow test into the fast loop without a word.
"""
from __future__ import annotations

import os

import pytest

from tests.support.ports import free_port

SLOW = "slow: takes seconds: trains, builds or serves the page, drives a browser (deselect with -m 'not slow')"


def pytest_configure(config):
    config.addinivalue_line("markers", SLOW)
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnknownMarkWarning")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test that asks for the session's running app, directly or through a fixture that does (`client`, `lab_jobs`,
    a module's own client), serves the page: it is marked slow here, so that a module's unit tests stay in the fast
    loop while its endpoint tests leave it without a mark of their own. Runs before `-m` deselects."""
    for item in items:
        if "running_app" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


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
    from tests.support.launching import launch

    demo = build_app(lab_home_dir)
    demo.queue()
    port = free_port()
    launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
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

"""The test suite, one folder per stage of lab_models/ (text, nn, objectives, models, training, inference, interop,
experiments), app/ for the page, project/ and reliability/ for whole-project checks, and support/ for the helpers the
modules share. conftest.py holds the shared fixtures and the `slow` marker (`python -m pytest -m "not slow"` is the fast
loop)."""

"""Every worked example in a docstring is run: the examples in lab_models/ and app/ are tests, not decoration."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import app
import lab_models

# every module of both packages, however deep (pkgutil.walk_packages imports the packages it walks into)
MODULES = sorted(
    info.name
    for package in (lab_models, app)
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
    if not info.ispkg
)
# app/ keeps most of its modules in packages (i18n/ and one per tab): every one of them, however deep
MODULES = sorted(set(MODULES) | {info.name for info in pkgutil.walk_packages(app.__path__, "app.") if not info.ispkg})


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed"


def test_the_examples_are_found():
    assert "lab_models.objectives.bert" in MODULES and "lab_models.nn.attention" in MODULES
    assert "app.main" in MODULES and "app.i18n.messages" in MODULES
    attempted = sum(doctest.testmod(importlib.import_module(name)).attempted for name in
                    ("lab_models.nn.attention", "lab_models.objectives.xlnet"))
    assert attempted >= 5

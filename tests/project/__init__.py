"""Whole-project checks: the layout rules, the docstring examples, the bounds on every number a request takes, the docs."""

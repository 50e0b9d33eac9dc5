"""Tests of lab_models/models/: the family models (leakage, training at the tiny preset, round trips), the RNN families,
Switch layers."""

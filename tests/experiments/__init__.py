"""Tests of lab_models/experiments/: scaling sweeps and the zoo."""

"""Tests of lab_models/interop/: parity with transformers for every architecture the lab imports and exports, and the
framework."""

"""Tests of lab_models/nn/: the backbone, its attention paths and options, relative attention."""

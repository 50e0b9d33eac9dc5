"""Tests of lab_models/training/: the engine, the CLI, the job manager, performance and precision, training further from
a checkpoint."""

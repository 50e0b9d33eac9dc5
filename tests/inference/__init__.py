"""Tests of lab_models/inference/: generation, representations and probes, fine-tuning, the leaderboard."""

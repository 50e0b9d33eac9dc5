"""Helpers the test modules share (imported, never collected): toy vocabularies and models, the leakage check, tiny
trained runs, fake trainers, interop checkpoints, message templates, ports and polling."""

"""Generation and fill-mask, in parts (see lab_models/generate.py, which re-exports them all)."""

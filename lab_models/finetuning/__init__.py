"""Fine-tuning, in parts (see lab_models/finetune.py, which re-exports them all)."""

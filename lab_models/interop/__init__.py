"""Hugging Face interop: one architecture module per family (`lab_models/interop/<family>.py`), each with FAMILY,
MODEL_TYPES, HF_ARCHITECTURES, import_config, import_state, export_config and export_state, so that a local
checkpoint folder becomes a lab run with numerical parity to `transformers` and a lab run becomes a folder that
`transformers` loads. `transformers` itself is never imported here: only tests and benchmarks use it."""

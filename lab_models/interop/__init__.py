"""Hugging Face checkpoints in and out of the lab: one module per architecture (`lab_models/interop/<arch>.py`).

Each architecture module names the lab family it becomes (`FAMILY`), the config.json `model_type` values it handles
(`MODEL_TYPES`) and the reference classes (`HF_ARCHITECTURES`), and converts both ways: `import_config`,
`import_state`, `export_config`, `export_state`. Paper and deviations: in each module.
"""

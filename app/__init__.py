"""The Pretraining Lab's Gradio UI: one module per tab, each with `build(...)`. Handlers are plain functions that call
`lab_models.api` and turn its `ValueError`s into `gr.Error` messages; no model logic lives here."""

"""The sections of `lab_models.api`, one module each; `lab_models.api` re-exports every name (the UI imports only
that module)."""

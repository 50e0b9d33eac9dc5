"""The Pretraining Lab's backend: corpora, tokenizers, mask predicates, batch builders and (later) models.

The UI in `app/` imports only `lab_models.api`; everything else here is internal and may change.
"""

"""The Tokenizer Lab tab: `tab` (its layout and handlers: train tokenizers on a corpus and watch them split a text)
and `figures` (the token chips, the merge replay and the statistics figures).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

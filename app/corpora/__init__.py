"""The Corpora tab: `tab` (its layout and handlers: the built-in corpora, uploads, a card for each corpus).

Its module imports `lab_models.api` and the lower app modules (`app.errors`, `app.i18n`); no other tab."""

"""The Scaling tab: `tab` (its layout and handlers: start, watch and stop size sweeps) and `figures` (bits per byte
against parameters and training FLOPs with the fitted power laws, the points table, the sweeps' status).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

"""The first tab, the Mask Explorer: `tab` (its layout and handlers), `figures` (the attention heatmaps and the anatomy
table) and `zoo_panel` (the demo zoo's offer and progress, shown above the explorer on a lab home without runs).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

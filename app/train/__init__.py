"""The Train tab: `tab` (its layout and handlers: start, watch, stop and compare runs), `figures` (loss and learning
rate curves, the progress bar, the runs table), `addon_figures` (the add-on objectives' validation numbers),
`switch_panel` and `switch_figures` (the Switch Transformer controls and the routing plot over training), and
`import_panel` (importing a Hugging Face checkpoint as a run).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

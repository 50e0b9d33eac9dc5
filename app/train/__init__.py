"""The Train tab: `tab` (its layout and handlers: start, watch, stop and compare runs), `figures` (loss and learning
rate curves, the progress bar, the runs table), `addon_figures` (the add-on objectives' validation numbers),
`switch_panel` and `switch_figures` (the Switch Transformer controls and the routing plot over training),
`import_panel` (importing a Hugging Face checkpoint as a run: from the Hugging Face cache or a typed folder) and
`export_panel` (the Export button of an exportable run: a from_pretrained folder and its zip).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

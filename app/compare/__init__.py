"""The Compare tab: `tab` (its layout and handlers: up to four runs, one prompt, decoding options) and `figures` (the
HTML of the columns side by side, produced tokens shaded by probability).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

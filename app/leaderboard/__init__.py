"""The Leaderboard tab: `tab` (its layout and handlers: rank the runs of one corpus, measured the same way) and
`figures` (the table as shown, the notes under it, the figure).

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

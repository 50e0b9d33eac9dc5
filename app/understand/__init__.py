"""The Understand tab, what trained runs have learned: `tab` (its layout and handlers: fill-mask, contextual
embeddings, attention) with `figures` (their figures and tables, and the run pickers' labels), and its sections, each
a panel with its figures: `finetune_panel` and `finetune_figures` (fine-tuning on a labelled task),
`similarity_panel` and `similarity_figures` (sentence similarity by topic), `routing_panel` and `routing_figures`
(Switch routing: the expert of each token), `probe_panel` and `probe_figures` (linear probes of every layer),
`lens_panel` and `lens_figures` (the logit lens), `attribution_panel` and `attribution_figures` (integrated
gradients and gradient x input as token chips), `model_view_panel` and `model_view` (the attention model view and
the attention downloads); `export` writes any of their figures as a standalone HTML file.

Its modules import `lab_models.api`, the lower app modules (`app.display`, `app.errors`, `app.i18n`, `app.inputs`)
and each other; no other tab."""

"""The Pretraining Lab's Gradio UI: one package per tab (`explorer`, `train`, `scaling`, `compare`, `understand`,
`leaderboard`, `tokenizer_lab`, `corpora`), each with a `tab` module whose `build(...)` lays the tab out, and
`main.build_app` puts them on one page. Handlers are plain functions that call `lab_models.api` and turn its
`ValueError`s into `gr.Error` messages (`errors`); no model logic lives here.

The rule of the imports: from the backend, app code imports `lab_models.api` and nothing else. Within `app`, a tab's
modules import their own package and the lower modules (`display`: what several tabs show alike; `errors`; `inputs`;
`i18n`: the two languages), never another tab; only `main` imports the tabs."""

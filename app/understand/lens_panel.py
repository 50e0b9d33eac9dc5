"""The Understand tab's Logit lens section: what every layer already predicts.

Up to four runs and one text: for each run, every layer's hidden state at the position the family predicts (the first
[MASK] for the masked LMs, the next token for the causal ones, T5's and MASS's first span token, CoVe's first
translated token) decoded through the family's own output head with its final norm (nostalgebraist's logit lens,
`api.logit_lens`), as a grid of the top-k tokens per layer coloured by probability. A run whose family cannot be
read there (CVT, a masked LM without a [MASK]) says why in its panel. Under the grid, per run, the position read and
where the head makes the lens an approximation. The plot's camera button saves a PNG, **Download as HTML** a
standalone file.

Endpoints: `/understand_lens` (runs, text, top_k) -> (figure, notes, table, HTML file); `/understand_lens_runs_list`
and `/understand_lens_runs_on_select`: runs -> the runs picker; `/understand_lens_placeholders_on_load`: the empty
plot in the reader's language.
"""
from __future__ import annotations

import logging

import gradio as gr

from lab_models import api

from app.display import redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import text, tr
from app.inputs import picked_runs, whole_number
from app.understand.export import FigureFiles
from app.understand.lens_figures import lens_figure, lens_notes, lens_table
from app.understand.run_picker import RunPicking, SectionPicker, runs_picker

logger = logging.getLogger(__name__)

MAX_RUNS = 4
DEFAULT_TOP_K = 5
MAX_TOP_K = 10
EXAMPLE = "the cats near the dog [MASK] a ball ."  # a stories sentence: the verb agrees with "cats", not "dog"


class LensView(RunPicking):
    """The section's handlers, bound to the app's run store."""

    RUNS_INFO = "probing.lens_runs_info"
    PICKS = "lens"
    MAX_PICKS = MAX_RUNS

    def __init__(self, home, jobs=None, files: FigureFiles | None = None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)
        self.files = files or FigureFiles()

    def lens(self, run_ids, sentence, top_k=DEFAULT_TOP_K, progress=gr.Progress()):
        """(figure, notes, table, HTML file): one panel per run; a run that cannot be read explains why in its
        panel."""
        run_ids = picked_runs(run_ids, MAX_RUNS, api.Message("read with the logit lens"))
        if sentence is None or not str(sentence).strip():
            raise api.LabError("Type a text first: it is empty. Mark the word to predict with [MASK] for the masked "
                               "LMs, e.g. “{example}”.", example=EXAMPLE)
        top_k = whole_number(top_k, "Top-k", DEFAULT_TOP_K, 1, MAX_TOP_K)
        rows = {row["run_id"]: row for row in api.runs_with_weights(self.jobs)}  # "weights_step": what loads
        results = []
        for index, run_id in enumerate(run_ids):
            progress(index / len(run_ids), desc=tr("probing.progress_lens", run_id=run_id, index=index + 1,
                                                   total=len(run_ids)))
            row = rows.get(run_id, {})
            result = {"run_id": run_id, "family": row.get("family") or "", "title": row.get("family") or "",
                      "step": row.get("weights_step", row.get("step")), "seed": row.get("seed")}
            try:
                frame = api.logit_lens(self.jobs.run_dir(run_id), str(sentence), top_k=top_k)
                result.update(frame=frame, step=frame.attrs.get("step"))
            except ValueError as error:
                result["error"] = api.as_message(api.message_of(error))  # a library's text: said to be English
            except Exception as error:  # noqa: BLE001 - one broken run must not hide the others' answers
                logger.exception("logit lens of %s failed", run_id)
                result["error"] = api.Message("Something went wrong with this run: {error_type}: {error}",
                                              error_type=type(error).__name__, error=str(error))
            results.append(result)
        progress(1.0, desc=tr("probing.progress_done"))
        figure = lens_figure(results)
        return figure, lens_notes(results), lens_table(results), self.files.figure(figure, "logit-lens")


def placeholders():
    """The empty grid before the first press, in the reader's language."""
    return lens_figure([])


def build(home, jobs=None, choices=None, files: FigureFiles | None = None) -> SectionPicker:
    """Lay out the section inside the current container. Returns its runs picker."""
    view = LensView(home, jobs, files)
    choices = view.run_choices() if choices is None else choices
    gr.Markdown(text("probing.lens_intro"))
    runs = runs_picker(choices, label=text("probing.runs_label"), elem_id="understand-lens-runs",
                       info=LensView.RUNS_INFO, no_runs_info=LensView.NO_RUNS_INFO, max_runs=MAX_RUNS,
                       value=view.default_picks())
    with gr.Row():
        sentence = gr.Textbox(EXAMPLE, label=text("probing.lens_text_label"), scale=4, elem_id="understand-lens-text",
                              info=text("probing.lens_text_info"))
        top_k = gr.Slider(1, MAX_TOP_K, DEFAULT_TOP_K, step=1, label="Top-k", scale=1)
    button = gr.Button(text("probing.lens_button"), variant="primary", elem_id="understand-lens")
    plot = gr.Plot(placeholders(), label=text("probing.lens_plot_label"), elem_id="understand-lens-plot")
    notes = gr.Markdown("", elem_id="understand-lens-notes")
    with gr.Row():
        download = gr.DownloadButton(text("probing.download_html"), value=None, size="sm", scale=0, min_width=220,
                                     elem_id="understand-lens-html")
        gr.Markdown(text("probing.png_hint"))
    with gr.Accordion(text("probing.lens_table_accordion"), open=False):
        table = gr.Dataframe(lens_table([]), interactive=False)
    outputs = [plot, notes, table, download]
    lens = user_errors(view.lens)
    button.click(lens, [runs, sentence, top_k], outputs, api_name="understand_lens")
    sentence.submit(lens, [runs, sentence, top_k], outputs, api_name="understand_lens_on_submit")
    gr.on(None, placeholders, None, plot, api_name="understand_lens_placeholders_on_load", show_progress="hidden",
          queue=False)
    redrawn_on_language_switch("understand_lens", outputs, (lens, [runs, sentence, top_k], [button.click,
                                                                                          sentence.submit]))
    return SectionPicker.of(view, runs)

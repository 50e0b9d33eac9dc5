"""The Understand tab's Attributions section: which input tokens moved a prediction, and how much.

Up to four sources, side by side: runs (the probability of their own answer at the position the family predicts: a
fill-mask answer at the first [MASK], the next token a causal family would generate, T5's and MASS's first span
token) and fine-tunings that kept their weights (the probability of the label their classifier gives the sentence).
Integrated gradients (a baseline of [PAD] vectors or zeros, a number of quadrature steps; the completeness check,
sum of the scores against f(x) - f(baseline), is reported) or gradient x input (`api.explain_prediction`). Each token
is a chip shaded by its score: red raised the probability, blue lowered it. **Download as HTML** saves the chips.

Endpoints: `/understand_attributions` (sources, text, method, steps, baseline, target) -> (chips HTML, table, HTML
file); `/understand_attributions_sources_list` and `/understand_attributions_sources_on_select`: sources -> the
picker (runs and fine-tunings with weights).
"""
from __future__ import annotations

import logging

import gradio as gr

from lab_models import api

from app.display import redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import text, tr
from app.inputs import picked_runs, whole_number
from app.understand.figures import run_title
from app.understand.attribution_figures import attribution_table, chips_html
from app.understand.export import FigureFiles
from app.understand.run_picker import RunPicking, SectionPicker, run_choices, runs_picker

logger = logging.getLogger(__name__)

MAX_SOURCES = 4
EXAMPLE = "the cats near the dog [MASK] a ball ."  # a stories sentence: the verb agrees with "cats", not "dog"
METHODS = ("integrated_gradients", "gradient_x_input")


def method_choices() -> list[tuple[object, str]]:
    return [(text("probing.method_ig"), "integrated_gradients"), (text("probing.method_gxi"), "gradient_x_input")]


def baseline_choices() -> list[tuple[object, str]]:
    return [(text("probing.baseline_pad"), "pad"), (text("probing.baseline_zero"), "zero")]


class AttributionView(RunPicking):
    """The section's handlers, bound to the app's run store. Its picker lists sources: runs and fine-tunings."""

    RUNS_INFO = "probing.sources_info"
    PICKS = "attributions"
    MAX_PICKS = MAX_SOURCES

    def __init__(self, home, jobs=None, files: FigureFiles | None = None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)
        self.files = files or FigureFiles()

    def run_choices(self) -> list[tuple[str, str]]:
        """Runs with weights, then fine-tunings that kept theirs (sentence tasks only)."""
        runs = run_choices(self.jobs)
        tuned = [(tr("probing.finetune_choice", finetune_id=row["finetune_id"], task=row.get("task") or "?",
                     family=row.get("family") or "?"), row["finetune_id"])
                 for row in api.finetunes_with_weights(self.jobs)]
        return runs + tuned

    def explain(self, sources, sentence, method="integrated_gradients", steps=api.ATTRIBUTION_DEFAULT_STEPS,
                baseline="pad", target="", progress=gr.Progress()):
        """(chips HTML, table, HTML file): one row of chips per source; a source that cannot explain this text says
        why in its row."""
        sources = picked_runs(sources, MAX_SOURCES, api.Message("explain"))
        if sentence is None or not str(sentence).strip():
            raise api.LabError("Type a text first: it is empty, e.g. “{example}”.", example=EXAMPLE)
        if method not in METHODS:
            raise api.LabError("Unknown attribution method {method!r}: choose one of {methods}.",
                               method=method, methods=', '.join(METHODS))
        if baseline not in api.ATTRIBUTION_BASELINES:
            raise api.LabError("Unknown baseline {baseline!r}: choose 'pad' (the [PAD] token's vector) or 'zero'.",
                               baseline=baseline)
        steps = whole_number(steps, tr("probing.steps_label"), api.ATTRIBUTION_DEFAULT_STEPS, 2,
                             api.ATTRIBUTION_MAX_STEPS)
        target = str(target).strip() if isinstance(target, str) else ""
        seeds = {row["run_id"]: row.get("seed") for row in api.runs_with_weights(self.jobs)}  # a fine-tuning: none
        results = []
        for index, source in enumerate(sources):
            progress(index / len(sources), desc=tr("probing.progress_attributions", run_id=source, index=index + 1,
                                                   total=len(sources)))
            result = {"run_id": source, "title": source}
            try:
                attribution = api.explain_prediction(self.jobs.run_dir(source), str(sentence), method, steps,
                                                     baseline=baseline, target=target or None)
                result.update(attribution=attribution, title=run_title(
                    {"title": attribution.family, "run_id": source, "seed": seeds.get(source)}))
            except ValueError as error:
                result["error"] = api.as_message(api.message_of(error))  # a library's text: said to be English
            except Exception as error:  # noqa: BLE001 - one broken run must not hide the others' answers
                logger.exception("attributions of %s failed", source)
                result["error"] = api.Message("Something went wrong with this run: {error_type}: {error}",
                                              error_type=type(error).__name__, error=str(error))
            results.append(result)
        progress(1.0, desc=tr("probing.progress_done"))
        body = chips_html(results)
        return body, attribution_table(results), self.files.page(body, "attributions",
                                                                 tr("probing.tab_attributions"))


def placeholders() -> str:
    """The chips' place before the first press, in the reader's language."""
    return chips_html([])


def build(home, jobs=None, files: FigureFiles | None = None) -> SectionPicker:
    """Lay out the section inside the current container. Returns its sources picker."""
    view = AttributionView(home, jobs, files)
    choices = view.run_choices()
    gr.Markdown(text("probing.attributions_intro"))
    sources = runs_picker(choices, label=text("probing.sources_label"), elem_id="understand-attributions-sources",
                          info=AttributionView.RUNS_INFO, no_runs_info=AttributionView.NO_RUNS_INFO,
                          max_runs=MAX_SOURCES, value=view.default_picks())
    with gr.Row():
        sentence = gr.Textbox(EXAMPLE, label=text("probing.attributions_text_label"), scale=4,
                              elem_id="understand-attributions-text", info=text("probing.lens_text_info"))
        target = gr.Textbox("", label=text("probing.target_label"), scale=1, info=text("probing.target_info"))
    with gr.Row():
        method = gr.Radio(method_choices(), value="integrated_gradients", label=text("probing.method_label"),
                          scale=2)
        baseline = gr.Radio(baseline_choices(), value="pad", label=text("probing.baseline_label"), scale=2,
                            info=text("probing.baseline_info"))
        steps = gr.Slider(2, api.ATTRIBUTION_MAX_STEPS, api.ATTRIBUTION_DEFAULT_STEPS, step=1,
                          label=text("probing.steps_label"), scale=1, info=text("probing.steps_info"))
    button = gr.Button(text("probing.attributions_button"), variant="primary", elem_id="understand-attributions")
    chips = gr.HTML(placeholders(), elem_id="understand-attributions-chips")
    download = gr.DownloadButton(text("probing.download_html"), value=None, size="sm",
                                 elem_id="understand-attributions-html")
    with gr.Accordion(text("probing.attributions_table_accordion"), open=False):
        table = gr.Dataframe(attribution_table([]), interactive=False)
    explain = user_errors(view.explain)
    inputs = [sources, sentence, method, steps, baseline, target]
    button.click(explain, inputs, [chips, table, download], api_name="understand_attributions")
    sentence.submit(explain, inputs, [chips, table, download], api_name="understand_attributions_on_submit")
    gr.on(None, placeholders, None, chips, api_name="understand_attributions_placeholders_on_load",
          show_progress="hidden", queue=False)
    redrawn_on_language_switch("understand_attributions", [chips, table, download],
                               (explain, inputs, [button.click, sentence.submit]))
    return SectionPicker.of(view, sources)

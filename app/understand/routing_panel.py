"""The Understand tab's "Switch routing" section: which expert each token of a sentence goes to, in every Switch layer
of a trained run, as token chips coloured by expert.

Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers. The routing is read from the run's real forward pass in
evaluation mode (`api.switch_routing`, lab_models/models/switch.py), where the lab drops no token (the paper evaluates with a
larger capacity factor instead); the chips are app/understand/routing_figures.py's.

Endpoints: `/understand_routing` (and `_on_submit`): (run id, sentence) -> (chips HTML, note, table);
`/understand_routing_runs` (the Refresh button and opening the section): the current choice -> the run picker, listing
the runs with Switch layers and weights; `/understand_routing_table_on_load` (page load): -> the empty table, its
headers in the reader's language.

What the server writes here is in the reader's language (`app.i18n.language.tr`): the picker's entries, the note on the
input used (the backend's, through app/i18n/messages.py) and the messages; the chips and the table are
app/understand/routing_figures.py's.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from lab_models import api

from app.display import redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import text, tr
from app.i18n.messages import translate
from app.understand.routing_figures import routing_chips_html, routing_table

NO_SWITCH_RUNS = api.Message("No run with Switch layers has weights yet: tick “Switch Transformer” in the Train tab, "
                             "train a run, then press Refresh.")
EXAMPLES = [["the cat sees a red ball in the park ."], ["the girl does not eat the apple ."],
            ["I ate an apple with my lunch."]]


class RoutingView:
    def __init__(self, jobs):
        self.jobs = jobs

    def choices(self) -> list[tuple[str, str]]:
        rows = api.switch_runs(self.jobs)
        return [(tr("routing.run_choice", run_id=row["run_id"], family=row.get("family") or "?",
                    step=f"{int(row.get('weights_step') or 0):,}"), row["run_id"]) for row in rows]

    def refresh(self, current=None):
        choices = self.choices()
        ids = [value for _, value in choices]
        value = current if current in ids else (ids[0] if ids else None)
        return gr.update(choices=choices, value=value, info=run_info(choices))

    def show(self, run_id, sentence):
        """The run's routing of `sentence`: chips per Switch layer, a note on the input used, the table."""
        if not run_id or not str(run_id).strip():
            if not self.choices():
                raise api.LabError.of(NO_SWITCH_RUNS)
            raise api.LabError("Choose a run with Switch layers first.")
        view = api.switch_routing(self.jobs.run_dir(str(run_id).strip()), sentence)
        return routing_chips_html(view), translate(view.note), routing_table(view)


def run_info(choices):
    """The run picker's help line, as a translation marker (a string: `refresh` returns it in an update, which
    Gradio's `/call/` route serializes with plain `json`); NO_SWITCH_RUNS stays the error message's English."""
    return str(text("routing.run_info") if choices else text("routing.no_switch_runs"))


def empty_table():
    """The routing table before the first press: no rows, the headers `routing_table` writes (in the reader's
    language)."""
    return routing_table(SimpleNamespace(layers=[]))


def build(jobs, tab=None) -> None:
    """Lay out the section (call inside a gr.Tab). `tab` refreshes the run picker when it is opened."""
    view = RoutingView(jobs)
    choices = view.choices()
    gr.Markdown(text("routing.intro"))
    with gr.Row():
        run = gr.Dropdown(choices, value=choices[0][1] if choices else None, label=text("routing.run_label"),
                          info=run_info(choices),
                          allow_custom_value=True, scale=4, elem_id="understand-routing-run")
        refresh = gr.Button(text("routing.refresh"), size="sm", scale=0, min_width=100)
    with gr.Row():
        sentence = gr.Textbox(EXAMPLES[0][0], label=text("routing.sentence_label"), scale=4,
                              elem_id="understand-routing-sentence",
                              info=text("routing.max_tokens_info") + f" {api.PROBE_MAX_TOKENS}")
        button = gr.Button(text("routing.show_routing"), variant="primary", scale=1, elem_id="understand-routing-show")
    gr.Examples(EXAMPLES, [sentence], label=text("routing.examples_label"), api_name="understand_routing_example")
    # the page's own note, translated (the marker sits inside the HTML, which the page translates)
    chips = gr.HTML(f'<div class="switch-routing">{text("routing.empty")}</div>',
                    elem_id="understand-routing")
    note = gr.Markdown("")
    with gr.Accordion(text("routing.table_accordion"), open=False):
        table = gr.Dataframe(empty_table(), interactive=False)
    show = user_errors(view.show)
    button.click(show, [run, sentence], [chips, note, table], api_name="understand_routing")
    sentence.submit(show, [run, sentence], [chips, note, table], api_name="understand_routing_on_submit")
    refresh_runs = user_errors(view.refresh)
    refresh.click(refresh_runs, run, run, api_name="understand_routing_runs")
    if tab is not None:
        tab.select(refresh_runs, run, run, api_name="understand_routing_runs_on_select", show_progress="hidden")
    # the page is built before any reader: draw the empty table again, in the reader's language, when it loads
    gr.on(None, empty_table, None, table, api_name="understand_routing_table_on_load", show_progress="hidden",
          queue=False)
    redrawn_on_language_switch("understand_routing", [chips, note, table], (show, [run, sentence], [button.click,
                                                                                                  sentence.submit]))

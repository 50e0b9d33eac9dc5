"""The Understand tab's Probing section: where each objective puts what it learns, layer by layer.

Up to six runs; a linear probe on every layer of every stream (`api.probe_layers`: Liu et al. 2019, Tenney et al.
2019) for a label of the synthetic corpus: part-of-speech tags and the words' roles (per word), topic and sentiment
(per sentence, from the mean of the layer). One line per run against relative depth (0 = embeddings, 1 = top layer),
each with the same probe on its untrained twin (the random-init control: Hewitt and Liang 2019's selectivity is the
gap) and the majority baseline; the table under it. A progress bar runs while a run's features are computed (once per
run: they are cached in its folder); the plot's camera button saves a PNG, **Download as HTML** a standalone file.

The handlers only translate the controls into `api.probe_layers` and draw (app/understand/probe_figures.py).

Endpoints: `/understand_probe` (runs, task, seed) -> (figure, table, HTML file); `/understand_probe_runs_list` and
`/understand_probe_runs_on_select` (the tab's Refresh runs and opening the tab): runs -> the runs picker;
`/understand_probe_placeholders_on_load` (page load): the empty plot and table in the reader's language.
"""
from __future__ import annotations

import gradio as gr

from lab_models import api

from app.display import redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import text, tr
from app.inputs import picked_runs, whole_number
from app.understand.export import FigureFiles
from app.understand.probe_figures import TASKS, probe_figure, probe_table
from app.understand.run_picker import RunPicking, SectionPicker, runs_picker

MAX_RUNS = 6
MAX_SEED = 2**31 - 1


def task_choices() -> list[tuple[object, str]]:
    """The task picker's (label, value) pairs; the labels are translated in the page."""
    return [(text(f"probing.task_{task}"), task) for task in TASKS]


class ProbeView(RunPicking):
    """The section's handlers, bound to the app's run store."""

    PICKS = "probing"
    MAX_PICKS = MAX_RUNS

    def __init__(self, home, jobs=None, files: FigureFiles | None = None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)
        self.files = files or FigureFiles()

    def probe(self, run_ids, task="tags", seed=0, progress=gr.Progress()):
        """(figure, table, HTML file) for the picked runs."""
        run_ids = picked_runs(run_ids, MAX_RUNS, api.Message("probe"))
        if task not in api.PROBE_TASKS:
            raise api.LabError("Unknown probe task {task!r}: choose one of {probe_tasks}.",
                               task=task, probe_tasks=', '.join(api.PROBE_TASKS))
        seed = whole_number(seed, tr("probing.seed_label"), 0, 0, MAX_SEED)
        frames = []
        for index, run_id in enumerate(run_ids):
            def report(done, total, message, index=index, run_id=run_id):
                part = "probing.progress_control" if done >= total // 2 else "probing.progress_features"
                progress((index + done / max(total, 1)) / len(run_ids),
                         desc=tr(part, run_id=run_id, index=index + 1, total=len(run_ids)))

            progress(index / len(run_ids), desc=tr("probing.progress_probes", run_id=run_id, index=index + 1,
                                                   total=len(run_ids)))
            frames.append(api.probe_layers(self.jobs.run_dir(run_id), task, seed, progress=report))
        progress(1.0, desc=tr("probing.progress_done"))
        figure = probe_figure(frames)
        return figure, probe_table(frames), self.files.figure(figure, f"probes-{task}")


def placeholders() -> tuple:
    """(plot, table) before the first press, in the reader's language."""
    return probe_figure([]), probe_table([])


def build(home, jobs=None, choices=None, files: FigureFiles | None = None) -> SectionPicker:
    """Lay out the section inside the current container. Returns its runs picker, for the tab's Refresh runs button
    and its select event."""
    view = ProbeView(home, jobs, files)
    choices = view.run_choices() if choices is None else choices
    start = placeholders()
    gr.Markdown(text("probing.intro"))
    with gr.Row():
        runs = runs_picker(choices, label=text("probing.runs_label"), elem_id="understand-probe-runs",
                           info=ProbeView.RUNS_INFO, no_runs_info=ProbeView.NO_RUNS_INFO, max_runs=MAX_RUNS,
                           value=view.default_picks(), scale=4)
        task = gr.Dropdown(task_choices(), value="tags", label=text("probing.task_label"), scale=2,
                           info=text("probing.task_info"), elem_id="understand-probe-task")
        seed = gr.Number(0, precision=0, minimum=0, maximum=MAX_SEED, label=text("probing.seed_label"), scale=1,
                         min_width=100, info=text("probing.seed_info"))
    button = gr.Button(text("probing.probe_button"), variant="primary", elem_id="understand-probe")
    plot = gr.Plot(start[0], label=text("probing.plot_label"), elem_id="understand-probe-plot")
    with gr.Row():
        download = gr.DownloadButton(text("probing.download_html"), value=None, size="sm", scale=0, min_width=220,
                                     elem_id="understand-probe-html")
        gr.Markdown(text("probing.png_hint"))
    with gr.Accordion(text("probing.table_accordion"), open=True):
        table = gr.Dataframe(start[1], interactive=False, elem_id="understand-probe-table")
    button.click(user_errors(view.probe), [runs, task, seed], [plot, table, download], api_name="understand_probe")
    gr.on(None, placeholders, None, [plot, table], api_name="understand_probe_placeholders_on_load",
          show_progress="hidden", queue=False)
    redrawn_on_language_switch("understand_probe", [plot, table, download],
                               (user_errors(view.probe), [runs, task, seed], [button.click]))
    return SectionPicker.of(view, runs)

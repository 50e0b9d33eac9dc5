"""The Train tab's Export button: the selected run, when transformers has a class for it, as a folder that
`from_pretrained` loads and a zip of that folder to download.

It sits beside the run picker because it acts on the selected run, like Stop and Resume: the button shows for a run
that can be exported (GPT, GPT-2, BERT, RoBERTa, ALBERT, ELECTRA, XLNet, MPNet and T5 runs with weights, imported or
trained, whose options the transformers class has) and hides for the others (`api.export_problem` says why not;
`python -m lab_models export-hf` prints it). **Export** writes `<lab home>/exports/<run>-transformers-<time>-<hex>/`
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json, README.md; ELECTRA's generator in
`generator/`) and offers a zip of it for download. `lab_models/interop/exporter.py` does the work.

Endpoints:
* `/export_visibility`: a run id -> (the button row shown or hidden, a note: "" or why the run cannot be exported).
  The Train tab's live tick (`/refresh_run`) does it again when the selected run's state changed (a run that finishes
  while it is selected gets its button): `ExportView.refresh`.
* `/export_run`: a run id -> (the zip to download, a note naming the folder in the lab home).
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from lab_models import api

from app.errors import user_errors
from app.i18n.language import current_language, text, tr
from app.i18n.messages import translate




class ExportView:
    """The button's handlers, bound to the app's job manager (run ids are resolved inside the lab home)."""

    def __init__(self, home, jobs):
        self.home = home
        self.jobs = jobs

    def _folder(self, run_id):
        if not run_id or not str(run_id).strip():
            raise api.LabError("Pick a run first: the one to export.")
        return api.run_folder(str(run_id).strip(), jobs=self.jobs)

    def visibility(self, run_id):
        """The row for an exportable run; for another run it stays hidden, and the note says why when the run has
        weights (a run still without weights says nothing: it may become exportable)."""
        if not run_id:
            return gr.update(visible=False), ""
        try:
            folder = self._folder(run_id)
            if self.jobs is not None and api.training_status(self.jobs, str(run_id).strip()).get("state") in (
                    "queued", "running"):
                return gr.update(visible=False), ""  # not yet: the button comes when the run has stopped
            problem = api.export_problem(folder)
        except ValueError:
            return gr.update(visible=False), ""
        if not problem:
            return gr.update(visible=True), ""
        if "no weights yet" in problem or "is not a trained run" in problem:
            return gr.update(visible=False), ""
        return gr.update(visible=False), tr("export.not_exportable", reason=translate(problem))

    def refresh(self, run_id, signature=None):
        """`visibility` again when the selected run's state (or the reader's language) changed, else
        nothing is sent."""
        if not run_id or self.jobs is None:
            return gr.skip(), gr.skip(), signature
        try:
            state = api.training_status(self.jobs, str(run_id).strip()).get("state")
        except ValueError:
            return gr.skip(), gr.skip(), signature
        now = [str(run_id), state, current_language()]
        if now == signature:
            return gr.skip(), gr.skip(), signature
        return (*self.visibility(run_id), now)

    def export(self, run_id):
        """Export the run; returns (the zip, a note naming the folder)."""
        result = api.export_hf_archive(self._folder(run_id), home=self.home)
        return str(result["zip"]), tr("export.done", folder=result["folder"])


def build(home, jobs, run, view: ExportView | None = None) -> SimpleNamespace:
    """The Export row under the run picker `run` (hidden until an exportable run is picked), with `view`'s handlers
    (a new ExportView by default)."""
    view = view if view is not None else ExportView(home, jobs)
    with gr.Row(visible=False, elem_id="train-export-row") as row:
        button = gr.Button(text("export.button"), variant="secondary", size="sm", scale=1, elem_id="train-export")
        download = gr.File(None, label=text("export.file"), interactive=False, scale=2, elem_id="train-export-file")
    note = gr.Markdown("", elem_id="train-export-note")
    signature = gr.State(None)
    button.click(user_errors(view.export), run, [download, note], api_name="export_run")

    # `show`: the check when a run is picked, and `live`: again at the Train tab's live tick (a run that finishes
    # shows its Export button); each runs inside one of the tab's events rather than as an event of its own
    return SimpleNamespace(view=view, row=row, download=download, note=note,
                           show=(user_errors(view.visibility), [run], [row, note]),
                           live=(view.refresh, [run, signature], [row, note, signature]))

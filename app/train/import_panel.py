"""The Train tab's "Import a checkpoint" section: a Hugging Face checkpoint on the server's disk becomes a run.

It sits under the Train tab's runs table because an import makes a run, as training does: the new run appears in
that table at once (step 0, preset "imported") and in the run pickers of Compare, Understand and the Leaderboard,
which read runs the same way whatever made them.

The checkpoints already in the user's Hugging Face cache are listed first (`api.cached_checkpoints`: huggingface_hub's
own scanner of HF_HUB_CACHE / HF_HOME/hub / ~/.cache/huggingface/hub, no network; read when the section opens and on
**Refresh**): repository, architecture, the lab family it becomes, parameters, size on disk, and either an
**Import** cell (one click imports it, with a progress bar) or why the lab cannot import it. A click on any other
cell of a row puts its snapshot folder in the folder box and looks at it. Or the user types the path of a folder that
`save_pretrained` wrote (config.json, model.safetensors, the tokenizer files) and presses **Look**: the page lists what it found (architecture,
the lab family it becomes, sizes, parameters, tokenizer and which of its tokens play [MASK], [EOS], ..., the files)
or says why it cannot be imported. **Import** converts it with a progress bar and names the new run. ELECTRA takes
its generator's folder in a second box; pickled weights (pytorch_model.bin) need the box ticked and are read with
`torch.load(weights_only=True)`. Nothing is downloaded. `lab_models/interop/` does the work; the handlers only call
`api.inspect_hf` and `api.import_hf`.

Endpoints:
* `/cached_checkpoints` (the Refresh button) and `/cached_checkpoints_on_open` (the section opens): no input ->
  (the cache table, its rows, a note naming the cache folder). `/import_cached_checkpoint` (an API endpoint, no
  component): (repository id, corpus) -> the result line, as `/import_checkpoint` writes it. The page's click on a
  row (`/import_cached_checkpoint_click`, private: its input is the browser's click) imports it from the Import cell
  or looks at it from any other cell; the runs table is refreshed after it (`/list_runs_after_cached_import`).
* `/import_checkpoint_look`: (folder, generator folder, allow pickle) -> (summary markdown, files table).
* `/import_checkpoint`: (folder, generator folder, allow pickle, corpus) -> result markdown (a note in the reader's
  language, then the new run's id in bold and its folder: `... **gpt2-imported-...** (in `...`).`); then the runs
  table is refreshed (`/list_runs_after_import`).

What the handlers write (the summary, the files table's headers, the progress lines, the result) is in the reader's
language (`app.i18n.language.tr`; the backend's progress lines through the catalogue of app/i18n/locales/zh/messages/).

"""
from __future__ import annotations

import html
from types import SimpleNamespace

import gradio as gr
import pandas as pd

from lab_models import api

from app.errors import user_errors
from app.i18n.language import text, tr
from app.i18n.messages import translate

FILES_COLUMNS = ["file", "size"]  # the English of import.col_file and import.col_size
# the cache table's columns, read back by position (any language): import.col_repo ... import.col_action
CACHE_COLUMN_KEYS = ("col_repo", "col_architecture", "col_family", "col_parameters", "col_disk", "col_action")
ACTION_COLUMN = len(CACHE_COLUMN_KEYS) - 1  # a click on this cell imports the row
INTRO = text("import.intro")


def architectures_markdown(rows: list[dict], importable="Importable here:", not_yet="Not in this build yet:"
                           ) -> tuple[str, str]:
    """The architectures the lab converts and those it does not yet, as two Markdown lines (the second "" when every
    one converts). The page passes the two lead-ins in its language (one translated text per Markdown).

    >>> architectures_markdown([{"module": "gpt2", "family": "gpt2", "model_types": ["gpt2"],
    ...     "reference": "GPT2LMHeadModel", "available": True}, {"module": "t5", "family": "t5",
    ...     "model_types": ["t5"], "reference": None, "available": False}])
    ('Importable here: **gpt2** (`GPT2LMHeadModel`).', 'Not in this build yet: t5.')
    """
    ready = [f"**{row['model_types'][0]}** (`{row['reference']}`)" for row in rows if row["available"]]
    later = [row["model_types"][0] for row in rows if not row["available"]]
    return (importable + " " + ", ".join(ready) + ".", (not_yet + f" {', '.join(later)}.") if later else "")


def _count(n) -> str:
    if n is None:
        return tr("import.count_unknown")
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,}"


def summary_markdown(summary: dict) -> str:
    """What `api.inspect_hf` found, for people, in the reader's language (names, sizes and tokens as they are)."""
    tokenizer = summary["tokenizer"]
    framing = tokenizer.get("framing")
    roles = ", ".join(f"{html.escape(name)} = `{token}`" for name, token in tokenizer["roles"].items()
                      if name not in ("[S]", "[E]"))
    lines = [
        tr("import.summary_head", architecture=summary["architecture"], model_type=summary["model_type"],
           family=summary["family"]),
        tr("import.summary_sizes", d_model=summary["d_model"], n_layers=summary["n_layers"],
           n_heads=summary["n_heads"], d_ff=summary["d_ff"], vocab=f"{summary['vocab_size']:,}",
           positions=summary["max_positions"], activation=summary["activation"]),
        tr("import.summary_parameters_pickled" if summary["pickled"] else "import.summary_parameters",
           count=_count(summary["parameters"]), size=summary["weights_size"]),
        tr("import.summary_objectives",
           objectives=", ".join(f"{name} {weight:g}" for name, weight in summary["objectives"].items())),
        tr("import.summary_tokenizer", source=tokenizer["source"], kind=tokenizer["kind"],
           size=f"{tokenizer['size']:,}", roles=roles),
    ]
    if framing:
        lines.append(tr("import.summary_framing", framing=framing))
    if tokenizer.get("sentinels"):
        lines.append(tr("import.summary_sentinels", last=tokenizer["sentinels"] - 1, count=tokenizer["sentinels"]))
    if tokenizer["added"]:
        lines.append(tr("import.summary_added", tokens=", ".join(tokenizer["added"])))
    if summary.get("generator"):
        generator = summary["generator"]
        lines.append(tr("import.summary_generator", path=generator["path"], width=generator["hidden_size"],
                        parameters=_count(generator["parameters"])))
    elif summary["family"] == "electra":
        lines.append(tr("import.summary_no_generator"))
    return "\n".join(lines)


def cache_frame(rows: list[dict]) -> pd.DataFrame:
    """The cached checkpoints (`api.cached_checkpoints`) as the page's table, in the reader's language: repository,
    architecture, lab family, parameters, size on disk, and the action cell (Import, or why not).

    >>> cache_frame([{"repo_id": "gpt2", "architecture": "GPT2LMHeadModel", "family": "gpt2",
    ...               "parameters": 124_439_808, "size_text": "548 MB", "supported": True, "reason": ""}]).values[0][:5]
    array(['gpt2', 'GPT2LMHeadModel', 'gpt2', '124.4M', '548 MB'], dtype=object)
    """
    table = [[row["repo_id"], row["architecture"] or "?", row["family"] or "-",
              _count(row["parameters"]) if row["parameters"] else "-", row["size_text"],
              tr("import.cache_import") if row["supported"] else tr("import.cache_not_importable",
                                                                    reason=translate(row["reason"]))]
             for row in rows]
    return pd.DataFrame(table, columns=[tr(f"import.{key}") for key in CACHE_COLUMN_KEYS])


def files_frame(files) -> pd.DataFrame:
    """(name, bytes) pairs as a two-column table with readable sizes.

    >>> files_frame([("config.json", 665), ("model.safetensors", 497_773_000)]).values.tolist()
    [['config.json', '665 B'], ['model.safetensors', '497.8 MB']]
    """
    def size(n: int) -> str:
        for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
            if n >= scale:
                return f"{n / scale:.1f} {unit}"
        return f"{n} B"

    return pd.DataFrame([[name, size(n)] for name, n in files], columns=[tr("import.col_file"), tr("import.col_size")])


class ImportView:
    """The section's handlers, bound to one lab home."""

    def __init__(self, home):
        self.home = home

    @staticmethod
    def _folder(folder) -> str:
        if folder is None or not str(folder).strip():
            raise api.LabError("Type the path of a checkpoint folder on this server first (e.g. "
                               "~/models/bert-base-uncased).")
        return str(folder).strip()

    def look(self, folder, generator, allow_pickle):
        summary = api.inspect_hf(self._folder(folder), generator_dir=(generator or None),
                                 allow_pickle=bool(allow_pickle))
        return summary_markdown(summary), files_frame(summary["files"])

    def cache(self):
        """The cache table and the rows behind it (kept in a gr.State for a click to find its row)."""
        rows = api.cached_checkpoints()
        note = tr("import.cache_where", folder=api.hf_cache_dir()) if rows else tr("import.cache_empty",
                                                                                   folder=api.hf_cache_dir())
        return cache_frame(rows), rows, note

    def import_cached(self, repo_id, corpus, progress=gr.Progress()):
        """Import the cached checkpoint `repo_id` (the API endpoint; the page's click calls it too)."""
        progress(0.0, desc=tr("import.progress_starting"))
        run_dir = api.import_cached(str(repo_id or "").strip(), corpus=(corpus or api.INTEROP_DEFAULT_CORPUS),
                                    home=self.home,
                                    progress=lambda fraction, message: progress(fraction, desc=translate(message)))
        return tr("import.imported_as") + " " + tr("import.imported_where", run=run_dir.name, folder=run_dir.parent)

    def import_cached_by_id(self, repo_id: str, corpus: str = "") -> str:
        """`/import_cached_checkpoint` for API clients: the repository id as `/cached_checkpoints` lists it, and the
        corpus to file the run under ("" = stdlib-docs); returns the result line."""
        return self.import_cached(repo_id, corpus, progress=lambda *args, **kwargs: None)

    def cache_click(self, rows, corpus, event: gr.SelectData, progress=gr.Progress()):
        """A click on the cache table: the Import cell imports the row; any other cell looks at its folder. Returns
        (folder box, summary, files table, result)."""
        row_index, column = (event.index if event is not None and isinstance(event.index, (list, tuple))
                             else (None, None))
        if row_index is None or not rows or not 0 <= row_index < len(rows):
            return (gr.skip(),) * 4
        row = rows[row_index]
        if column == ACTION_COLUMN and row["supported"]:
            return gr.skip(), gr.skip(), gr.skip(), self.import_cached(row["repo_id"], corpus, progress)
        if not row["path"]:
            return gr.skip(), tr("import.cache_not_importable", reason=translate(row["reason"])), gr.skip(), \
                gr.skip()
        try:
            summary, files = self.look(row["path"], "", False)
        except ValueError as error:  # an unsupported checkpoint: say why in the summary, not as an error toast
            return row["path"], tr("import.cache_not_importable", reason=translate(api.message_of(error))), \
                files_frame(api.checkpoint_files(row["path"])), gr.skip()
        return row["path"], summary, files, gr.skip()

    def run_import(self, folder, generator, allow_pickle, corpus, progress=gr.Progress()):
        progress(0.0, desc=tr("import.progress_starting"))
        run_dir = api.import_hf(self._folder(folder), generator_dir=(generator or None),
                                allow_pickle=bool(allow_pickle), corpus=(corpus or api.INTEROP_DEFAULT_CORPUS),
                                home=self.home,
                                progress=lambda fraction, message: progress(fraction, desc=translate(message)))
        return tr("import.imported_as") + " " + tr("import.imported_where", run=run_dir.name, folder=run_dir.parent)


def build(home) -> SimpleNamespace:
    """The section (an accordion); returns its two import events (a typed folder, a cached checkpoint), for the Train
    tab to refresh its runs table after them."""
    view = ImportView(home)
    with gr.Accordion(text("import.accordion"), open=False,
                      elem_id="import-checkpoint") as section:
        gr.Markdown(text("import.cache_heading"))
        with gr.Row():
            cache_note = gr.Markdown(text("import.cache_intro"), elem_id="import-cache-note")
            refresh = gr.Button(text("import.cache_refresh"), size="sm", scale=0, min_width=120,
                                elem_id="import-cache-refresh")
        cache_table = gr.Dataframe(cache_frame([]), interactive=False, label=text("import.cache_table"),
                                   elem_id="import-cache", max_height=320, wrap=True,
                                   column_widths=["22%", "17%", "10%", "10%", "10%", "31%"])
        cache_rows = gr.State([])
        gr.Markdown(text("import.folder_heading"))
        gr.Markdown(INTRO)
        importable, not_yet = architectures_markdown(api.interop_architectures(), text("import.importable"),
                                                     text("import.not_yet"))
        gr.Markdown(importable)
        if not_yet:
            gr.Markdown(not_yet)
        with gr.Row():
            folder = gr.Textbox(label=text("import.folder"), placeholder="~/models/bert-base-uncased", scale=3,
                                elem_id="import-folder")
            generator = gr.Textbox(label=text("import.generator"), placeholder="~/models/electra-gen",
                                   scale=2)
        with gr.Row():
            allow_pickle = gr.Checkbox(False, label=text("import.allow_pickle"))
            corpus = gr.Dropdown(api.list_corpora(home=home), value=api.INTEROP_DEFAULT_CORPUS, allow_custom_value=True,
                                 label=text("import.corpus"))
        with gr.Row():
            look = gr.Button(text("import.look"), variant="secondary", elem_id="import-look")
            start = gr.Button(text("import.import"), variant="primary", elem_id="import-start")
        summary = gr.Markdown(text("import.summary_empty"), elem_id="import-summary")
        # its headers are redrawn in the reader's language by the Train tab's load event (`files` below)
        files = gr.Dataframe(files_frame([]), interactive=False, label=text("import.files"), max_height=240)
        # a visible placeholder: the progress bar of an import is drawn over this component
        result = gr.Markdown(text("import.result_empty"), elem_id="import-result", min_height=60)
    look.click(user_errors(view.look), [folder, generator, allow_pickle], [summary, files],
               api_name="import_checkpoint_look")
    imported = start.click(user_errors(view.run_import), [folder, generator, allow_pickle, corpus], result,
                           api_name="import_checkpoint")
    listed = user_errors(view.cache)
    refresh.click(listed, None, [cache_table, cache_rows, cache_note], api_name="cached_checkpoints")
    section.expand(listed, None, [cache_table, cache_rows, cache_note], api_name="cached_checkpoints_on_open",
                   show_progress="hidden")
    # API clients import a cached checkpoint by its repository id; the page by one click on the row's Import cell
    # (private: its input is the browser's click, which no API client can send)
    gr.api(user_errors(view.import_cached_by_id), api_name="import_cached_checkpoint")
    clicked = cache_table.select(user_errors(view.cache_click), [cache_rows, corpus],
                                 [folder, summary, files, result], api_name="import_cached_checkpoint_click",
                                 api_visibility="private")
    return SimpleNamespace(view=view, imported=imported, clicked=clicked,
                           files=files, cache=(cache_table, cache_rows, cache_note))


"""Leaderboard tab: every trained run on one corpus, measured the same way (the equal-budget leaderboard).

Pick a corpus (the list holds the corpora that have runs with weights, the one with the most runs first) and press
**Compute**: one row per run with its validation bits per byte, fill-mask accuracy and infill exact match on the
corpus's held-out sentences, its best fine-tuned classification accuracy per task, its parameters and the tokens it
trained on; a bar chart per metric; and the table as a CSV file to download. The numbers come from
`api.leaderboard` (lab_models/inference/leaderboard.py defines each metric and how it deviates from the papers); the
forward-pass scores are cached in each run folder, so the second Compute is instant. Nothing here is per-family: a
family that cannot do a metric shows "—" and says why in the notes.

Endpoints (every event has an `api_name`, so `gradio_client` can drive the tab):
* `/leaderboard_compute`: (corpus, held-out sentences per metric, seed) -> (status markdown, the table as shown,
  the reasons for the missing scores (markdown), the figure, the CSV file of the full-precision table). corpus
  "(all corpora)" lists every run, grouped by corpus.
* `/leaderboard_corpora_list` (the Refresh button): the current corpus -> the corpus picker with the corpora that have
  runs now.
* `/leaderboard_rank_zoo` (**Rank the zoo**): (zoo name, held-out sentences, seed) -> the same outputs as
  `/leaderboard_compute`, for the runs of that zoo only (lab_models/experiments/zoo.py: one run per family, one corpus).
* `/leaderboard_refresh` (a timer, every few seconds): (corpus, zoo, the last signature) -> the corpus picker, the
  zoo picker and its row, only when the corpora with runs or the zoos have changed.
* `/leaderboard_on_select` (opening the tab, one event): (the current corpus, the current zoo, the table shown) ->
  the corpus picker as `/leaderboard_corpora_list`, the zoo's row, its picker (with how many runs have finished) and
  the timer's signature, then the empty table and figure, redrawn in the reader's language while nothing has been
  computed (the page is built before anyone reads it; a computed table stays).

What the handlers write (status, table headers, notes, figure titles and legend, progress lines, the zoo picker's
labels) is in the reader's language (app/i18n/language.py `tr`, app/i18n/messages.py for `lab_models`' reasons); run
ids, family names, corpus names and numbers stay as they are. API clients that send no language read English.
"""
from __future__ import annotations

import logging

import gradio as gr
import pandas as pd

from lab_models import api

from app.display import PICKER_MIN_WIDTH, cjk_empty_figure, one_event, redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import current_language, marker, text, tr
from app.inputs import whole_number
from app.leaderboard.figures import (COLUMN_WIDTHS, column_widths, display_table, intervals_markdown, leaderboard_figure,
                                     notes_markdown)
from app.tab_parts import TabParts

logger = logging.getLogger(__name__)

ALL_CORPORA = "(all corpora)"  # not a corpus slug (those never hold parentheses), so it cannot shadow a corpus
NO_RUNS_INFO = marker("leaderboard.no_runs")  # "No run has weights yet: ...", under the corpus picker
CORPUS_INFO = marker("leaderboard.corpus_info")  # "the corpora that have runs with weights"
# "all corpora, grouped by corpus". A marker string, not the I18nData: an update's choices go out through json.dumps
# on the /call API, which cannot write an I18nData object.
ALL_CORPORA_LABEL = marker("leaderboard.all_corpora")
EXAMPLE_CHOICES = (8, 256)  # the range of the held-out sentences slider
REFRESH_S = 5.0  # the corpus and zoo pickers follow new runs this often
PLACEHOLDER_COLUMNS = tuple(COLUMN_WIDTHS)  # the empty table's headers ("col_<name>"): the computed table's first


def corpus_choices(corpora: list[str]) -> list[tuple[str, str]]:
    """The picker's choices: each corpus with runs, then every corpus together.

    >>> choices = corpus_choices(["synthetic"])
    >>> choices[0], choices[1][1], choices[1][0] == ALL_CORPORA_LABEL  # label: "all corpora, grouped by corpus"
    (('synthetic', 'synthetic'), '(all corpora)', True)
    """
    return [(name, name) for name in corpora] + [(ALL_CORPORA_LABEL, ALL_CORPORA)]


def status_markdown(frame: pd.DataFrame, corpus: str | None) -> str:
    """One paragraph: how many runs, evaluated now or read from the cache, and how to read the scores."""
    computed, cached = frame.attrs.get("computed", []), frame.attrs.get("cached", [])
    settings = frame.attrs.get("settings", {})
    seconds = sum(frame.attrs.get("seconds", {}).get(run, 0.0) for run in computed)
    where = (tr("leaderboard.status_on_corpus", corpus=corpus) if corpus else
             tr("leaderboard.status_on_corpora", count=frame["corpus"].nunique()))
    runs = tr("leaderboard.status_runs", count=len(frame), s="s" if len(frame) != 1 else "", where=where)
    evaluated = (tr("leaderboard.status_evaluated", computed=len(computed), seconds=f"{seconds:.1f}",
                    cached=len(cached)) if computed
                 else tr("leaderboard.status_all_cached", cached=len(cached)))
    return tr("leaderboard.status", runs=runs, evaluated=evaluated, examples=settings.get("max_examples"),
              seed=settings.get("seed"))


def zoo_choices(zoos: list[dict]) -> list[tuple[str, str]]:
    """The zoo picker's choices: each zoo with how many of its runs have finished.

    >>> zoo_choices([{"name": "tiny", "runs": 17, "finished": 5}])
    [('tiny (5 of 17 runs finished)', 'tiny')]
    """
    return [(tr("leaderboard.zoo_choice", name=zoo["name"], finished=zoo["finished"], runs=zoo["runs"]), zoo["name"])
            for zoo in zoos]


class LeaderboardView:
    """The tab's handlers, bound to the app's lab home."""

    def __init__(self, home, jobs=None):
        self.home = home
        self.jobs = jobs

    def corpora(self) -> list[str]:
        return api.leaderboard_corpora(self.home)

    def refresh(self, current=None):
        """The corpus picker with the corpora that have runs now, keeping the current one if it still has runs."""
        corpora = self.corpora()
        values = corpora + [ALL_CORPORA]
        value = current if current in values else (corpora[0] if corpora else ALL_CORPORA)
        info = CORPUS_INFO if corpora else NO_RUNS_INFO
        return gr.update(choices=corpus_choices(corpora), value=value, info=info)

    def zoos(self) -> list[dict]:
        return api.list_zoos(self.jobs, home=self.home)  # the store caches what it has read

    def refresh_if_changed(self, corpus=None, zoo=None, signature=None):
        """The timer's refresh: (corpus picker, zoo row, zoo picker, signature), all skipped when neither the
        corpora with runs nor the zoos have changed. Opening the tab calls it with no signature: everything is
        drawn at once, the zoo's row and its count of finished runs included."""
        corpora, zoos = self.corpora(), self.zoos()
        now = [corpora, [[z["name"], z["runs"], z["finished"]] for z in zoos], current_language()]  # the switch too
        if signature is not None and now == signature:
            return (gr.skip(),) * 4
        names = [z["name"] for z in zoos]
        return (self.refresh(corpus), gr.update(visible=bool(zoos)),
                gr.update(choices=zoo_choices(zoos), value=zoo if zoo in names else (names[0] if names else None)),
                now)

    def rank_zoo(self, zoo, max_examples=api.LEADERBOARD_DEFAULT_EXAMPLES, seed=0, progress=gr.Progress()):
        """The leaderboard of one zoo's runs (one per family), with the same outputs as `compute`."""
        if not zoo:
            raise api.LabError("No zoo to rank yet: press Train the demo zoo on the first tab (or run python -m "
                               "lab_models zoo).")
        return self.compute(None, max_examples, seed, progress, zoo=str(zoo))

    def compute(self, corpus, max_examples=api.LEADERBOARD_DEFAULT_EXAMPLES, seed=0, progress=gr.Progress(),
                zoo=None):
        """(status, display table, notes, figure, CSV file) for the runs on `corpus` (or of `zoo`); progress per
        run."""
        chosen = None if corpus in (None, "", ALL_CORPORA) else str(corpus)
        max_examples = whole_number(max_examples, api.Message("Held-out sentences"), api.LEADERBOARD_DEFAULT_EXAMPLES, 1,
                              api.LEADERBOARD_MAX_EXAMPLES)
        seed = whole_number(seed, api.Message("Seed"), 0, 0, 2**31 - 1)

        def report(done: int, total: int, message: str) -> None:
            progress(done / max(total, 1), desc=tr("leaderboard.progress_evaluating", run=message) if done < total
                     else tr("leaderboard.progress_done"))

        progress(0.0, desc=tr("leaderboard.progress_finding"))
        frame = api.leaderboard(self.home, chosen, max_examples=max_examples, seed=seed, progress=report, zoo=zoo)
        if not len(frame):
            no_runs = tr("leaderboard.no_runs")
            return no_runs, display_table(frame), "", cjk_empty_figure(no_runs), None
        path = api.leaderboard_csv(frame)  # a new temporary folder per call: sessions never share a file
        if zoo and chosen is None and frame["corpus"].nunique() == 1:
            chosen = str(frame["corpus"].iloc[0])  # a zoo trains on one corpus: say which
        status = status_markdown(frame, chosen)
        if zoo:
            status = tr("leaderboard.zoo_status", zoo=zoo, status=status, note=tr("leaderboard.zoo_note"))
        notes = notes_markdown(frame)
        if zoo:  # a zoo's families side by side: how far each score is from noise
            notes = intervals_markdown(frame) + ("\n\n" + notes if notes else "")
        measured = frame.attrs.get("measured") or []
        if measured:  # imported checkpoints: bits per byte measured here, the trainer's way (api.leaderboard)
            runs = tr("leaderboard.list_separator").join(f"**{run}**" for run in measured)
            notes = (notes + "\n\n" if notes else "") + tr("leaderboard.measured_note", runs=runs)
        return (status, display_table(frame), notes, leaderboard_figure(frame), str(path))

    @staticmethod
    def placeholder_table() -> pd.DataFrame:
        """The table before anything is computed: its headers only, in the reader's language."""
        return pd.DataFrame(columns=[tr(f"leaderboard.col_{name}") for name in PLACEHOLDER_COLUMNS])

    @staticmethod
    def placeholder_figure():
        return cjk_empty_figure(tr("leaderboard.fig_pick"))

    def placeholder(self, shown=None):
        """Opening the tab: while the table shown has no row (nothing computed yet), the empty table and figure again,
        in the reader's language; a computed table and its figure stay (skipped). Reads the table only by its rows,
        so its headers' language does not matter."""
        rows = [] if shown is None else getattr(shown, "values", shown)
        has_rows = any(str(cell).strip() not in ("", "nan", "None") for row in rows for cell in row)
        if has_rows:
            return gr.skip(), gr.skip()
        return self.placeholder_table(), self.placeholder_figure()


def build(home, jobs=None, tab=None) -> TabParts:
    """Lay out the tab. `tab` (the gr.Tab it sits in) refreshes the corpus picker when it is opened. The page needs
    nothing more from it."""
    view = LeaderboardView(home, jobs)
    corpora = view.corpora()
    gr.Markdown(text("leaderboard.intro"))
    with gr.Row():
        corpus = gr.Dropdown(corpus_choices(corpora), value=corpora[0] if corpora else ALL_CORPORA,
                             label=text("leaderboard.corpus"), info=CORPUS_INFO if corpora else NO_RUNS_INFO, scale=3,
                             allow_custom_value=True, elem_id="leaderboard-corpus")
        max_examples = gr.Slider(*EXAMPLE_CHOICES, api.LEADERBOARD_DEFAULT_EXAMPLES, step=8,
                                 label=text("leaderboard.examples"), scale=2, elem_id="leaderboard-examples",
                                 info=text("leaderboard.examples_info"))
        seed = gr.Number(0, precision=0, label=text("leaderboard.seed"), info=text("leaderboard.seed_info"),
                         scale=1, min_width=120, elem_id="leaderboard-seed")
    with gr.Row():
        compute = gr.Button(text("leaderboard.compute"), variant="primary", elem_id="leaderboard-compute", scale=2)
        refresh = gr.Button(text("leaderboard.refresh"), size="sm", scale=0, min_width=160,
                            elem_id="leaderboard-refresh")
    zoos = view.zoos()
    with gr.Row(visible=bool(zoos), elem_id="leaderboard-zoo-row") as zoo_row:
        zoo = gr.Dropdown(zoo_choices(zoos), value=zoos[0]["name"] if zoos else None, label=text("leaderboard.zoo"),
                          scale=3, info=text("leaderboard.zoo_info"), elem_id="leaderboard-zoo",
                          min_width=PICKER_MIN_WIDTH)
        rank_zoo = gr.Button(text("leaderboard.rank_zoo"), variant="secondary", scale=1, elem_id="leaderboard-rank-zoo")
    status = gr.Markdown(text("leaderboard.pick"), elem_id="leaderboard-status")
    table = gr.Dataframe(view.placeholder_table(), interactive=False,
                         label=text("leaderboard.table"), elem_id="leaderboard-table", wrap=True,
                         column_widths=column_widths(), max_height=960, buttons=["fullscreen", "copy"])
    notes = gr.Markdown("", elem_id="leaderboard-notes")
    download = gr.File(None, label=text("leaderboard.csv"),
                       interactive=False, elem_id="leaderboard-csv")
    plot = gr.Plot(view.placeholder_figure(), label=text("leaderboard.plot"),
                   elem_id="leaderboard-plot")

    handler = user_errors(view.compute)
    compute.click(handler, [corpus, max_examples, seed], [status, table, notes, plot, download],
                  api_name="leaderboard_compute")
    rank_zoo.click(user_errors(view.rank_zoo), [zoo, max_examples, seed], [status, table, notes, plot, download],
                   api_name="leaderboard_rank_zoo")
    # the last ranking in the new language after the header's switch: computed again from its cached scores
    redrawn_on_language_switch("leaderboard_table", [status, table, notes, plot, download],
                               (view.compute, [corpus, max_examples, seed], [compute.click]),
                               (view.rank_zoo, [zoo, max_examples, seed], [rank_zoo.click]))
    signature = gr.State(None)
    gr.Timer(REFRESH_S).tick(view.refresh_if_changed, [corpus, zoo, signature], [corpus, zoo_row, zoo, signature],
                             api_name="leaderboard_refresh", show_progress="hidden", queue=False)
    refresh_corpora = user_errors(view.refresh)
    refresh.click(refresh_corpora, corpus, corpus, api_name="leaderboard_corpora_list")
    if tab is not None:
        # the corpus picker, the zoo's row with its count, and the empty table and plot in the reader's language, at
        # once rather than at the timer's next tick: one event (app/display.py)
        def open_pickers(chosen_corpus, chosen_zoo):
            return view.refresh_if_changed(chosen_corpus, chosen_zoo, None)

        tab.select(*one_event((user_errors(open_pickers), [corpus, zoo], [corpus, zoo_row, zoo, signature]),
                              (user_errors(view.placeholder), table, [table, plot])),
                   api_name="leaderboard_on_select", show_progress="hidden")
    return TabParts()

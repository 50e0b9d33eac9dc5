"""The Understand tab's Sentence similarity section: are same-topic sentences closer than different-topic ones?

Up to four runs read the held-out sentences of the synthetic corpus's five topics (animals, food, city, school,
sports; lab_models/inference/sentence_similarity.py) and pool one vector per sentence the way the family reads a
sentence ([CLS] for the encoders, the last token for GPT, the encoder for MASS and T5, the LSTMs' own representations)
or by averaging the tokens. For each run: a topic x topic heatmap of the mean cosine similarity, the same-topic and
different-topic means and their gap (bars). This is where the contrastive add-on shows (SimCSE, Gao et al. 2021;
lab_models/objectives/contrastive.py): without it, the encoder families' [CLS] vectors of different sentences are
almost parallel (cosine near 1, no gap), with it they spread out and the topics separate.

The handlers only translate the controls into `api.sentence_similarity` and draw (app/understand/similarity_figures.py).

Endpoints: `/understand_sentences` (runs, pooling, sentences per topic) -> (heatmaps, bars, table);
`/understand_sentences_runs_list` and `/understand_sentences_runs_on_select` (the tab's Refresh runs and opening the
tab): runs -> the runs picker; `/understand_sentences_placeholders_on_load` (page load): -> the empty plots and table
in the reader's language.

What the server writes here is in the reader's language (`app.i18n.language.tr`, area `similarity`): the table's
headers, the progress lines, the empty heatmaps' note and the messages; the figures are
app/understand/similarity_figures.py's.
"""
from __future__ import annotations

import gradio as gr
import pandas as pd

from lab_models import api

from app.display import compact_empty_figure, redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import text, tr
from app.inputs import picked_runs, whole_number
from app.understand.run_picker import RunPicking, SectionPicker, runs_picker
from app.understand.similarity_figures import topic_gap_figure, topic_similarity_figure

MAX_RUNS = 4
TABLE_COLUMNS = ["run", "family", "step", "pooling", "same topic", "different topics", "gap", "AUC",
                 "nearest is same topic", "sentences"]  # the English headers; `table_columns()` the reader's
COLUMN_KEYS = ("col_run", "col_family", "col_step", "col_pooling", "col_same", "col_different", "col_gap", "col_auc",
               "col_nearest", "col_sentences")
POOLINGS = ("mean", "auto")  # the sentence vector's choices, in the picker's order (labels: pooling_choices)


def pooling_choices() -> list[tuple[object, str]]:
    """The Sentence vector picker's (label, value) pairs; the labels are translated in the page."""
    labels = {"mean": text("similarity.pooling_mean"), "auto": text("similarity.pooling_auto")}
    return [(labels[pooling], pooling) for pooling in POOLINGS]


def table_columns() -> list[str]:
    """The table's headers in the reader's language (TABLE_COLUMNS in English)."""
    return [tr(f"similarity.{key}") for key in COLUMN_KEYS]


def similarity_table(results) -> pd.DataFrame:
    """One row per run: its numbers, rounded for the page (headers in the reader's language).

    >>> similarity_table([]).columns.tolist()[:4]
    ['run', 'family', 'step', 'pooling']
    """
    return pd.DataFrame([[r.run_id, r.family, r.step, r.pooling, round(r.same, 4), round(r.different, 4),
                          round(r.gap, 4), round(r.auc, 3), round(r.nearest_same_topic, 3), r.sentences]
                         for r in results], columns=table_columns())


class SentenceSimilarityView(RunPicking):
    """The section's handlers, bound to the app's run store."""

    RUNS_INFO = "similarity.runs_info"
    NO_RUNS_INFO = "similarity.no_runs_info"
    PICKS = "sentences"
    MAX_PICKS = MAX_RUNS

    def __init__(self, home, jobs=None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)

    def compare(self, run_ids, pooling="mean", per_topic=api.SENTENCE_SIMILARITY_PER_TOPIC, progress=gr.Progress()):
        """(heatmaps figure, same/different bars, table) for the picked runs."""
        run_ids = picked_runs(run_ids, MAX_RUNS, api.Message("compare"))
        pooling = pooling or "mean"
        if pooling not in api.SENTENCE_SIMILARITY_POOLINGS:
            raise api.LabError("Unknown pooling {pooling!r}: choose one of "
                               "{sentence_similarity_poolings}.",
                               pooling=pooling,
                               sentence_similarity_poolings=', '.join(api.SENTENCE_SIMILARITY_POOLINGS))
        per_topic = whole_number(per_topic, tr("similarity.per_topic_label"), api.SENTENCE_SIMILARITY_PER_TOPIC, 2,
                                 api.SENTENCE_SIMILARITY_MAX_PER_TOPIC)
        results = []
        for index, run_id in enumerate(run_ids):
            progress(index / len(run_ids), desc=tr("similarity.progress_encoding", run_id=run_id))
            results += api.sentence_similarity([self.jobs.run_dir(run_id)], pooling, per_topic)
        progress(1.0, desc=tr("similarity.progress_done"))
        return topic_similarity_figure(results), topic_gap_figure(results), similarity_table(results)


def placeholders() -> tuple:
    """(heatmaps, bars, table) before the first press, in the reader's language. The page is built before any reader
    asks, so these are drawn again when it loads."""
    return compact_empty_figure(tr("similarity.empty_heatmaps"), 360), topic_gap_figure([]), similarity_table([])


def build(home, jobs=None, choices=None) -> SectionPicker:
    """Lay out the section inside the current container. Returns its runs picker, for the tab's Refresh runs button
    and its select event."""
    view = SentenceSimilarityView(home, jobs)
    choices = view.run_choices() if choices is None else choices
    start = placeholders()
    gr.Markdown(text("similarity.intro"))
    with gr.Row():
        runs = runs_picker(choices, label=text("similarity.runs_label"), elem_id="understand-sentences-runs",
                           info=SentenceSimilarityView.RUNS_INFO, no_runs_info=SentenceSimilarityView.NO_RUNS_INFO,
                           max_runs=MAX_RUNS, value=view.default_picks(), scale=4)
        pooling = gr.Dropdown(pooling_choices(), value="mean", label=text("similarity.pooling_label"), scale=2,
                              elem_id="understand-sentences-pooling")
        per_topic = gr.Number(api.SENTENCE_SIMILARITY_PER_TOPIC, precision=0, label=text("similarity.per_topic_label"),
                              minimum=2, maximum=api.SENTENCE_SIMILARITY_MAX_PER_TOPIC, scale=1, min_width=120)
    button = gr.Button(text("similarity.compare_button"), variant="primary", elem_id="understand-sentences-compare")
    heatmaps = gr.Plot(start[0], label=text("similarity.heatmaps_label"),
                       elem_id="understand-sentences-heatmaps")
    bars = gr.Plot(start[1], label=text("similarity.bars_label"),
                   elem_id="understand-sentences-bars")
    with gr.Accordion(text("similarity.table_accordion"), open=False):
        table = gr.Dataframe(start[2], interactive=False, elem_id="understand-sentences-table")
    button.click(user_errors(view.compare), [runs, pooling, per_topic], [heatmaps, bars, table],
                 api_name="understand_sentences")
    # the page is built before any reader: draw the empty views again, in the reader's language, when it loads
    gr.on(None, placeholders, None, [heatmaps, bars, table], api_name="understand_sentences_placeholders_on_load",
          show_progress="hidden", queue=False)
    redrawn_on_language_switch("understand_sentences", [heatmaps, bars, table],
                               (user_errors(view.compare), [runs, pooling, per_topic], [button.click]))
    return SectionPicker.of(view, runs)

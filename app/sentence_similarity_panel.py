"""The Understand tab's Sentence similarity section: are same-topic sentences closer than different-topic ones?

Up to four runs read the held-out sentences of the synthetic corpus's five topics (animals, food, city, school,
sports; lab_models/sentence_similarity.py) and pool one vector per sentence the way the family reads a sentence
([CLS] for the encoders, the last token for GPT, the encoder for MASS and T5, the LSTMs' own representations) or by
averaging the tokens. For each run: a topic x topic heatmap of the mean cosine similarity, the same-topic and
different-topic means and their gap (bars). This is where the contrastive add-on shows (SimCSE, Gao et al. 2021;
lab_models/objectives/contrastive.py): without it, the encoder families' [CLS] vectors of different sentences are
almost parallel (cosine near 1, no gap), with it they spread out and the topics separate.

The handlers only translate the controls into `api.sentence_similarity` and draw (app/addon_figures.py).

Endpoints: `/understand_sentences` (runs, pooling, sentences per topic) -> (heatmaps, bars, table);
`/understand_sentences_runs_list` and `/understand_sentences_runs_on_select` (the tab's Refresh runs and opening the
tab): runs -> the runs picker.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pandas as pd

from lab_models import api

from .addon_figures import empty_figure, topic_gap_figure, topic_similarity_figure
from .errors import user_errors
from .inputs import picked_runs, whole_number

MAX_RUNS = 4
TABLE_COLUMNS = ["run", "family", "step", "pooling", "same topic", "different topics", "gap", "AUC",
                 "nearest is same topic", "sentences"]
POOLING_CHOICES = [("mean of the tokens", "mean"), ("the family's fine-tuning vector ([CLS] / last token)", "auto")]
NO_RUNS_INFO = "No run has weights yet: train one in the Train tab, then press Refresh runs."


def similarity_table(results) -> pd.DataFrame:
    """One row per run: its numbers, rounded for the page.

    >>> similarity_table([]).columns.tolist()[:4]
    ['run', 'family', 'step', 'pooling']
    """
    return pd.DataFrame([[r.run_id, r.family, r.step, r.pooling, round(r.same, 4), round(r.different, 4),
                          round(r.gap, 4), round(r.auc, 3), round(r.nearest_same_topic, 3), r.sentences]
                         for r in results], columns=TABLE_COLUMNS)


class SentenceSimilarityView:
    """The section's handlers, bound to the app's run store."""

    def __init__(self, home, jobs=None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)

    def run_choices(self) -> list[tuple[str, str]]:
        from .understand_tab import run_label  # the label the tab's other pickers use

        return [(run_label(row), row["run_id"]) for row in api.runs_with_weights(self.jobs)]

    def refresh_runs(self, run_ids=None):
        """The runs picker with the runs that have weights now, keeping the chosen ones that still exist."""
        choices = self.run_choices()
        ids = [value for _, value in choices]
        current = [run_ids] if isinstance(run_ids, str) else list(run_ids or [])
        return gr.update(choices=choices, value=[r for r in current if r in ids],
                         info=f"up to {MAX_RUNS} runs with weights" if choices else NO_RUNS_INFO)

    def compare(self, run_ids, pooling="mean", per_topic=api.SENTENCE_SIMILARITY_PER_TOPIC, progress=gr.Progress()):
        """(heatmaps figure, same/different bars, table) for the picked runs."""
        run_ids = picked_runs(run_ids, MAX_RUNS, "compare")
        pooling = pooling or "mean"
        if pooling not in api.SENTENCE_SIMILARITY_POOLINGS:
            raise ValueError(f"Unknown pooling {pooling!r}: choose one of "
                             f"{', '.join(api.SENTENCE_SIMILARITY_POOLINGS)}.")
        per_topic = whole_number(per_topic, "Sentences per topic", api.SENTENCE_SIMILARITY_PER_TOPIC, 2,
                                 api.SENTENCE_SIMILARITY_MAX_PER_TOPIC)
        results = []
        for index, run_id in enumerate(run_ids):
            progress(index / len(run_ids), desc=f"Encoding the held-out sentences with {run_id}")
            results += api.sentence_similarity([self.jobs.run_dir(run_id)], pooling, per_topic)
        progress(1.0, desc="Done")
        return topic_similarity_figure(results), topic_gap_figure(results), similarity_table(results)


def build(home, jobs=None, choices=None):
    """Lay out the section inside the current container. Returns a namespace: `view`, `runs` (the picker) and
    `refresh_runs` = (fn, inputs, outputs) for the tab's Refresh runs button and its select event."""
    view = SentenceSimilarityView(home, jobs)
    choices = view.run_choices() if choices is None else choices
    gr.Markdown("Do the runs place sentences about the same topic close together? Each run encodes held-out "
                "sentences of the synthetic corpus's five topics (never trained on) into one vector each; the "
                "heatmap shows the mean cosine similarity between topics, the bars the same-topic and "
                "different-topic means. A **gap** above 0 means same-topic sentences are closer; the table adds the "
                "AUC (the chance that a same-topic pair is closer than a different-topic pair; 0.5 = no topic) and "
                "how often a sentence's nearest neighbour shares its topic (0.2 = chance). A run trained with the "
                "**contrastive** objective (SimCSE) spreads the sentences out and, on the mean of its tokens, "
                "brings the topics apart.")
    with gr.Row():
        runs = gr.Dropdown(choices, value=[run_id for _, run_id in choices[:2]], multiselect=True,
                           max_choices=MAX_RUNS, label="Runs", allow_custom_value=True, scale=4,
                           info=f"up to {MAX_RUNS} runs with weights" if choices else NO_RUNS_INFO,
                           elem_id="understand-sentences-runs")
        pooling = gr.Dropdown(POOLING_CHOICES, value="mean", label="Sentence vector", scale=2,
                              elem_id="understand-sentences-pooling")
        per_topic = gr.Number(api.SENTENCE_SIMILARITY_PER_TOPIC, precision=0, label="Sentences per topic",
                              minimum=2, maximum=api.SENTENCE_SIMILARITY_MAX_PER_TOPIC, scale=1, min_width=120)
    button = gr.Button("Compare sentences", variant="primary", elem_id="understand-sentences-compare")
    heatmaps = gr.Plot(empty_figure("Pick runs and press Compare sentences.", 360), label="Mean cosine by topic",
                       elem_id="understand-sentences-heatmaps")
    bars = gr.Plot(topic_gap_figure([]), label="Same topic vs different topics", elem_id="understand-sentences-bars")
    with gr.Accordion("Numbers as a table", open=False):
        table = gr.Dataframe(similarity_table([]), interactive=False, elem_id="understand-sentences-table")
    button.click(user_errors(view.compare), [runs, pooling, per_topic], [heatmaps, bars, table],
                 api_name="understand_sentences")
    return SimpleNamespace(view=view, runs=runs, refresh_runs=(user_errors(view.refresh_runs), runs, runs))

"""Understand tab: what trained runs have learned, side by side. Five sections:

* **Fill-mask**: up to four runs and a text with one or more [MASK]; each run's top-k predictions per slot, with their
  probabilities (`api.fill_mask`). A run whose family cannot fill masks (GPT reads left to right) explains why in its
  column; that is never an error.
* **Contextual embeddings**: the same word in two sentences ("apple" the fruit and Apple the company): the cosine
  similarity of its two vectors at every layer, one line per run (`api.contextual_similarity`), and the final layer's
  token vectors of a few sentences on their first two principal components, one scatter per run
  (`api.embedding_projection`).
* **Sentence similarity**: held-out sentences of five topics, one pooled vector each; per run the mean cosine between
  topics and the gap between same-topic and different-topic pairs (app/understand/similarity_panel.py; the contrastive
  add-on's view; its endpoints start with `understand_sentences`).
* **Attention**: one run and a sentence; every head of one layer of one stream as a heatmap, under the mask the family
  really uses (`api.attention_maps`; lab_models/inference/representations.py documents the mask per family).
* **Fine-tune**: up to four runs fine-tuned on a labelled task (built-in or a CSV), queued on the job manager, with
  live progress, Stop, and a leaderboard table and plot (app/understand/finetune_panel.py; its endpoints start with
  `understand_finetune_`).
* **Switch routing**: for a run trained with Switch Transformer layers, the expert each token of a sentence goes to in
  every Switch layer, as chips coloured by expert (app/understand/routing_panel.py; endpoints `/understand_routing...`).

The handlers only translate the controls into `lab_models.api` calls and draw the results (app/understand/figures.py).

Endpoints (every event has an `api_name`, so `gradio_client` can drive the tab):
* `/understand_fill_mask` (and `_on_submit`): (run ids, text, top_k) -> (figure, table, one dict per run with
  "slots" [[token, probability], ...] or "error").
* `/understand_similarity` (and `_on_submit`): (run ids, sentence A, sentence B, word) -> (figure, table); then
  `/understand_projection`: (run ids, sentences one per line, word) -> figure.
* `/understand_attention`: (run id, sentence, stream, layer) -> (stream, layer, figure, note, details); the stream
  falls back to the run's first and the layer is clamped when they do not fit the run. `/understand_attention_stream`
  and `/understand_attention_view` redraw after a stream or layer change. The layer slider then allows the shown
  run's layers only, for the rest of the session (Gradio checks a slider's range), so a client that switches to a
  deeper run asks for layer 1 first.
* `/understand_runs_list` (the Refresh button): the current selections -> the three run pickers, with the runs that have
  weights now. `/understand_runs_on_select` (opening the tab, one event): the same three, then the probing, logit lens,
  attributions, sentence similarity and fine-tuning pickers (each as its own `..._list` endpoint).
* `/understand_runs_refresh` (a timer, every few seconds): (the three selections; the probing, logit lens,
  attributions, sentence similarity and fine-tuning pickers' selections; the last choices) -> those eight pickers
  only when the runs with weights have changed, so new runs show up in every section by themselves. A picker with
  nothing picked gets the view's default picks (`api.view_picks`: the demo zoo's runs that make its point).
* `/understand_placeholders_on_load` (page load): -> the empty plots and tables, in the reader's language.

What the server writes here (figures, table headers, progress lines, the attention note, picker entries, messages) is in
the reader's language (`app.i18n.language.tr`, area `understand`; the backend's notes through app/i18n/messages.py).
The pickers' entries ("run · family · step N") are drawn again by the timer's first tick and when the tab is opened.
"""
from __future__ import annotations

import html
import logging

import gradio as gr

from lab_models import api

from app.display import cjk_empty_figure, one_event, redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import current_language, marker, reader_examples, text, tr
from app.i18n.messages import translate
from app.inputs import picked, picked_runs, still_listed, whole_number
from app.tab_parts import TabParts
from app.understand import (attribution_panel, finetune_panel, lens_panel, model_view_panel, probe_panel, routing_panel,
                            similarity_panel)
from app.understand.export import FigureFiles
from app.understand.figures import (attention_details, attention_figure, fill_mask_figure, fill_mask_table,
                                    projection_figure, similarity_figure, similarity_table, stream_label, stream_title)
from app.understand.run_picker import run_choices, runs_picker

logger = logging.getLogger(__name__)

MAX_RUNS = 4
DEFAULT_TOP_K = 5
MASK = "[MASK]"
MAX_LAYERS = 12  # the layer slider's range before a run is shown (the base preset's depth); then the run's own
STREAMS = ("self", "content", "query", "encoder", "decoder", "cross")  # every stream name an AttentionMaps can have
RUNS_REFRESH_S = 5.0  # new runs with weights show up in the pickers by themselves this often
# Examples: sentences of the "stories" language that the demo zoo trains on (lab_models/text/stories.py: lower case,
# " ." before the stop), first, so that the defaults read without [UNK] and ask what only the context decides: which
# character "the [MASK]" is (the judges: the verb is plural), a verb's number across a relative clause, a form that is
# a noun in one place and a verb in another ("cook"); then ordinary English (the classic "apple" example), which only a
# run trained on English reads.
FILL_MASK_EXAMPLES = [
    ["a doctor guards two judges . they find this train . the [MASK] hate the doctor ."],
    ["the teachers that chase a pupil [MASK] the tall pen ."],
    ["I ate an [MASK] with my lunch."],
]
SIMILARITY_EXAMPLES = [
    ["the cooks cook the fish in the kitchen .", "the cook cooks some drinks .", "cook"],
    ["a doctor guards two judges .", "the judges judge the doctor .", "judges"],
    ["I ate an apple with my lunch.", "She works at Apple in the city.", "apple"],
]
ATTENTION_EXAMPLES = [["the cats near the dog chase a ball ."], ["the cooks cook the fish in the kitchen ."],
                      ["I ate an apple with my lunch."]]


class UnderstandView:
    """The tab's handlers, bound to the app's run store (the job manager)."""

    def __init__(self, home, jobs=None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)

    # ------------------------------------------------------------------ run pickers
    def run_choices(self) -> list[tuple[str, str]]:
        return run_choices(self.jobs)

    def fill_picks(self) -> list[str]:
        """What the fill-mask picker holds until the user picks: runs that can fill a mask, the zoo's best first."""
        return api.fill_mask_picks(self.jobs, MAX_RUNS)

    def embedding_picks(self) -> list[str]:
        """What the embeddings picker holds until the user picks: the zoo's BERT, GPT, ELMo and T5, else the newest
        runs."""
        return api.view_picks(self.jobs, "embeddings", MAX_RUNS)

    def refresh(self, fill_runs=None, embedding_runs=None, attention_run=None):
        """The three pickers with the runs that have weights now, keeping the chosen ones that still exist (an empty
        fill-mask or embeddings picker gets `fill_picks` or `embedding_picks`, so the demo zoo's runs appear there as
        they finish)."""
        choices = self.run_choices()
        ids = [value for _, value in choices]
        # the help lines as translation markers, strings: Gradio's `/call/` route serializes updates with plain `json`
        info = marker("understand.runs_info" if choices else "understand.no_runs_info")
        attention = attention_run if isinstance(attention_run, str) and attention_run in ids else (ids[0] if ids
                                                                                                  else None)
        return (gr.update(choices=choices, value=still_listed(fill_runs, ids) or self.fill_picks(), info=info),
                gr.update(choices=choices, value=still_listed(embedding_runs, ids) or self.embedding_picks(),
                          info=info),
                gr.update(choices=choices, value=attention,
                          info=marker("understand.run_info" if choices else "understand.no_runs_info")))

    def refresh_if_changed(self, fill_runs=None, embedding_runs=None, attention_run=None, signature=None,
                           sections=()):
        """The timer's refresh: the three pickers, each section's picker (`sections`: (its refresh, its value)
        pairs) and the new signature, or only skips when the runs with weights are the ones the pickers already
        list."""
        # the runs listed and the language, not their labels' steps: a training run's checkpoints would redraw every
        # picker (and what follows their changes) every tick; the labels are drawn again when the tab is opened
        now = [[value for _, value in self.run_choices()], current_language()]
        if signature is not None and now == signature:
            return (gr.skip(),) * (4 + len(sections))
        return (*self.refresh(fill_runs, embedding_runs, attention_run),
                *(refresh(value) for refresh, value in sections), now)

    @staticmethod
    def _run_ids(run_ids, what: api.Message) -> list[str]:
        return picked_runs(run_ids, MAX_RUNS, what)

    def _facts(self, run_id: str, rows: dict) -> dict:
        row = rows.get(run_id, {})
        family = row.get("family") or ""
        try:
            title = api.family(family).title if family else ""
        except ValueError:
            title = family
        return {"run_id": run_id, "family": family, "title": title,
                "step": row.get("weights_step", row.get("step")), "seed": row.get("seed")}

    # ------------------------------------------------------------------ fill-mask
    def fill_mask(self, run_ids, text, top_k=DEFAULT_TOP_K, progress=gr.Progress()):
        """One column per run with its top-k predictions per [MASK]; a run that cannot fill masks (or whose input
        is refused) explains why in its column."""
        run_ids = self._run_ids(run_ids, api.Message("fill the masks with"))
        if text is None or not str(text).strip():
            raise api.LabError("Type a text first: it is empty. Mark each blank with {mask}, e.g. "
                               "“{example}”.", mask=MASK, example=FILL_MASK_EXAMPLES[0][0])
        if MASK.lower() not in str(text).lower():
            raise api.LabError("The text has no {mask}: mark each word to predict with {mask}, e.g. "
                               "“{example}”.", mask=MASK, example=FILL_MASK_EXAMPLES[0][0])
        top_k = whole_number(top_k, "Top-k", DEFAULT_TOP_K, 1, 20)
        fill = getattr(api, "fill_mask", None)
        rows = {row["run_id"]: row for row in api.runs_with_weights(self.jobs)}  # "weights_step": what loads
        results = []
        for index, run_id in enumerate(run_ids):
            progress(index / len(run_ids), desc=tr("understand.progress_filling", run_id=run_id, index=index + 1,
                                                   total=len(run_ids)))
            result = self._facts(run_id, rows)
            try:
                if fill is None:
                    raise api.LabError("Fill-mask is not available in this version of the lab.")
                slots = fill(self.jobs.run_dir(run_id), str(text), top_k=top_k)
                result["slots"] = [[[str(token), round(float(prob), 6)] for token, prob in slot] for slot in slots]
            except ValueError as error:
                result["error"] = api.as_message(api.message_of(error))  # a library's text: said to be English
            except Exception as error:  # noqa: BLE001 - one broken run must not hide the others' answers
                logger.exception("fill-mask with %s failed", run_id)
                result["error"] = api.Message("Something went wrong with this run: {error_type}: {error}",
                                              error_type=type(error).__name__, error=str(error))
            results.append(result)
        progress(1.0, desc=tr("understand.progress_done"))
        return fill_mask_figure(results), fill_mask_table(results), results

    # ------------------------------------------------------------------ contextual embeddings
    def similarity(self, run_ids, sentence_a, sentence_b, word, progress=gr.Progress()):
        """The word's similarity between the two sentences per layer, one line per run, and the table."""
        run_ids = self._run_ids(run_ids, api.Message("compare"))
        progress(0.1, desc=tr("understand.progress_reading", count=len(run_ids)))
        frame = api.contextual_similarity([self.jobs.run_dir(r) for r in run_ids], sentence_a, sentence_b, word)
        progress(1.0, desc=tr("understand.progress_done"))
        word = str(word or "").strip()
        return similarity_figure(frame, word), similarity_table(frame)

    def projection(self, run_ids, sentences, word, progress=gr.Progress()):
        """One PCA scatter per run of the final-layer token vectors of the sentences (one per line)."""
        run_ids = self._run_ids(run_ids, api.Message("project"))
        lines = [line.strip() for line in str(sentences or "").splitlines() if line.strip()]
        if not lines:
            raise api.LabError("Type the sentences to project, one per line: the box is empty.")
        frames = []
        for index, run_id in enumerate(run_ids):
            progress(index / len(run_ids), desc=tr("understand.progress_projecting", run_id=run_id,
                                                   index=index + 1, total=len(run_ids)))
            frames.append(api.embedding_projection(self.jobs.run_dir(run_id), lines, word))
        progress(1.0, desc=tr("understand.progress_done"))
        return projection_figure(frames, lines, str(word or "").strip())

    # ------------------------------------------------------------------ attention
    def attention(self, run_id, sentence, stream=None, layer=1, progress=gr.Progress()):
        """The heads of one layer of one stream. Returns (stream picker, layer slider, figure, note, details)."""
        if isinstance(run_id, (list, tuple)):
            run_id = run_id[0] if run_id else None
        if not run_id or not str(run_id).strip():
            raise api.LabError("Choose a run first: pick one with weights in the Run list.")
        progress(0.2, desc=tr("understand.progress_running", run_id=run_id))
        maps = api.attention_maps(self.jobs.run_dir(str(run_id).strip()), sentence)
        streams = list(maps.streams)
        stream = stream if stream in streams else streams[0]
        n_layers = int(maps.weights[stream].shape[0])
        layer = whole_number(layer, tr("understand.layer_label"), 1, 1, 10_000)
        layer = min(max(layer, 1), n_layers)
        progress(0.8, desc=tr("understand.progress_drawing"))
        summary = tr("understand.attention_summary", run_id=maps.run_id, family=maps.family, step=f"{maps.step:,}",
                     tokens=len(maps.tokens), layers=n_layers, heads=maps.n_heads,
                     streams=", ".join(stream_title(s) for s in streams))
        # a token such as <pad> in the note is text, not an HTML tag
        note = f"{summary}\n\n{html.escape(translate(maps.note), quote=False)}"
        return (gr.update(choices=[(stream_title(s), s) for s in streams], value=stream),
                gr.update(maximum=max(n_layers, 2), value=layer, interactive=n_layers > 1),
                attention_figure(maps, stream, layer), note, attention_details(maps, stream, layer))


def placeholders() -> tuple:
    """What the result views hold before the first press, in the reader's language: (fill-mask plot, its table,
    similarity plot, its table, projection plot, attention plot). The page is built before any reader asks, so these
    are drawn again when it loads (`/understand_placeholders_on_load`)."""
    return (cjk_empty_figure(tr("understand.fig_fill_empty")), fill_mask_table([]),
            cjk_empty_figure(tr("understand.fig_similarity_start")), similarity_table(None),
            cjk_empty_figure(tr("understand.fig_projection_start")),
            cjk_empty_figure(tr("understand.fig_attention_empty")))


def build(home, jobs=None, tab=None) -> TabParts:
    """Lay out the tab. `tab` (the gr.Tab it sits in) refreshes the run pickers when it is opened. The page needs
    nothing more from it."""
    view = UnderstandView(home, jobs)
    choices = view.run_choices()
    files = FigureFiles()  # the figures' standalone HTML files (the attention, probe, lens and attribution views)
    start = placeholders()
    gr.Markdown(text("understand.intro"))
    with gr.Row():
        refresh = gr.Button(text("understand.refresh_runs"), size="sm", scale=0, min_width=140,
                            elem_id="understand-refresh")
    with gr.Tabs():
        # ---------------------------------------------------------------- fill-mask
        with gr.Tab(text("understand.tab_fill_mask"), id="understand-fill-mask"):
            gr.Markdown(text("understand.fill_intro"))
            # the runs that fill masks best (the zoo's BERT-like runs), else the newest runs, ready to compare
            fill_runs = runs_picker(choices, label=text("understand.runs_label"), elem_id="understand-fill-runs",
                                    info="understand.runs_info", no_runs_info="understand.no_runs_info",
                                    max_runs=MAX_RUNS, value=list(view.fill_picks()) or None, scale=4)
            with gr.Row():
                fill_text = gr.Textbox(FILL_MASK_EXAMPLES[0][0], label=text("understand.fill_text_label"), lines=1,
                                       scale=4,
                                       elem_id="understand-fill-text")
                top_k = gr.Slider(1, 20, DEFAULT_TOP_K, step=1, label="Top-k", scale=1)
            gr.Examples(FILL_MASK_EXAMPLES, [fill_text], label=text("understand.fill_examples_label"),
                        api_name="understand_fill_mask_example")
            fill_button = gr.Button(text("understand.fill_button"), variant="primary", elem_id="understand-fill")
            fill_plot = gr.Plot(start[0], label=text("understand.fill_plot_label"), elem_id="understand-fill-plot")
            with gr.Accordion(text("understand.fill_table_accordion"), open=False):
                fill_table = gr.Dataframe(start[1], interactive=False, wrap=True)
                fill_details = gr.JSON([], label=text("understand.fill_raw_label"))
        # ---------------------------------------------------------------- contextual embeddings
        with gr.Tab(text("understand.tab_embeddings"), id="understand-embeddings"):
            gr.Markdown(text("understand.embed_intro"))
            embed_runs = runs_picker(choices, label=text("understand.runs_label"), elem_id="understand-embed-runs",
                                     info="understand.runs_info", no_runs_info="understand.no_runs_info",
                                     max_runs=MAX_RUNS, value=view.embedding_picks(), scale=4)
            with gr.Row():
                sentence_a = gr.Textbox(SIMILARITY_EXAMPLES[0][0], label=text("understand.sentence_a"), scale=3,
                                        elem_id="understand-sentence-a")
                sentence_b = gr.Textbox(SIMILARITY_EXAMPLES[0][1], label=text("understand.sentence_b"), scale=3,
                                        elem_id="understand-sentence-b")
                word = gr.Textbox(SIMILARITY_EXAMPLES[0][2], label=text("understand.word_label"), scale=1,
                                  elem_id="understand-word", info=text("understand.word_info"))
            projected = gr.Textbox("\n".join(SIMILARITY_EXAMPLES[0][:2]), lines=3,
                                   label=text("understand.projected_label") + f" {api.PROBE_MAX_SENTENCES}",
                                   elem_id="understand-projected")
            similarity_examples = gr.Examples(SIMILARITY_EXAMPLES, [sentence_a, sentence_b, word],
                                              label=text("understand.examples_label"),
                                              api_name="understand_similarity_example")
            similarity_examples_for_reader = reader_examples(similarity_examples)
            embed_button = gr.Button(text("understand.compare_contexts"), variant="primary",
                                     elem_id="understand-compare")
            similarity_plot = gr.Plot(start[2], label=text("understand.similarity_plot_label"),
                                      elem_id="understand-similarity-plot")
            with gr.Accordion(text("understand.similarity_table_accordion"), open=False):
                similarity_frame = gr.Dataframe(start[3], interactive=False)
            projection_plot = gr.Plot(start[4], label=text("understand.projection_plot_label"),
                                      elem_id="understand-projection-plot")
        # ---------------------------------------------------------------- sentence similarity (contrastive add-on)
        with gr.Tab(text("understand.tab_sentences"), id="understand-sentences"):
            sentences = similarity_panel.build(home, view.jobs, choices)
        # ---------------------------------------------------------------- attention
        with gr.Tab(text("understand.tab_attention"), id="understand-attention"):
            gr.Markdown(text("understand.attention_intro"))
            with gr.Row():
                attention_run = runs_picker(choices, label=text("understand.run_label"),
                                            elem_id="understand-attention-run", info="understand.run_info",
                                            no_runs_info="understand.no_runs_info", scale=4)
            with gr.Row():
                attention_sentence = gr.Textbox(ATTENTION_EXAMPLES[0][0], label=text("understand.sentence_label"),
                                                scale=4, elem_id="understand-attention-sentence",
                                                info=text("understand.max_tokens_info") + f" {api.PROBE_MAX_TOKENS}")
                attention_button = gr.Button(text("understand.show_attention"), variant="primary", scale=1,
                                             elem_id="understand-attention-show")
            gr.Examples(ATTENTION_EXAMPLES, [attention_sentence], label=text("understand.examples_label"),
                        api_name="understand_attention_example")
            with gr.Row():
                # a Dropdown that accepts any value: an API client may ask any run for any stream name
                stream = gr.Dropdown([(stream_label(s), s) for s in STREAMS], value="self",
                                     label=text("understand.stream_label"),
                                     scale=3, allow_custom_value=True, elem_id="understand-attention-stream",
                                     info=text("understand.stream_info"))
                layer = gr.Slider(1, MAX_LAYERS, 1, step=1, label=text("understand.layer_label"), scale=2,
                                  elem_id="understand-layer", info=text("understand.layer_info"))
            attention_plot = gr.Plot(start[5], label=text("understand.attention_plot_label"), elem_id="understand-attention-plot")
            attention_note = gr.Markdown("")
            with gr.Accordion(text("understand.attention_data_accordion"), open=False):
                attention_data = gr.JSON({}, label=text("understand.attention_data_label"))
            # the downloads and the model view (model_view_panel.py); wired to the head view's events below
            model_view = model_view_panel.build(view.jobs, files, attention_run, attention_sentence, stream, layer)
        # ------------------------------------------------------------------------ probing, logit lens, attributions
        with gr.Tab(text("probing.tab_probing"), id="understand-probing"):
            probing = probe_panel.build(home, view.jobs, choices, files)
        with gr.Tab(text("probing.tab_lens"), id="understand-lens"):
            lens = lens_panel.build(home, view.jobs, choices, files)
        with gr.Tab(text("probing.tab_attributions"), id="understand-attributions"):
            attributing = attribution_panel.build(home, view.jobs, files)
        # ---------------------------------------------------------------- fine-tuning (finetune_panel.py)
        with gr.Tab(text("understand.tab_finetune"), id="understand-finetune") as finetune_tab:
            finetune = finetune_panel.build(home, view.jobs, choices, finetune_tab)
        # ---------------------------------------------------------------- Switch routing (routing_panel.py)
        with gr.Tab(text("understand.tab_routing"), id="understand-routing") as routing_tab:
            routing_panel.build(view.jobs, routing_tab)

    # ---------------------------------------------------------------- events
    fill_inputs = [fill_runs, fill_text, top_k]
    fill_outputs = [fill_plot, fill_table, fill_details]
    fill = user_errors(view.fill_mask)
    fill_button.click(fill, fill_inputs, fill_outputs, api_name="understand_fill_mask")
    fill_text.submit(fill, fill_inputs, fill_outputs, api_name="understand_fill_mask_on_submit")

    similarity = user_errors(view.similarity)
    projection = user_errors(view.projection)
    similarity_inputs = [embed_runs, sentence_a, sentence_b, word]
    similarity_outputs = [similarity_plot, similarity_frame]
    projection_inputs = [embed_runs, projected, word]
    embed_button.click(similarity, similarity_inputs, similarity_outputs, api_name="understand_similarity").success(
        projection, projection_inputs, projection_plot, api_name="understand_projection")
    word.submit(similarity, similarity_inputs, similarity_outputs, api_name="understand_similarity_on_submit")

    attention = user_errors(view.attention)
    attention_inputs = [attention_run, attention_sentence, stream, layer]
    attention_outputs = [stream, layer, attention_plot, attention_note, attention_data]
    attention_click = attention_button.click(attention, attention_inputs, attention_outputs,
                                             api_name="understand_attention")
    attention_submit = attention_sentence.submit(attention, attention_inputs, attention_outputs,
                                                 api_name="understand_attention_on_submit")
    stream_event = stream.input(attention, attention_inputs, attention_outputs, api_name="understand_attention_stream",
                                show_progress="hidden")
    layer_event = layer.release(attention, attention_inputs, attention_outputs, api_name="understand_attention_view",
                                show_progress="hidden")
    model_view.follow([(attention_click, ""), (attention_submit, "_on_submit"), (stream_event, "_stream"),
                       (layer_event, "_view")])

    refresh_runs = user_errors(view.refresh)
    pickers = [fill_runs, embed_runs, attention_run]
    refresh.click(refresh_runs, pickers, pickers, api_name="understand_runs_list")
    refresh.click(*finetune.event, api_name="understand_finetune_runs_list")
    for section, name in ((probing, "probe_runs"), (lens, "lens_runs"), (attributing, "attributions_sources"),
                          (sentences, "sentences_runs")):
        refresh.click(*section.event, api_name=f"understand_{name}_list")
    if tab is not None:  # opening the tab refreshes every picker in one event (app/display.py's one_event)
        tab.select(*one_event((refresh_runs, pickers, pickers), probing.event, lens.event, attributing.event,
                              sentences.event, finetune.event),
                   api_name="understand_runs_on_select", show_progress="hidden")
    choices_signature = gr.State(None)
    # the page is built before any reader: draw the empty views again, in the reader's language, when it loads
    gr.on(None, placeholders, None, [fill_plot, fill_table, similarity_plot, similarity_frame, projection_plot,
                                     attention_plot], api_name="understand_placeholders_on_load",
          show_progress="hidden", queue=False)
    gr.on(None, similarity_examples_for_reader, None, similarity_examples.dataset,
          api_name="understand_similarity_examples_on_load", show_progress="hidden", queue=False)
    # after the header's switch, what was computed is computed again in the new language (after the placeholders)
    redrawn_on_language_switch("understand_fill_mask", fill_outputs, (fill, fill_inputs, [fill_button.click,
                                                                                       fill_text.submit]))

    def similarity_and_projection(runs, first, second, chosen_word, projected_words):
        return (*similarity(runs, first, second, chosen_word), projection(runs, projected_words, chosen_word))

    redrawn_on_language_switch("understand_similarity", [*similarity_outputs, projection_plot],
                               (similarity_and_projection, [*similarity_inputs, projected], [embed_button.click]),
                               (lambda *values: (*similarity(*values), gr.skip()), similarity_inputs,
                                [word.submit]))
    redrawn_on_language_switch("understand_attention", attention_outputs,
                               (attention, attention_inputs, [attention_button.click, attention_sentence.submit,
                                                              stream.input, layer.release]))

    sections = (probing, lens, attributing, sentences, finetune)  # every section's picker follows new runs too
    section_pickers = [section.picker for section in sections]

    def refresh_if_changed(fill, embedding, attention, *picked_and_signature):
        *picked, signature = picked_and_signature
        return view.refresh_if_changed(fill, embedding, attention, signature,
                                       [(section.refresh, value) for section, value in zip(sections, picked)])

    gr.Timer(RUNS_REFRESH_S).tick(refresh_if_changed, [*pickers, *section_pickers, choices_signature],
                                  [*pickers, *section_pickers, choices_signature], api_name="understand_runs_refresh",
                                  show_progress="hidden", queue=False)
    return TabParts()

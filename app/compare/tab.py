"""Compare tab: up to four trained runs, one prompt, the outputs side by side.

Pick runs of any families and corpora, type a prompt and press **Generate**. Each run answers in its own column, headed
by its family, run id, step and latest validation bits per byte, with every produced token shaded by the probability
it had when it was chosen. The decoding itself (`api.generate`) decides what a family can do: continuation for the
causal families, infilling of a blank ([MASK] or ___) for the blank-infilling and seq2seq ones, iterative mask-predict
for the MLM families, English→Chinese translation for the seq2seq ones. A family that cannot do the chosen mode says
why in its column; that is never an error. Nothing here is per-family: the modes and the families come from
`api.GENERATION_MODES`, `api.generation_modes(name)` and the run list, so a family added later shows up by itself.

Endpoints (every event has an `api_name`, so `gradio_client` can drive the tab):
* `/compare_generate`: inputs (run ids, prompt, mode, strategy, temperature, top_k, top_p, beam_size, max_new_tokens,
  seed, iterations, blank_length); returns (the columns as HTML, one dict per run with the raw generation). `mode`
  "auto" = a task each run's family can do from the same prompt (`api.auto_task`: a continuation for the causal
  families, the prompt with a blank at its end for the families that only fill blanks), each column saying what was
  added; so the first comparison of the demo zoo's GPT, GPT-2, BERT and T5 gives four answers. temperature / top-k / top-p apply to `sample`, beam size to `beam`; a blank
  length of 0 lets the backend choose.
* `/compare_runs_list` (the Refresh button) and `/compare_runs_on_select` (opening the tab): input the current
  selection; return the run picker with the runs that have weights now (nothing picked: the demo zoo's finished
  runs, as the timer below picks them).
* `/compare_decoding_controls`: strategy -> which decoding controls are shown.
* `/compare_runs_refresh` (a timer, every few seconds): (the current selection, the picks made by the page, the last
  choices) -> the picker only when the runs with weights have changed, so new runs show up by themselves. While the
  user has not picked runs of their own, the demo zoo's finished runs are picked as they finish (GPT and GPT-2
  first, up to four), so the first comparison is one click on Generate. Its first tick redraws the picker, so the
  entries ("run · family · step N") read in the reader's language.
* `/compare_modes_table_on_load` (page load): -> the table of which family does which mode, in the reader's language.

What the server writes here (the columns, progress lines, picker entries, the modes table, messages) is in the
reader's language (`app.i18n.language.tr`, area `compare`; the backend's explanations through app/i18n/messages.py).
"""
from __future__ import annotations

import logging
import math

import gradio as gr

from lab_models import api

from app.compare.figures import (error_column_html, generation_column_html, grid_html, latest_val_bits, mode_title,
                                 modes_table_markdown)
from app.display import PICKER_MIN_WIDTH, redrawn_on_language_switch
from app.errors import user_errors
from app.i18n.language import current_language, reader_examples, text, tr
from app.i18n.messages import translate
from app.inputs import picked, picked_runs, still_listed
from app.tab_parts import TabParts

logger = logging.getLogger(__name__)

MAX_RUNS = 4
# The longest prompt the page takes: about 1,000 tokens, what the largest models the lab reads (GPT-2's 1,024
# positions) can see at once; each column repeats the prompt, so a longer one only makes the page grow.
MAX_PROMPT_CHARS = 5000
AUTO = "auto"
STRATEGIES = ("greedy", "sample", "beam")
DEFAULTS = {"strategy": "greedy", "temperature": 1.0, "top_k": 0, "top_p": 1.0, "beam_size": 4, "max_new_tokens": 30,
            "seed": 0, "iterations": 10, "blank_length": 0}
# Example prompts per mode: the first of each is in the "stories" language that the demo zoo trains on (lower case,
# " ." before the stop; lab_models/text/stories.py), so a run of the zoo has a fair chance; the others are ordinary
# English.
EXAMPLE_PROMPTS = {
    "continue": ["a doctor guards two judges . they", "The cat sat on the"],
    "infill": ["the teachers that chase a pupil ___ the tall pen .", "The old man ___ the river."],
    "mask_predict": ["a big dog does not [MASK] some rabbits . it [MASK] the sticks .",
                     "She [MASK] to the market [MASK] morning."],
    "translate": ["a big dog does not hate some rabbits ."],
}
# The prompt the tab opens with, for Auto mode: one blank in the middle of a sentence of the stories language, so that
# every family of the default columns can answer with a sentence (GPT and GPT-2 continue the text before the blank and
# say so; BERT fills the one [MASK] slot from both sides; T5 infills a span there), and the answer shows agreement: the
# verb after "they" must be plural.
DEFAULT_PROMPT = "a doctor guards two judges . they [MASK] the doctor ."
RUNS_REFRESH_S = 5.0  # new runs with weights show up in the picker by themselves this often


def _number(value, name: str, default, *, whole: bool):
    """A control's value as int/float (blank -> the default); ValueError naming the control when it is not one."""
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise api.LabError("{name} must be a number, got {value!r}.", name=name, value=value) from None
    if not math.isfinite(number):
        raise api.LabError("{name} must be a finite number, got {value!r}.", name=name, value=value)
    if whole:
        if not number.is_integer():
            raise api.LabError("{name} must be a whole number, got {value!r}.", name=name, value=value)
        return int(number)
    return number


def decoding_options(strategy, temperature, top_k, top_p, beam_size, max_new_tokens, seed, iterations,
                     blank_length) -> dict:
    """The decoding controls as keyword arguments of `api.generate`. Sampling settings go only with `sample` and the
    beam size only with `beam`, so a control left over from another strategy never changes the result.

    >>> decoding_options("greedy", 0.7, 40, 0.9, 4, 20, 1, 10, 0)
    {'strategy': 'greedy', 'max_new_tokens': 20, 'seed': 1, 'iterations': 10, 'blank_length': None}
    >>> decoding_options("sample", 0.7, 40, 0.9, 4, 20, 1, 10, 2)["top_k"]
    40
    """
    strategy = strategy or DEFAULTS["strategy"]
    # the controls' names in the reader's language: a refused value's message names the control the reader sees
    options = {"strategy": strategy,
               "max_new_tokens": _number(max_new_tokens, tr("compare.max_new_tokens_label"),
                                         DEFAULTS["max_new_tokens"], whole=True),
               "seed": _number(seed, tr("compare.seed_label"), DEFAULTS["seed"], whole=True),
               "iterations": _number(iterations, tr("compare.iterations_label"), DEFAULTS["iterations"],
                                     whole=True),
               "blank_length": _number(blank_length, tr("compare.name_blank_length"), 0, whole=True) or None}
    if strategy == "sample":
        options.update(temperature=_number(temperature, tr("compare.temperature_label"), DEFAULTS["temperature"],
                                           whole=False),
                       top_k=_number(top_k, "Top-k", DEFAULTS["top_k"], whole=True),
                       top_p=_number(top_p, "Top-p", DEFAULTS["top_p"], whole=False))
    elif strategy == "beam":
        options["beam_size"] = _number(beam_size, tr("compare.beam_size_label"), DEFAULTS["beam_size"], whole=True)
    return options


def run_label(row: dict) -> str:
    """"run_id · family · step N" for the run picker (the word "step" in the reader's language)."""
    return tr("compare.run_choice", run_id=row["run_id"], family=row.get("family") or "?",
              step=f"{int(row.get('step') or 0):,}")


class CompareView:
    """The tab's handlers, bound to the app's run store (the job manager)."""

    def __init__(self, home, jobs=None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)

    # ------------------------------------------------------------------ the run picker
    def run_choices(self) -> list[tuple[str, str]]:
        """The runs that can generate now (`api.runs_with_weights`: finished and stopped runs, running or failed
        ones with a checkpoint), newest first."""
        return [(run_label(row), row["run_id"]) for row in api.runs_with_weights(self.jobs)]

    def refresh(self, current=None):
        """The picker with the runs that have weights now, keeping the chosen ones that still exist; with none
        chosen, the demo zoo's finished runs (`zoo_picks`), so Generate works right after the tab is opened (the
        timer's first pick comes RUNS_REFRESH_S later: a reader who opened the tab and pressed Generate within
        it was told to pick a run)."""
        choices = self.run_choices()
        ids = [value for _, value in choices]
        return gr.update(choices=choices, value=still_listed(current, ids) or self.zoo_picks(ids),
                         info=runs_info(choices))

    def zoo_picks(self, ids: list[str]) -> list[str]:
        """The demo zoo's finished runs among `ids`, in the zoo's order (GPT, GPT-2, BERT, ...), at most MAX_RUNS."""
        zoo = api.zoo_progress(self.jobs, api.DEMO_ZOO)
        return [run.run_id for run in zoo.runs if run.state == "finished" and run.run_id in ids][:MAX_RUNS]

    def refresh_if_changed(self, current=None, auto_picked=None, signature=None):
        """The timer's refresh: (picker, the page's own picks, signature), skipped when the choices are unchanged.
        A selection the page made (or an empty one) follows the demo zoo; one the user changed is left alone."""
        choices = self.run_choices()
        ids = [value for _, value in choices]
        # the runs listed and the language, not their labels' steps: a training run's checkpoints would redraw the
        # picker every tick (its label is drawn again when the tab is opened or Refresh is pressed)
        now = [ids, current_language()]
        if signature is not None and now == signature:
            return gr.skip(), gr.skip(), gr.skip()
        current = [run_id for run_id in (current or []) if run_id in ids]
        auto_picked = list(auto_picked or [])
        picks = self.zoo_picks(ids)
        # the page's own picks: this timer's, or the zoo's first ones (what opening the tab picked, `refresh`)
        page_made = current == [run_id for run_id in auto_picked if run_id in ids] or current == picks[:len(current)]
        if (not current or page_made) and picks:
            current, auto_picked = picks, picks
        info = runs_info(choices)
        return gr.update(choices=choices, value=current, info=info), auto_picked, now

    # ------------------------------------------------------------------ generating
    @staticmethod
    def _run_ids(run_ids) -> list[str]:
        return picked_runs(run_ids, MAX_RUNS, api.Message("generate with"))

    @staticmethod
    def _mode(mode) -> str | None:
        if mode in (None, "", AUTO):
            return AUTO  # api.generate's "auto": a task each family can do from the prompt (api.auto_task)
        if mode not in api.GENERATION_MODES:
            raise api.LabError("Unknown mode {mode!r}: choose {auto} or one of {generation_modes}.",
                               mode=mode, auto=AUTO, generation_modes=', '.join(api.GENERATION_MODES))
        return mode

    def _run_facts(self, run_id: str, rows: dict) -> dict:
        """Family, its title, the step of the weights that load and the latest validation bits per byte of one run
        (for the column's header)."""
        row = rows.get(run_id, {})
        family = row.get("family") or ""
        try:
            title = api.family(family).title if family else run_id
        except ValueError:
            title = family
        try:
            bits = latest_val_bits(api.run_metrics(self.jobs, run_id))
        except ValueError:
            bits = None
        return {"family": family, "title": title, "val_bits_per_byte": bits,
                "step": row.get("weights_step", row.get("step")), "seed": row.get("seed")}

    def generate(self, run_ids, prompt, mode, strategy, temperature, top_k, top_p, beam_size, max_new_tokens, seed,
                 iterations, blank_length, progress=gr.Progress()):
        """One column per run. A run whose family cannot do the mode explains why in its column; a run whose input
        is refused shows the message in its column, unless every run refused it for the same reason (a bad prompt or
        decoding value), which is then the page's error."""
        run_ids = self._run_ids(run_ids)
        if prompt is None or not str(prompt).strip():
            raise api.LabError("Type a prompt first: the prompt is empty. For infilling, mark the blank with [MASK] or "
                               "___; the examples below the answers show one per mode.")
        if len(str(prompt)) > MAX_PROMPT_CHARS:
            raise api.LabError("The prompt is {length:,} characters long: shorten it to at most {limit:,} (about what "
                               "the largest models here read at once).", length=len(str(prompt)),
                               limit=MAX_PROMPT_CHARS)
        mode = self._mode(mode)
        options = decoding_options(strategy, temperature, top_k, top_p, beam_size, max_new_tokens, seed, iterations,
                                   blank_length)
        rows = {row["run_id"]: row for row in api.runs_with_weights(self.jobs)}  # "weights_step": what loads
        columns, details, errors = [], [], []
        for index, run_id in enumerate(run_ids):
            progress(index / len(run_ids), desc=tr("compare.progress_generating", run_id=run_id, index=index + 1,
                                                   total=len(run_ids)))
            facts = self._run_facts(run_id, rows)
            try:
                generation = api.generate(self.jobs.run_dir(run_id), prompt, mode=mode, **options)
            except ValueError as error:  # a library's text (no template) is shown after a word that it is English
                message = api.as_message(api.message_of(error))
            except Exception as error:  # noqa: BLE001 - one broken run must not hide the others' answers
                logger.exception("generation with %s failed", run_id)
                message = api.Message("Something went wrong generating with this run: {error_type}: {error}",
                                      error_type=type(error).__name__, error=str(error))
            else:
                columns.append(generation_column_html(generation, title=facts["title"] or generation.family,
                                                      val_bits_per_byte=facts["val_bits_per_byte"],
                                                      seed=facts["seed"]))
                details.append(self._details(generation, facts))
                continue
            errors.append(message)
            columns.append(error_column_html(run_id, message, title=facts["title"], family=facts["family"],
                                             step=facts["step"], val_bits_per_byte=facts["val_bits_per_byte"],
                                             seed=facts["seed"]))
            details.append({"run_id": run_id, "family": facts["family"], "error": message})
        progress(1.0, desc=tr("compare.progress_done"))
        if errors and len(errors) == len(run_ids) and len(set(errors)) == 1:
            raise refusal(errors[0])
        return grid_html(columns, prompt=str(prompt)), details

    @staticmethod
    def _details(generation, facts: dict) -> dict:
        """The raw generation, as the JSON panel and API clients see it."""
        return {"run_id": generation.run_id, "family": generation.family, "title": facts["title"],
                "mode": generation.mode, "supported": generation.supported, "explanation": generation.explanation,
                "note": generation.note, "prompt": generation.prompt,
                "step": generation.step, "seed": facts["seed"], "val_bits_per_byte": facts["val_bits_per_byte"],
                "text": generation.text,
                "new_text": generation.new_text, "tokens": list(generation.tokens),
                "probs": [round(float(p), 6) for p in generation.probs], "seconds": generation.seconds,
                "ms_per_token": generation.ms_per_token}

    # ------------------------------------------------------------------ controls
    @staticmethod
    def decoding_controls(strategy):
        """Show temperature / top-k / top-p for sampling and the beam size for beam search."""
        sample, beam = strategy == "sample", strategy == "beam"
        return (gr.update(visible=sample), gr.update(visible=sample), gr.update(visible=sample),
                gr.update(visible=beam))


def refusal(message) -> api.LabError:
    """The page's error when every run refused the input for the same reason: the backend's message, which may start
    in lower case, with a capital (`user_errors` shows it in the reader's language)."""
    return api.LabError("{reason:capitalized}", reason=api.as_message(message))


def runs_info(choices) -> str:
    """The run picker's help line, what it lists or how to get a run with weights, as a translation marker that the
    page translates. A string, not the `text()` object: handlers return it, and Gradio's `/call/` route serializes
    their updates with plain `json`."""
    return str(text("compare.runs_info") if choices else text("compare.no_runs_info"))


def mode_label(mode: str):
    """A mode's name in the Mode picker (translated in the page); a mode added later shows its `mode_title`."""
    labels = {"continue": text("compare.mode_continue"), "infill": text("compare.mode_infill"),
              "mask_predict": text("compare.mode_mask_predict"), "translate": text("compare.mode_translate")}
    return labels.get(mode, mode_title(mode))


def strategy_label(strategy: str):
    labels = {"greedy": text("compare.strategy_greedy"), "sample": text("compare.strategy_sample"),
              "beam": text("compare.strategy_beam")}
    return labels[strategy]


def mode_choices() -> list[tuple[object, str]]:
    return [(text("compare.mode_auto"), AUTO)] + [(mode_label(mode), mode) for mode in api.GENERATION_MODES]


def modes_markdown() -> str:
    """Which family does what, as a table from `api.generation_modes` (a family added later appears by itself), its
    header and marks in the reader's language. The page is built before any reader asks, so the table is drawn again
    when the page loads (`/compare_modes_table_on_load`)."""
    rows = []
    for spec in api.families():
        try:
            rows.append((spec.title, list(api.generation_modes(spec.name))))
        except ValueError:
            rows.append((spec.title, []))
    return modes_table_markdown(rows, api.GENERATION_MODES)


def build(home, jobs=None, tab=None) -> TabParts:
    """Lay out the tab. `tab` (the gr.Tab it sits in) refreshes the run picker when it is opened. The page needs
    nothing more from it."""
    view = CompareView(home, jobs)
    choices = view.run_choices()
    gr.Markdown(text("compare.intro"))
    with gr.Row():
        runs = gr.Dropdown(choices, value=[], multiselect=True, max_choices=MAX_RUNS, label=text("compare.runs_label"),
                           scale=4, allow_custom_value=True, info=runs_info(choices), elem_id="compare-runs",
                           min_width=PICKER_MIN_WIDTH)
        refresh = gr.Button(text("compare.refresh_runs"), size="sm", scale=0, min_width=140)
    with gr.Row():
        with gr.Column(scale=3, min_width=360):
            prompt = gr.Textbox(DEFAULT_PROMPT, label=text("compare.prompt_label"), lines=2,
                                elem_id="compare-prompt", info=text("compare.prompt_info"))
            mode = gr.Radio(mode_choices(), value=AUTO, label=text("compare.mode_label"),
                            info=text("compare.mode_info"))
            generate = gr.Button(text("compare.generate"), variant="primary", elem_id="compare-generate")
        with gr.Column(scale=2, min_width=320):
            strategy = gr.Radio([(strategy_label(key), key) for key in STRATEGIES], value=DEFAULTS["strategy"],
                                label=text("compare.decoding_label"), info=text("compare.decoding_info"))
            with gr.Row():
                temperature = gr.Slider(0.05, 2.0, DEFAULTS["temperature"], step=0.05,
                                        label=text("compare.temperature_label"),
                                        info=text("compare.temperature_info"), visible=False,
                                        elem_id="compare-temperature")
                top_k = gr.Slider(0, 100, DEFAULTS["top_k"], step=1, label="Top-k",
                                  info=text("compare.top_k_info"), visible=False)
            with gr.Row():
                top_p = gr.Slider(0.05, 1.0, DEFAULTS["top_p"], step=0.05, label="Top-p",
                                  info=text("compare.top_p_info"), visible=False)
                beam_size = gr.Slider(2, 8, DEFAULTS["beam_size"], step=1, label=text("compare.beam_size_label"),
                                      info=text("compare.beam_size_info"), visible=False)
            with gr.Row():
                max_new_tokens = gr.Slider(1, 200, DEFAULTS["max_new_tokens"], step=1,
                                           label=text("compare.max_new_tokens_label"),
                                           elem_id="compare-max-new")
                seed = gr.Number(DEFAULTS["seed"], precision=0, label=text("compare.seed_label"),
                                 info=text("compare.seed_info"), min_width=120, elem_id="compare-seed")
            with gr.Row():
                iterations = gr.Slider(1, 20, DEFAULTS["iterations"], step=1, label=text("compare.iterations_label"),
                                       info=text("compare.iterations_info"))
                blank_length = gr.Number(DEFAULTS["blank_length"], precision=0,
                                         label=text("compare.blank_length_label"),
                                         info=text("compare.blank_length_info"), min_width=120)
            with gr.Accordion(text("compare.modes_accordion"), open=False):
                gr.Markdown(text("compare.modes_notes"))
                modes_table = gr.Markdown(modes_markdown())
                gr.Markdown(text("compare.modes_footer"))
    # the page's own note, translated; the marker sits inside the HTML (empty_html would escape it)
    output = gr.HTML(f'<div class="cmp-result cmp-empty">{text("compare.empty_output")}</div>',
                     elem_id="compare-output")
    # the examples under the answers: a long table between the button and the answers would push them off screen
    examples = [[example, mode_name] for mode_name in api.GENERATION_MODES
                for example in EXAMPLE_PROMPTS.get(mode_name, [])]
    example_table = gr.Examples(examples, [prompt, mode], label=text("compare.examples_label"),
                                api_name="compare_load_example", examples_per_page=10)
    examples_for_reader = reader_examples(example_table)
    with gr.Accordion(text("compare.raw_accordion"), open=False):
        details = gr.JSON([], label=text("compare.raw_label"))

    inputs = [runs, prompt, mode, strategy, temperature, top_k, top_p, beam_size, max_new_tokens, seed, iterations,
              blank_length]
    handler = user_errors(view.generate)
    generate.click(handler, inputs, [output, details], api_name="compare_generate")
    prompt.submit(handler, inputs, [output, details], api_name="compare_generate_on_submit")
    redrawn_on_language_switch("compare_answers", [output, details],
                               (view.generate, inputs, [generate.click, prompt.submit]))
    strategy.change(view.decoding_controls, strategy, [temperature, top_k, top_p, beam_size],
                    api_name="compare_decoding_controls", show_progress="hidden")
    refresh_runs = user_errors(view.refresh)
    refresh.click(refresh_runs, runs, runs, api_name="compare_runs_list")
    if tab is not None:
        tab.select(refresh_runs, runs, runs, api_name="compare_runs_on_select", show_progress="hidden")
    auto_picked, choices_signature = gr.State([]), gr.State(None)
    # the page is built before any reader: draw what the server writes again, in the reader's language, on load
    gr.on(None, modes_markdown, None, modes_table, api_name="compare_modes_table_on_load", show_progress="hidden",
          queue=False)
    gr.on(None, examples_for_reader, None, example_table.dataset, api_name="compare_examples_on_load",
          show_progress="hidden", queue=False)
    gr.Timer(RUNS_REFRESH_S).tick(view.refresh_if_changed, [runs, auto_picked, choices_signature],
                                  [runs, auto_picked, choices_signature], api_name="compare_runs_refresh",
                                  show_progress="hidden", queue=False)
    return TabParts()

"""The demo zoo on the first tab: the offer on a fresh lab home, then one progress bar for the zoo and one per run.

When the lab home holds no run at all, the panel says so and offers **Train the demo zoo** (`api.DEMO_ZOO`: the
tiny preset, the stories language, the same training FLOPs for every family, GPT and GPT-2 first). The zoo trains on the app's job manager
like any run (lab_models/experiments/zoo.py), so the page stays responsive; a timer redraws the bars every few
seconds, only when something changed, and rests while the zoo is not training. **Stop the zoo** stops it cleanly (the
running model checkpoints); **Continue the demo zoo** goes on where it stopped. The panel stays while the demo zoo
has runs and hides on a home with other runs only. Compare, Understand and the Leaderboard pick the zoo's runs up by
themselves as they finish (their own timers).

Endpoints (every event has an `api_name`, so `gradio_client` can drive the panel):
* `/zoo_panel_on_load` (page load): no input -> (panel, message, progress HTML, start button, stop button, signature).
  `/zoo_refresh` (the timer): the last signature -> the same, then the timer (turned off while the zoo is not
  training); it skips the redraw when nothing changed.
* `/zoo_start` ("Train the demo zoo" / "Continue the demo zoo"): seeds (runs per family, default 1) -> the same
  outputs; `/zoo_stop` ("Stop the zoo"): no input -> the same outputs. A zoo of several seeds shows a row per family
  and seed; its later seeds train after every family's first.

The progress view is written by the server in the reader's language (`app.i18n.language.tr`: states, numbers' names, a
failed run's message through the catalogue of app/i18n/locales/zh/messages/); the message and the buttons are Gradio
i18n markers, translated by the page itself.
"""
from __future__ import annotations

import dataclasses
import html

import gradio as gr

from lab_models import api

from app.display import STATE_COLORS, WAKE_TIMER_JS, rest_when_idle, state_word
from app.errors import user_errors
from app.i18n.language import marker, text, tr
from app.inputs import whole_number
from app.i18n.messages import translate
from app.tab_parts import PageLoad, TabParts

REFRESH_S = 2.0
# The panel's message and button texts are Gradio i18n markers (app/i18n/locales/*/zoo.json): the page shows them in the
# reader's language, API clients get the marker (its key names the state). How many runs have finished is in the
# progress view's head, right under the message.
OFFER = marker("zoo.offer")  # "**This lab home has no runs yet.** Train the demo zoo: ..."
TRAINING = marker("zoo.training")  # "**Training the demo zoo.** ..."
STOPPED = marker("zoo.stopped")  # "**The demo zoo is stopped.** ..."
TRAINED = marker("zoo.trained")  # "**The demo zoo is trained**: one tiny model per family. ..."
START_LABEL = marker("zoo.start")  # "Train the demo zoo"
CONTINUE_LABEL = marker("zoo.continue")  # "Continue the demo zoo"
RUNS_FINISHED = marker("zoo.runs_finished")  # "runs finished", after "<b>5</b> / 17" in the progress view


def zoo_progress_html(progress) -> str:
    """One bar for the whole zoo (its runs finished, and the share of all its steps done, which the bar draws), then
    one row per run: family, state, bar, step / total, loss, bits per byte."""
    overall = progress.fraction
    head = (f'<div class="train-progress zoo-overall"><div class="train-progress-head">'
            f'<span class="train-state">{html.escape(tr("zoo.zoo_name", name=progress.name))}</span>'
            f"<span><b>{progress.finished}</b> / {len(progress.runs)} {RUNS_FINISHED} · "
            f"{html.escape(tr('zoo.steps_done', percent=f'{overall:.0%}'))}</span></div>"

            f'<div class="train-bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
            f'aria-valuenow="{overall * 100:.0f}"><div class="train-bar-fill" style="width:{overall * 100:.1f}%;'
            f'background:#16a34a"></div></div></div>')
    rows = []
    several_seeds = len({run.seed for run in progress.runs}) > 1
    for run in progress.runs:
        state = run.state
        label = (tr("zoo.state_queued_position", position=run.queue_position) if state == "queued"
                 and run.queue_position else state_word(state))
        color = STATE_COLORS.get(state, "#94a3b8")
        numbers = []
        if run.loss is not None:
            numbers.append(tr("zoo.loss", value=f"{run.loss:.2f}"))
        if run.val_bits_per_byte is not None:
            numbers.append(f"{run.val_bits_per_byte:.2f} bits/byte")
        title = html.escape(translate(run.message)) if state == "failed" else html.escape(run.run_id or "")

        rows.append(
            f'<div class="zoo-run zoo-{html.escape(state.replace(" ", "-"))}" title="{title}">'
            f'<span class="zoo-family">{html.escape(run.title)}'
            f'{html.escape(tr("zoo.seed", seed=run.seed)) if several_seeds else ""}</span>'
            f'<span class="zoo-state" style="color:{color}">{html.escape(label)}</span>'
            f'<div class="train-bar zoo-bar" role="progressbar" aria-valuemin="0" aria-valuemax="{run.total_steps}" '
            f'aria-valuenow="{run.step}"><div class="train-bar-fill" style="width:{run.fraction * 100:.1f}%;'
            f'background:{color}"></div></div>'
            f'<span class="zoo-steps">{run.step:,} / {run.total_steps:,}</span>'
            f'<span class="zoo-numbers">{html.escape(" · ".join(numbers))}</span></div>')
    return f'<div class="zoo-progress" id="zoo-progress">{head}<div class="zoo-runs">{"".join(rows)}</div></div>'


class ZooPanel:
    """The panel's handlers, bound to the app's job manager."""

    def __init__(self, home, jobs):
        self.home = home
        self.jobs = jobs

    def _signature(self, progress, has_runs: bool) -> list:
        return [has_runs] + [[run.run_id, run.state, run.step, run.queue_position] for run in progress.runs]

    def config(self, seeds: int | None = None):
        """The demo zoo with `seeds` seeds, or with as many as it has runs of (a zoo trained with --seeds N)."""
        seeds = api.trained_seeds(self.jobs, api.DEMO_ZOO) if seeds is None else seeds
        return dataclasses.replace(api.DEMO_ZOO, seeds=seeds)

    def tick(self, signature=None):
        """The timer: `view`, then the timer itself, turned off while the zoo is not training (app/display.py's
        rest_when_idle; the start button and opening the tab turn it on again)."""
        progress = api.zoo_progress(self.jobs, self.config())
        return (*self.view(signature, progress), rest_when_idle(progress.active))

    def view(self, signature=None, progress=None):
        """(panel, message, progress, start button, stop button, signature); all skipped when nothing changed."""
        progress = progress if progress is not None else api.zoo_progress(self.jobs, self.config())
        has_runs = api.has_runs(self.jobs)
        now = self._signature(progress, has_runs)
        if signature is not None and now == signature:
            return (gr.skip(),) * 6
        started = any(run.run_id for run in progress.runs)
        visible = started or not has_runs
        total = len(progress.runs)
        if progress.active:
            message, start, stop = TRAINING, None, True
        elif progress.finished == total:
            message, start, stop = TRAINED, None, False
        elif started:
            message, start, stop = STOPPED, CONTINUE_LABEL, False
        else:
            message, start, stop = OFFER, START_LABEL, False
        return (gr.update(visible=visible), message, zoo_progress_html(progress) if started else "",
                gr.update(visible=start is not None, value=start or START_LABEL), gr.update(visible=stop), now)

    def start(self, seeds=1):
        """Queue the demo zoo with `seeds` runs per family (what has finished is skipped; a zoo that has more seeds
        keeps them); then the panel as it stands."""
        seeds = whole_number(seeds, tr("zoo.seeds_label"), 1, 1, api.MAX_ZOO_SEEDS)
        api.start_zoo(self.jobs, self.config(max(seeds, api.trained_seeds(self.jobs, api.DEMO_ZOO))))
        return self.view()

    def stop(self):
        """Stop the demo zoo: the queued runs leave the queue, the running one checkpoints."""
        api.stop_zoo(self.jobs, api.DEMO_ZOO.name)
        return self.view()


def build(home, jobs) -> TabParts:
    """Lay out the panel (hidden until the page loads and says whether it is needed: `/zoo_panel_on_load`)."""
    panel = ZooPanel(home, jobs)
    with gr.Column(visible=False, elem_id="zoo-panel", elem_classes=["zoo-panel"]) as column:
        message = gr.Markdown(OFFER, elem_id="zoo-message")
        with gr.Row():
            start = gr.Button(START_LABEL, variant="primary", elem_id="zoo-start", scale=0, min_width=280)
            seeds = gr.Number(1, precision=0, minimum=1, maximum=api.MAX_ZOO_SEEDS, label=text("zoo.seeds_label"),
                              info=text("zoo.seeds_info"), scale=0, min_width=200, elem_id="zoo-seeds")
            stop = gr.Button(text("zoo.stop"), variant="stop", visible=False, elem_id="zoo-stop", scale=0,
                             min_width=160)
        progress = gr.HTML("", elem_id="zoo-progress-view")
    signature = gr.State(None)
    timer = gr.Timer(REFRESH_S)
    outputs = [column, message, progress, start, stop, signature]
    start.click(user_errors(panel.start), seeds, outputs, api_name="zoo_start").then(
        None, None, timer, js=WAKE_TIMER_JS, api_name="zoo_timer_on_start", show_progress="hidden")
    stop.click(user_errors(panel.stop), None, outputs, api_name="zoo_stop")
    # like the Train tab's ticks, the refresh skips Gradio's queue: it is cheap and mostly a gr.skip()
    timer.tick(panel.tick, signature, [*outputs, timer], api_name="zoo_refresh", show_progress="hidden", queue=False)
    return TabParts(loads=(PageLoad("zoo_panel_on_load", panel.view, None, outputs, show_progress="hidden"),))

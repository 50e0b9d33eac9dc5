"""Scaling tab: train one family at several sizes (a sweep), and see validation bits per byte against parameters and
against training FLOPs on log-log axes with a fitted power law, dense and Switch Transformer on the same axes.

Papers: Kaplan et al. (2020), Scaling Laws for Neural Language Models; Fedus, Zoph, Shazeer (2022), Switch
Transformers. A sweep is one `python -m lab_models sweep` worker queued on the app's job manager (lab_models/experiments/sweep.py
says how it trains, counts and fits); this tab only turns the controls into `api.start_sweep` and draws the sweeps of
the lab home (app/scaling/figures.py).

Endpoints (every event has an `api_name`):
* `/sweep_command` and `/start_sweep`: (family, sizes, steps, preset, switch, n_experts, capacity_factor,
  expert_every, max_minutes, device, seed, budget_flops, budget_minutes) -> the equivalent command / the new sweep's
  id (then picked). A budget above 0 (training FLOPs or minutes per run) replaces the steps; 0 = none.
* `/stop_sweep`: the picked sweeps -> their status line (each running or queued one is stopped).
* `/show_sweeps`: the picked sweep ids -> (status, figure, fits, points table); `/refresh_sweeps` is the live tick
  (redrawn only when a sweep moved; then the timer, turned off while no picked sweep is queued or running);
  `/list_sweeps` (Refresh): the picker.
* `/sweeps_on_select` (opening the tab, one event): (picked sweeps, the command's controls, picked sweeps) -> the
  picker, the command, then `/show_sweeps`' outputs and their signature (skipped when nothing changed since drawn).

What the server writes (the status lines, the figure, the fits, the table, the command's reason why there is none)
is in the reader's language (app/scaling/figures.py). The tab's first drawing is made when the page is built, before
anyone asked, so opening the tab draws it again (`/sweeps_on_select`).
"""
from __future__ import annotations

import gradio as gr

from lab_models import api

from app.display import PICKER_MIN_WIDTH, WAKE_TIMER_JS, one_event, rest_when_idle
from app.errors import user_errors
from app.i18n.language import current_language, text, tr
from app.i18n.messages import translate
from app.inputs import budget_number
from app.inputs import picked as picked_names
from app.scaling.figures import TABLE_COLUMNS, fits_markdown, points_table, scaling_figure, status_html, sweep_label
from app.tab_parts import TabParts

DEFAULT_FAMILY = "gpt"
DEFAULT_SIZES = "32x1,48x1,64x2,96x2,128x2"  # about ten minutes for 300 steps each on two CPU cores, dense + Switch
DEFAULT_STEPS = 300
DEFAULT_MAX_MINUTES = 10
REFRESH_S = 3.0
MAX_PICKED = 6


class ScalingView:
    def __init__(self, jobs):
        self.jobs = jobs

    def _kwargs(self, family, sizes, steps, preset, switch, n_experts, capacity_factor, expert_every, max_minutes,
                device, seed, budget_flops=0, budget_minutes=0) -> dict:
        if not family:
            raise api.LabError("Choose a family to sweep.")
        # a budget replaces the steps (the steps box keeps its number for when the budget is cleared)
        budgets = {"budget_flops": budget_number(budget_flops, tr("scaling.budget_flops")),
                   "budget_minutes": budget_number(budget_minutes, tr("scaling.budget_minutes"))}
        budgets = {name: value for name, value in budgets.items() if value is not None}
        return {"family": family, "sizes": sizes or "", "steps": None if budgets else int(steps or 0),
                **budgets, "preset": preset or "tiny",
                "switch": bool(switch), "n_experts": int(n_experts or 8),
                "capacity_factor": float(capacity_factor or 0),
                "expert_every": int(expert_every or 1), "max_minutes": float(max_minutes) if max_minutes else None,
                "device": device or "auto", "seed": int(seed or 0)}

    def command(self, *controls) -> str:
        try:
            kwargs = self._kwargs(*controls)
            return api.sweep_command(self.jobs, kwargs.pop("family"), kwargs.pop("sizes"), **kwargs)
        except ValueError as error:
            return f"# {' '.join(translate(error).split())}"

    def start(self, *controls):
        kwargs = self._kwargs(*controls)
        sweep_id = api.start_sweep(self.jobs, kwargs.pop("family"), kwargs.pop("sizes"), **kwargs)
        return self.picker([sweep_id])

    def stop(self, picked):
        sweeps = {sweep["sweep_id"]: sweep for sweep in api.list_sweeps(self.jobs)}
        active = [s for s in _ids(picked) if (sweeps.get(s, {}).get("status") or {}).get("state") in ("queued",
                                                                                                      "running")]
        if not active:
            raise api.LabError("None of the picked sweeps is queued or running: nothing to stop.")
        for sweep_id in active:
            api.stop_sweep(self.jobs, sweep_id)
        return status_html([s for s in api.list_sweeps(self.jobs) if s["sweep_id"] in _ids(picked)])

    def picker(self, picked=None):
        sweeps = api.list_sweeps(self.jobs)
        ids = [s["sweep_id"] for s in sweeps]
        value = [s for s in _ids(picked) if s in ids] or ids[:1]  # nothing picked: the newest sweep
        return gr.update(choices=[(sweep_label(s), s["sweep_id"]) for s in sweeps], value=value)

    def show(self, picked):
        picked = _ids(picked)
        sweeps = [s for s in api.list_sweeps(self.jobs) if s["sweep_id"] in picked]
        frame = api.sweep_points(picked, self.jobs) if picked else None
        table = points_table(frame) if frame is not None else points_table(api.sweep_points([], self.jobs))
        return status_html(sweeps), scaling_figure(sweeps), fits_markdown(sweeps), table, self._signature(sweeps)

    @staticmethod
    def _signature(sweeps) -> list:
        """What `show` draws: each sweep's state, runs done and points, and the language (the switch redraws)."""
        return [[s["sweep_id"], (s.get("status") or {}).get("state"), (s.get("status") or {}).get("step"),
                 len(s.get("points") or [])] for s in sweeps] + [current_language()]

    def show_if_changed(self, picked, signature):
        """Opening the tab: `show`, or five skips when the picked sweeps and the language are as last drawn (their
        figure and table stay as they are)."""
        ids = _ids(picked)
        sweeps = [s for s in api.list_sweeps(self.jobs) if s["sweep_id"] in ids]
        if signature is not None and self._signature(sweeps) == signature:
            return (gr.skip(),) * 5
        return self.show(picked)

    def tick(self, picked, signature):
        """The timer: `show` only when a picked sweep moved, then the timer itself, turned off while none of the
        picked sweeps is queued or running (app/display.py's rest_when_idle)."""
        try:
            ids = _ids(picked)
            sweeps = [s for s in api.list_sweeps(self.jobs) if s["sweep_id"] in ids]
        except ValueError:
            return (*(gr.skip(),) * 5, rest_when_idle(False))
        busy = rest_when_idle(any((s.get("status") or {}).get("state") in ("queued", "running") for s in sweeps))
        if self._signature(sweeps) == signature:
            return (*(gr.skip(),) * 5, busy)
        return (*self.show(picked), busy)


def _ids(picked) -> list[str]:
    return picked_names(picked)[:MAX_PICKED]


def build(home, jobs, tab=None) -> TabParts:
    """Lay out the tab. `tab` refreshes the sweep picker when opened. The page needs nothing more from it."""
    view = ScalingView(jobs)
    families = [(spec.title, spec.name) for spec in api.trainable_families() if spec.kind != "rnn"]
    gr.Markdown(text("scaling.intro"))
    with gr.Row():
        with gr.Column(scale=2, min_width=340):
            family = gr.Dropdown(families, value=DEFAULT_FAMILY, label=text("scaling.family"),
                                 elem_id="scaling-family")
            sizes = gr.Textbox(DEFAULT_SIZES, label=text("scaling.sizes"), elem_id="scaling-sizes",
                               info=text("scaling.sizes_info"))
            with gr.Row():
                steps = gr.Number(DEFAULT_STEPS, precision=0, minimum=1, label=text("scaling.steps"))
                preset = gr.Dropdown(list(api.TRAINING_PRESETS), value="tiny", label=text("scaling.preset"),
                                     info=text("scaling.preset_info"))
            with gr.Row():
                max_minutes = gr.Number(DEFAULT_MAX_MINUTES, minimum=0, label=text("scaling.max_minutes"),
                                        info=text("scaling.max_minutes_info"))
                device = gr.Dropdown(list(api.TRAINING_DEVICES), value="auto", label=text("scaling.device"))
                seed = gr.Number(0, precision=0, minimum=0, label=text("scaling.seed"))
            with gr.Row():  # instead of the steps: an iso-FLOP sweep, or the same minutes for every size
                budget_flops = gr.Number(0, minimum=0, label=text("scaling.budget_flops"),
                                         info=text("scaling.budget_flops_info"), elem_id="scaling-budget-flops")
                budget_minutes = gr.Number(0, minimum=0, label=text("scaling.budget_minutes"),
                                           info=text("scaling.budget_minutes_info"), elem_id="scaling-budget-minutes")
            switch = gr.Checkbox(True, label=text("scaling.switch"),
                                 elem_id="scaling-switch")
            with gr.Row():
                defaults = api.SWITCH_DEFAULTS
                n_experts = gr.Number(defaults["n_experts"], precision=0, minimum=1, label=text("scaling.experts"))
                capacity = gr.Number(defaults["capacity_factor"], minimum=0, step=0.05, label=text("scaling.capacity"))
                every = gr.Number(defaults["expert_every"], precision=0, minimum=1, label=text("scaling.every"))
            with gr.Row():
                start = gr.Button(text("scaling.start"), variant="primary", elem_id="scaling-start")
                stop = gr.Button(text("scaling.stop"), variant="stop")
            command = gr.Code("", language="shell", label=text("scaling.command"), lines=2, interactive=False,
                              wrap_lines=True, show_line_numbers=False)
        with gr.Column(scale=3, min_width=440):
            with gr.Row():
                picker = gr.Dropdown([], value=[], multiselect=True, max_choices=MAX_PICKED,
                                     label=text("scaling.picker"),
                                     info=text("scaling.picker_info"), scale=4, allow_custom_value=True,
                                     elem_id="scaling-picker", min_width=PICKER_MIN_WIDTH)
                refresh = gr.Button(text("scaling.refresh"), size="sm", scale=0, min_width=100)
            status = gr.HTML(status_html([]), elem_id="scaling-status")
            plot = gr.Plot(scaling_figure([]), label=text("scaling.plot"), elem_id="scaling-plot")
            fits = gr.Markdown(fits_markdown([]), elem_id="scaling-fits")
    table = gr.Dataframe(points_table(api.sweep_points([], jobs)), headers=TABLE_COLUMNS, interactive=False,
                         wrap=True, label=text("scaling.points"),
                         elem_id="scaling-points")
    signature = gr.State(None)
    timer = gr.Timer(REFRESH_S)

    controls = [family, sizes, steps, preset, switch, n_experts, capacity, every, max_minutes, device, seed,
                budget_flops, budget_minutes]
    outputs = [status, plot, fits, table, signature]
    gr.on([c.change for c in controls], view.command, controls, command, api_name="sweep_command",
          trigger_mode="always_last", show_progress="hidden")
    # the picker's `input` (a reader's pick), not its `change`: a select or a refresh that sets the picker would
    # otherwise run a second event that draws everything again (the tab's click took 0.7 s instead of 0.4)
    picker.input(user_errors(view.show), picker, outputs, api_name="show_sweeps", show_progress="hidden")
    start.click(user_errors(view.start), controls, picker, api_name="start_sweep").then(
        user_errors(view.show_if_changed), [picker, signature], outputs, api_name="show_sweeps_after_start",
        show_progress="hidden").then(
        None, None, timer, js=WAKE_TIMER_JS, api_name="sweeps_timer_on_start", show_progress="hidden")
    stop.click(user_errors(view.stop), picker, status, api_name="stop_sweep")
    timer.tick(view.tick, [picker, signature], [*outputs, timer], api_name="refresh_sweeps", show_progress="hidden",
               queue=False)
    refresh.click(user_errors(view.picker), picker, picker, api_name="list_sweeps").then(
        user_errors(view.show_if_changed), [picker, signature], outputs, api_name="show_sweeps_after_refresh",
        show_progress="hidden")
    if tab is not None:
        # the sweep picker, the command, and the status, plot, fits and table (drawn in English when the page was
        # built: drawn again in the reader's language), in one event (app/display.py's one_event)
        tab.select(*one_event((user_errors(view.picker), picker, picker), (view.command, controls, command),
                              (user_errors(view.show_if_changed), [picker, signature], outputs)),
                   api_name="sweeps_on_select", show_progress="hidden")
    return TabParts()

"""The Train tab's Switch Transformer section: a toggle with its settings (added to the run's `--model` overrides)
and the live per-expert routing plot of the selected run.

Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers; the layer is lab_models/nn/moe.py. The UI only turns the
controls into `api.switch_settings(...)` (the `model` argument of `api.start_training`) and draws the `switch` entries
of the run's metrics rows (app/train/switch_figures.py). Deviation from the paper's defaults: none (8 experts, capacity
factor 1.25, every other feed-forward, no z-loss unless asked for).

Endpoints: `/switch_visibility` (family -> the section, shown for the Transformer families only), `/show_routing`
(run id -> the routing figure and its signature); the Train tab's live tick (`/refresh_run`) redraws it only when new
routing numbers arrived. The section's five controls are the last inputs of `/start_training` and `/training_command`:
(..., switch_on, n_experts, capacity_factor, expert_every, router_z_weight); left out by an API client, they keep their
defaults (Switch off).
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from lab_models import api

from app.errors import user_errors
from app.i18n.language import current_language, text, tr
from app.train.switch_figures import routing_figure, routing_row_count

SWITCH_NOTE = text("switch.note")


def _is_rnn(family) -> bool:
    try:
        return bool(family) and api.family(family).kind == "rnn"
    except ValueError:
        return False


def switch_model_overrides(family, on, n_experts, capacity_factor, expert_every, router_z_weight) -> dict:
    """The controls as `api.start_training`'s `model` argument: {} when the toggle is off, or for an RNN family
    (whose page hides the section)."""
    if _is_rnn(family):
        return {}
    return api.switch_settings(bool(on), n_experts, capacity_factor, expert_every, router_z_weight)


def switch_visibility(family):
    """The section is for the Transformer families: an LSTM has no feed-forward to replace."""
    return gr.update(visible=not _is_rnn(family))


def build_switch_controls():
    """The toggle and its settings (call inside the tab's left column). Returns a namespace with `group` (to hide for
    the RNN families) and `controls` (the five inputs, in `switch_model_overrides` order)."""
    defaults = api.SWITCH_DEFAULTS
    with gr.Accordion(text("switch.accordion"), open=False, elem_id="train-switch") as group:
        gr.Markdown(SWITCH_NOTE)
        on = gr.Checkbox(False, label=text("switch.on"), elem_id="train-switch-on",
                         info=text("switch.on_info"))
        with gr.Row():
            n_experts = gr.Number(defaults["n_experts"], precision=0, minimum=1, label=text("switch.experts"),
                                  info=text("switch.experts_info"), elem_id="train-switch-experts")
            capacity = gr.Number(defaults["capacity_factor"], minimum=0, step=0.05, label=text("switch.capacity"),
                                 info=text("switch.capacity_info"), elem_id="train-switch-capacity")
        with gr.Row():
            every = gr.Number(defaults["expert_every"], precision=0, minimum=1, label=text("switch.every"),
                              info=text("switch.every_info"), elem_id="train-switch-every")
            z_loss = gr.Number(defaults["router_z_weight"], minimum=0, step=0.001, label=text("switch.z_loss"),
                               info=text("switch.z_loss_info"), elem_id="train-switch-z")
    return SimpleNamespace(group=group, controls=[on, n_experts, capacity, every, z_loss])


class RoutingLive:
    """The routing plot's handlers, bound to the app's run store."""

    def __init__(self, jobs):
        self.jobs = jobs

    def show(self, run_id):
        """The run's per-expert routing figure and its signature (the metrics rows that carry routing numbers)."""
        run_id = str(run_id or "").strip()
        if not run_id:
            return routing_figure([]), None
        rows = api.run_metrics(self.jobs, run_id)
        figure = routing_figure(rows, title=tr("switch.fig_title", run_id=run_id))
        return figure, self._signature(run_id, rows)

    @staticmethod
    def _signature(run_id: str, rows) -> list:
        # after the header's switch the next tick redraws; a dense run keeps its note however many rows it logs
        return [run_id, routing_row_count(rows), current_language()]

    def tick(self, run_id, signature):
        """Redraw only when the run has new routing numbers."""
        try:
            run_id = str(run_id or "").strip()
            if not run_id:
                return self.show(None) if signature is not None else (gr.skip(),) * 2
            if self._signature(run_id, api.run_metrics(self.jobs, run_id)) == signature:
                return (gr.skip(),) * 2
            return self.show(run_id)
        except ValueError:
            return (gr.skip(),) * 2


def build_routing_plot(view: RoutingLive, run):
    """The routing plot (call inside the tab's right column). Returns the plot, its signature state and the
    (handler, inputs, outputs) that draws it for the run in `run`, which the tab runs when a run is picked
    (`/show_routing` on its own); the tab's seldom live tick redraws it through `view.tick` (app/train/tab.py)."""
    with gr.Accordion(text("switch.routing_accordion"), open=True):
        plot = gr.Plot(routing_figure([]), label=text("switch.routing_plot"), elem_id="train-switch-routing")
    signature = gr.State(None)
    return plot, signature, (user_errors(view.show), [run], [plot, signature])

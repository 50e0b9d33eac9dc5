"""Claims tab: the survey's claims, each tested at equal FLOPs over seeds, with a computed verdict and its interval.

Paper: the survey the lab follows (Qiu et al. 2020) and each claim's own paper (lab_models/experiments/claims.py
holds the records, the arms, the metrics and how a verdict is computed; this tab only draws them and queues runs).

What a reader does: pick the preset and the seeds, read the cards (one per claim, with its verdict once run), pick a
claim to see its card in full (arms, budget, metric, the paper's figure, why the lab's setting differs, the verdict
with its interval, the smallest detectable effect and what resolving it would cost), its runs' live bars and its
figure; **Run** queues the picked claim's arm runs on the app's job manager (finished runs are reused, the zoo's
included) and then its scoring job; **Run all** does it for every claim; **Stop** stops the picked claim's runs (or,
with nothing picked, every claim's).

Endpoints (every event has an `api_name`):
* `/claims_on_select` (opening the tab) and `/show_claims` (the picker, the preset, the seeds): (claim, preset, seeds)
  -> (cards, card, progress, figure, table, signature).
* `/start_claim`, `/start_all_claims`: (claim, preset, seeds) -> a status line; then the timer wakes.
* `/stop_claims`: (claim, preset, seeds) -> a status line.
* `/refresh_claims`: the timer: redrawn only when a run or score moved; asleep when nothing of the picked claim is
  queued or running.
"""
from __future__ import annotations

import gradio as gr

from lab_models import api

from app.claims.figures import (cards_html, claim_choice, claim_figure, detail_html, progress_html, table_headers,
                                table_rows)
from app.display import WAKE_TIMER_JS, rest_when_idle
from app.errors import user_errors
from app.i18n.language import current_language, text, tr
from app.tab_parts import TabParts

CLAIM_PRESETS = ("tiny", "small", "medium")
DEFAULT_CLAIM = "electra-per-flop"
REFRESH_S = 3.0
OUTPUTS = 6  # cards, card, progress, figure, table, signature
# the verdicts table fits the page's width: the statement and the paper's figure wrap
TABLE_COLUMN_WIDTHS = ["4%", "26%", "17%", "9%", "7%", "7%", "11%", "8%", "11%"]


def _seeds(value) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = float("nan")
    if not number.is_integer() or not 1 <= number <= api.MAX_ZOO_SEEDS:
        raise api.LabError("Seeds must be a whole number from 1 to {max_seeds}.", max_seeds=api.MAX_ZOO_SEEDS)
    return int(number)


def _preset(value) -> str:
    if value not in CLAIM_PRESETS:
        raise api.LabError("Unknown preset {preset!r} for the claims: choose one of {presets}", preset=value,
                           presets=", ".join(CLAIM_PRESETS))
    return value


class ClaimsView:
    def __init__(self, jobs):
        self.jobs = jobs

    def setup(self, preset, seeds) -> api.ClaimsSetup:
        return api.ClaimsSetup(preset=_preset(preset), seeds=_seeds(seeds))

    def _state(self, claim_key, preset, seeds):
        setup = self.setup(preset, seeds)
        record = api.claim(claim_key or DEFAULT_CLAIM)
        results = api.claims_results(self.jobs, setup)
        progress = api.claim_progress(self.jobs, record.key, setup)
        jobs = api.claims_score_jobs(self.jobs)
        return setup, record, results, progress, jobs

    @staticmethod
    def _signature(record, results, progress, jobs) -> list:
        runs = [[run.run_id, run.state, run.step] for arm_runs in progress.values() for run in arm_runs]
        verdicts = [[result.claim.key, result.verdict.word if result.verdict else None,
                     [list(arm.values) for arm in result.arms]] for result in results]
        scoring = [[job["job_id"], job["state"], job["step"]] for job in jobs if record.key in job["claims"]]
        return [record.key, runs, verdicts, scoring, current_language()]

    def show(self, claim_key, preset, seeds):
        """(cards, the picked claim's card, its progress, its figure, the verdicts table, signature)."""
        setup, record, results, progress, jobs = self._state(claim_key, preset, seeds)
        return self._draw(setup, record, results, progress, jobs)

    def _draw(self, setup, record, results, progress, jobs):
        result = next(result for result in results if result.claim.key == record.key)
        curves = api.claim_curves(self.jobs, record.key, setup)
        table = gr.update(value=table_rows(results), headers=table_headers())
        return (cards_html(results, api.CLAIM_METRICS), detail_html(result, api.CLAIM_METRICS, setup.budget),
                progress_html(record, progress, jobs), claim_figure(result, curves, api.CLAIM_METRICS), table,
                self._signature(record, results, progress, jobs))

    def show_if_changed(self, claim_key, preset, seeds, signature):
        setup, record, results, progress, jobs = self._state(claim_key, preset, seeds)
        if signature is not None and self._signature(record, results, progress, jobs) == signature:
            return (gr.skip(),) * OUTPUTS
        return self._draw(setup, record, results, progress, jobs)

    def opened(self, claim_key, preset, seeds, signature):
        """Opening the tab: the picker's claims in the reader's language and `show_if_changed` (the page itself turns
        the tab's timer on while the tab is shown: app/display.py `follow_tabs`)."""
        picker = gr.update(choices=[claim_choice(record) for record in api.claim_records()],
                           value=api.claim(claim_key or DEFAULT_CLAIM).key)
        return (picker, *self.show_if_changed(claim_key, preset, seeds, signature), rest_when_idle(True))

    def tick(self, claim_key, preset, seeds, signature):
        """The timer: redraw only when something moved; asleep once nothing of the claim is queued or running."""
        try:
            setup, record, results, progress, jobs = self._state(claim_key, preset, seeds)
        except ValueError:
            return (*(gr.skip(),) * OUTPUTS, rest_when_idle(False))
        busy = any(run.state in ("queued", "running") for arm_runs in progress.values() for run in arm_runs) or any(
            job["state"] in ("queued", "running") for job in jobs if record.key in job["claims"])
        if self._signature(record, results, progress, jobs) == signature:
            return (*(gr.skip(),) * OUTPUTS, rest_when_idle(busy))
        return (*self._draw(setup, record, results, progress, jobs), rest_when_idle(busy))

    def start(self, claim_key, preset, seeds) -> str:
        record = api.claim(claim_key or DEFAULT_CLAIM)
        setup = self.setup(preset, seeds)
        runs = [run for arm_runs in api.claim_progress(self.jobs, record.key, setup).values() for run in arm_runs]
        to_train = sum(run.state != "finished" for run in runs)
        job_id = api.start_claims(self.jobs, [record.key], preset=setup.preset, seeds=setup.seeds)
        if not to_train:
            return tr("claims.started_scoring_only", claim=record.number, runs=len(runs), job=job_id)
        return tr("claims.started_one", claim=record.number, runs=to_train, job=job_id)

    def start_all(self, claim_key, preset, seeds) -> str:
        setup = self.setup(preset, seeds)
        job_id = api.start_claims(self.jobs, None, preset=setup.preset, seeds=setup.seeds)
        return tr("claims.started_all", count=len(api.claim_records()), job=job_id)

    def stop(self, claim_key, preset, seeds) -> str:
        setup = self.setup(preset, seeds)
        names = [api.claim(claim_key).key] if claim_key else None
        stopped = api.stop_claims(self.jobs, names, setup)
        if not stopped:
            raise api.LabError("Nothing of these claims is queued or running: nothing to stop.")
        return tr("claims.stopped", count=len(stopped))


def build(home, jobs, tab=None) -> TabParts:
    """Lay out the tab. `tab` draws it again in the reader's language when opened."""
    view = ClaimsView(jobs)
    gr.Markdown(text("claims.intro"))
    with gr.Row():
        preset = gr.Dropdown(list(CLAIM_PRESETS), value="tiny", label=text("claims.preset"),
                             info=text("claims.preset_info"), elem_id="claims-preset", scale=1)
        seeds = gr.Number(3, precision=0, minimum=1, maximum=api.MAX_ZOO_SEEDS, label=text("claims.seeds"),
                          info=text("claims.seeds_info"), elem_id="claims-seeds", scale=1)
        run_all = gr.Button(text("claims.run_all"), variant="secondary", elem_id="claims-run-all", scale=1)
    cards = gr.HTML("", elem_id="claims-cards-view")
    with gr.Row():
        picker = gr.Dropdown([claim_choice(record) for record in api.claim_records()], value=DEFAULT_CLAIM,
                             label=text("claims.picker"), elem_id="claims-picker", scale=4)
        run = gr.Button(text("claims.run"), variant="primary", elem_id="claims-run", scale=1)
        stop = gr.Button(text("claims.stop"), variant="stop", elem_id="claims-stop", scale=1)
    status = gr.Markdown("", elem_id="claims-status")
    with gr.Row():
        with gr.Column(scale=3, min_width=420):
            detail = gr.HTML("", elem_id="claims-detail-view")
        with gr.Column(scale=2, min_width=360):
            progress = gr.HTML("", elem_id="claims-progress-view")
    plot = gr.Plot(label=text("claims.plot"), elem_id="claims-plot")
    table = gr.Dataframe(headers=table_headers(), interactive=False, wrap=True, label=text("claims.table"),
                         elem_id="claims-table", column_widths=TABLE_COLUMN_WIDTHS)
    signature = gr.State(None)
    timer = gr.Timer(REFRESH_S, active=False)

    inputs = [picker, preset, seeds]
    outputs = [cards, detail, progress, plot, table, signature]
    gr.on([picker.input, preset.input, seeds.submit], user_errors(view.show), inputs, outputs,
          api_name="show_claims", show_progress="hidden")
    run.click(user_errors(view.start), inputs, status, api_name="start_claim").then(
        user_errors(view.show_if_changed), [*inputs, signature], outputs, api_name="show_claims_after_start",
        show_progress="hidden").then(None, None, timer, js=WAKE_TIMER_JS, api_name="claims_timer_on_start",
                                     show_progress="hidden")
    run_all.click(user_errors(view.start_all), inputs, status, api_name="start_all_claims").then(
        user_errors(view.show_if_changed), [*inputs, signature], outputs, api_name="show_claims_after_start_all",
        show_progress="hidden").then(None, None, timer, js=WAKE_TIMER_JS, api_name="claims_timer_on_start_all",
                                     show_progress="hidden")
    stop.click(user_errors(view.stop), inputs, status, api_name="stop_claims")
    timer.tick(view.tick, [*inputs, signature], [*outputs, timer], api_name="refresh_claims", show_progress="hidden",
               queue=False)
    if tab is not None:
        # drawn in English when the page was built: drawn again in the reader's language, and the timer woken
        tab.select(user_errors(view.opened), [*inputs, signature], [picker, *outputs, timer], api_name="claims_on_select",
                   show_progress="hidden")
    return TabParts()

"""Train tab: start, watch, stop and resume pretraining runs, and compare their curves.

Every run is a `python -m lab_models train` worker process queued by the app's one `JobManager` (lab_models/training/jobs/manager.py),
so training never blocks the page. The handlers below only translate the controls into `lab_models.api` calls and
draw what the run folders say (app/train/figures.py); the equivalent CLI command is shown so a run can be repeated
headlessly.

Endpoints (every event has an `api_name`, so `gradio_client` can drive the tab):
* `/start_training`, `/training_command`: inputs (family, preset, corpus, tokenizer, steps, seed, device, settings,
  on_1, weight_1, ..., on_4, weight_4). Row k is the k-th objective of the family (`api.family(f).objectives`);
  rows past the family's objectives are ignored. `corpus` "" = the preset's corpus, else a built-in or imported
  corpus name (never a path: `api.corpus_name`), `tokenizer` "" = the family's
  own, `steps` 0 = the preset's (a blank Number reads 0 in the page). `settings` is a table (setting, value,
  default): rows whose value differs from the default are passed on (`api.family_settings`). `/start_training`
  returns the new run id. Then, optional: the Switch Transformer section's (switch_on, n_experts, capacity_factor,
  expert_every, router_z_weight) (app/train/switch_panel.py: `/switch_visibility`, `/show_routing`, `/refresh_routing`),
  the run to start from, and the budgets instead of steps: training FLOPs and minutes (0 = none; at most one of
  steps and the budgets).
* `/show_run`, `/stop_run`, `/resume_run`: input a run id; return the progress bar, the status, the loss curve, the
  log tail and the raw status (a dict with state, step, total_steps, ..., metric_rows).
* `/show_picked_run`: what picking a run in the page runs, one event: `/show_run`, `/show_schedule`,
  `/show_addon_numbers`, `/show_routing` and `/export_visibility` in that order, their outputs one after another
  (each of those stays an endpoint of its own).
* `/show_addon_numbers`: a run id -> the add-on objectives' validation numbers (topic gap, alignment, uniformity; BLEU
  and chrF both ways), for runs with contrastive learning or back-translation.
* `/show_schedule`: a run id -> the learning-rate figure (one line per layer group and the stages shaded for runs
  that record them, ULMFiT's).
* `GET lab/train/progress?run=RUN_ID` (not a Gradio event; app/train/progress_route.py): the progress bar's HTML,
  which the page's own script fetches every 2 s while a queued or running run's bar is shown.
* `/refresh_run`: the tab's live tick (every 10 s while the tab is shown: app/display.py's follow_tabs): (run id,
  the signatures of the run, its learning-rate, add-on and routing figures, the compared runs, the metric, the runs
  table's signature, the Export row's signature)
  -> the selected run's six outputs as `/show_run`, each figure with its new signature, then `/list_runs`' five
  outputs (the comparison plot only when a compared run moved), then the Export button's row, its note and their
  signature (app/train/export_panel.py); every output whose data did not change is skipped.
* `/list_runs`: the runs table (and the choices of the run pickers); `/compare_runs`: (run ids, metric) -> figure.
* `/import_checkpoint_look`, `/import_checkpoint`, `/cached_checkpoints`, `/import_cached_checkpoint`: the "Import a
  checkpoint" section under the runs table (app/train/import_panel.py); the runs table is refreshed after an import
  (`/list_runs_after_import`, `/list_runs_after_cached_import`).
* `/export_visibility`, `/export_run`: the Export button under the run picker (app/train/export_panel.py).
* `/leak_demo`: no input; queues two tiny XLNet runs, with two streams and without (`two_stream=false`), and returns
  (the leaky run's id, both ids to compare, the metric "val_loss"): the leak's validation loss collapses while the
  real one falls slowly. `/leak_demo_visibility`: family -> the button shown for XLNet only.
"""
from __future__ import annotations

import time

import gradio as gr
import pandas as pd

from lab_models import api

from app.display import one_event
from app.errors import readable, user_errors
from app.i18n.language import current_language, marker, text, tr
from app.i18n.messages import translate
from app.inputs import budget_number, picked, still_listed
from app.tab_parts import CorpusPicker, PageLoad, TabParts
from app.train import export_panel, import_panel
from app.train.addon_figures import addon_figure, addon_row_count
from app.train.figures import (COMPARE_METRICS, compare_figure, loss_figure, lr_figure, progress_html, runs_table,
                               status_markdown)
from app.train.progress_route import POLL_SCRIPT, REFRESH_NOW_ID, progress_route
from app.train.switch_figures import routing_figure
from app.train.switch_panel import (RoutingLive, build_routing_plot, build_switch_controls, switch_model_overrides,
                                    switch_visibility)

MAX_OBJECTIVES = 4  # the most any family has (with its add-ons) is 4; rows beyond them are hidden
SWITCH_CONTROLS = 5  # app/train/switch_panel.py's controls, after the objectives' rows (then "start from")
DEFAULT_FAMILY = "bert"
DEFAULT_PRESET = "tiny"
# Only while the tab is shown (app/display.py's follow_tabs), one live tick, seldom: every Gradio event costs the
# browser a walk over the page's components and a copy of its inputs (Gradio 6.31), and a training run on the same CPU
# pays for it. The progress bar moves between ticks without an event (app/train/progress_route.py, every 2 s).
LR_REFRESH_S = 60.0  # the learning-rate plot of a training run, at most this often
# the runs table (and the comparison plot) while only a run's step and losses move: the progress bar and the status
# line show the live step; a redrawn table costs the page's heap what it keeps of each (Gradio 6.31's Dataframe)
TABLE_REFRESH_S = 60.0
LIVE_REFRESH_S = 10.0  # the selected run's status, loss, learning-rate, add-on and routing plots, log and raw status;
# the runs table
LOG_LINES = 20
SETTINGS_HEADERS = ["setting", "value", "default", "what it does"]  # read back by position, whatever the language
SETTINGS_HEADER_KEYS = ("col_setting", "col_value", "col_default", "col_what")
# The family note's kind of model, in the reader's language (train.json's kind_<kind>); another kind shows as it is.
KIND_KEYS = {"encoder": "kind_encoder", "decoder": "kind_decoder", "encoder-decoder": "kind_encoder_decoder",
             "two-stream": "kind_two_stream", "rnn": "kind_rnn"}
# What each objective does, in the page's language (objectives without a text here show their own description).
OBJECTIVE_TITLES = {
    "clm": text("train.objective_clm"),
    "mlm": text("train.objective_mlm"),
    "nsp": text("train.objective_nsp"),
    "sop": text("train.objective_sop"),
    "sbo": text("train.objective_sbo"),
    "rtd": text("train.objective_rtd"),
    "cloze": text("train.objective_cloze"),
    "plm": text("train.objective_plm"),
    "mplm": text("train.objective_mplm"),
    "seq2seq": text("train.objective_seq2seq"),
    "blank_infilling": text("train.objective_blank_infilling"),
    "span_corruption": text("train.objective_span_corruption"),
    "contrastive": text("train.objective_contrastive"),
    "adversarial": text("train.objective_adversarial"),
    "translation": text("train.objective_translation"),
    "back_translation": text("train.objective_back_translation"),
    "forward_lm": text("train.objective_forward_lm"),
    "backward_lm": text("train.objective_backward_lm"),
    "nmt": text("train.objective_nmt"),
    "lm": text("train.objective_lm"),
    "classifier": text("train.objective_classifier"),
    "labelled": text("train.objective_labelled"),
    "unlabelled": text("train.objective_unlabelled"),
}
# The comparison plot's choices, in the page's language (the keys of COMPARE_METRICS, in its order).
METRIC_CHOICES = {
    "loss": text("train.metric_loss"),
    "val_loss": text("train.metric_val_loss"),
    "val_bits_per_byte": text("train.metric_val_bits_per_byte"),
    "val_topic_gap": text("train.metric_val_topic_gap"),
    "val_uniformity": text("train.metric_val_uniformity"),
    "val_bleu_en_zh": text("train.metric_val_bleu_en_zh"),
    "val_bleu_zh_en": text("train.metric_val_bleu_zh_en"),
    "val_chrf_en_zh": text("train.metric_val_chrf_en_zh"),
    "val_chrf_zh_en": text("train.metric_val_chrf_zh_en"),
}
LEAK_DEMO_FAMILY = "xlnet"
LEAK_DEMO_STEPS = 150  # about 30 s per run on 2 CPU cores; the gap is already wide (val loss ~1.3 vs ~4.4)


def objective_info(objective) -> str:
    """The help text under an objective's checkbox: the page's own text for it (as its marker string: a handler's
    update must be plain JSON), else the objective's description."""
    if objective.name in OBJECTIVE_TITLES:
        return str(OBJECTIVE_TITLES[objective.name])
    return translate(objective.description) or objective.name


def weight_label(name: str) -> str:
    """The label of an objective's weight box: "weight of mlm" (权重 mlm)."""
    return text("train.weight_of") + f" {name}"


def setting_text(value) -> str:
    """A default as the settings table shows it: True -> "true", 0.15 -> "0.15", 10 -> "10"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def settings_frame(family: str) -> pd.DataFrame:
    """The family's settings as an editable table: setting, value (starts at the default), default, what it does
    (headers and explanations in the reader's language; `settings_overrides` reads the columns by position)."""
    explained = api.family_settings_help(family)
    rows = [[key, setting_text(value), setting_text(value), translate(explained.get(key, ""))]
            for key, value in api.family_settings(family).items()]
    return pd.DataFrame(rows, columns=[tr(f"train.{key}") for key in SETTINGS_HEADER_KEYS])


TOKENIZER_KIND_KEYS = {"tokenizer_kind_byte_bpe"}  # the other kinds' names are names (BPE, WordPiece, Unigram)


def tokenizer_kind_label(kind: str, label: str) -> str:
    """A tokenizer's name in the choices, in the reader's language ("Byte-level BPE (GPT-2)": 字节级 BPE (GPT-2))."""
    return tr(f"train.tokenizer_kind_{kind}") if f"tokenizer_kind_{kind}" in TOKENIZER_KIND_KEYS else label


def settings_overrides(table) -> dict[str, str]:
    """The rows of the settings table whose value differs from its default, as {setting: value text}.

    >>> table = pd.DataFrame([["mask_rate", "0.2", "0.15", ""], ["nsp", "true", "true", ""]], columns=SETTINGS_HEADERS)
    >>> settings_overrides(table)
    {'mask_rate': '0.2'}
    """
    if table is None:
        return {}
    if isinstance(table, dict):  # {"headers": [...], "data": [[...], ...]} as an API client may send it
        table = pd.DataFrame(table.get("data") or [], columns=(table.get("headers") or None))
    if not isinstance(table, pd.DataFrame):
        table = pd.DataFrame(table)
    overrides = {}
    for row in table.itertuples(index=False):
        cells = ["" if cell is None or (isinstance(cell, float) and pd.isna(cell)) else str(cell).strip()
                 for cell in row]
        if not cells or not cells[0]:
            continue
        key, value = cells[0], (cells[1] if len(cells) > 1 else "")
        default = cells[2] if len(cells) > 2 else None
        if default is not None and value == default:
            continue
        overrides[key] = value
    return overrides


def weight_when_ticked(on: bool, weight):
    """An objective's weight after its box is ticked or unticked: ticking one at weight 0 makes it 1 (on means on).

    >>> weight_when_ticked(True, 0), weight_when_ticked(True, 0.5), weight_when_ticked(False, 0)
    (1.0, 0.5, 0)
    """
    try:
        current = float(weight)
    except (TypeError, ValueError):
        current = 0.0
    return 1.0 if on and current == 0 else weight


def leak_demo_visible(family):
    """The leak demo is shown for XLNet only (its two_stream switch)."""
    return gr.update(visible=family == LEAK_DEMO_FAMILY)


class TrainView:
    """The tab's handlers, bound to the app's job manager."""

    def __init__(self, home, jobs):
        self.home = home
        self.jobs = jobs
        self.specs = {spec.name: spec for spec in api.trainable_families()}
        self.routing = RoutingLive(jobs)  # the Switch routing plot's handlers (app/train/switch_panel.py)
        self.exporter = export_panel.ExportView(home, jobs)  # the Export button's (app/train/export_panel.py)

    # ------------------------------------------------------------------ the request
    def _spec(self, family):
        if not isinstance(family, str) or family not in self.specs:
            raise api.LabError("Unknown or untrainable family {family!r}: choose one of {specs}.",
                               family=family, specs=', '.join(self.specs))
        return self.specs[family]

    def objective_weights(self, family: str, rows) -> dict[str, float]:
        """(on_1, weight_1, on_2, weight_2, ...) -> {objective: weight}; an objective that is off gets weight 0."""
        spec = self._spec(family)
        weights = {}
        for index, objective in enumerate(spec.objectives[:MAX_OBJECTIVES]):
            on = rows[2 * index] if 2 * index < len(rows) else True
            weight = rows[2 * index + 1] if 2 * index + 1 < len(rows) else objective.weight
            if not on:
                if objective.weight > 0:  # an opt-in objective left off (translation, the add-ons) is not passed
                    weights[objective.name] = 0.0
                continue
            if weight is None or weight == "":
                raise api.LabError("Enter a weight for {name} (e.g. {weight:g}), or untick it.",
                                   name=objective.name, weight=objective.weight)
            try:
                weight = float(weight)
            except (TypeError, ValueError):
                raise api.LabError("The weight of {name} must be a number, got {weight!r}.",
                                   name=objective.name, weight=weight) from None
            if not weight >= 0:
                raise api.LabError("The weight of {name} must be 0 or more, got {weight:g}; untick an "
                                   "objective to turn it off.", name=objective.name, weight=weight)
            weights[objective.name] = weight
        if weights and not any(weight > 0 for weight in weights.values()):
            raise api.LabError("Turn on at least one of {title}'s objectives "
                               "({objectives}) with a weight above 0.",
                               title=spec.title, objectives=', '.join(o.name for o in spec.objectives))
        return weights

    def request(self, family, preset, corpus, tokenizer, steps, seed, device, settings, *rows) -> dict:
        """The controls as keyword arguments of `api.start_training` / `api.training_command`. `rows`: the
        objectives' (on, weight) pairs, then the Switch section's controls (app/train/switch_panel.py), then the run
        to start from ("" or absent: from scratch), if given."""
        self._spec(family)
        switch_rows = rows[2 * MAX_OBJECTIVES:2 * MAX_OBJECTIVES + SWITCH_CONTROLS]
        after = list(rows[2 * MAX_OBJECTIVES + SWITCH_CONTROLS:]) + [None] * 3
        start_from, budget_flops, budget_minutes = after[:3]
        steps = float(steps) if steps not in (None, "") else 0.0
        if not steps.is_integer() or not 0 <= steps <= api.MAX_STEPS:
            raise api.LabError("Steps must be a whole number from 1 to {max_steps:,}, or 0 for the preset's; got "
                               "{steps:,.15g}.", max_steps=api.MAX_STEPS, steps=steps)
        budgets = {"budget_flops": budget_number(budget_flops, tr("train.budget_flops")),
                   "budget_minutes": budget_number(budget_minutes, tr("train.budget_minutes"))}
        corpus = api.corpus_name(corpus, home=self.home) if corpus else None  # a name, never a path
        return {"family": family, "preset": preset or DEFAULT_PRESET, "corpus": corpus,
                "tokenizer": tokenizer or None, "steps": int(steps) or None,
                "seed": int(seed or 0), "device": device or "auto",
                "objectives": self.objective_weights(family, rows), "settings": settings_overrides(settings),
                "model": switch_model_overrides(family, *switch_rows) if switch_rows else {},
                "init_from": str(start_from).strip() if start_from and str(start_from).strip() else None,
                **{name: value for name, value in budgets.items() if value is not None}}

    def command(self, *controls) -> str:
        """The equivalent `python -m lab_models train ...` (or why there is none yet, as a shell comment, in the
        reader's language)."""
        try:
            return api.training_command(self.jobs, **self.request(*controls))
        except ValueError as error:
            return f"# {translate(error)}"

    # ------------------------------------------------------------------ controls that follow the family
    def family_defaults(self, family):
        """On a family change: the tokenizer choice, one (checkbox, weight) row per objective, the settings table."""
        spec = self._spec(family)
        own = api.TOKENIZER_KINDS.get(spec.tokenizer, spec.tokenizer)
        tokenizer = gr.update(choices=self.tokenizer_choices(family), value="")
        rows = []
        for index in range(MAX_OBJECTIVES):
            if index < len(spec.objectives):
                objective = spec.objectives[index]
                rows += [gr.update(visible=True, value=objective.weight > 0, label=objective.name,
                                   info=objective_info(objective)),
                         gr.update(visible=True, value=objective.weight, label=weight_label(objective.name))]
            else:
                rows += [gr.update(visible=False, value=False), gr.update(visible=False, value=0)]
        frame = settings_frame(family)
        # written by the server in the reader's language (the page's load event redraws the first one); how to edit
        # the settings is the settings table's label; the paper's reference stays as it is cited
        kind = tr(f"train.{KIND_KEYS[spec.kind]}") if spec.kind in KIND_KEYS else spec.kind
        note = tr("train.family_note", title=spec.title, kind=kind,
                  tokenizer=tokenizer_kind_label(spec.tokenizer, own), paper=spec.paper)
        return [tokenizer, *rows, gr.update(value=frame, visible=bool(len(frame))), note]

    def tokenizer_choices(self, family: str) -> list[tuple[str, str]]:
        spec = self.specs.get(family)
        if spec:
            own = tokenizer_kind_label(spec.tokenizer, api.TOKENIZER_KINDS.get(spec.tokenizer, spec.tokenizer))
            own = own.split(" (")[0]
        else:
            own = tr("train.tokenizer_family_own")
        return ([(tr("train.tokenizer_default_choice", name=own), "")]
                + [(tokenizer_kind_label(kind, label), kind) for kind, label in api.TOKENIZER_KINDS.items()])

    def corpus_choices(self) -> list[tuple[str, str]]:
        return [(marker("train.corpus_preset"), "")] + [(name, name) for name in api.list_corpora(home=self.home)]

    def refresh_corpora(self, current):
        """After a corpus import: the corpus choices again, keeping the current one."""
        choices = self.corpus_choices()
        return gr.update(choices=choices, value=current if current in [v for _, v in choices] else "")

    # ------------------------------------------------------------------ one run: start, stop, resume, watch
    def start(self, *controls):
        """Queue a run; return its id (it becomes the selected run; the run list follows in the next event)."""
        return api.start_training(self.jobs, **self.request(*controls))

    def stop(self, run_id):
        api.stop_training(self.jobs, self._run_id(run_id))
        return self.show(run_id)

    def resume(self, run_id):
        api.resume_training(self.jobs, self._run_id(run_id))
        return self.show(run_id)

    @staticmethod
    def _run_id(run_id) -> str:
        if not run_id or not str(run_id).strip():
            raise api.LabError("Choose a run first: start one, or pick one in the Run list.")
        return str(run_id).strip()

    @staticmethod
    def _status_signature(run_id, summary) -> list:
        """What the progress bar and status line draw: state, step, stopping, queue position, message."""
        return [run_id, summary.get("state"), summary.get("step"), summary.get("stopping"),
                summary.get("queue_position"), summary.get("message")]

    def _watch(self, run_id):
        """(summary, metrics rows, signature) of a run; the signature changes whenever something to draw changes."""
        summary = api.training_status(self.jobs, run_id)
        rows = api.run_metrics(self.jobs, run_id)
        signature = [*self._status_signature(run_id, summary), len(rows),
                     current_language()]  # after the header's switch the next tick draws in the new language
        return summary, rows, signature

    def _progress_and_status(self, summary, log=None):
        """The progress bar and the status line of a run; a failed or dead run's status shows the end of its log."""
        if summary.get("state") not in ("failed", "died"):
            log = ""
        elif log is None:
            log = api.training_log(self.jobs, summary["run_id"], LOG_LINES)
        return progress_html(summary), status_markdown(summary, log)

    def show(self, run_id):
        """The selected run: progress bar, status, loss curve, log tail, raw status (and the new signature)."""
        if not run_id:
            return (progress_html(None), status_markdown(None), loss_figure([]), "", {}, None)
        summary, rows, signature = self._watch(self._run_id(run_id))
        log = api.training_log(self.jobs, summary["run_id"], LOG_LINES)
        details = dict(summary, metric_rows=len(rows))
        return (*self._progress_and_status(summary, log), loss_figure(rows, title=f"{summary['run_id']}"), log,
                details, signature)

    def tick(self, run_id, signature):
        """The live refresh: redraw only when the run's state, step or metrics have changed since the last tick; the
        loss curve only when new metrics rows arrived (a step alone moves the progress bar, not the curve)."""
        try:
            if not run_id:
                return self.show(None) if signature is not None else (gr.skip(),) * 6
            _, _, now = self._watch(self._run_id(run_id))
            if now == signature:
                return (gr.skip(),) * 6
            shown = list(self.show(run_id))
            same_rows = signature is not None and (signature[0], *signature[6:]) == (now[0], *now[6:])
            if same_rows:
                shown[2] = gr.skip()  # the curve: same run, same metrics rows, same language
            return tuple(shown)
        except ValueError:  # e.g. a run folder deleted meanwhile: keep the page as it is
            return (gr.skip(),) * 6

    def schedule(self, run_id):
        """The selected run's learning-rate figure and its signature (the number of metrics rows)."""
        if not run_id:
            return lr_figure([]), None
        rows = api.run_metrics(self.jobs, self._run_id(run_id))
        return (lr_figure(rows, title=tr("train.fig_lr_title", run_id=str(run_id).strip())),
                [str(run_id).strip(), len(rows), current_language(), time.monotonic()])

    def schedule_tick(self, run_id, signature):
        """The live refresh of the learning-rate figure: redrawn when new metrics rows arrived, at most every
        LR_REFRESH_S for the same run once drawn with rows (a schedule moves slowly, and every redrawn plot costs the
        browser); a run's first rows are drawn at the next tick."""
        try:
            if not run_id:
                return self.schedule(None) if signature is not None else (gr.skip(),) * 2
            rows = api.run_metrics(self.jobs, self._run_id(run_id))
            now = [str(run_id).strip(), len(rows), current_language()]
            if signature is not None and now == signature[:3]:
                return (gr.skip(),) * 2
            if (signature is not None and now[0] == signature[0] and now[2] == signature[2] and signature[1] > 0
                    and time.monotonic() - signature[3] < LR_REFRESH_S):
                return (gr.skip(),) * 2  # the same run's schedule, drawn with rows less than LR_REFRESH_S ago
            return self.schedule(run_id)
        except ValueError:
            return (gr.skip(),) * 2

    def addon_numbers(self, run_id):
        """The selected run's add-on validation numbers (contrastive, back-translation) and their signature."""
        if not run_id:
            return addon_figure([]), None
        rows = api.run_metrics(self.jobs, self._run_id(run_id))
        return (addon_figure(rows, title=tr("train.fig_addons_title", run_id=str(run_id).strip())),
                self._addon_signature(run_id, rows))

    @staticmethod
    def _addon_signature(run_id, rows) -> list:
        """What the add-on figure draws: the validation rows that carry add-on numbers (a run without add-ons keeps
        its note, however many rows it logs)."""
        return [str(run_id).strip(), addon_row_count(rows), current_language()]

    def addon_tick(self, run_id, signature):
        """The live refresh of the add-on figure: redrawn only when new add-on numbers arrived."""
        try:
            if not run_id:
                return self.addon_numbers(None) if signature is not None else (gr.skip(),) * 2
            rows = api.run_metrics(self.jobs, self._run_id(run_id))
            if self._addon_signature(run_id, rows) == signature:
                return (gr.skip(),) * 2
            return self.addon_numbers(run_id)
        except ValueError:
            return (gr.skip(),) * 2

    def live(self, run_id, run_signature, schedule_signature, addon_signature, routing_signature, compared=None,
             metric="loss", table_signature=None, export_signature=None):
        """The tab's live refresh (a timer that ticks only while the tab is shown: app/display.py's follow_tabs):
        the selected run (`tick`), its learning-rate, add-on and routing figures (`schedule_tick`, `addon_tick`, the
        routing view's `tick`), the runs table with the comparison plot (`overview`) and the Export button's row
        (app/train/export_panel.py), each output skipped when its data is unchanged. One event instead of six: the
        browser pays for every event it runs, whatever it returns."""
        return (*self.tick(run_id, run_signature), *self.schedule_tick(run_id, schedule_signature),
                *self.addon_tick(run_id, addon_signature), *self.routing.tick(run_id, routing_signature),
                *self.overview(compared, metric, table_signature), *self.exporter.refresh(run_id, export_signature))

    # ------------------------------------------------------------------ all runs
    def leak_demo(self, steps: int = LEAK_DEMO_STEPS):
        """Queue the two-stream leak demonstration: tiny XLNet with two streams, then without. Returns (the leaky run,
        both runs for the comparison plot, the plotted metric)."""
        runs = [api.start_training(self.jobs, family=LEAK_DEMO_FAMILY, preset="tiny", steps=steps,
                                   settings={"two_stream": value}) for value in ("true", "false")]
        return runs[1], runs, "val_loss"

    def run_ids(self) -> list[str]:
        return [row["run_id"] for row in api.list_runs(self.jobs)]

    def overview(self, compared=None, metric="loss", signature=None):
        """The runs table, the run pickers' choices and the comparison plot; skipped when no run has changed, and
        while only steps and losses moved, until the table is TABLE_REFRESH_S old (a new run, a state, a queue
        position or the language redraws at once). `signature`: what the last draw returned ({"rows", "drawn_at"})."""
        rows = api.list_runs(self.jobs)
        language = current_language()  # part of each entry: after the header's switch the table is drawn again
        now = [[row.get("run_id"), row.get("state"), row.get("step"), row.get("queue_position"), row.get("val_loss"),
                language] for row in rows]

        def standing(entries):  # each run's id, state, queue position and the language: not its step or losses
            return [[entry[0], entry[1], entry[3], entry[5]] for entry in entries]

        drawn = signature.get("rows") if isinstance(signature, dict) else None
        if drawn is not None and (now == drawn or (standing(now) == standing(drawn) and
                                                   time.monotonic() - signature["drawn_at"] < TABLE_REFRESH_S)):
            return (gr.skip(),) * 6
        ids = [row["run_id"] for row in rows]
        changed_ids = drawn is None or ids != [entry[0] for entry in drawn]
        picker = gr.update(choices=ids) if changed_ids else gr.skip()
        compared = still_listed(compared, ids)
        starts = gr.update(choices=self.start_choices(rows)) if changed_ids else gr.skip()
        # the comparison plot only when a compared run moved (another run training leaves it as it is)
        before = {entry[0]: entry for entry in drawn or []}
        same_curves = (not changed_ids and drawn is not None
                       and all(before.get(entry[0]) == entry for entry in now if entry[0] in compared))
        return (runs_table(rows), picker, gr.update(choices=ids, value=compared) if changed_ids else gr.skip(),
                gr.skip() if same_curves else self.compare(compared, metric),
                {"rows": now, "drawn_at": time.monotonic()}, starts)

    @staticmethod
    def start_choices(rows) -> list[tuple[str, str]]:
        """The "start from" choices: from scratch, then every run that has weights (finished or stopped, or with a
        checkpoint: an imported checkpoint is finished at step 0)."""
        return [(marker("train.start_from_scratch"), "")] + [
            (f"{row['run_id']} · {row.get('family')}", row["run_id"]) for row in rows
            if row.get("state") in ("finished", "stopped") or (row.get("step") or 0) > 0]

    def on_load(self, compared=None, metric="loss", family=DEFAULT_FAMILY, run_id=None):
        """The page's load event: the runs table, the pickers and the comparison plot (as `overview`), then what the
        server wrote when the page was built, again in the reader's language (the page was built before anyone
        asked): the tokenizer choices, the settings table and the family note of `family`, the empty plots of the
        selected run (loss, learning rate, add-ons, routing) and the import section's files table. It runs again
        after the header's language switch: with a run picked (`run_id`), its plots stay until the live tick redraws
        them in the new language, rather than being blanked first. Last, the picked run's progress bar and status
        line: when the page changes language, Gradio draws again the texts these boxes had when the page was built
        ("no run selected") once the tab has been hidden and shown, so they are drawn here for the picked run."""
        tokenizer, *_, settings, note = self.family_defaults(family)
        picked_run = bool(run_id and str(run_id).strip())
        plots = ((gr.skip(),) * 4 if picked_run else
                 (loss_figure([]), lr_figure([]), addon_figure([]), routing_figure([])))
        try:  # the bar and the status line alone: not the loss figure, which `show` builds too (half the event)
            progress, status = (self._progress_and_status(api.training_status(self.jobs, self._run_id(run_id)))
                                if picked_run else (progress_html(None), status_markdown(None)))
        except ValueError:  # a run id that is not (or no longer) there: its boxes stay as they are
            progress, status = gr.skip(), gr.skip()
        return (*self.overview(compared, metric), tokenizer, settings, note, *plots, import_panel.files_frame([]),
                progress, status)

    def compare(self, run_ids, metric="loss"):
        """Overlay the chosen runs' curves: train loss, validation loss or validation bits per byte."""
        run_ids = picked(run_ids)
        if metric is not None and not isinstance(metric, str):  # a list, a dict: only an API client sends one
            raise gr.Error(readable(tr("train.compare_metric_refused", metrics=", ".join(COMPARE_METRICS),
                                       kind=type(metric).__name__)))
        if metric not in COMPARE_METRICS:
            raise api.LabError("Unknown metric {metric!r}: choose one of {compare_metrics}.",
                               metric=metric, compare_metrics=', '.join(COMPARE_METRICS))
        families = {row["run_id"]: row.get("family") for row in api.list_runs(self.jobs) if row["run_id"] in run_ids}
        return compare_figure({run_id: api.run_metrics(self.jobs, run_id) for run_id in run_ids}, metric,
                              families=families)

    @staticmethod
    def select_from_table(table, event: gr.SelectData):
        """A click on a row of the runs table selects that run."""
        row = event.row_value if event is not None else None
        if not row:
            return gr.skip()
        return row[0]


def build(home, jobs, corpus_choices=None) -> TabParts:
    """Lay out the tab. For the page: its load event (`/list_runs_on_load`: the runs table as it is now, then what
    the server wrote in English), the progress bar's route and script, and the corpus picker, which follows the
    Corpora tab's imports."""
    view = TrainView(home, jobs)
    families = [(spec.title, name) for name, spec in view.specs.items()]
    default_family = DEFAULT_FAMILY if DEFAULT_FAMILY in view.specs else families[0][1]
    spec = view.specs[default_family]
    corpora = [(text("train.corpus_preset"), "")] + [(name, name) for name in
                                                     (corpus_choices or api.list_corpora(home=home))]
    default_settings = settings_frame(default_family)
    default_rows = [value for objective in spec.objectives for value in (objective.weight > 0, objective.weight)]
    *_, default_note = view.family_defaults(default_family)

    live = gr.Timer(LIVE_REFRESH_S)
    gr.Markdown(text("train.intro"))
    with gr.Row():
        with gr.Column(scale=2, min_width=340):
            with gr.Row():
                family = gr.Dropdown(families, value=default_family, label=text("train.family"),
                                     allow_custom_value=True)
                preset = gr.Dropdown(list(api.TRAINING_PRESETS), value=DEFAULT_PRESET, label=text("train.preset"),
                                     info=text("train.preset_info"))
            with gr.Row():
                corpus = gr.Dropdown(corpora, value="", label=text("train.corpus"),
                                     info=text("train.corpus_info"),
                                     allow_custom_value=True)
                tokenizer = gr.Dropdown(view.tokenizer_choices(default_family), value="",
                                        label=text("train.tokenizer"))
            start_from = gr.Dropdown([(text("train.start_from_scratch"), "")], value="", label=text("train.start_from"),
                                     info=text("train.start_from_info"), allow_custom_value=True,
                                     elem_id="train-start-from")
            with gr.Row():
                steps = gr.Number(0, precision=0, label=text("train.steps"), info=text("train.steps_info"))
                seed = gr.Number(0, precision=0, label=text("train.seed"))
                device = gr.Dropdown(list(api.TRAINING_DEVICES), value="auto", label=text("train.device"))
            with gr.Row():  # instead of steps: equal compute, or equal time on this machine
                budget_flops = gr.Number(0, label=text("train.budget_flops"), info=text("train.budget_flops_info"),
                                         elem_id="train-budget-flops")
                budget_minutes = gr.Number(0, label=text("train.budget_minutes"),
                                           info=text("train.budget_minutes_info"), elem_id="train-budget-minutes")
            gr.Markdown(text("train.objectives_note"))
            rows = []
            for index in range(MAX_OBJECTIVES):
                objective = spec.objectives[index] if index < len(spec.objectives) else None
                name = objective.name if objective else "objective"
                with gr.Row(equal_height=True):
                    rows.append(gr.Checkbox(value=objective is not None and objective.weight > 0,
                                            visible=objective is not None, scale=3, label=name,
                                            info=objective_info(objective) if objective else ""))
                    rows.append(gr.Number(objective.weight if objective else 0, visible=objective is not None,
                                          scale=1, min_width=110, label=weight_label(name)))
            family_note = gr.Markdown(default_note)
            with gr.Group(visible=default_family == LEAK_DEMO_FAMILY) as leak_group:
                gr.Markdown(text("train.leak_note") + f" {LEAK_DEMO_STEPS}.")
                leak = gr.Button(text("train.leak_button"), size="sm")
            # widths that keep the "default" header and its lock on one line beside a 400-pixel-wide column
            settings = gr.Dataframe(default_settings, headers=SETTINGS_HEADERS, datatype="str", interactive=True,
                                    static_columns=[0, 2, 3], label=text("train.settings_label"),
                                    column_widths=["32%", "14%", "22%", "32%"], wrap=True,
                                    visible=bool(len(default_settings)), max_height=420)
            switch = build_switch_controls()
            command = gr.Code(view.command(default_family, DEFAULT_PRESET, "", "", 0, 0, "auto", default_settings,
                                           *default_rows),
                              language="shell", label=text("train.command"), lines=2,
                              interactive=False, wrap_lines=True, show_line_numbers=False)
        with gr.Column(scale=3, min_width=440):
            with gr.Row():
                start = gr.Button(text("train.start"), variant="primary", scale=2)
                stop = gr.Button(text("train.stop"), variant="stop", scale=1)
                resume = gr.Button(text("train.resume"), scale=1)
            run = gr.Dropdown(view.run_ids(), value=None, label=text("train.run"), allow_custom_value=True,
                              elem_id="train-run",
                              info=text("train.run_info"))
            # the Export button of an exportable run, under its picker
            exporter = export_panel.build(home, jobs, run, view.exporter)
            progress = gr.HTML(progress_html(None), elem_id="train-progress")
            # clicked by the bar's own script when the run's state changes between two ticks (progress_route.py)
            refresh_now = gr.Button(visible="hidden", elem_id=REFRESH_NOW_ID)
            status = gr.Markdown(status_markdown(None), elem_id="train-status")
            curve = gr.Plot(loss_figure([]), label=text("train.loss_plot"), elem_id="train-curve")
            with gr.Accordion(text("train.lr_accordion"), open=True):
                schedule_plot = gr.Plot(lr_figure([]), label=text("train.lr_plot"), elem_id="train-lr")
            routing_plot, routing_signature, show_routing = build_routing_plot(view.routing, run)
            with gr.Accordion(text("train.addons_accordion"), open=True):
                addon_plot = gr.Plot(addon_figure([]), label=text("train.addons_plot"), elem_id="train-addons")
            with gr.Accordion(text("train.log_accordion"), open=False):
                log = gr.Code("", language=None, lines=8, interactive=False, show_line_numbers=False,
                              label=text("train.log"))
            with gr.Accordion(text("train.raw_status_accordion"), open=False):
                details = gr.JSON({}, label=text("train.raw_status"))
    with gr.Row():
        gr.Markdown(text("train.runs_heading"))
        refresh = gr.Button(text("train.refresh_runs"), size="sm", scale=0, min_width=140)
    table = gr.Dataframe(runs_table([]), interactive=False, label=text("train.runs_table"), elem_id="train-runs",
                         max_height=360)
    with gr.Row():
        compared = gr.Dropdown([], value=[], multiselect=True, allow_custom_value=True,
                               label=text("train.compare_runs"), scale=3)
        metric = gr.Dropdown([(METRIC_CHOICES.get(key, label), key) for key, label in COMPARE_METRICS.items()],
                             value="loss", label=text("train.compare_metric"), scale=1)
    comparison = gr.Plot(compare_figure({}, "loss"), label=text("train.comparison_plot"),
                         elem_id="train-compare")
    importer = import_panel.build(home)  # an import makes a run, as training does: it lands in the table above
    run_signature = gr.State(None)
    schedule_signature = gr.State(None)
    table_signature = gr.State(None)
    addon_signature = gr.State(None)

    controls = [family, preset, corpus, tokenizer, steps, seed, device, settings, *rows, *switch.controls, start_from,
                budget_flops, budget_minutes]
    overview = user_errors(view.overview)  # the timer calls view.overview itself: no error toast every tick
    watched = [progress, status, curve, log, details, run_signature]
    overview_inputs = [compared, metric]
    overview_outputs = [table, run, compared, comparison, table_signature, start_from]

    family.change(user_errors(view.family_defaults), family, [tokenizer, *rows, settings, family_note],
                  api_name="family_defaults").then(view.command, controls, command,
                                                   api_name="training_command_for_family", show_progress="hidden")
    gr.on([control.input for control in controls if control is not family], view.command, controls, command,
          api_name="training_command", trigger_mode="always_last", show_progress="hidden")
    for index in range(MAX_OBJECTIVES):  # ticking an objective that is off by default (weight 0) gives it weight 1
        on, weight = rows[2 * index], rows[2 * index + 1]
        on.input(weight_when_ticked, [on, weight], weight, api_name=f"objective_{index + 1}_ticked",
                 show_progress="hidden").then(view.command, controls, command, show_progress="hidden",
                                              api_name=f"training_command_after_objective_{index + 1}")
    family.change(leak_demo_visible, family, leak_group,
                  api_name="leak_demo_visibility", show_progress="hidden")
    family.change(switch_visibility, family, switch.group, api_name="switch_visibility", show_progress="hidden")
    leak.click(user_errors(view.leak_demo), None, [run, compared, metric], api_name="leak_demo").then(
        overview, overview_inputs, overview_outputs, api_name="list_runs_after_leak_demo", show_progress="hidden")
    start.click(user_errors(view.start), controls, run, api_name="start_training").then(
        overview, overview_inputs, overview_outputs, api_name="list_runs_after_start", show_progress="hidden")
    # Picking a run draws its whole view in one event: Gradio runs the listeners of one trigger one after another,
    # each once the last one's outputs are drawn (five round trips and five draws). Each part stays an endpoint of its
    # own for API clients, on a hidden button that the page never clicks.
    picked_parts = {"show_run": (user_errors(view.show), [run], watched),
                    "show_schedule": (user_errors(view.schedule), [run], [schedule_plot, schedule_signature]),
                    "show_addon_numbers": (user_errors(view.addon_numbers), [run], [addon_plot, addon_signature]),
                    "show_routing": show_routing, "export_visibility": exporter.show}
    run.change(*one_event(*picked_parts.values()), api_name="show_picked_run", show_progress="hidden")
    part_endpoints = gr.Button(visible="hidden", elem_id="train-run-part-endpoints")
    for name, (fn, inputs, outputs) in picked_parts.items():
        part_endpoints.click(fn, inputs, outputs, api_name=name, show_progress="hidden")
    stop.click(user_errors(view.stop), run, watched, api_name="stop_run").then(
        overview, overview_inputs, overview_outputs, api_name="list_runs_after_stop", show_progress="hidden")
    resume.click(user_errors(view.resume), run, watched, api_name="resume_run").then(
        overview, overview_inputs, overview_outputs, api_name="list_runs_after_resume", show_progress="hidden")
    # One tick for the whole tab, skipping Gradio's queue: it is cheap (about a millisecond when nothing changed),
    # while every queued event makes Gradio recompute its analytics over up to 1,000 past events. The timer ticks only
    # while the tab is shown (app/display.py's follow_tabs); between its ticks the page's own script moves the
    # progress bar without a Gradio event (app/train/progress_route.py).
    _, (_, export_signature), export_outputs = exporter.live
    live_inputs = [run, run_signature, schedule_signature, addon_signature, routing_signature, *overview_inputs,
                   table_signature, export_signature]
    live_outputs = [*watched, schedule_plot, schedule_signature, addon_plot, addon_signature, routing_plot,
                    routing_signature, *overview_outputs, *export_outputs]
    # also at once when the bar's script sees the run's state change (it ended, or left the queue): the status line,
    # the table and the Export row said "running" for up to LIVE_REFRESH_S beside a finished bar
    gr.on([live.tick, refresh_now.click], view.live, live_inputs, live_outputs, api_name="refresh_run",
          show_progress="hidden", queue=False)
    refresh.click(overview, overview_inputs, overview_outputs, api_name="list_runs")
    importer.imported.then(overview, overview_inputs, overview_outputs, api_name="list_runs_after_import",
                           show_progress="hidden")
    importer.clicked.then(overview, overview_inputs, overview_outputs, api_name="list_runs_after_cached_import",
                          show_progress="hidden")
    # private: its input is the browser's click (gr.SelectData), which no API client can send (Gradio fails before the
    # handler runs); API clients pick a run by calling /show_run with its id.
    table.select(view.select_from_table, table, run, api_name="select_run_from_table", api_visibility="private")
    # the reader's picks (`input`): whatever sets the pickers itself draws the comparison too (`overview`), so that
    # the plot is not drawn twice (a language switch, the leak demo)
    gr.on([compared.input, metric.input], user_errors(view.compare), overview_inputs, comparison,
          api_name="compare_runs", show_progress="hidden")
    # the page's load event: the overview, then the texts that the server wrote in English when the page was built
    load_outputs = [*overview_outputs, tokenizer, settings, family_note, curve, schedule_plot, addon_plot, routing_plot,
                    importer.files, progress, status]
    return TabParts(loads=(PageLoad("list_runs_on_load", user_errors(view.on_load), [*overview_inputs, family, run],
                                    load_outputs, show_progress="hidden"),),
                    routes=(progress_route(jobs),), head=POLL_SCRIPT,
                    corpus_pickers=(CorpusPicker("train", view.refresh_corpora, corpus),))


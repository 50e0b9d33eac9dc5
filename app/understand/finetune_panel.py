"""The Understand tab's Fine-tune section: fine-tune up to four trained runs on a labelled task, watch them, and
compare them on a leaderboard.

The user picks runs (those with weights), a task (sentiment, topic, entailment, tagging, or an uploaded CSV), the
pooling of the classification head, λ (the weight of the auxiliary LM loss), steps, batch size, learning rate and
seed. **Start** queues one fine-tuning per run on the app's job manager (`api.start_finetune`: a worker process each,
one per device at a time, like the Train tab's runs; each keeps its weights for the Attributions section); **Stop** stops the shown ones that are queued or running. A
`gr.Timer` redraws the progress rows (state, step / total, latest validation accuracy) while anything changes, and
the leaderboard (a table and a bar plot, from `api.finetune_leaderboard`) whenever a result appears.

The recipe follows BERT §4 (a [CLS] head) and GPT §3.2-3.3 (a last-token head, plus λ = 0.5 times the LM loss);
lab_models/inference/finetuning/run.py states the lab's deviations. The handlers only translate the controls into `lab_models.api`
calls; app/understand/finetune_figures.py draws.

Endpoints (every `api_name` starts with `understand_finetune_`):
* `_start`: (runs, task, CSV file, text column, label column, pair column, pooling, λ, steps, batch size, lr, seed,
  shown fine-tunings, adversarial: none / freelb / smart) -> (shown fine-tunings, status markdown, progress HTML);
  then `_leaderboard_after_start`.
* `_stop`: (shown fine-tunings) -> (status markdown, progress HTML).
* `_progress` (the timer): (shown fine-tunings, runs, leaderboard scope, signature) -> (progress HTML, table, plot,
  signature, the timer); parts that did not change are skipped, and the timer is turned off while none of the shown
  fine-tunings is queued or running (`_timer_on_start` turns it on again).
* `_leaderboard`: (runs, scope) -> (table, plot). Scope: "selected runs" or "all runs".
* `_refresh` (its Refresh button): (runs, shown, scope) -> (runs picker, shown picker, progress, table, plot); with
  nothing shown, the active fine-tunings (or the newest few) are shown. `_on_select` (opening the section, one event):
  (runs, shown, scope, runs, task) -> the same five, then the defaults note and the task note.
* `_task`: task -> (description, CSV controls' visibility); `_csv_columns` (a file uploaded): file -> (text, label,
  pair column pickers, CSV summary); `_csv_check`: (file, text, label, pair) -> CSV summary.
* `_defaults`: runs -> what "auto" pooling and an empty λ mean for each; `_shown`: shown fine-tunings -> progress.
* `_runs_list` (the tab's Refresh runs): runs -> the runs picker (opening the tab refreshes it too, in the Understand
  tab's `understand_runs_on_select`).

What the handlers write (status lines, warnings, notes, progress rows, the leaderboard's headers, the figure) is in the
reader's language (app/i18n/language.py `tr`; `lab_models`' sentences through app/i18n/messages.py). The section is
built with the page, before anyone reads it: opening it redraws the progress, leaderboard, figure and both notes in the
reader's language.
"""
from __future__ import annotations

import logging
import math

import gradio as gr

from lab_models import api

from app.display import WAKE_TIMER_JS, one_event, rest_when_idle
from app.errors import user_errors
from app.i18n.language import current_language, marker, text, tr
from app.i18n.messages import translate
from app.inputs import picked, picked_runs, whole_number
from app.understand.finetune_figures import (TABLE_COLUMN_WIDTHS, TASKS, accuracy_figure, csv_summary_markdown,
                                             defaults_markdown, leaderboard_table, progress_html, task_markdown,
                                             task_title)
from app.understand.run_picker import RunPicking, SectionPicker, runs_picker

logger = logging.getLogger(__name__)

MAX_RUNS = 4
CSV_TASK = "csv"
DEFAULT_TASK = "topic"
SCOPES = ("selected runs", "all runs")
REFRESH_S = 1.5  # the progress timer; a tick with nothing new costs a few file reads and skips every output
MAX_SHOWN = 8  # fine-tunings in the progress list; the oldest drop out when Start adds more
DEFAULT_SHOWN = 6  # with nothing picked and nothing running, the progress list shows the newest this many
RECENT_CHOICES = 40  # fine-tunings offered in the "shown" picker
ACTIVE = ("queued", "running")
LIMITS = {"steps": (1, 100_000), "batch_size": (1, 1024), "seed": (0, 2**31 - 1)}
MAX_LR = 1.0
MAX_LM_AUX_WEIGHT = 10.0
TEXT_GUESSES = ("text", "sentence", "review", "content", "body", "premise", "sentence1", "question")
LABEL_GUESSES = ("label", "labels", "class", "category", "target", "sentiment", "y")


def pair_none_choice() -> tuple[str, str]:
    """The second text column's "none" choice: its label a translation marker (a string, for `/call/`'s plain `json`),
    its value the empty string."""
    return (marker("finetune.pair_none"), "")


def scope_choices() -> list[tuple[object, str]]:
    """The leaderboard scope's (label, value) pairs: the values stay the English SCOPES that API clients send."""
    labels = {SCOPES[0]: text("finetune.scope_selected"), SCOPES[1]: text("finetune.scope_all")}
    return [(labels[scope], scope) for scope in SCOPES]


def _whole(value, name: api.Message, key: str, default: int) -> int:
    return whole_number(value, name, default, *LIMITS[key])


def _optional_real(value, name: api.Message, *, low: float, high: float, allow_zero: bool,
                   example: str) -> float | None:
    """A number, or None for an empty box or "auto" (the default)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto", "default")):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise api.LabError("{name} must be a number such as {example} (or empty for the default), got "
                           "{value!r}.", name=name, example=example, value=value) from None
    if not math.isfinite(number) or number < low or number > high or (number == low and not allow_zero):
        bound = (api.Message("from {low:g}", low=low) if allow_zero
                 else api.Message("above {low:g}", low=low))
        raise api.LabError("{name} must be a number {bound} up to {high:g}, such as {example}, got {value!r}.",
                           name=name, bound=bound, high=high, example=example, value=value)
    return number


def _guess(columns: list[str], names: tuple[str, ...], avoid: str | None = None) -> str | None:
    lowered = {column.lower(): column for column in columns}
    for name in names:
        if name in lowered and lowered[name] != avoid:
            return lowered[name]
    return None


def _file_path(file) -> str | None:
    """The path of an uploaded file, whatever form Gradio hands it in (a path, a dict, a FileData)."""
    if file is None:
        return None
    if isinstance(file, dict):
        return file.get("path") or file.get("name")
    return getattr(file, "path", None) or str(file)


class FinetuneView(RunPicking):
    """The section's handlers, bound to the app's job manager (a read-only RunStore can list but not start)."""

    RUNS_INFO = "finetune.runs_info"
    NO_RUNS_INFO = "finetune.no_runs_info"
    PICKS = "finetune"
    MAX_PICKS = MAX_RUNS

    def __init__(self, home, jobs=None):
        self.home = home
        self.jobs = jobs if jobs is not None else api.RunStore(home)
        self.task_specs = {spec.name: spec for spec in api.finetune_tasks()}

    # ------------------------------------------------------------------ choices
    def task_choices(self) -> list[tuple[str, str]]:
        # a built-in task's title as a translation marker: the page is built before anyone reads it
        return ([(text(f"finetune.task_{name}") if name in TASKS else spec.title, name)
                 for name, spec in self.task_specs.items()] + [(text("finetune.upload_csv"), CSV_TASK)])

    def finetune_choices(self) -> list[str]:
        return [row["finetune_id"] for row in api.list_finetunes(self.jobs)[:RECENT_CHOICES]]

    def default_shown(self) -> list[str]:
        """What the progress list shows when nothing is picked: the queued and running fine-tunings, or when none
        is, the newest few."""
        rows = api.list_finetunes(self.jobs)
        active = [row["finetune_id"] for row in rows if row.get("state") in ACTIVE]
        return (active or [row["finetune_id"] for row in rows][:DEFAULT_SHOWN])[:MAX_SHOWN]

    def refresh(self, run_ids=None, shown=None, scope=SCOPES[0]):
        """The Refresh button (and opening the section): runs picker, shown fine-tunings (`default_shown` when none
        is picked), progress, leaderboard table and plot."""
        picker = self.refresh_runs(run_ids)
        shown = self._shown(shown) or self.default_shown()
        table, plot = self.leaderboard(run_ids, scope)
        return (picker, gr.update(choices=self._shown_choices(shown), value=shown),
                progress_html(self.statuses(shown)), table, plot)

    def _shown_choices(self, shown: list[str]) -> list[str]:
        return list(dict.fromkeys([*shown, *self.finetune_choices()]))

    # ------------------------------------------------------------------ task and CSV
    def task_info(self, task):
        """The chosen task's description, and whether the CSV controls show."""
        csv = task == CSV_TASK
        return task_markdown(self.task_specs.get(task), csv=csv), gr.update(visible=csv)

    def csv_columns(self, file):
        """After an upload: the column pickers with the file's header (text and label guessed) and its summary."""
        path = _file_path(file)
        if not path:
            empty = gr.update(choices=[], value=None)
            return empty, empty, gr.update(choices=[pair_none_choice()], value=""), \
                csv_summary_markdown(None)
        try:
            columns = api.csv_columns(path)
        except ValueError as error:
            empty = gr.update(choices=[], value=None)
            return empty, empty, gr.update(choices=[pair_none_choice()], value=""), \
                csv_summary_markdown(None, str(error))
        text = _guess(columns, TEXT_GUESSES) or columns[0]
        label = _guess(columns, LABEL_GUESSES, avoid=text) or next((c for c in reversed(columns) if c != text), text)
        pair_choices = [pair_none_choice()] + [(c, c) for c in columns]
        return (gr.update(choices=columns, value=text), gr.update(choices=columns, value=label),
                gr.update(choices=pair_choices, value=""), self.csv_check(path, text, label, ""))

    def csv_check(self, file, text_column, label_column, pair_column=None) -> str:
        """The CSV task as the worker will read it, or what is wrong with it (never an error toast)."""
        path = _file_path(file)
        if not path:
            return csv_summary_markdown(None)
        try:
            return csv_summary_markdown(api.check_csv_task(path, text_column, label_column, pair_column or None))
        except ValueError as error:
            return csv_summary_markdown(None, str(error))

    def defaults(self, run_ids) -> str:
        """What "auto" pooling and an empty λ mean for each selected run."""
        rows = []
        families = {row["run_id"]: row.get("family") for row in api.list_runs(self.jobs)}
        for run_id in self._run_ids(run_ids, required=False):
            family = families.get(run_id)
            try:
                rows.append({"run_id": run_id, "family": family, "pooling": api.default_pooling(family),
                             "lm_aux_weight": api.default_lm_aux_weight(family)})
            except ValueError:
                rows.append({"run_id": run_id, "family": family, "error": tr("finetune.defaults_unknown_family")})
        return defaults_markdown(rows)

    # ------------------------------------------------------------------ start, stop, watch
    @staticmethod
    def _run_ids(run_ids, required: bool = True) -> list[str]:
        return picked_runs(run_ids, MAX_RUNS, api.Message("fine-tune: runs with weights are listed"),
                           together=api.Message("fine-tune side by side"), required=required)

    def options(self, task, csv_file, text_column, label_column, pair_column, pooling, lm_aux_weight, steps,
                batch_size, lr, seed) -> tuple[str, dict]:
        """(task, start_finetune's options) from the controls; ValueError for anything out of range."""
        if task != CSV_TASK and task not in self.task_specs:
            raise api.LabError("Unknown task {task!r}: choose one of {task_specs}, or Upload CSV.",
                               task=task, task_specs=', '.join(self.task_specs))
        pooling = pooling or "auto"
        if pooling not in api.FINETUNE_POOLINGS:
            raise api.LabError("Unknown pooling {pooling!r}: choose one of {finetune_poolings}.",
                               pooling=pooling, finetune_poolings=', '.join(api.FINETUNE_POOLINGS))
        defaults = api.FINETUNE_DEFAULTS
        options = {
            "pooling": pooling,
            "lm_aux_weight": _optional_real(lm_aux_weight, api.Message("λ (the auxiliary LM weight)"), low=0.0,
                                            high=MAX_LM_AUX_WEIGHT, allow_zero=True, example="0 or 0.5"),
            "steps": _whole(steps, api.Message("Steps"), "steps", defaults["steps"]),
            "batch_size": _whole(batch_size, api.Message("Batch size"), "batch_size", defaults["batch_size"]),
            "lr": _optional_real(lr, api.Message("The learning rate"), low=0.0, high=MAX_LR, allow_zero=False,
                                 example="1e-3"),
            "seed": _whole(seed, api.Message("Seed"), "seed", defaults["seed"]),
        }
        if task == CSV_TASK:
            path = _file_path(csv_file)
            if not path:
                raise api.LabError("Upload a CSV file for the CSV task (or pick a built-in task).")
            pair = pair_column if pair_column and str(pair_column).strip() else None
            api.check_csv_task(path, text_column, label_column, pair)  # a bad CSV fails here, once, for all runs
            options.update(csv_path=str(api.store_task_csv(path, self.jobs.home)), text_column=text_column,
                           label_column=label_column, text_pair_column=pair)
        return task, options

    def start(self, run_ids, task, csv_file, text_column, label_column, pair_column, pooling, lm_aux_weight, steps,
              batch_size, lr, seed, shown=None, adversarial="none"):
        """Queue one fine-tuning per run. Returns (shown picker, status markdown, progress HTML). Settings that are
        wrong for every run raise; a run that cannot be fine-tuned (no weights, say) is skipped with a warning."""
        if not hasattr(self.jobs, "start_command"):
            raise api.LabError("Fine-tuning needs the app's job manager; start the app with `python app.py`.")
        run_ids = self._run_ids(run_ids)
        task, options = self.options(task, csv_file, text_column, label_column, pair_column, pooling,
                                     lm_aux_weight, steps, batch_size, lr, seed)
        adversarial = adversarial or "none"
        if adversarial not in api.FINETUNE_ADVERSARIAL_METHODS:
            raise api.LabError("Unknown adversarial training {adversarial!r}: choose one of "
                               "{finetune_adversarial_methods}.",
                               adversarial=adversarial,
                               finetune_adversarial_methods=', '.join(api.FINETUNE_ADVERSARIAL_METHODS))
        if adversarial != "none":
            options["adversarial"] = adversarial
        started, problems = [], []
        for run_id in run_ids:
            try:
                # the weights are kept: the Attributions section explains a fine-tuned classifier's labels from them
                started.append(api.start_finetune(self.jobs, run_id, task, save_weights=True, **options))
            except ValueError as error:
                problems.append(api.Message("{run}: {error}", run=run_id, error=api.message_of(error)))
        if not started:
            raise api.LabError("Nothing was started. {problems}", problems=api.Joined(problems, " "))
        problems = [translate(problem) for problem in problems]
        for problem in problems:
            gr.Warning(tr("finetune.not_finetuned", problem=problem))
        shown = self._shown([*started, *self._shown(shown)])[:MAX_SHOWN]
        lines = [tr("finetune.status_queued", count=len(started), s="s" if len(started) > 1 else "", task=task,
                    steps=f"{options['steps']:,}") + ", ".join(f"`{finetune_id}`" for finetune_id in started)]
        lines += ["⚠️ " + tr("finetune.not_finetuned", problem=problem) for problem in problems]
        return (gr.update(choices=self._shown_choices(shown), value=shown), "\n\n".join(lines),
                progress_html(self.statuses(shown)))

    def stop(self, shown):
        """Stop the shown fine-tunings that are queued or running. Returns (status markdown, progress HTML)."""
        shown = self._shown(shown)
        statuses = self.statuses(shown)
        active = [s["finetune_id"] for s in statuses if s.get("state") in ACTIVE and not s.get("error")]
        if not active:
            raise api.LabError("None of the shown fine-tunings is queued or running: there is nothing to stop.")
        stopped = []
        for finetune_id in active:
            try:
                api.stop_finetune(self.jobs, finetune_id)
                stopped.append(finetune_id)
            except ValueError as error:  # it finished between the two reads
                logger.info("could not stop %s: %s", finetune_id, error)
        message = (tr("finetune.status_stopped", count=len(stopped), s="s" if len(stopped) != 1 else "")
                   + ", ".join(f"`{finetune_id}`" for finetune_id in stopped))
        return message, progress_html(self.statuses(shown))

    @staticmethod
    def _shown(shown) -> list[str]:
        return picked(shown)

    def statuses(self, shown) -> list[dict]:
        rows = []
        for finetune_id in self._shown(shown):
            try:
                rows.append(api.finetune_status(self.jobs, finetune_id))
            except ValueError as error:
                rows.append({"finetune_id": finetune_id, "error": api.as_message(api.message_of(error))})
        return rows

    def progress(self, shown) -> str:
        """The progress rows of the shown fine-tunings."""
        return progress_html(self.statuses(shown))

    def leaderboard(self, run_ids, scope=SCOPES[0]):
        """The leaderboard table and the accuracy plot, of the selected runs or of all runs."""
        if scope not in SCOPES:
            raise api.LabError("Unknown scope {scope!r}: choose one of {scopes}.",
                               scope=scope, scopes=', '.join(SCOPES))
        runs = self._run_ids(run_ids, required=False) if scope == SCOPES[0] else None
        if scope == SCOPES[0] and not runs:
            frame = api.finetune_leaderboard(self.jobs).iloc[0:0]
        else:
            frame = api.finetune_leaderboard(self.jobs, runs=runs)
        titles = {name: task_title(name, spec.title) for name, spec in self.task_specs.items()}
        return leaderboard_table(frame), accuracy_figure(frame, titles)

    def notes(self, run_ids, task):
        """Opening the section: the defaults note and the task note, in the reader's language."""
        return self.defaults(run_ids), self.task_info(task)[0]

    def tick(self, shown, run_ids, scope, signature):
        """The timer: redraw the progress while anything moves, the leaderboard when a result appears; else skip. Then
        the timer itself, turned off while none of the shown fine-tunings is queued or running (app/display.py's
        rest_when_idle)."""
        try:
            statuses = self.statuses(shown)
            busy = rest_when_idle(any(s.get("state") in ("queued", "running") for s in statuses))
            return (*self._tick(statuses, run_ids, scope, signature), busy)
        except ValueError:  # e.g. a folder removed meanwhile: keep the page as it is
            return (gr.skip(),) * 4 + (rest_when_idle(False),)

    def _tick(self, statuses, run_ids, scope, signature):
        """`tick`'s redraws: (progress, table, plot, signature)."""
        progress = [[s.get("finetune_id"), s.get("state"), s.get("step"), s.get("val_accuracy"),
                     s.get("queue_position"), s.get("stopping"), s.get("error")] for s in statuses]
        results = [[s.get("finetune_id"), bool(s.get("has_result")), s.get("state")] for s in statuses]
        previous = signature if isinstance(signature, dict) else {}
        language = current_language()  # after the header's switch the progress is drawn again in the new one
        same_language = language == previous.get("language", language)
        if progress == previous.get("progress") and results == previous.get("results") and same_language:
            return (gr.skip(),) * 4
        now = {"progress": progress, "results": results, "language": language}
        html_out = (progress_html(statuses) if progress != previous.get("progress") or not same_language
                    else gr.skip())
        if results != previous.get("results") and "results" in previous:
            table, plot = self.leaderboard(run_ids, scope)
        else:  # the first tick only learns where things stand; the leaderboard is drawn by its own events
            table, plot = gr.skip(), gr.skip()
        return html_out, table, plot, now


def build(home, jobs=None, choices=None, tab=None) -> SectionPicker:
    """Lay out the section inside the current container (the Understand tab's "Fine-tune" tab). `choices`: the run
    picker's choices (computed by the tab); `tab`: the gr.Tab it sits in, whose opening refreshes it. Returns its runs
    picker, for the tab's Refresh runs button, its select event and its timer."""
    view = FinetuneView(home, jobs)
    choices = view.run_choices() if choices is None else choices
    shown = view.default_shown()
    task_choices = view.task_choices()
    defaults = api.FINETUNE_DEFAULTS
    initial_runs = view.default_picks()
    table, plot = view.leaderboard(initial_runs)

    gr.Markdown(text("finetune.intro"))
    with gr.Row():
        runs = runs_picker(choices, label=text("finetune.runs_label"), elem_id="understand-finetune-runs",
                           info=FinetuneView.RUNS_INFO, no_runs_info=FinetuneView.NO_RUNS_INFO, max_runs=MAX_RUNS,
                           value=initial_runs, scale=4)
    defaults_note = gr.Markdown(view.defaults(initial_runs), elem_id="understand-finetune-defaults")
    with gr.Row():
        with gr.Column(scale=1, min_width=360):
            task = gr.Radio(task_choices, value=DEFAULT_TASK, label=text("finetune.task_label"),
                            elem_id="understand-finetune-task")
            task_note = gr.Markdown(task_markdown(view.task_specs.get(DEFAULT_TASK)),
                                    elem_id="understand-finetune-task-note")
            with gr.Group(visible=False) as csv_group:
                csv_file = gr.File(label=text("finetune.csv_file_label"),
                                   file_types=[".csv", ".tsv", ".txt"], type="filepath", height=110,
                                   elem_id="understand-finetune-csv")
                with gr.Row():
                    text_column = gr.Dropdown([], value=None, label=text("finetune.text_column"),
                                              allow_custom_value=True)
                    label_column = gr.Dropdown([], value=None, label=text("finetune.label_column"),
                                               allow_custom_value=True)
                    pair_column = gr.Dropdown([pair_none_choice()], value="", allow_custom_value=True,
                                              label=text("finetune.pair_column"),
                                              info=text("finetune.pair_column_info"))
                csv_note = gr.Markdown(csv_summary_markdown(None))
        with gr.Column(scale=1, min_width=360):
            with gr.Row():
                pooling = gr.Dropdown(list(api.FINETUNE_POOLINGS), value=defaults["pooling"],
                                      label=text("finetune.pooling_label"), scale=1, min_width=120,
                                      info=text("finetune.pooling_info"))
                lm_aux_weight = gr.Textbox("", label=text("finetune.lambda_label"), placeholder="auto",
                                           scale=2, info=text("finetune.lambda_info"),
                                           elem_id="understand-finetune-lambda")
            with gr.Row():
                steps = gr.Number(defaults["steps"], precision=0, label=text("finetune.steps_label"), minimum=1,
                                  min_width=90)
                batch_size = gr.Number(defaults["batch_size"], precision=0, label=text("finetune.batch_size_label"),
                                       minimum=1, min_width=90)
                lr = gr.Textbox("", label=text("finetune.lr_label"), placeholder="auto", min_width=110,
                                info=text("finetune.lr_info"))
                seed = gr.Number(defaults["seed"], precision=0, label=text("finetune.seed_label"), minimum=0,
                                 min_width=90)
            adversarial = gr.Radio(list(api.FINETUNE_ADVERSARIAL_METHODS), value="none",
                                   label=text("finetune.adversarial_label"),
                                   info=text("finetune.adversarial_info"), elem_id="understand-finetune-adversarial")
    with gr.Row():
        start = gr.Button(text("finetune.start"), variant="primary", scale=2, elem_id="understand-finetune-start")
        stop = gr.Button(text("finetune.stop"), variant="stop", scale=1, elem_id="understand-finetune-stop")
        refresh = gr.Button(text("finetune.refresh"), scale=1, elem_id="understand-finetune-refresh")
    status = gr.Markdown("", elem_id="understand-finetune-status")
    shown_picker = gr.Dropdown(view._shown_choices(shown), value=shown, multiselect=True, allow_custom_value=True,
                               label=text("finetune.shown_label"), info=text("finetune.shown_info"),
                               elem_id="understand-finetune-shown")
    progress = gr.HTML(progress_html(view.statuses(shown)), elem_id="understand-finetune-progress")
    scope = gr.Radio(scope_choices(), value=SCOPES[0], label=text("finetune.scope_label"),
                     elem_id="understand-finetune-scope")
    plot_out = gr.Plot(plot, label=text("finetune.plot_label"), elem_id="understand-finetune-plot")
    table_out = gr.Dataframe(table, interactive=False, label=text("finetune.table_label"),
                             elem_id="understand-finetune-table", max_height=360, wrap=True,
                             column_widths=TABLE_COLUMN_WIDTHS)
    signature = gr.State(None)
    timer = gr.Timer(REFRESH_S)

    # ---------------------------------------------------------------- events
    controls = [runs, task, csv_file, text_column, label_column, pair_column, pooling, lm_aux_weight, steps,
                batch_size, lr, seed, shown_picker, adversarial]
    leaderboard = user_errors(view.leaderboard)
    started = start.click(user_errors(view.start), controls, [shown_picker, status, progress],
                          api_name="understand_finetune_start")
    started.then(leaderboard, [runs, scope], [table_out, plot_out],
                 api_name="understand_finetune_leaderboard_after_start", show_progress="hidden")
    started.then(None, None, timer, js=WAKE_TIMER_JS, api_name="understand_finetune_timer_on_start",
                 show_progress="hidden")
    stop.click(user_errors(view.stop), shown_picker, [status, progress], api_name="understand_finetune_stop")
    # Like the Train tab's live view, the ticks skip Gradio's queue: they are cheap and mostly skip every output.
    timer.tick(view.tick, [shown_picker, runs, scope, signature], [progress, table_out, plot_out, signature, timer],
               api_name="understand_finetune_progress", show_progress="hidden", queue=False)
    # the reader's picks (`input`): Gradio 6.31's frontend fired `change` on this multiselect again and again while
    # the section was shown (each answer starting the next: about four events a second, measured); the handlers that
    # set the picker themselves draw the leaderboard and the notes with it (Refresh, opening the section)
    gr.on([runs.input, scope.change], leaderboard, [runs, scope], [table_out, plot_out],
          api_name="understand_finetune_leaderboard", show_progress="hidden")
    runs.input(user_errors(view.defaults), runs, defaults_note, api_name="understand_finetune_defaults",
               show_progress="hidden")
    shown_picker.input(user_errors(view.progress), shown_picker, progress, api_name="understand_finetune_shown",
                       show_progress="hidden")  # Start, Refresh and the section's opening draw the rows themselves
    refresh_all = user_errors(view.refresh)
    refresh_outputs = [runs, shown_picker, progress, table_out, plot_out]
    refresh.click(refresh_all, [runs, shown_picker, scope], refresh_outputs,
                  api_name="understand_finetune_refresh").then(
        user_errors(view.defaults), runs, defaults_note, api_name="understand_finetune_defaults_after_refresh",
        show_progress="hidden")
    if tab is not None:  # the page was built once, at start-up: opening the section shows the lab home as it is now
        # and its notes in the reader's language, in one event (app/display.py's one_event)
        tab.select(*one_event((refresh_all, [runs, shown_picker, scope], refresh_outputs),
                              (user_errors(view.notes), [runs, task], [defaults_note, task_note])),
                   api_name="understand_finetune_on_select", show_progress="hidden")
    task.change(user_errors(view.task_info), task, [task_note, csv_group], api_name="understand_finetune_task",
                show_progress="hidden")
    csv_file.change(user_errors(view.csv_columns), csv_file, [text_column, label_column, pair_column, csv_note],
                    api_name="understand_finetune_csv_columns")
    gr.on([text_column.input, label_column.input, pair_column.input], user_errors(view.csv_check),
          [csv_file, text_column, label_column, pair_column], csv_note, api_name="understand_finetune_csv_check",
          show_progress="hidden")
    return SectionPicker.of(view, runs)

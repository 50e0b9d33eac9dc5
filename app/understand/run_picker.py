"""The run pickers of the Understand tab and its sections (fill-mask, embeddings, attention, probing, logit lens,
attributions, sentence similarity, fine-tuning): which runs they list, the picker as the page is built with it, and
what the Refresh runs button (and opening the tab) keeps of the reader's picks.

Every picker lists the runs that have weights to load now (`api.runs_with_weights`: finished and stopped runs, and
running or failed ones with a checkpoint), newest first, each entry "run · family · step N" with N the step of those
weights (`run_label`). Its help line says what it lists or, while no run has weights, how to get one; a refresh
returns it as a translation marker, a string, since Gradio's `/call/` route serializes updates with plain `json`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from lab_models import api

from app.errors import user_errors
from app.i18n.language import marker, text
from app.inputs import still_listed
from app.understand.figures import run_label


def run_choices(jobs) -> list[tuple[str, str]]:
    """(entry, run id) of every run with weights, newest first."""
    return [(run_label(row), row["run_id"]) for row in api.runs_with_weights(jobs)]


def runs_picker(choices, *, label, elem_id: str, info: str, no_runs_info: str, max_runs: int | None = None,
                first: int | None = None, value=None, scale: int | None = None) -> gr.Dropdown:
    """The picker of `choices`: a multiselect of up to `max_runs`, the first `first` (default `max_runs`) picked, or
    without `max_runs` one run, the newest; `value` picks otherwise. `info` and `no_runs_info` are the keys of its
    help line with runs and without. Any value is accepted (`allow_custom_value`): an API client may name any run,
    and the handler says when it is not there."""
    multiselect = max_runs is not None
    if value is None:
        value = ([run_id for _, run_id in choices[:first or max_runs]] if multiselect
                 else (choices[0][1] if choices else None))
    return gr.Dropdown(choices, value=value, multiselect=multiselect, max_choices=max_runs, label=label,
                       info=text(info if choices else no_runs_info), allow_custom_value=True, scale=scale,
                       elem_id=elem_id)


class RunPicking:
    """The runs picker of a section's view (the view has `jobs`): `run_choices`, `default_picks` and `refresh_runs`,
    the handler of the Refresh runs button, the timer and opening the tab. RUNS_INFO and NO_RUNS_INFO are the keys of
    its help line; PICKS names the view for `api.view_picks` (what the picker holds until the reader picks) and
    MAX_PICKS is the picker's limit."""

    RUNS_INFO = "probing.runs_info"
    NO_RUNS_INFO = "probing.no_runs_info"
    PICKS = "probing"
    MAX_PICKS = 4

    def run_choices(self) -> list[tuple[str, str]]:
        return run_choices(self.jobs)

    def default_picks(self) -> list[str]:
        """The demo zoo's runs that make this view's point, else the newest runs with weights."""
        return api.view_picks(self.jobs, self.PICKS, self.MAX_PICKS)

    def runs_info(self, choices) -> str:
        return marker(self.RUNS_INFO if choices else self.NO_RUNS_INFO)

    def refresh_runs(self, run_ids=None):
        """The picker with the runs that have weights now, keeping the picked ones that still have, or when none is
        left, `default_picks`; a value that is not a list of names (only an API client sends one) keeps none, so that
        the timer and the tab's opening never fail on it."""
        choices = self.run_choices()
        try:
            kept = still_listed(run_ids, [value for _, value in choices])
        except ValueError:
            kept = []
        return gr.update(choices=choices, value=kept or self.default_picks(), info=self.runs_info(choices))


@dataclass(frozen=True)
class SectionPicker:
    """A section's runs picker as the Understand tab wires it: its Refresh runs button, the tab's opening and the
    timer redraw `picker` with `refresh(current)`."""

    refresh: Callable
    picker: gr.Dropdown

    @classmethod
    def of(cls, view: RunPicking, picker: gr.Dropdown) -> SectionPicker:
        return cls(user_errors(view.refresh_runs), picker)

    @property
    def event(self) -> tuple:
        """(fn, inputs, outputs) of an event that redraws the picker."""
        return self.refresh, self.picker, self.picker

"""What a tab hands the page: one shape for every tab's `build()`.

`app/main.py` `build_app` lays the tabs out and then wires, for all of them alike, what reaches beyond one tab:
- the page-load events (`PageLoad`), registered with `demo.load` in the order of the tabs; the language switch
  redraws those named `<name>_on_load` again (`redraw_after_language_switch`, which finds them by name);
- the routes served beside Gradio's own and the scripts of the page's <head> that use them (the Train tab's progress
  bar: app/train/progress_route.py), given to Gradio by `launch_kwargs`;
- the corpus pickers that follow the Corpora tab (`CorpusPicker`), redrawn after each event of `corpus_changes`
  (an import, a link).

Everything else a tab builds (its handlers, its own events) stays inside the tab: the page needs none of it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PageLoad:
    """An event the page runs when it loads: `fn(*inputs) -> outputs`, callable as `/<api_name>`."""

    api_name: str
    fn: Callable
    inputs: Sequence[Any] | None
    outputs: Sequence[Any]
    show_progress: str = "full"  # Gradio's own default: the outputs show their loading state


@dataclass(frozen=True)
class CorpusPicker:
    """A corpus picker of a tab that follows the Corpora tab: `refresh(current)` gives its update (the corpora of the
    lab home now). Its redraw after an import is `/refresh_<name>_corpora` (after a link: `..._after_link`)."""

    name: str
    refresh: Callable
    picker: Any


@dataclass(frozen=True)
class TabParts:
    """What the page needs from one tab (or panel). `corpus_changes`: (api-name suffix, event) pairs, the events
    after which every tab's `corpus_pickers` are redrawn ("" for the import, "_after_link" for the link)."""

    loads: tuple[PageLoad, ...] = ()
    routes: tuple[Any, ...] = ()
    head: str = ""
    corpus_pickers: tuple[CorpusPicker, ...] = ()
    corpus_changes: tuple[tuple[str, Any], ...] = ()

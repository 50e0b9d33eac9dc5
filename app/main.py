"""The page: a header with the compute device, the precision training runs in and why, and the language switch, then
one tab per view that works.

`build_app(home)` returns the `gr.Blocks`; `app.py` launches it. Tabs: Mask Explorer (drawn on load; above it the
demo zoo panel, app/explorer/zoo_panel.py, shown on a lab home without runs), Train, Scaling (size sweeps,
app/scaling/tab.py), Compare, Understand, Leaderboard, Claims, Tokenizer Lab, Corpora, each built by its package's `tab`
module. Every tab hands the page the same shape (app/tab_parts.py `TabParts`): its page-load events, registered here
(those that draw what the server writes run again after the language switch), its routes and scripts, and the
corpus pickers that follow the Corpora tab's imports. The app's one training `JobManager` is created here and kept as
`demo.lab_jobs`; whoever launches the app closes it at exit (`demo.lab_jobs.close()` stops the running trainers
cleanly, with a checkpoint).

How the page is served is here too: `launch_kwargs` (styling, the lab's routes, Gradio's run history off, the
middleware that changes Gradio 6.31's frontend: app/gradio_fixes.py) and `configure_queue` (Gradio's idle polling
slowed).
"""
from __future__ import annotations

import html
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from lab_models import api

from app.claims import tab as claims_tab
from app.compare import tab as compare_tab
from app.corpora import tab as corpora_tab
from app.display import LANGUAGE_SWITCH_SUFFIX, element_id, follow_tabs, tabs_holding
from app.errors import keep_outputs_on_failure
from app.explorer import tab as explorer_tab, zoo_panel
from app.gradio_fixes import GradioFixesMiddleware
from app.i18n.language import (LANGUAGE_ON_LOAD_JS, LANGUAGE_SWITCH_JS, LANGUAGES, english, lab_i18n,
                               redraw_shown_tab_js, redraw_stale_tab_js, relabel_tabs_js, text, tr)
from app.i18n.messages import translate
from app.leaderboard import tab as leaderboard_tab
from app.scaling import tab as scaling_tab
from app.tab_parts import TabParts
from app.tokenizer_lab import tab as tokenizer_tab
from app.train import tab as train_tab
from app.understand import tab as understand_tab

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TITLE = "Pretraining Lab"


def precision_text(precision: dict, translate=tr) -> str:
    """What `precision=auto` trains in here and why (`api.training_precision`), in the reader's language: "bf16
    autocast for models from 4 MFLOPs per token, the small preset up (this CPU computes bf16 natively: AVX-512 BF16,
    AMX-BF16; a bf16 matmul runs 2.7× fp32); fp32 for smaller ones"."""
    why = precision.get("why") or ""
    key = f"header.precision_{why}" if why in PRECISION_TEXTS else "header.precision_plain"
    speedup = precision.get("bf16_speedup")
    return translate(key, precision=precision.get("precision") or "fp32", features=precision.get("features") or "",
                     speedup=f"{speedup:.1f}" if speedup else "?",
                     mflops=f"{(precision.get('min_bf16_flops_per_token') or 0) / 1e6:g}")


PRECISION_TEXTS = ("native_bf16", "bf16_not_faster", "no_native_bf16", "cuda", "no_bf16_device")


def header_html(device_line: str | None = None, home=None) -> str:
    """The title, the compute device and the precision training runs in (`device_line`, HTML). Built with the page
    (the frontend translates the marker), then written again in the reader's language when the page loads
    (`/header_on_load`), the device's name and the precision's reason included. The precision's title (hover) says
    the peak MFU divides by and how it was obtained."""
    precision = api.training_precision(home)
    if device_line is None:
        english_line = precision_text(precision, lambda key, **fields: english(key).format(**fields))
        device_line = (f'{text("header.device")}: {html.escape(precision["device"])} · '
                       f'{html.escape(english("header.precision"))}: {html.escape(english_line)}')
    title = html.escape(translate(precision.get("peak_source") or ""), quote=True)
    return (f'<div class="lab-header"><h1>{TITLE}</h1><span class="lab-device" id="lab-device" '
            f'title="{title}">{device_line}</span></div>')


def header_html_for_reader(home=None) -> str:
    precision = api.training_precision(home)
    device = tr("header.device_line", label=tr("header.device"), device=translate(precision["device"]))
    line = tr("header.precision_line", device=device, label=tr("header.precision"),
              precision=precision_text(precision))
    return header_html(html.escape(line), home)


def build_header(home=None):
    """The title with the compute device and training precision, the language switch (English / 中文) and the
    tagline."""
    with gr.Row(equal_height=True):
        header = gr.HTML(header_html(home=home), elem_id="lab-header")
        language = gr.Radio(list(LANGUAGES.values()), value=LANGUAGES["en"], label=text("header.language"),
                            elem_id="lab-language", scale=0, min_width=250)
    gr.Markdown(text("header.tagline"))
    # The switch runs in the browser (the frontend translates the static texts) and sets the cookie that the server
    # reads for what it writes itself; build_app redraws the first tab after it.
    switched = language.change(None, language, language, js=LANGUAGE_SWITCH_JS, api_name="switch_language")
    gr.on(None, lambda: header_html_for_reader(home), None, header, api_name="header_on_load", show_progress="hidden")
    return language, switched


def redraw_after_language_switch(demo: gr.Blocks, switched) -> None:
    """What the server drew in the old language is drawn again in the new one, tab by tab and only when seen.

    The redrawing events are the page-load events that draw what the server writes (`<name>_on_load`: the Mask
    Explorer, the runs and settings tables, the empty plots, the modes table, ...) and every tab's select event that
    redraws (`<name>_on_select`: the run pickers' entries, the placeholders, the fine-tuning notes). Each belongs to
    the top-level tab that holds its outputs (a select event: its tab's top-level tab); those of no tab (the header)
    run after every switch. Each event of a top-level tab gets hidden buttons at the page's root, one for each of
    its two copies:
    - `<name>_after_language_switch` hangs off a `<panel>-redraw-now` button; the switch clicks those of the tab
      that is shown, so the switch redraws one tab, not the whole page (it ran some thirty events, several seconds
      on a page with the demo zoo);
    - `<name>_on_stale_select` hangs off a `<panel>-redraw-stale` button (the tab's load events and its nested tabs'
      select events; its own select events run anyway): selecting a tab drawn in another language than the page's
      clicks them once.
    The browser keeps which language each tab was last drawn in (`window.labDrawnLanguage`; the page's first
    language until then). The tab names are redrawn in the browser (`relabel_tabs`)."""
    groups: dict = {}  # top-level tab (None: outside every tab) -> [(dependency, name, runs on its own select)]
    for dependency in list(demo.fns.values()):
        name = dependency.api_name or ""
        if dependency.fn is None or not name.endswith(("_on_load", "_on_select", LANGUAGE_SWITCH_SUFFIX)):
            continue
        if name.endswith("_on_select"):
            selected = [demo.blocks.get(block_id) for block_id, _ in dependency.targets]
            chain = [*tabs_holding(selected[0]), selected[0]] if selected and isinstance(selected[0], gr.Tab) else []
            home, own = (chain[0] if chain else None), len(chain) == 1
        else:
            holders = {id(tabs[0]) if tabs else None: (tabs[0] if tabs else None)
                       for tabs in (tabs_holding(output) for output in dependency.outputs)}
            home, own = (next(iter(holders.values())) if len(holders) == 1 else None), False
        groups.setdefault(home, []).append((dependency, name.removesuffix("_on_load").removesuffix(
            LANGUAGE_SWITCH_SUFFIX), own))
    tabs = []
    for home, events in groups.items():
        if home is None:
            for dependency, name, _ in events:
                switched.then(dependency.fn, list(dependency.inputs), list(dependency.outputs),
                              api_name=f"{name}_after_language_switch", show_progress="hidden")
            continue
        panel = element_id(home)
        for index, (dependency, name, own) in enumerate(events):
            # a button per event: Gradio runs the listeners of one trigger one after another, each once the last
            # one's outputs are drawn (the Mask Explorer's four figures, then the zoo panel: 0.13 s more)
            now = gr.Button(visible="hidden", elem_id=f"{panel}-redraw-now-{index}",
                            elem_classes=[f"{panel}-redraw-now"])
            now.click(dependency.fn, list(dependency.inputs), list(dependency.outputs),
                      api_name=f"{name}_after_language_switch", show_progress="hidden")
            if not own:
                stale = gr.Button(visible="hidden", elem_id=f"{panel}-redraw-stale-{index}",
                                  elem_classes=[f"{panel}-redraw-stale"])
                stale.click(dependency.fn, list(dependency.inputs), list(dependency.outputs),
                            api_name=f"{name}_on_stale_select", show_progress="hidden")
        home.select(None, None, None, js=redraw_stale_tab_js(panel),
                    api_name=f"redraw_{panel.replace('-', '_')}_if_stale", show_progress="hidden")
        tabs.append(panel)
    switched.then(None, None, None, js=redraw_shown_tab_js(tabs), api_name="redraw_shown_tab_after_language_switch",
                  show_progress="hidden")


def relabel_tabs(demo: gr.Blocks, *language_events) -> None:
    """After the header's switch (and the page's load, which may restore a stored language), every tab of the page,
    nested ones included, is updated with its own label in the browser, so that its tab bar draws the name in the new
    language (app/i18n/language.py `relabel_tabs_js`): no tab has to be shown for it."""
    tabs = [block for block in demo.blocks.values() if isinstance(block, gr.Tab)]
    script = relabel_tabs_js([str(tab.label) for tab in tabs])
    for event, name in zip(language_events, ("tab_names_after_language_switch", "tab_names_on_load")):
        event.then(None, None, tabs, js=script, api_name=name, show_progress="hidden")


def build_app(home=None, jobs=None, *, corpus_root=None) -> gr.Blocks:
    """The whole page, bound to one lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab).

    Creates the app's training job manager (`demo.lab_jobs`), or uses `jobs` (one made by `api.create_job_manager`
    for `home`, e.g. a test's with a stand-in trainer); call its `close()` when the server stops. The Corpora tab's
    background tokenizations are `demo.lab_tokenize_jobs` (close it too), and the corpora it links from the server's
    disk lie in `corpus_root` (`api.corpus_root`: default `<home>/server-corpora`).
    """
    home = api.lab_home(home)
    corpus_choices = api.list_corpora(home=home)
    jobs = jobs if jobs is not None else api.create_job_manager(home)
    tokenize_jobs = api.create_tokenize_jobs(home)
    try:
        with gr.Blocks(title=TITLE) as demo:
            language, language_switched = build_header(home)
            with gr.Tabs():
                with gr.Tab(text("header.tab_mask_explorer"), id="mask-explorer"):
                    zoo = zoo_panel.build(home, jobs)  # the demo zoo offer on a fresh lab home, then its progress
                    explorer = explorer_tab.build(home)
                with gr.Tab(text("header.tab_train"), id="train"):
                    train = train_tab.build(home, jobs, corpus_choices)
                with gr.Tab(text("header.tab_scaling"), id="scaling") as scaling_page:
                    scaling = scaling_tab.build(home, jobs, scaling_page)
                with gr.Tab(text("header.tab_compare"), id="compare") as compare_page:
                    compare = compare_tab.build(home, jobs, compare_page)
                with gr.Tab(text("header.tab_understand"), id="understand") as understand_page:
                    understand = understand_tab.build(home, jobs, understand_page)
                with gr.Tab(text("header.tab_leaderboard"), id="leaderboard") as leaderboard_page:
                    leaderboard = leaderboard_tab.build(home, jobs, leaderboard_page)
                with gr.Tab(text("header.tab_claims"), id="claims") as claims_page:
                    claims = claims_tab.build(home, jobs, claims_page)
                with gr.Tab(text("header.tab_tokenizer_lab"), id="tokenizer-lab") as tokenizer_page:
                    tokenizer = tokenizer_tab.build(home, corpus_choices, tokenizer_page)
                with gr.Tab(text("header.tab_corpora"), id="corpora") as corpora_page:
                    corpora = corpora_tab.build(home, corpus_choices, root=corpus_root, tokenize_jobs=tokenize_jobs,
                                                tab=corpora_page)
            # in page order, the Mask Explorer's figures before the zoo panel above them: the order of their loads
            tabs = (explorer, zoo, train, scaling, compare, understand, leaderboard, claims, tokenizer, corpora)
            wire_tabs(demo, tabs)
            language_loaded = demo.load(None, None, language, js=LANGUAGE_ON_LOAD_JS, api_name="language_on_load")
            redraw_after_language_switch(demo, language_switched)
            relabel_tabs(demo, language_switched, language_loaded)
            follow_tabs(demo)  # every live view ticks only while its tab is shown (app/display.py)
            keep_outputs_on_failure(demo)  # a failed event leaves its outputs as they were (app/errors.py)
    except BaseException:
        jobs.close()
        tokenize_jobs.close()
        raise
    demo.lab_jobs = jobs
    demo.lab_tokenize_jobs = tokenize_jobs
    demo.lab_routes = [route for tab in tabs for route in tab.routes]  # served beside Gradio's own (launch_kwargs)
    demo.lab_head = "".join(tab.head for tab in tabs)  # the page's own scripts
    return demo


def wire_tabs(demo: gr.Blocks, tabs: tuple[TabParts, ...]) -> None:
    """What reaches beyond one tab, for every tab alike: its page-load events, registered in the order of `tabs`,
    and after each import or link of the Corpora tab (`corpus_changes`) every tab's corpus pickers, redrawn with the
    corpora of now (`/refresh_<name>_corpora`, `..._after_link`)."""
    for load in (load for tab in tabs for load in tab.loads):
        demo.load(load.fn, load.inputs, load.outputs, api_name=load.api_name, show_progress=load.show_progress)
    pickers = [picker for tab in tabs for picker in tab.corpus_pickers]
    for suffix, event in (change for tab in tabs for change in tab.corpus_changes):
        for picker in pickers:
            event.then(picker.refresh, picker.picker, picker.picker, api_name=f"refresh_{picker.name}_corpora{suffix}")


QUEUE_CONCURRENCY = 4  # Gradio workers for queued events (a generation, a fill-mask, a tokenizer run)
QUEUE_IDLE_POLL_S = 0.02  # Gradio polls its empty queue every 1 ms on Linux: 0.03 of a core for nothing
QUEUE_PROGRESS_POLL_S = 0.1  # and its progress updates every 10 ms; a progress bar needs no more than 10 a second
# Gradio keeps a record of every queued event (up to 10,000) for its monitoring summary and recomputes the summary, a
# pandas group-by over all records, after every event: about 25 ms per event once a long demo has run thousands. The
# lab shows no monitoring page; the summary is recomputed every 100 events over the last 1,000.
QUEUE_ANALYTICS_EVERY = 100
QUEUE_ANALYTICS_KEPT = 1_000


def configure_queue(demo: gr.Blocks) -> gr.Blocks:
    """`demo.queue(...)` as the app serves it, with Gradio's idle polling slowed down.

    Gradio 6.31's queue loop sleeps `sleep_when_free` (1 ms on Linux) between looks at an empty queue and its progress
    loop 10 ms, so an idle server uses about 0.04 of a core (measured on the 2-core machine; 0.011 with these polls).
    A queued event then waits up to 20 ms more before it starts. Its monitoring summary is recomputed every
    QUEUE_ANALYTICS_EVERY events instead of after each. The attributes are Gradio's own; should a release rename
    them, this sets nothing and the lab still works (tests/app/test_page_cost.py notices)."""
    demo.queue(default_concurrency_limit=QUEUE_CONCURRENCY)
    queue = getattr(demo, "_queue", None)
    if queue is not None and hasattr(queue, "sleep_when_free") and hasattr(queue, "progress_update_sleep_when_free"):
        queue.sleep_when_free = QUEUE_IDLE_POLL_S
        queue.progress_update_sleep_when_free = QUEUE_PROGRESS_POLL_S
    if queue is not None and hasattr(queue, "ANAYLTICS_CACHE_FREQUENCY") and hasattr(queue, "ANALYTICS_MAX_EVENTS"):
        queue.ANAYLTICS_CACHE_FREQUENCY = QUEUE_ANALYTICS_EVERY  # Gradio's own spelling
        queue.ANALYTICS_MAX_EVENTS = QUEUE_ANALYTICS_KEPT
    return demo


def launch_kwargs(demo: gr.Blocks | None = None) -> dict:
    """Arguments for `Blocks.launch` that style the page (Gradio 6 takes css/theme at launch) and keep it light; with
    the `demo` that `build_app` made, also its own routes (given to Gradio's FastAPI app, before Gradio's) and the
    scripts that use them (the Train tab's progress bar: app/train/progress_route.py). Without `demo` the page works,
    its progress bar moving only when Gradio redraws it.

    `run_history=False`: Gradio's run history saves every event a reader starts (inputs and outputs: our plots and
    tables) in the browser's localStorage, re-serialising its whole list of up to 100 runs on each one. A tab click
    runs several events and the language switch dozens, so with it the page spends seconds of a core in
    `JSON.stringify` and `setItem` per click. The lab's runs live in the lab home, not in the browser; without it the
    footer's "Runs" link (which Gradio does not translate) goes too.

    `GradioFixesMiddleware` (app/gradio_fixes.py) changes Gradio 6.31's frontend as it leaves the server: a script
    first in the page's <head> that stops a timer drawing 60 frames a second for as long as the page is open and
    purges the figures Gradio's Plot drops, and two of Gradio's bundles changed so that an event no longer hands
    every component its status again, nor a status or a tab's new name copies the values of everything inside it."""
    kwargs = {"css": (ASSETS / "lab.css").read_text(encoding="utf-8"), "theme": gr.themes.Soft(), "i18n": lab_i18n(),
              "run_history": False, "app_kwargs": {"middleware": [Middleware(GradioFixesMiddleware)]}}
    if demo is not None and getattr(demo, "lab_routes", None):
        kwargs["app_kwargs"]["routes"] = list(demo.lab_routes)
        kwargs["head"] = demo.lab_head
    return kwargs

"""The page: a header with the compute device, the precision training runs in and why, and the language switch, then
one tab per view that works.

`build_app(home)` returns the `gr.Blocks`; `app.py` launches it. Tabs: Mask Explorer (drawn on load; above it the
demo zoo panel, app/explorer/zoo_panel.py, shown on a lab home without runs), Train, Scaling (size sweeps,
app/scaling/tab.py), Compare, Understand, Leaderboard, Tokenizer Lab, Corpora, each built by its package's `tab`
module. The page-load events are registered here; those that draw what the server writes run again after the
language switch. The app's one training `JobManager` is created here and kept as `demo.lab_jobs`; whoever launches
the app closes it at exit (`demo.lab_jobs.close()` stops the running trainers cleanly, with a checkpoint).

How the page is served is here too: `launch_kwargs` (styling, the lab's routes, Gradio's run history off),
`configure_queue` (Gradio's idle polling slowed) and, at the end, what stops four costs of Gradio 6.31's
frontend (`FIXES_SCRIPT`, written into the page, and `with_status_fix` and `with_read_back_fix`, applied to two of
Gradio's bundles, all by `GradioFixesMiddleware`).
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from lab_models import api

from app.compare import tab as compare_tab
from app.corpora import tab as corpora_tab
from app.display import element_id, follow_tabs, tabs_holding
from app.errors import keep_outputs_on_failure
from app.explorer import tab as explorer_tab, zoo_panel
from app.i18n.language import (LANGUAGE_ON_LOAD_JS, LANGUAGE_SWITCH_JS, LANGUAGES, english, lab_i18n,
                               redraw_shown_tab_js, redraw_stale_tab_js, relabel_tabs_js, text, tr)
from app.i18n.messages import translate_message
from app.leaderboard import tab as leaderboard_tab
from app.scaling import tab as scaling_tab
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
    title = html.escape(translate_message(precision.get("peak_source") or ""), quote=True)
    return (f'<div class="lab-header"><h1>{TITLE}</h1><span class="lab-device" id="lab-device" '
            f'title="{title}">{device_line}</span></div>')


def header_html_for_reader(home=None) -> str:
    precision = api.training_precision(home)
    device = tr("header.device_line", label=tr("header.device"), device=translate_message(precision["device"]))
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
        if dependency.fn is None or not (name.endswith("_on_load") or name.endswith("_on_select")):
            continue
        if name.endswith("_on_select"):
            selected = [demo.blocks.get(block_id) for block_id, _ in dependency.targets]
            chain = [*tabs_holding(selected[0]), selected[0]] if selected and isinstance(selected[0], gr.Tab) else []
            home, own = (chain[0] if chain else None), len(chain) == 1
        else:
            holders = {id(tabs[0]) if tabs else None: (tabs[0] if tabs else None)
                       for tabs in (tabs_holding(output) for output in dependency.outputs)}
            home, own = (next(iter(holders.values())) if len(holders) == 1 else None), False
        groups.setdefault(home, []).append((dependency, name.removesuffix("_on_load"), own))
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
                    draw, explorer_inputs, explorer_outputs, explorer_handler = explorer_tab.build(home)
                with gr.Tab(text("header.tab_train"), id="train"):
                    train = train_tab.build(home, jobs, corpus_choices)
                with gr.Tab(text("header.tab_scaling"), id="scaling") as scaling_page:
                    scaling_tab.build(home, jobs, scaling_page)
                with gr.Tab(text("header.tab_compare"), id="compare") as compare_page:
                    compare_tab.build(home, jobs, compare_page)
                with gr.Tab(text("header.tab_understand"), id="understand") as understand_page:
                    understand_tab.build(home, jobs, understand_page)
                with gr.Tab(text("header.tab_leaderboard"), id="leaderboard") as leaderboard_page:
                    leaderboard_tab.build(home, jobs, leaderboard_page)
                with gr.Tab(text("header.tab_tokenizer_lab"), id="tokenizer-lab") as tokenizer_page:
                    tokenizer_components = tokenizer_tab.build(home, corpus_choices, tokenizer_page)
                with gr.Tab(text("header.tab_corpora"), id="corpora") as corpora_page:
                    corpus_dropdown, added, corpora_view = corpora_tab.build(home, corpus_choices, root=corpus_root,
                                                                             tokenize_jobs=tokenize_jobs,
                                                                             tab=corpora_page)
            for index, event in enumerate(added):  # an import or a link: the other tabs' corpus pickers follow
                suffix = "" if index == 0 else "_after_link"
                event.then(corpora_view.refresh, tokenizer_components["corpus"], tokenizer_components["corpus"],
                           api_name=f"refresh_tokenizer_corpora{suffix}")
                event.then(train.view.refresh_corpora, train.corpus, train.corpus,
                           api_name=f"refresh_train_corpora{suffix}")
            demo.load(explorer_handler, explorer_inputs, explorer_outputs, api_name="explore_masks_on_load")
            demo.load(*train.load, api_name="list_runs_on_load", show_progress="hidden")
            demo.load(*zoo.load, api_name="zoo_panel_on_load", show_progress="hidden")
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
    demo.lab_routes = list(train.routes)  # served beside Gradio's own (launch_kwargs)
    demo.lab_head = train.head  # the page's own scripts
    return demo


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
    loop 10 ms, so an idle server used about 0.04 of a core (measured on the 2-core machine; 0.011 with these polls).
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
    runs several events and the language switch dozens, so the page spent seconds of a core in `JSON.stringify` and
    `setItem` per click. The lab's runs live in the lab home, not in the browser; without it the footer's "Runs"
    link (which Gradio does not translate) goes too.

    `GradioFixesMiddleware` puts `FIXES_SCRIPT` (below) first in the page's <head>: Gradio's loading screen leaves a
    timer drawing 60 frames a second for as long as the page is open (0.07 of a core in the browser), and its Plot
    keeps every figure it redraws alive (the page's heap doubled in 30 minutes on the Train tab). It also serves
    Gradio's `Blocks-<hash>.js` with `with_status_fix`: every event handed every component the page had used its
    status again (half a second of the browser per language switch with every tab visited), and its
    `core-<hash>.js` with `with_read_back_fix`: a status or a tab's new name made the page copy the values of the
    component and of everything inside it."""
    kwargs = {"css": (ASSETS / "lab.css").read_text(encoding="utf-8"), "theme": gr.themes.Soft(), "i18n": lab_i18n(),
              "run_history": False, "app_kwargs": {"middleware": [Middleware(GradioFixesMiddleware)]}}
    if demo is not None and getattr(demo, "lab_routes", None):
        kwargs["app_kwargs"]["routes"] = list(demo.lab_routes)
        kwargs["head"] = demo.lab_head
    return kwargs


# ---------------------------------------------------------------------------------------------- Gradio's leaks
# Four costs of Gradio 6.31's frontend that an open page pays during a long demo, stopped by a script that the page
# runs before Gradio's own and by changes to two of Gradio's bundles (issue 25). Found with CPU profiles of the page
# (idle, ticking, switching language) and a count of its live objects by prototype (CDP `Runtime.queryObjects`).
#
# 1. **A timer that draws frames forever.** Gradio's StatusTracker counts an event's elapsed seconds in a loop of
#    `requestAnimationFrame` calls that runs while its event is pending. The tracker of the page's own "Loading..."
#    screen is removed while still pending, so its loop never ends: a frame 60 times a second for as long as the page
#    is open. Any Gradio 6.31 page with one textbox cost Chromium 0.07 of a core with no event at all (about:blank
#    0.001). The loop shows a number with one decimal and needs no frames: callbacks of the tracker's timer shape
#    (`TRACKER_TIMER_SHAPE`, matched on their source) get a `TRACKER_TIMER_MS` timeout instead. A live tracker still
#    counts its seconds, four times a second; the orphaned one ticks without drawing. Other callers (Plotly, Svelte's
#    transitions) get the browser's own `requestAnimationFrame`.
# 2. **Every redrawn plot kept.** Gradio's Plot draws each new figure into a new `<div>` with `Plotly.react` and
#    `responsive` on, and drops the old `<div>` without `Plotly.purge`: Plotly's resize listener on the window keeps
#    each old figure alive, its SVG and its data (the Train tab's loss curve, redrawn every 10 s, left about 500 SVG
#    elements and half a megabyte per tick: the page's heap doubled in 30 minutes). The script wraps Plotly's `react`
#    and `newPlot` when Gradio sets `window.Plotly` (it loads Plotly lazily), remembers each plot it draws, and purges
#    those no longer in the page at the next draw.
#
# 3. **Every event tells every component its status again.** Gradio keeps a loading status for each component that
#    any event of the page has used, and after each change of any event's status (pending, then complete: twice per
#    event, a live tick included) hands every one of them its status again, changed or not; each such update first
#    reads the component's value back (a copy of a whole figure or table) and those of all its children. With every
#    tab visited that is several hundred components per step: half a second of the browser per language switch
#    (a CPU profile: `update_loading_stati_state`, 1.9 of 2.2 s over four switches), and a cost on every tick and
#    click that grows with what the page shows. Gradio's bundle that holds it (`Blocks-<hash>.js`) leaves the server
#    with that method changed to hand on only the statuses that changed since it last handed them on
#    (`with_status_fix`; the page then draws the same statuses).
# 4. **A tab's new name copies everything in it.** Before it applies an update that carries no value, Gradio reads
#    the current value of the component and of every component inside it back into its tree (a structured clone of
#    each figure and table), so that a component drawn again from the tree (one made visible) keeps what the reader
#    typed. Neither a status nor a tab's name draws anything again, yet each paid the copy: the language switch's new
#    tab names (every tab of the page, its whole content each: a tab with 191 components for the Train tab) and every
#    status of every event. `core-<hash>.js` leaves the server with that read-back skipped for an update that carries
#    only a status, or only a tab's label (`with_read_back_fix`); any other update (visibility, choices, ...) still
#    reads back first. Measured with the Train tab live, every tab visited: the language switch's median 0.54 ->
#    0.40 to 0.43 s over ten switches (two runs of benchmarks' `probe`), the browser's main thread per probe (seven
#    tab clicks and back, two switches) 4.3 -> 3.9 to 4.1 s.
#
# All are matched on what Gradio does today; a release that changes it no longer matches, and the page then works as
# Gradio made it (tests/app/test_page_cost.py checks the shapes against Gradio's files; tests/app/test_browser.py counts the
# idle page's frames). Gradio places `launch(head=...)` after its app has loaded, too late for the first fix, so
# `GradioFixesMiddleware` writes the script into the HTML of Gradio's page as it leaves the server, and changes the
# bundles of the third and the fourth as they leave too (mounted by `app.main.launch_kwargs`).
TRACKER_TIMER_MS = 250
# Gradio 6.31's timer callback, minified: `()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}` (set the elapsed
# seconds; request the next frame while still pending). Names vary with the build, the shape does not.
TRACKER_TIMER_SHAPE = r"^\(\)=>\{[\w$]+\([\w$]+,\(performance\.now\(\)-[\w$]+\([\w$]+\)\)/1e3\),[\w$]+&&[\w$]+\(\)\}$"
MARKER = "lab-gradio-fixes"
FIXES_SCRIPT = f"""<script id="{MARKER}">
(() => {{
  // 1. the status tracker's timer: a timeout, not a frame
  const nativeRequest = window.requestAnimationFrame.bind(window);
  const nativeCancel = window.cancelAnimationFrame.bind(window);
  const trackerTimer = new RegExp({json.dumps(TRACKER_TIMER_SHAPE)});
  window.requestAnimationFrame = function (callback) {{
    if (typeof callback === "function" && trackerTimer.test(Function.prototype.toString.call(callback))) {{
      return -window.setTimeout(() => callback(performance.now()), {TRACKER_TIMER_MS});  // negative: a timeout's id
    }}
    return nativeRequest(callback);
  }};
  window.cancelAnimationFrame = (id) => (id < 0 ? window.clearTimeout(-id) : nativeCancel(id));

  // 2. plots that Gradio drew and dropped: purged at the next draw
  const drawn = new Set();
  const purgeDropped = (Plotly) => {{
    for (const plot of drawn) {{
      if (plot.isConnected) {{ continue; }}
      drawn.delete(plot);
      try {{ Plotly.purge(plot); }} catch (error) {{}}
    }}
  }};
  const adopt = (Plotly) => {{
    if (!Plotly || typeof Plotly !== "object" || Plotly.labPurgesDropped) {{ return Plotly; }}
    for (const name of ["react", "newPlot"]) {{
      const draw = Plotly[name];
      if (typeof draw !== "function") {{ continue; }}
      Plotly[name] = function (plot, ...rest) {{
        purgeDropped(Plotly);
        if (plot instanceof Element) {{ drawn.add(plot); }}
        return draw.call(this, plot, ...rest);
      }};
    }}
    Plotly.labPurgesDropped = true;
    return Plotly;
  }};
  let plotly = adopt(window.Plotly);
  Object.defineProperty(window, "Plotly", {{
    configurable: true, enumerable: true, get: () => plotly, set: (value) => {{ plotly = adopt(value); }},
  }});
}})();
</script>"""
_HEAD_OPEN = re.compile(rb"<head[^>]*>", re.IGNORECASE)


def with_fixes_script(page: bytes) -> bytes:
    """`page` (an HTML document) with FIXES_SCRIPT as the first child of its <head>; unchanged without a <head> or
    when the script is there already."""
    if MARKER.encode() in page:
        return page
    head = _HEAD_OPEN.search(page)
    if head is None:
        return page
    return page[:head.end()] + FIXES_SCRIPT.encode() + page[head.end():]


# Gradio 6.31's method, minified: after each status change, every known component's status handed on again.
STATUS_UPDATE_SHAPE = re.compile(
    rb"async update_loading_stati_state\(\)\{await Promise\.all\(Object\.entries\(this\.loading_stati\.current\)"
    rb"\.map\(\(\[([\w$]+),([\w$]+)\]\)=>this\.update_state_cb\(Number\(\1\),\{loading_status:\2\},!1\)\)\)\}")
# The same method handing on only what changed since the last time (compared as JSON: a status is a small plain
# object, rebuilt on every change of any event, so its identity says nothing).
STATUS_UPDATE_FIXED = (
    b"async update_loading_stati_state(){const labSent=this.labSentStati||(this.labSentStati=new Map());"
    b"await Promise.all(Object.entries(this.loading_stati.current).filter(([id,status])=>{let now;"
    b"try{now=JSON.stringify(status)}catch(error){return!0}if(labSent.get(id)===now)return!1;"
    b"labSent.set(id,now);return!0}).map(([id,status])=>this.update_state_cb(Number(id),{loading_status:status},!1)))}")
# the bundle that holds it, as Gradio serves it ("/assets/Blocks-D1GWYZdr.js")
STATUS_BUNDLE_PATH = re.compile(r"/assets/Blocks-[\w-]+\.js$")


def with_status_fix(bundle: bytes) -> bytes:
    """Gradio's `Blocks-<hash>.js` with STATUS_UPDATE_FIXED in place of the method of STATUS_UPDATE_SHAPE; unchanged
    when the bundle has no such method (another Gradio release) or has it fixed already."""
    return STATUS_UPDATE_SHAPE.sub(lambda _: STATUS_UPDATE_FIXED, bundle, count=1)


# Gradio 6.31's `update_state(id, update)`, minified: `r&&!(`value`in t)&&(await this.#m(e,r),await this.#h(r));`
# (node r, update t, id e: without a value in the update, read back the node's values, then its descendants').
READ_BACK_SHAPE = re.compile(
    rb"([\w$]+)&&!\(`value`in ([\w$]+)\)&&\(await this\.(#[\w$]+)\(([\w$]+),\1\),await this\.(#[\w$]+)\(\1\)\);")
# the same, skipped when the update carries only a status, or only a tab's label
READ_BACK_FIXED = (rb"\1&&!(`value`in \2)&&!Object.keys(\2).every(labKey=>labKey===`loading_status`||"
                   rb"labKey===`label`&&\1.type===`tabitem`)&&(await this.\3(\4,\1),await this.\5(\1));")
# the bundle that holds it ("/assets/core-Bdx9080F.js")
READ_BACK_BUNDLE_PATH = re.compile(r"/assets/core-[\w-]+\.js$")


def with_read_back_fix(bundle: bytes) -> bytes:
    """Gradio's `core-<hash>.js` with its read-back (READ_BACK_SHAPE) skipped for an update of a status alone or
    of a tab's label alone; unchanged when the bundle has no such statement (another Gradio release) or has it
    fixed already."""
    return READ_BACK_SHAPE.sub(READ_BACK_FIXED, bundle, count=1)


# Gradio's bundles that leave the server changed, and how
CHANGED_BUNDLES = ((STATUS_BUNDLE_PATH, with_status_fix), (READ_BACK_BUNDLE_PATH, with_read_back_fix))


# a request for the changed bundle asks for it whole and uncompressed: the server's copy is the one changed
_WHOLE_RESPONSE_ONLY = {b"accept-encoding", b"if-none-match", b"if-modified-since", b"range", b"if-range"}
# what described Gradio's own copy of the bundle: a browser must not mix it up with the changed one
_STALE_HEADERS = {b"content-length", b"etag", b"last-modified", b"accept-ranges"}


class GradioFixesMiddleware:
    """ASGI middleware: GET responses with an HTML body (Gradio's page, at "/" or a page of a multipage app) get
    FIXES_SCRIPT in their <head>; Gradio's bundles of CHANGED_BUNDLES get their change (`Blocks-<hash>.js`
    `with_status_fix`, `core-<hash>.js` `with_read_back_fix`). Other responses pass through untouched and
    unbuffered."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        for path, change in CHANGED_BUNDLES:
            if path.search(scope.get("path", "")):
                headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() not in _WHOLE_RESPONSE_ONLY]
                await self.app({**scope, "headers": headers}, receive, self._changing(send, b"javascript", change))
                return
        await self.app(scope, receive, self._changing(send, b"text/html", with_fixes_script))

    @staticmethod
    def _changing(send, content_type: bytes, change):
        """A `send` that passes on a 200 response whose content type contains `content_type` as `change(body)`,
        and any other response as it comes."""
        start: dict | None = None
        body: list[bytes] = []

        async def send_changed(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if (message.get("status") != 200 or content_type not in headers.get(b"content-type", b"")
                        or headers.get(b"content-encoding")):
                    await send(message)  # not ours to change (or compressed already): pass it on as it comes
                    return
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            changed = change(b"".join(body))
            headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() not in _STALE_HEADERS]
            headers.append((b"content-length", str(len(changed)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": changed})

        return send_changed

"""What keeps the page light while it stays open: every timer ticks only while its tab is shown
(`follow_tabs` in app/display.py), the Train tab has one live event instead of five, Gradio's run history is off and its idle queue
polls slowly (app/main.py). The browser's own numbers come from benchmarks/bench_page.py; the browser test
(tests/app/test_browser.py) checks that a hidden tab's timer does not tick."""
from __future__ import annotations

import json

from pathlib import Path

import gradio as gr
import pytest

from app.display import activity_js, changed, follow_tabs, one_event, rest_when_idle, shown_first, tabs_holding
from app.main import build_app, configure_queue, launch_kwargs

from tests.support.launching import launch


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    demo = build_app(tmp_path_factory.mktemp("page-cost-home"))
    yield demo
    demo.lab_jobs.close()


def timers_by_tab(demo) -> dict[str, list[gr.Timer]]:
    found: dict[str, list[gr.Timer]] = {}
    for block in demo.blocks.values():
        if isinstance(block, gr.Timer):
            holders = tabs_holding(block)
            found.setdefault("/".join(str(tab.id) for tab in holders), []).append(block)
    return found


@pytest.mark.slow
def test_every_timer_sits_in_a_tab_and_only_the_first_tab_ticks_when_the_page_opens(page):
    timers = timers_by_tab(page)
    assert "" not in timers  # no timer outside every tab: each one belongs to a view
    assert set(timers) == {"mask-explorer", "train", "scaling", "compare", "understand",
                           "understand/understand-finetune", "leaderboard", "claims", "corpora"}
    active = {path: [timer.active for timer in found] for path, found in timers.items()}
    assert active.pop("mask-explorer") == [True]  # the demo zoo's progress, on the tab the page opens on
    assert all(not any(flags) for flags in active.values()), active
    assert len(timers["train"]) == 1  # the Train tab's plots and tables; its progress bar moves without events
    # each is drawn at the page's root, where an update reaches it while its tab is hidden (the "off")
    assert all(timer in page.children for found in timers.values() for timer in found)
    assert not any(isinstance(child, gr.Timer) for block in page.blocks.values()
                   if isinstance(block, gr.Tab) for child in block.children)


@pytest.mark.slow
def test_the_train_tab_has_one_seldom_live_event_and_its_progress_bar_a_route_of_its_own(page):
    from app.train.progress_route import POLL_S, ROUTE
    from app.train.tab import LIVE_REFRESH_S

    (timer,) = timers_by_tab(page)["train"]
    (tick,) = [fn for fn in page.fns.values() if any(block == timer._id for block, _ in fn.targets)]
    assert tick.api_name == "refresh_run" and timer.value == LIVE_REFRESH_S > POLL_S
    assert len(tick.outputs) == 21  # run (6), learning rate, add-ons, routing (2 each), runs table (5), start-from,
    # the Export row (3): one event for the whole tab
    assert not [fn for fn in page.fns.values() if fn.api_name in ("refresh_run_progress", "refresh_export_visibility")]
    # the same refresh, at once, from the bar's script when the run's state changes (a hidden button it clicks)
    from app.train.progress_route import POLL_SCRIPT, REFRESH_NOW_ID

    (button_id, event), = [target for target in tick.targets if target[0] != timer._id]
    assert page.blocks[button_id].elem_id == REFRESH_NOW_ID and event == "click"
    assert POLL_SCRIPT.count(json.dumps(REFRESH_NOW_ID)) == 1
    kwargs = launch_kwargs(page)
    assert [route.path for route in kwargs["app_kwargs"]["routes"]] == [ROUTE]
    assert ROUTE in kwargs["head"] and "#train-progress .train-progress-live" in kwargs["head"]
    assert "routes" not in launch_kwargs()["app_kwargs"] and "head" not in launch_kwargs()


@pytest.mark.slow
def test_picking_a_run_in_the_train_tab_is_one_event_and_each_part_stays_an_endpoint(page):
    """Gradio runs one trigger's listeners one after another, each once the last one's outputs are drawn: the run
    picker's change is one event that draws the run, its learning-rate, add-on and routing figures and the Export row;
    `/show_run`, `/show_schedule`, ... stay callable on their own, from a hidden button the page never clicks."""
    picker = next(block for block in page.blocks.values() if getattr(block, "elem_id", None) == "train-run")
    (picked,) = [fn for fn in page.fns.values() if (picker._id, "change") in fn.targets]
    assert picked.api_name == "show_picked_run" and len(picked.outputs) == 6 + 2 + 2 + 2 + 2
    parts = {fn.api_name: fn for fn in page.fns.values()
             if fn.api_name in ("show_run", "show_schedule", "show_addon_numbers", "show_routing", "export_visibility")}
    assert len(parts) == 5
    (button,) = {block for fn in parts.values() for block, _ in fn.targets}
    assert page.blocks[button].visible == "hidden" and all(fn.targets == [(button, "click")] for fn in parts.values())
    assert [output for name in parts for output in parts[name].outputs] == list(picked.outputs)


@pytest.mark.slow
def test_gradios_page_gets_the_fixes_script_first_in_its_head_and_nothing_else_is_touched(page):
    import httpx

    from app.gradio_fixes import FIXES_SCRIPT, MARKER

    _, url, _ = launch(page, server_name="127.0.0.1", prevent_thread_lock=True, quiet=True, **launch_kwargs(page))
    try:
        served = httpx.get(url)
        assert served.status_code == 200 and served.headers["content-length"] == str(len(served.content))
        text = served.text
        head = text.index("<head>") + len("<head>")
        assert text[head:head + len(FIXES_SCRIPT)] == FIXES_SCRIPT  # before any of Gradio's scripts
        assert text.count(MARKER) == 1 and text.index(MARKER) < text.index('type="module"')
        config = httpx.get(url + "config")
        assert config.status_code == 200 and MARKER not in config.text  # JSON passes through as it was
        assert httpx.get(url + "lab/train/progress").status_code == 400  # the lab's own route still answers
    finally:
        page.close()


def test_the_fixes_scripts_timer_shape_matches_gradios_status_tracker_and_nothing_else():
    """The script recognises the loop by its source; a Gradio release that rewrites its tracker fails here, so the
    shape (app/gradio_fixes.py) is brought up to date instead of silently matching nothing."""
    import re
    from pathlib import Path

    from app.gradio_fixes import TRACKER_TIMER_SHAPE, with_fixes_script

    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    bodies = re.compile(r"\(\)=>\{[^{}]*performance\.now\(\)[^{}]*\}")
    found = [body for path in assets.glob("statustracker-*.js") for body in bodies.findall(path.read_text())]
    assert found and all(re.fullmatch(TRACKER_TIMER_SHAPE, body) for body in found), found
    shape = re.compile(TRACKER_TIMER_SHAPE)
    assert shape.match("()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}")
    for other in ("()=>e()", "function bl(){let e=yl.now();}", "()=>{F(Pe,(performance.now()-w(de))/1e3)}"):
        assert not shape.match(other)
    assert with_fixes_script(b"<p>no head</p>") == b"<p>no head</p>"
    once = with_fixes_script(b"<html><head lang='x'><title>t</title></head></html>")
    assert once.startswith(b"<html><head lang='x'><script id=") and with_fixes_script(once) == once


@pytest.mark.slow
def test_gradios_status_and_core_bundles_are_served_changed_whole_and_uncompressed_to_be_changed(page):
    """Gradio's `Blocks-<hash>.js` leaves the server with its status method handing on only changed statuses: asked
    for compressed, conditionally or in part, the server still changes its whole copy (then compresses it). Its
    `core-<hash>.js` leaves with the read-back fix."""
    import httpx

    from app.gradio_fixes import (READ_BACK_BUNDLE_PATH, SET_DATA_BUNDLE_PATH, SET_DATA_SHAPE, STATUS_BUNDLE_PATH,
                                  STATUS_UPDATE_FIXED, with_read_back_fix, with_set_data_fix)

    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    (bundle,) = [path for path in assets.glob("Blocks-*.js") if STATUS_BUNDLE_PATH.search("/assets/" + path.name)]
    _, url, _ = launch(page, server_name="127.0.0.1", prevent_thread_lock=True, quiet=True, **launch_kwargs(page))
    try:
        plain = httpx.get(url + "assets/" + bundle.name, headers={"accept-encoding": "identity"})
        assert plain.status_code == 200 and plain.headers["content-length"] == str(len(plain.content))
        assert plain.content.count(STATUS_UPDATE_FIXED) == 1 and "etag" not in plain.headers
        asked = httpx.get(url + "assets/" + bundle.name, headers={
            "accept-encoding": "br, gzip", "if-none-match": '"anything"', "range": "bytes=0-99"})
        assert asked.status_code == 200 and asked.content == plain.content  # httpx undoes the compression
        other = httpx.get(url + "assets/" + next(assets.glob("index-*.js")).name)  # any other asset: untouched
        assert other.status_code == 200 and b"labSentStati" not in other.content and b"labKey" not in other.content
        # and Gradio's core bundle with its read-back skipped for a status or a tab's label alone
        (core,) = [path for path in assets.glob("core-*.js") if READ_BACK_BUNDLE_PATH.search("/assets/" + path.name)]
        served = httpx.get(url + "assets/" + core.name, headers={"accept-encoding": "br, gzip"})
        assert served.status_code == 200 and served.content == with_read_back_fix(core.read_bytes()) != core.read_bytes()
        # and the one that keeps a drawn value through a change of language (tests/app/i18n/test_language_switch.py)
        (source,) = [path for path in assets.glob("src-*.js") if SET_DATA_SHAPE.search(path.read_bytes())]
        assert SET_DATA_BUNDLE_PATH.search("/assets/" + source.name)
        served = httpx.get(url + "assets/" + source.name, headers={"accept-encoding": "br, gzip"})
        assert served.status_code == 200 and served.content == with_set_data_fix(source.read_bytes())
        assert served.content != source.read_bytes()
    finally:
        page.close()


def test_the_status_fix_matches_gradios_method_once_and_nothing_else():
    """A Gradio release that rewrites its status method fails here, so the shape is brought up to date instead of
    silently matching nothing; the fixed method parses as JavaScript (node, where the machine has it)."""
    import shutil
    import subprocess

    from app.gradio_fixes import STATUS_UPDATE_FIXED, STATUS_UPDATE_SHAPE, with_status_fix

    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    holding = [path for path in assets.glob("*.js") if STATUS_UPDATE_SHAPE.search(path.read_bytes())]
    assert [path.name.split("-")[0] for path in holding] == ["Blocks"]
    original = holding[0].read_bytes()
    fixed = with_status_fix(original)
    assert fixed.count(STATUS_UPDATE_FIXED) == 1 and with_status_fix(fixed) == fixed
    assert fixed.replace(STATUS_UPDATE_FIXED, b"") == STATUS_UPDATE_SHAPE.sub(b"", original)  # nothing else touched
    assert with_status_fix(b"async update_loading_stati_state(){}") == b"async update_loading_stati_state(){}"
    if shutil.which("node"):
        check = subprocess.run(["node", "--check", "--input-type=module"], input=fixed, capture_output=True)
        assert check.returncode == 0, check.stderr.decode()


@pytest.mark.slow
def test_the_read_back_fix_matches_gradios_update_state_once_and_skips_only_a_status_or_a_tabs_label():
    """Gradio's `update_state` reads back a component's values (and its descendants') before an update without a
    value; the fix keeps that for every update but one of a status alone or of a tab's label alone. Its shape must
    match Gradio's core bundle exactly once (a release that rewrites it fails here); the fixed bundle parses, and
    its condition, run in node, says which updates still read back."""
    import shutil
    import subprocess

    from app.gradio_fixes import READ_BACK_SHAPE, with_read_back_fix

    from tests.support.gradio_bundles import fixed_once

    _, fixed = fixed_once(READ_BACK_SHAPE, with_read_back_fix, "core")
    if not shutil.which("node"):
        return
    check = subprocess.run(["node", "--check", "--input-type=module"], input=fixed, capture_output=True)
    assert check.returncode == 0, check.stderr.decode()
    # the fixed statement on its own, with stand-ins for the two read-backs, run for six updates
    statement = with_read_back_fix(b"r&&!(`value`in t)&&(await this.#m(e,r),await this.#h(r));").decode()
    body = statement.replace("this.#m(e,r)", "read.push(e)").replace("await this.#h(r)", "0")
    script = f"""
const read = [];
const update = async (e, r, t) => {{ {body} }};
(async () => {{
  await update(1, {{type: "plot"}}, {{loading_status: {{status: "pending"}}}});
  await update(2, {{type: "tabitem"}}, {{label: "Train"}});
  await update(3, {{type: "textbox"}}, {{label: "Prompt"}});
  await update(4, {{type: "tabitem"}}, {{visible: true}});
  await update(5, {{type: "dropdown"}}, {{choices: [], loading_status: {{}}}});
  await update(6, {{type: "plot"}}, {{value: 1}});
  process.stdout.write(JSON.stringify(read));
}})();
"""
    run = subprocess.run(["node", "-e", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [3, 4, 5]  # a textbox's label, a visibility, choices: read back first


@pytest.mark.slow
def test_the_progress_route_answers_with_the_bar_in_the_readers_language(page, tmp_path):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from app.train.progress_route import progress_route
    from lab_models import api

    jobs = api.create_job_manager(tmp_path)
    try:
        client = TestClient(Starlette(routes=[progress_route(jobs)]))
        assert client.get("/lab/train/progress").status_code == 400
        missing = client.get("/lab/train/progress", params={"run": "../etc"})
        assert missing.status_code == 404 and "Run ids look like" in missing.json()["error"]
        assert client.get("/lab/train/progress", params={"run": "no-such-run"}).status_code == 404
        run_dir = tmp_path / "runs" / "gpt-tiny-1"
        run_dir.mkdir(parents=True)
        (run_dir / "status.json").write_text(json.dumps({"state": "stopped", "step": 30, "total_steps": 120}))
        answer = client.get("/lab/train/progress", params={"run": "gpt-tiny-1"})
        assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
        body = answer.json()
        assert body["run"] == "gpt-tiny-1" and body["state"] == "stopped"
        assert 'aria-valuenow="30"' in body["html"] and "step <b>30</b> / 120 (25%)" in body["html"]
        client.cookies.set("lab_language", "zh")
        assert "第 <b>30</b> / 120 步" in client.get("/lab/train/progress", params={"run": "gpt-tiny-1"}).json()["html"]
    finally:
        jobs.close()


def test_the_progress_box_names_its_run_and_state_for_the_script():
    from app.train.figures import progress_bar_html, progress_html

    summary = {"run_id": "bert-tiny-1", "state": "queued", "step": 0, "total_steps": 10}
    drawn = progress_html(summary)
    assert drawn == ('<div class="train-progress-live" data-run="bert-tiny-1" data-state="queued">'
                     + progress_bar_html(summary) + "</div>")
    assert progress_html(None).startswith('<div class="train-progress-live" data-run="" data-state="">')


@pytest.mark.slow
def test_every_tab_turns_the_timers_on_and_off_in_the_browser_alone(page):
    tabs = [block for block in page.blocks.values() if isinstance(block, gr.Tab)]
    timers = [block for block in page.blocks.values() if isinstance(block, gr.Timer)]
    for tab in tabs:
        (select,) = [fn for fn in page.fns.values() if fn.api_name and fn.api_name.startswith("live_views_on_")
                     and any(block == tab._id for block, _ in fn.targets)]
        assert select.fn is None and select.js  # no server call: the clicks' order is the updates' order
        assert [output._id for output in select.outputs] == [timer._id for timer in timers]
    # the script names the panel of each timer's innermost tab
    panels = json.loads(select.js.split("return ")[-1].split(".map")[0])
    assert panels == [tabs_holding(timer)[-1].elem_id for timer in timers]
    assert "lab-tab-understand-finetune" in panels
    assert f'const selected = "{tabs[-1].elem_id}";' in select.js  # it waits until its own panel is shown


def test_nested_tabs_and_timers_outside_tabs():
    with gr.Blocks() as demo:
        outside = gr.Timer(1)
        with gr.Tabs():
            with gr.Tab("a", id="a") as first:
                in_first = gr.Timer(1)
                with gr.Tabs():
                    with gr.Tab("a1", id="a1"):
                        in_first_first = gr.Timer(1)
                    with gr.Tab("a2", id="a2") as second_nested:
                        in_first_second = gr.Timer(1)
            with gr.Tab("b", id="b"):
                in_second = gr.Timer(1, active=True)
        follow_tabs(demo)
    assert [outside.active, in_first.active, in_first_first.active, in_first_second.active, in_second.active] == \
        [True, True, True, False, False]
    assert tabs_holding(in_first_second) == [first, second_nested] and shown_first(first)
    assert not shown_first(second_nested)
    script = activity_js(["lab-tab-a", None], "lab-tab-b")
    assert '["lab-tab-a", null]' in script and '"active": shown(id)' in script
    assert 'const selected = "lab-tab-b";' in script


def test_a_live_view_redraws_only_what_changed():
    assert not changed([1, "running", 3], [1, "running", 3])
    assert changed([1, "running", 4], [1, "running", 3]) and changed([], None)


@pytest.mark.slow
def test_the_page_keeps_no_run_history_and_the_idle_queue_polls_slowly(page):
    assert launch_kwargs()["run_history"] is False
    configure_queue(page)
    # Gradio's own attributes: if a release renames them, this fails and app/main.py's configure_queue needs a look
    assert page._queue.sleep_when_free == 0.02 and page._queue.progress_update_sleep_when_free == 0.1
    assert page._queue.ANAYLTICS_CACHE_FREQUENCY == 100 and page._queue.ANALYTICS_MAX_EVENTS == 1_000
    # the monitoring summary is not recomputed after each event (a pandas group-by over every record)
    record = {"function": "f", "status": "success", "process_time": 0.1}
    queue = page._queue
    queue.events_recorded, queue.event_count_at_last_cache = 99, 0
    assert queue.compute_analytics_summary([record]) == {"functions": {}}
    queue.events_recorded = 100
    assert list(queue.compute_analytics_summary([record])["functions"]) == ["f"]


def test_one_event_runs_several_handlers_with_their_own_inputs_and_outputs():
    seen = []

    def first(a):
        seen.append(("first", a))
        return a * 2

    def second(b, c):
        seen.append(("second", b, c))
        return b, c

    fn, inputs, outputs = one_event((first, "in-a", "out-x"), (second, ["in-b", "in-c"], ("out-y", "out-z")),
                                    (lambda: None, None, []))
    assert inputs == ["in-a", "in-b", "in-c"] and outputs == ["out-x", "out-y", "out-z"]
    assert fn(1, 2, 3) == (2, 2, 3) and seen == [("first", 1), ("second", 2, 3)]
    lone, _, _ = one_event((first, ["a"], ["x"]))
    assert lone(5) == 10  # one output: the value itself, as Gradio expects


@pytest.mark.slow
def test_every_tab_opening_is_one_server_event(page):
    """Opening a tab runs at most one event on the server (its browser-only steps aside): several queued events made
    the Understand tab take five seconds to open while a run trained."""
    for tab in [block for block in page.blocks.values() if isinstance(block, gr.Tab)]:
        served = [fn for fn in page.fns.values() if fn.fn is not None
                  and any(block == tab._id and name == "select" for block, name in fn.targets)]
        assert len(served) <= 1, (tab.id, [fn.api_name for fn in served])
        # nor does it set a component whose `change` runs a server event (a second event the browser waits for: the
        # Scaling tab's picker drew everything again after the tab's own event had)
        written = {block._id for fn in served for block in fn.outputs}
        chained = [fn.api_name for fn in page.fns.values() if fn.fn is not None
                   and any(block in written and name == "change" for block, name in fn.targets)]
        assert not chained, (tab.id, chained)


@pytest.mark.slow
def test_a_job_view_timer_rests_while_nothing_runs(page):
    assert rest_when_idle(True) == gr.skip()
    assert rest_when_idle(False) == {"__type__": "update", "active": False}
    resting = {"zoo_refresh", "refresh_tokenizing", "refresh_sweeps", "understand_finetune_progress"}
    for fn in page.fns.values():
        if fn.api_name in resting:
            (timer_id,) = {block for block, _ in fn.targets}
            assert fn.outputs[-1]._id == timer_id, fn.api_name  # the tick answers for its own timer
            resting.discard(fn.api_name)
    assert not resting
    woken = {fn.api_name for fn in page.fns.values() if fn.js and '"active": true' in fn.js}
    assert {"zoo_timer_on_start", "tokenizing_timer_on_start", "sweeps_timer_on_start",
            "understand_finetune_timer_on_start"} <= woken


def test_the_learning_rate_plot_of_a_new_run_is_drawn_at_once_then_at_most_every_minute(tmp_path, monkeypatch):
    import time as clock

    from app.train import tab as train_tab
    from lab_models import api
    from lab_models.training.runs import append_metrics

    jobs = api.create_job_manager(tmp_path)
    try:
        run_dir = tmp_path / "runs" / "gpt-tiny-2"
        run_dir.mkdir(parents=True)
        (run_dir / "status.json").write_text(json.dumps({"state": "stopped", "step": 0, "total_steps": 100}))
        view = train_tab.TrainView(tmp_path, jobs)
        _, signature = view.schedule("gpt-tiny-2")  # picked before its first step: an empty plot
        append_metrics(run_dir, {"step": 1, "loss": 5.0, "lr": 1e-4})
        figure, signature = view.schedule_tick("gpt-tiny-2", signature)  # the first rows: drawn at once
        assert figure != gr.skip() and signature[1] == 1
        append_metrics(run_dir, {"step": 2, "loss": 4.9, "lr": 2e-4})
        assert view.schedule_tick("gpt-tiny-2", signature)[0] == gr.skip()  # drawn with rows a moment ago
        monkeypatch.setattr(clock, "monotonic", lambda: signature[3] + train_tab.LR_REFRESH_S + 1)
        assert view.schedule_tick("gpt-tiny-2", signature)[1][1] == 2  # a minute later: the new row drawn
    finally:
        jobs.close()


def test_the_runs_table_follows_a_runs_steps_once_a_minute_and_a_new_state_at_once(monkeypatch):
    import time as clock

    from app.train import tab as train_tab
    from lab_models import api

    runs = [{"run_id": "gpt-tiny-1", "family": "gpt", "state": "running", "step": 10, "total_steps": 100}]
    monkeypatch.setattr(api, "list_runs", lambda jobs: [dict(row) for row in runs])
    view = train_tab.TrainView(None, None)
    table, *_, signature, _ = view.overview([], "loss")
    assert table is not gr.skip() and signature["rows"][0][2] == 10
    runs[0]["step"] = 20  # only the step moved: the table stays for now
    assert all(part == gr.skip() for part in view.overview([], "loss", signature))
    drawn_at = signature["drawn_at"]
    monkeypatch.setattr(clock, "monotonic", lambda: drawn_at + train_tab.TABLE_REFRESH_S + 1)
    table, *_, later, _ = view.overview([], "loss", signature)  # a minute on: the new step drawn
    assert list(table.iloc[:, 5]) == ["20 / 100"] and later["rows"][0][2] == 20  # the step column
    monkeypatch.setattr(clock, "monotonic", lambda: drawn_at + 1)
    runs[0].update(state="finished", step=100)  # a new state: at once
    table, *_, finished, _ = view.overview([], "loss", signature)
    assert table is not gr.skip() and finished["rows"][0][1] == "finished"

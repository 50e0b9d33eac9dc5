"""What keeps the page light while it stays open (issue 25): every timer ticks only while its tab is shown
(`follow_tabs` in app/display.py), the Train tab has one live event instead of five, Gradio's run history is off and its idle queue
polls slowly (app/main.py). The browser's own numbers come from benchmarks/bench_page.py; the browser test
(tests/test_browser.py) checks that a hidden tab's timer does not tick."""
from __future__ import annotations

import json

import gradio as gr
import pytest

from app.display import activity_js, changed, follow_tabs, shown_first, tabs_holding
from app.main import build_app, configure_queue, launch_kwargs


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


def test_every_timer_sits_in_a_tab_and_only_the_first_tab_ticks_when_the_page_opens(page):
    timers = timers_by_tab(page)
    assert "" not in timers  # no timer outside every tab: each one belongs to a view
    assert set(timers) == {"mask-explorer", "train", "scaling", "compare", "understand",
                           "understand/understand-finetune", "leaderboard", "corpora"}
    active = {path: [timer.active for timer in found] for path, found in timers.items()}
    assert active.pop("mask-explorer") == [True]  # the demo zoo's progress, on the tab the page opens on
    assert all(not any(flags) for flags in active.values()), active
    assert len(timers["train"]) == 2  # the Train tab's progress bar (often) and the rest (seldom)
    # each is drawn at the page's root, where an update reaches it while its tab is hidden (the "off")
    assert all(timer in page.children for found in timers.values() for timer in found)
    assert not any(isinstance(child, gr.Timer) for block in page.blocks.values()
                   if isinstance(block, gr.Tab) for child in block.children)


def test_the_train_tab_redraws_its_progress_often_and_its_plots_and_tables_seldom(page):
    from app.train.tab import LIVE_REFRESH_S, PROGRESS_REFRESH_S

    ticks = {}
    for timer in timers_by_tab(page)["train"]:
        (tick,) = [fn for fn in page.fns.values() if any(block == timer._id for block, _ in fn.targets)]
        ticks[tick.api_name] = (timer.value, tick)
    assert sorted(ticks) == ["refresh_run", "refresh_run_progress"]
    assert ticks["refresh_run_progress"][0] == PROGRESS_REFRESH_S < LIVE_REFRESH_S == ticks["refresh_run"][0]
    progress = ticks["refresh_run_progress"][1]
    assert [page.blocks[block._id].elem_id for block in progress.outputs[:1]] == ["train-progress"]
    assert len(progress.outputs) == 3  # the bar, the status line, their signature: no plot, no table
    assert len(ticks["refresh_run"][1].outputs) == 18  # run (6), learning rate, add-ons, routing (2 each), runs
    # table (5), start-from


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

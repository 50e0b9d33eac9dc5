"""The page's side of the zoo: the first tab's offer and progress (app/explorer/zoo_panel.py), Compare picking the zoo's
runs up by itself (app/compare/tab.py), and the Leaderboard's Rank the zoo (app/leaderboard/tab.py).

The handlers are called directly, on a lab home of their own, with the fake trainer of tests/support/fake_zoo_trainer.py
and a two-family demo zoo (monkeypatched), so that a "zoo" takes a second; the page itself is checked by the browser
test.
"""
from __future__ import annotations

import sys

import pytest

from app.compare.tab import CompareView
from app.explorer import zoo_panel
from app.leaderboard.tab import LeaderboardView
from app.understand import (attribution_panel, finetune_panel, lens_panel, probe_panel,
                            similarity_panel)
from app.understand.tab import UnderstandView
from lab_models import api
from lab_models.api import experiments as api_experiments
from lab_models.training.jobs.manager import JobManager

from tests.support.fake_zoo_trainer import FAKE_TRAINER
from tests.support.waiting import wait_for

SMALL_ZOO = api.ZooConfig(families=("gpt", "bert"), steps=6)


@pytest.fixture
def jobs(tmp_path, monkeypatch):
    script = tmp_path / "fake_zoo_trainer.py"
    script.write_text(FAKE_TRAINER)
    monkeypatch.setattr(api, "DEMO_ZOO", SMALL_ZOO)  # what the page's handlers read, as api.DEMO_ZOO
    monkeypatch.setattr(api_experiments, "DEMO_ZOO", SMALL_ZOO)  # what api.fill_mask_picks reads, in its own module
    manager = JobManager(tmp_path / "home", trainer_command=[sys.executable, str(script)], stop_timeout_s=5,
                         poll_interval_s=0.05)
    yield manager
    manager.close(timeout=5)


def updates(outputs):
    """The panel's outputs by name (gr.update dicts, or plain values)."""
    return dict(zip(("panel", "message", "progress", "start", "stop", "signature"), outputs))


def test_the_panel_texts_are_translated_markers_of_their_english(jobs):
    """The message and the button texts reach the page as Gradio i18n markers, one per state, of the English
    below (app/i18n/locales/en/zoo.json); the browser shows them in the reader's language."""
    from app.i18n.language import english

    states = {zoo_panel.OFFER: "zoo.offer", zoo_panel.TRAINING: "zoo.training", zoo_panel.STOPPED: "zoo.stopped",
              zoo_panel.TRAINED: "zoo.trained", zoo_panel.START_LABEL: "zoo.start",
              zoo_panel.CONTINUE_LABEL: "zoo.continue"}
    assert len(states) == 6 and all(marker.startswith("__i18n__") and f'"{key}"' in marker
                                    for marker, key in states.items())
    assert english("zoo.offer").startswith("**This lab home has no runs yet.** Train the demo zoo")
    assert english("zoo.training").startswith("**Training the demo zoo.**")
    assert english("zoo.start") == "Train the demo zoo" and english("zoo.continue") == "Continue the demo zoo"


def test_an_empty_home_shows_the_offer_and_nothing_else(jobs):
    shown = updates(zoo_panel.ZooPanel(jobs.home, jobs).view())
    assert shown["panel"]["visible"] is True
    assert shown["message"] == zoo_panel.OFFER and shown["progress"] == ""
    assert shown["start"]["visible"] is True and shown["start"]["value"] == zoo_panel.START_LABEL
    assert shown["stop"]["visible"] is False


def test_a_home_with_other_runs_only_hides_the_panel(jobs):
    jobs.start("gpt", steps=2)
    wait_for(lambda: jobs.list_runs() and jobs.list_runs()[0]["state"] == "finished", what="a plain run")
    assert updates(zoo_panel.ZooPanel(jobs.home, jobs).view())["panel"]["visible"] is False


def test_start_shows_the_progress_then_the_trained_zoo(jobs, monkeypatch):
    monkeypatch.setenv("FAKE_DELAY", "0.1")
    panel = zoo_panel.ZooPanel(jobs.home, jobs)
    started = updates(panel.start())
    assert started["message"] == zoo_panel.TRAINING and started["stop"]["visible"] is True
    assert started["start"]["visible"] is False
    assert "zoo tiny-stories-6steps" in started["progress"] and started["progress"].count('class="zoo-run ') == 2
    wait_for(lambda: api.zoo_progress(jobs, SMALL_ZOO).finished == 2, what="the fake zoo to finish")
    done = updates(panel.view(started["signature"]))  # something changed: redrawn
    assert done["message"] == zoo_panel.TRAINED
    assert done["start"]["visible"] is False and done["stop"]["visible"] is False
    assert f"<b>2</b> / 2 {zoo_panel.RUNS_FINISHED} · 100% of all steps done" in done["progress"]
    # the timer's next tick finds nothing new: every output is skipped
    assert all(update == {"__type__": "update"} for update in panel.view(done["signature"]))


def test_the_page_trains_a_zoo_of_several_seeds_and_shows_a_row_per_family_and_seed(jobs):
    panel = zoo_panel.ZooPanel(jobs.home, jobs)
    started = updates(panel.start(2))
    assert started["progress"].count('class="zoo-run ') == 4 and "GPT · seed 1" in started["progress"]
    wait_for(lambda: api.zoo_progress(jobs, panel.config(2)).finished == 4, what="the two-seed zoo to finish")
    assert api.trained_seeds(jobs, SMALL_ZOO) == 2 and panel.config().seeds == 2  # the page finds the seeds again
    done = updates(panel.view())
    assert done["message"] == zoo_panel.TRAINED and f"<b>4</b> / 4 {zoo_panel.RUNS_FINISHED}" in done["progress"]
    assert [run.seed for run in api.zoo_progress(jobs, SMALL_ZOO).runs] == [0, 0]  # the other views keep seed 0
    updates(panel.start(1))  # a smaller number never drops the seeds the zoo has
    assert panel.config().seeds == 2
    with pytest.raises(ValueError, match="Seeds must be a whole number from 1 to 20"):
        panel.start(0)


def test_stop_then_continue(jobs, monkeypatch):
    monkeypatch.setenv("FAKE_DELAY", "0.2")
    panel = zoo_panel.ZooPanel(jobs.home, jobs)
    panel.start()
    wait_for(lambda: any(run.state == "running" for run in api.zoo_progress(jobs, SMALL_ZOO).runs),
             what="the first run to start")
    panel.stop()
    wait_for(lambda: not api.zoo_progress(jobs, SMALL_ZOO).active, what="the zoo to stop")
    stopped = updates(panel.view())
    assert stopped["message"] == zoo_panel.STOPPED
    assert stopped["start"]["value"] == zoo_panel.CONTINUE_LABEL and stopped["start"]["visible"] is True
    monkeypatch.setenv("FAKE_DELAY", "0.01")
    assert updates(panel.start())["stop"]["visible"] is True
    wait_for(lambda: api.zoo_progress(jobs, SMALL_ZOO).finished == 2, what="the continued zoo to finish")


def test_compare_picks_the_finished_zoo_runs_until_the_user_picks_others(jobs):
    view = CompareView(jobs.home, jobs)
    picker, auto, signature = view.refresh_if_changed([], [], None)
    assert picker["value"] == [] and auto == []  # nothing has weights yet
    api.start_zoo(jobs, SMALL_ZOO)
    wait_for(lambda: api.zoo_progress(jobs, SMALL_ZOO).finished == 2, what="the fake zoo to finish")
    picker, auto, signature = view.refresh_if_changed([], auto, signature)
    gpt, bert = (run.run_id for run in api.zoo_progress(jobs, SMALL_ZOO).runs)
    assert picker["value"] == [gpt, bert] == auto  # the zoo's order: GPT first
    assert all(update == {"__type__": "update"} for update in view.refresh_if_changed([gpt, bert], auto, signature))
    other = jobs.start("t5", steps=2)  # a new run appears: the picker lists it, and keeps the user's choice
    wait_for(lambda: jobs.status(other)["state"] == "finished", what="a plain run")
    picker, auto, _ = view.refresh_if_changed([bert], auto, signature)
    assert picker["value"] == [bert] and other in [value for _, value in picker["choices"]]
    # opening the tab (or Refresh) with nothing picked picks the zoo's runs at once, not at the timer's first tick;
    # the timer then takes them for the page's own (it follows the zoo), and a user's pick stays theirs
    assert view.refresh([])["value"] == [gpt, bert] and view.refresh([bert, "gone"])["value"] == [bert]
    assert view.refresh_if_changed([gpt], [], None)[0]["value"] == [gpt, bert]
    assert view.refresh_if_changed([bert], [], None)[0]["value"] == [bert]


def test_understand_fills_masks_with_the_zoos_bert_like_runs_until_the_user_picks(jobs):
    view = UnderstandView(jobs.home, jobs)
    assert api.fill_mask_picks(jobs) == [] and view.refresh([], [], None)[0]["value"] == []
    api.start_zoo(jobs, SMALL_ZOO)
    wait_for(lambda: api.zoo_progress(jobs, SMALL_ZOO).finished == 2, what="the fake zoo to finish")
    gpt, bert = (run.run_id for run in api.zoo_progress(jobs, SMALL_ZOO).runs)
    other = jobs.start("t5", steps=2)  # newer, not in the showcase, but T5 fills a blank: after the zoo's BERT
    wait_for(lambda: jobs.status(other)["state"] == "finished", what="a plain run")
    assert api.fill_mask_picks(jobs) == [bert, other]  # GPT cannot fill a mask
    assert api.fill_mask_picks(jobs, max_runs=1) == [bert]
    fill, embeddings, attention = view.refresh([], [], None)
    assert fill["value"] == [bert, other] and attention["value"] == other  # the newest run
    assert embeddings["value"] == [bert, gpt, other]  # the zoo's BERT and GPT (no ELMo, no zoo T5), then the newest
    assert view.refresh([gpt], [], None)[0]["value"] == [gpt]  # the user's pick stays


def test_every_understand_section_picks_the_zoos_runs_until_the_user_picks(jobs):
    """Probing, logit lens, attributions, sentence similarity and fine-tuning open with runs picked (the zoo's that
    make the view's point, then the newest), never empty while a run has weights; a user's pick stays theirs."""
    sections = {"probing": probe_panel.ProbeView, "lens": lens_panel.LensView,
                "attributions": attribution_panel.AttributionView,
                "sentences": similarity_panel.SentenceSimilarityView, "finetune": finetune_panel.FinetuneView}
    views = {name: cls(jobs.home, jobs) for name, cls in sections.items()}
    assert all(view.default_picks() == [] and view.refresh_runs([])["value"] == [] for view in views.values())
    api.start_zoo(jobs, SMALL_ZOO)
    wait_for(lambda: api.zoo_progress(jobs, SMALL_ZOO).finished == 2, what="the fake zoo to finish")
    gpt, bert = (run.run_id for run in api.zoo_progress(jobs, SMALL_ZOO).runs)
    expected = {"probing": [bert, gpt], "lens": [gpt, bert], "attributions": [bert, gpt], "sentences": [bert, gpt],
                "finetune": [bert, gpt]}
    assert {name: view.refresh_runs([])["value"] for name, view in views.items()} == expected
    assert {name: view.refresh_runs(None)["value"] for name, view in views.items()} == expected
    assert all(view.refresh_runs([gpt])["value"] == [gpt] for view in views.values())
    assert views["lens"].refresh_runs([["not", "names"]])["value"] == [gpt, bert]  # an API client's odd value
    with pytest.raises(ValueError, match="Unknown view 'nothing'"):
        api.view_picks(jobs, "nothing", 4)


def test_the_understand_timer_redraws_every_sections_picker_when_new_runs_appear(jobs):
    view = UnderstandView(jobs.home, jobs)
    section = probe_panel.ProbeView(jobs.home, jobs)
    outputs = view.refresh_if_changed([], [], None, None, [(section.refresh_runs, [])])
    assert len(outputs) == 5 and outputs[3]["value"] == [] and outputs[4][0] == []
    signature = outputs[4]
    assert all(update == {"__type__": "update"}
               for update in view.refresh_if_changed([], [], None, signature, [(section.refresh_runs, [])]))
    api.start_zoo(jobs, SMALL_ZOO)
    wait_for(lambda: api.zoo_progress(jobs, SMALL_ZOO).finished == 2, what="the fake zoo to finish")
    gpt, bert = (run.run_id for run in api.zoo_progress(jobs, SMALL_ZOO).runs)
    outputs = view.refresh_if_changed([], [], None, signature, [(section.refresh_runs, [])])
    assert outputs[3]["value"] == [bert, gpt] and {gpt, bert} <= {value for _, value in outputs[3]["choices"]}


def test_rank_the_zoo_without_a_zoo_says_what_to_do(tmp_path):
    view = LeaderboardView(api.lab_home(tmp_path / "empty"))
    with pytest.raises(ValueError, match="Train the demo zoo"):
        view.rank_zoo(None)
    corpus, row, zoo, signature = view.refresh_if_changed(None, None, None)
    assert row["visible"] is False and zoo["choices"] == []
    assert all(update == {"__type__": "update"} for update in view.refresh_if_changed(None, None, signature))

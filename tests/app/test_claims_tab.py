"""The Claims tab (app/claims/tab.py): its cards, the picked claim's card, bars and figure, Run queueing the claim's arm
runs and then its scoring job, and the refusals. The handlers are called directly, on a lab home of their own, with the
fake trainer of tests/support/fake_zoo_trainer.py (a "run" takes a second); the verdict itself is tested on real runs in
tests/experiments/test_claims.py, and the page in the browser by the fuzz test of every endpoint.
"""
from __future__ import annotations

import sys

import pytest

from app.claims import figures
from app.claims.tab import ClaimsView
from lab_models import api
from lab_models.training.jobs.manager import JobManager
from tests.support.fake_zoo_trainer import FAKE_TRAINER
from tests.support.waiting import wait_for


@pytest.fixture
def jobs(tmp_path):
    script = tmp_path / "fake_zoo_trainer.py"
    script.write_text(FAKE_TRAINER)
    manager = JobManager(tmp_path / "home", trainer_command=[sys.executable, str(script)], stop_timeout_s=5,
                         poll_interval_s=0.05)
    yield manager
    manager.close(timeout=5)


def test_a_fresh_lab_shows_a_card_per_claim_not_run_and_the_picked_claims_facts(jobs):
    cards, detail, progress, figure, table, signature = ClaimsView(jobs).show("electra-per-flop", "tiny", 3)
    assert cards.count('class="claim-card"') == len(api.claim_records()) and cards.count("not run yet") == len(api.claim_records())
    assert "Replaced-token detection learns more per FLOP" in detail and "79.9 (ELECTRA-Small)" in detail
    assert "1e+12 training FLOPs per run, 3 seeds per arm" in detail
    assert progress.count('class="zoo-run claim-run"') == 6 and progress.count("not started") == 6  # 2 arms x 3 seeds
    assert figure.layout.annotations and "No run of this claim yet" in figure.layout.annotations[0].text
    assert len(table["value"]) == len(api.claim_records()) and table["headers"][-2] == "verdict"
    assert signature[0] == "electra-per-flop"


def test_run_queues_the_claims_arm_runs_then_its_scoring_job_and_the_bars_follow(jobs):
    view = ClaimsView(jobs)
    said = view.start("7", "tiny", 1)
    assert said.startswith("Claim 7 queued: 2 arm runs to train")
    scoring = api.claims_score_jobs(jobs)
    assert len(scoring) == 1 and scoring[0]["claims"] == ["electra-per-flop"]
    runs = {row["family"]: row for row in jobs.list_runs()}
    assert set(runs) == {"bert", "electra"} and {row["zoo"] for row in runs.values()} == {"tiny-stories-1e12flops"}

    def finished():
        progress = api.claim_progress(jobs, "7", api.ClaimsSetup(seeds=1))
        return all(run.state == "finished" for arm_runs in progress.values() for run in arm_runs)

    wait_for(finished, timeout=60, what="the fake arm runs to finish")
    _, _, progress, _, _, _ = view.show("7", "tiny", 1)
    assert progress.count("finished") >= 2 and "scoring:" in progress
    # a second Run reuses the finished runs: only a new scoring job is queued
    assert view.start("7", "tiny", 1).startswith("Claim 7: its 2 runs are trained already")
    assert len(jobs.list_runs()) == 2 and len(api.claims_score_jobs(jobs)) == 2


def test_bad_seeds_a_bad_preset_an_unknown_claim_and_nothing_to_stop_are_refused_with_a_message(jobs):
    view = ClaimsView(jobs)
    for seeds in (0, -1, 2.5, float("nan"), None, "three", 10**9):
        with pytest.raises(ValueError, match="Seeds must be a whole number"):
            view.show("7", "tiny", seeds)
    with pytest.raises(ValueError, match="Unknown preset 'huge'"):
        view.start("7", "huge", 3)
    with pytest.raises(ValueError, match="unknown claim 'bart'"):
        view.show("bart", "tiny", 3)
    with pytest.raises(ValueError, match="nothing to stop"):
        view.stop("7", "tiny", 3)
    assert jobs.list_runs() == []


def test_the_verdict_words_and_the_table_are_in_the_readers_language(monkeypatch):
    monkeypatch.setattr(figures, "current_language", lambda: "zh")
    monkeypatch.setattr("app.i18n.language.current_language", lambda: "zh")
    assert figures.verdict_word("holds") == "此处成立"
    assert figures.statement(api.claim("7")).startswith("替换词检测")
    assert figures.table_headers()[1] == "论断"


def test_opening_the_tab_gives_the_picker_its_claims_in_the_readers_language(jobs, monkeypatch):
    monkeypatch.setattr(figures, "current_language", lambda: "zh")
    monkeypatch.setattr("app.i18n.language.current_language", lambda: "zh")
    picker, *drawn, _ = ClaimsView(jobs).opened("7", "tiny", 3, None)
    assert dict((key, label) for label, key in picker["choices"])["electra-per-flop"].startswith("7. 替换词检测")
    assert picker["value"] == "electra-per-flop"
    assert drawn[0].count("尚未运行") == len(api.claim_records()) and "替换词检测" in drawn[0]  # the cards, in Chinese

"""The page's side of corpora at any size (app/corpora/tab.py, app/train/figures.py): a path on the server is looked
at and linked only inside the corpus root, a linked corpus too big to load gets a card from its beginning, Tokenize
runs a background worker whose bar shows bytes, tokens, MB/s and ETA and whose Stop keeps the work, and the Train tab
shows a run that is tokenizing as "tokenizing" with the same numbers, in English and in Chinese."""
from __future__ import annotations

import json
import time

import pytest

from app.corpora.tab import CorporaView, tokenize_progress_html
from app.i18n.language import reading_language
from app.train.figures import progress_html, state_label
from lab_models import api
from lab_models.text import corpora, corpus_sources


def write_lines(path, count: int):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(f"line {i}: the cat sees the dog number {i % 13} ." for i in range(count)),
                    encoding="utf-8")
    return path


def test_a_server_path_is_read_only_inside_the_corpus_root(tmp_path):
    root = tmp_path / "data"
    write_lines(root / "web" / "a.txt", 50)
    (tmp_path / "secret.txt").write_text("not yours\n", encoding="utf-8")
    (root / "escape").symlink_to(tmp_path / "secret.txt")
    view = CorporaView(tmp_path / "home", root)
    assert "Found 1 file(s)" in view.look("web", "")
    for outside in ("../secret.txt", str(tmp_path / "secret.txt"), "escape", "web/../../secret.txt"):
        with pytest.raises(ValueError, match="leads outside"):
            view.look(outside, "")
    with pytest.raises(ValueError, match="Type the path"):
        view.link("", "", "")
    status, choices, table, sample = view.link("web", "", "web-lines")
    assert status.startswith("Linked **web-lines**: 1 file(s)") and choices["value"] == "web-lines"
    assert "web-lines" in api.list_corpora(home=tmp_path / "home")
    assert api.corpus_root(home=tmp_path / "home2") == (tmp_path / "home2" / "server-corpora").resolve()


def test_a_big_linked_corpus_gets_a_card_from_its_beginning(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_sources, "IN_MEMORY_MAX_BYTES", 1000)  # this 100 KB file counts as big
    monkeypatch.setattr(corpora, "IN_MEMORY_MAX_BYTES", 1000)
    monkeypatch.setattr(corpus_sources, "CARD_SAMPLE_BYTES", 2000)
    root = tmp_path / "data"
    write_lines(root / "big.txt", 2000)
    view = CorporaView(tmp_path / "home", root)
    view.link("big.txt", "", "big")
    table, sample = view.card("big")
    facts = dict(zip(table["field"], table["value"]))
    assert facts["documents"] == facts["lines"] == "—" and facts["bytes"] == f"{(root / 'big.txt').stat().st_size:,}"
    assert facts["path"] == str((root / "big.txt").resolve()) and facts["files"] == "1"
    assert "the language mix and the sample are from its first 2.0 KB" in sample
    with pytest.raises(ValueError, match="too big to load whole"):
        api.load_named_corpus("big", home=tmp_path / "home")


@pytest.mark.slow
def test_tokenize_runs_in_the_background_with_its_bar_and_a_run_reuses_the_shards(tmp_path):
    home = tmp_path / "home"
    root = tmp_path / "data"
    write_lines(root / "notes.txt", 3000)
    jobs = api.create_tokenize_jobs(home)
    try:
        view = CorporaView(home, root, jobs)
        view.link("notes.txt", "", "notes")
        job_id, bar, _ = view.tokenize("notes", "gpt", "tiny")
        assert 'class="train-progress' in bar
        assert view.tokenize("notes", "gpt", "tiny")[0] == job_id  # one job per corpus at a time
        status = jobs.wait(job_id, timeout=600)
        assert status["state"] == "finished", status
        assert status["message"].startswith("tokenized notes: ") and status["progress"]["fraction"] == 1.0
        bar, line = view.tokenize_view(job_id)
        assert "tokenized" in bar and "100%" in bar and "tokens" in bar and line.startswith("tokenized notes")
        card, _ = view.card("notes")
        assert "tokens (shards, vocabulary)" in list(card["field"])
        out = tmp_path / "run"
        from lab_models.training import run as train

        code = train.main(["--family", "gpt", "--out", str(out), "--corpus", "notes", "--steps", "2", "--home",
                           str(home)])
        assert code == 0
        assert json.loads((out / "config.json").read_text())["token_shards"]["folder"] == status["shards"]["folder"]
        with pytest.raises(ValueError, match="Unknown corpus"):
            view.tokenize("../notes", "gpt", "tiny")
        with pytest.raises(ValueError, match="Start a tokenization first"):
            view.stop_tokenizing("")
    finally:
        jobs.close()


@pytest.mark.slow
def test_stop_keeps_the_work_and_a_new_start_continues(tmp_path):
    home = tmp_path / "home"
    root = tmp_path / "data"
    write_lines(root / "long.txt", 60_000)  # ~3 MB: several commits
    jobs = api.create_tokenize_jobs(home)
    try:
        view = CorporaView(home, root, jobs)
        view.link("long.txt", "", "long")
        job_id, *_ = view.tokenize("long", "gpt", "tiny")
        deadline = time.monotonic() + 600
        while (api.tokenizing_status(jobs, job_id).get("progress") or {}).get("phase") != "tokenizing":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        view.stop_tokenizing(job_id)
        status = jobs.wait(job_id, timeout=120)
        assert status["state"] == "stopped" and "resumable" in status["message"], status
        again, *_ = view.tokenize("long", "gpt", "tiny")
        assert again != job_id and jobs.wait(again, timeout=600)["state"] == "finished"
    finally:
        jobs.close()


def test_the_bars_read_english_and_chinese():
    running = {"state": "running", "progress": {"phase": "tokenizing", "bytes_done": 150e6, "bytes_total": 300e6,
                                                "tokens": 41e6, "mb_per_s": 3.0, "eta_s": 50.0, "fraction": 0.5}}
    bar = tokenize_progress_html(running)
    assert "tokenizing" in bar and "150.0 MB / 300.0 MB (50%)" in bar and "41.0M tokens" in bar and "3.0 MB/s" in bar
    assert 'aria-valuenow="50"' in bar and "ETA 50 s" in bar
    summary = {"state": "running", "phase": "tokenizing", "step": 0, "total_steps": 5, "tokenizing":
               {"phase": "tokenizing", "bytes_done": 150e6, "bytes_total": 300e6, "tokens": 41e6, "mb_per_s": 3.0,
                "eta_s": 50.0, "fraction": 0.5}}
    train_bar = progress_html(summary)
    assert state_label(summary) == "tokenizing" and "150.0 / 300.0 MB (50%)" in train_bar and "41.0M tokens" in \
        train_bar and 'data-phase="tokenizing"' in train_bar
    with reading_language("zh"):
        assert "分词中" in tokenize_progress_html(running) and "个词元" in tokenize_progress_html(running)
        assert state_label(summary) == "分词中" and "41.0M 个词元" in progress_html(summary)
        assert "分词中：训练分词器" in progress_html({**summary, "tokenizing": {"phase": "tokenizer"}})

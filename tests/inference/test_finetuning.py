"""Fine-tuning (lab_models/inference/finetuning/run.py) and its labelled tasks (lab_models/text/tasks.py).

Two tiny runs are pretrained once for the module with the real CLI (`python -m lab_models train`), BERT for 30 steps
and GPT for 10, in a lab home of their own; the fine-tunings then run in-process (no interpreter start-up), except
the one that goes through the JobManager (a worker process, stopped with SIGTERM) and one bad-argument check.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab_models.training import runs
from lab_models.batch import IGNORE_INDEX
from lab_models.text.corpora import load_corpus
from lab_models.inference.finetuning.config import LEADERBOARD_COLUMNS, RESULT_FILE, FinetuneConfig
from lab_models.inference.finetuning.run import finetune, main
from lab_models.inference.finetuning.results import finetune_leaderboard, list_finetunes, start_finetune
from lab_models.text.tasks import TASKS, csv_task, encode_words, first_piece_labels, load_task

REPO = Path(__file__).resolve().parents[2]


def _env(home: Path) -> dict:
    # one thread per process: two workers with two threads each on a small machine spend most of their time waiting
    env = dict(os.environ, PRETRAINING_LAB_HOME=str(home), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A lab home with a BERT run (30 steps) and a GPT run (10 steps), trained side by side by the real CLI."""
    home = tmp_path_factory.mktemp("finetune-home")
    jobs = {}
    for family, steps in (("bert", 30), ("gpt", 10)):
        out = home / "runs" / f"{family}-tiny-test"
        jobs[family] = (out, subprocess.Popen(
            [sys.executable, "-m", "lab_models", "train", "--family", family, "--out", str(out), "--steps", str(steps),
             "--home", str(home)], cwd=REPO, env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for family, (out, process) in jobs.items():
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f"pretraining {family} failed: {output.decode(errors='replace')[-2000:]}"
        assert (out / runs.MODEL_FILE).is_file()
    return {"home": home, "bert": jobs["bert"][0], "gpt": jobs["gpt"][0]}


@pytest.fixture(scope="module")
def topic_result(lab):
    """BERT fine-tuned on the 5-way topic task for 60 steps (in-process)."""
    out = lab["home"] / "finetunes" / "bert-tiny-test--topic--fixture"
    config = FinetuneConfig(run_dir=str(lab["bert"]), task="topic", out=str(out), steps=60, lr=2e-3, eval_every=30,
                            home=str(lab["home"]))
    return out, finetune(config)


# ------------------------------------------------------------------------------------------------ tasks
def test_builtin_tasks_have_their_labels_and_the_corpus_split():
    validation_text = " ".join(load_corpus("synthetic").validation)
    expected = {"sentiment": ("sequence", 3), "topic": ("sequence", 5), "entailment": ("pair", 3),
                "tagging": ("token", 10)}
    assert set(TASKS) == set(expected) | {"scope", "story_order"}
    for name, (kind, n_labels) in expected.items():
        task = load_task(name)
        assert (task.kind, task.n_labels) == (kind, n_labels)
        assert len(task.train) + len(task.validation) == 8000
        assert 300 < len(task.validation) < 600  # the synthetic corpus's held-out stories, ~5%
        counts = task.label_counts("train")
        assert list(counts) == list(task.label_names) and all(c > 0 for c in counts.values())
        if kind != "token":
            assert sum(counts.values()) == len(task.train)
            assert 0.15 < task.majority_baseline() < 0.5
        if kind != "pair":  # the validation sentences are the ones a run pretrained on the synthetic corpus held out
            assert all(e.text in validation_text for e in task.validation)
    pair = load_task("entailment").train[0]
    assert pair.text_pair and pair.text.startswith("the ")
    tagged = load_task("tagging").validation[0]
    assert len(tagged.label) == len(tagged.words) and tagged.words[-1] == "."
    assert load_task("tagging").label_names[tagged.label[-1]] == "PUNCT"


def test_the_stories_tasks_pair_sentences_by_scope_and_order_on_the_stories_split():
    from lab_models.text.stories import grammatical

    scope, order = load_task("scope"), load_task("story_order")
    assert (scope.kind, scope.label_names, scope.source) == ("pair", ("entailment", "contradiction", "neutral"),
                                                             "stories")
    assert (order.kind, order.label_names) == ("pair", ("swapped", "in order"))
    assert len(scope.validation) > 3000 and len(order.validation) > 2000  # the corpus's held-out stories and a seed's
    assert scope.majority_baseline() < 0.5 and 0.45 < order.majority_baseline() < 0.55
    example = scope.train[0]
    assert (example.text, example.text_pair, scope.label_names[example.label]) == (
        "no judge sees a map .", "no big judge sees a map .", "entailment")  # no: downward in its noun
    assert all(grammatical(e.text) and grammatical(e.text_pair) for e in scope.validation[:200])
    training_text = " ".join(load_corpus("stories").train)
    swapped = [e for e in order.validation if order.label_names[e.label] == "swapped"]
    assert swapped and all(f"{e.text_pair} {e.text}" not in training_text for e in swapped[:100])


def test_builtin_splits_are_deterministic():
    from lab_models.text import tasks

    first = load_task("sentiment")
    tasks._builtin_task.cache_clear()
    tasks._synthetic_split.cache_clear()
    again = load_task("sentiment")
    assert first is not again
    assert first.train == again.train and first.validation == again.validation
    with pytest.raises(ValueError, match="unknown task 'poetry'"):
        load_task("poetry")


def test_tagging_labels_sit_on_the_first_subword_piece():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "the": 1, "c": 2, "##at": 3, "s": 4, ".": 5}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    ids, labels = encode_words(tokenizer, ["the", "cat", "sat", "."], [0, 2, 4, 9])
    assert [tokenizer.id_to_token(i) for i in ids] == ["the", "c", "##at", "s", "##at", "."]
    assert labels == [0, 2, IGNORE_INDEX, 4, IGNORE_INDEX, 9]
    # SentencePiece's lone "▁" piece stands for the space before a word: it is that word's first piece
    assert first_piece_labels([(0, 1), (1, 2), (2, 5)], ["a", "not"], [7, 8]) == [7, 8, IGNORE_INDEX]
    # byte-level BPE's pieces carry their leading space ("Ġcat" covers " cat")
    assert first_piece_labels([(0, 3), (3, 5), (5, 7)], ["the", "cat"], [1, 2]) == [1, 2, IGNORE_INDEX]


def _write_csv(path: Path, rows: list[str], header: str = "text,label") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_csv_task_reads_labels_and_splits(tmp_path):
    rows = [f"review number {i} was {'great' if i % 2 else 'awful'},{'pos' if i % 2 else 'neg'}" for i in range(40)]
    path = _write_csv(tmp_path / "reviews.csv", rows + [",neg", "empty label,"])
    task = csv_task(path, "text", "label")
    assert (task.name, task.kind, task.label_names) == ("csv:reviews.csv", "sequence", ("neg", "pos"))
    assert len(task.train) + len(task.validation) == 40  # the two half-empty rows are skipped
    assert 2 <= len(task.validation) <= 16
    again = csv_task(path, "text", "label")
    assert again.validation == task.validation  # the split is a hash of the text: the same every time
    pairs = _write_csv(tmp_path / "pairs.csv", [f"a{i};b{i};{i % 3}" for i in range(30)], header="first;second;y")
    pair_task = csv_task(pairs, "first", "y", text_pair_column="second")
    assert pair_task.kind == "pair" and pair_task.label_names == ("0", "1", "2")
    assert pair_task.train[0].text_pair.startswith("b")


@pytest.mark.parametrize("case, message", [
    ("missing", "no CSV file at"),
    ("column", "has no column 'label' .* its columns are text, sentiment"),
    ("one_class", "only one label"),
    ("few_rows", "3 usable rows"),
    ("binary", "binary file"),
    ("latin1", "not valid UTF-8"),
])
def test_csv_task_errors_say_what_to_fix(tmp_path, case, message):
    path = tmp_path / "data.csv"
    if case == "column":
        _write_csv(path, [f"t{i},x" for i in range(20)], header="text,sentiment")
    elif case == "one_class":
        _write_csv(path, [f"t{i},same" for i in range(20)])
    elif case == "few_rows":
        _write_csv(path, ["a,x", "b,y", "c,x"])
    elif case == "binary":
        path.write_bytes(b"text,label\n\x00\x01\x02\x03binary,1\n" * 5)
    elif case == "latin1":
        path.write_bytes("text,label\n".encode() + "caf\xe9 au lait,1\n".encode("latin-1") * 20)
    with pytest.raises(ValueError, match=message):
        csv_task(path, "text", "label")


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="unknown pooling 'middle'"):
        FinetuneConfig(run_dir="r", task="topic", pooling="middle")
    with pytest.raises(ValueError, match="lm_aux_weight must be a finite number >= 0"):
        FinetuneConfig(run_dir="r", task="topic", lm_aux_weight=-1.0)
    with pytest.raises(ValueError, match="--csv PATH, --text-column NAME and --label-column NAME"):
        FinetuneConfig(run_dir="r", task="csv")
    resolved = FinetuneConfig(run_dir="r", task="topic").resolved("gpt2", 64, 128, 1e-3)
    assert (resolved.pooling, resolved.lm_aux_weight, resolved.max_len, resolved.lr) == ("last", 0.5, 64, 1e-3)
    resolved = FinetuneConfig(run_dir="r", task="topic").resolved("t5", 64, 128)
    assert (resolved.pooling, resolved.lm_aux_weight, resolved.lr) == ("first", 0.0, 5e-4)


# ------------------------------------------------------------------------------------------------ fine-tuning
@pytest.mark.slow
def test_bert_learns_the_topic_task(topic_result):
    out, result = topic_result
    rows = runs.read_metrics(out)
    train = [r for r in rows if r["split"] == "train"]
    val = [r for r in rows if r["split"] == "val"]
    assert [r["step"] for r in train] == list(range(1, 61))
    early = sum(r["loss"] for r in train[:10]) / 10
    late = sum(r["loss"] for r in train[-10:]) / 10
    assert early > 1.55 and late < early - 0.25, (early, late)  # from ln 5 = 1.61 down
    assert [r["step"] for r in val] == [30, 60] and all(0 <= r["macro_f1"] <= 1 for r in val)
    baseline = load_task("topic").majority_baseline()
    assert result["majority_baseline"] == pytest.approx(baseline)
    assert result["accuracy"] > baseline + 0.1, result  # clearly better than always answering the commonest topic
    assert result["accuracy"] == val[-1]["accuracy"]
    assert (result["state"], result["steps"], result["pooling"], result["lm_aux_weight"]) == ("finished", 60,
                                                                                           "first", 0.0)
    assert result["family"] == "bert" and result["run_id"] == "bert-tiny-test" and result["num_parameters"] > 0
    assert sum(map(sum, result["confusion"])) == result["validation_examples"]
    status = runs.read_status(out)
    assert (status["state"], status["step"], status["total_steps"]) == ("finished", 60, 60)
    config = runs.read_config(out)
    assert config["finetune"]["pooling"] == "first" and config["finetune"]["lr"] == 2e-3
    assert config["task"]["name"] == "topic" and json.loads((out / RESULT_FILE).read_text()) == result


@pytest.mark.slow
def test_gpt_reads_the_last_token_and_adds_half_the_lm_loss(lab):
    out = lab["home"] / "finetunes" / "gpt-tiny-test--sentiment--aux"
    result = finetune(FinetuneConfig(run_dir=str(lab["gpt"]), task="sentiment", out=str(out), steps=6,
                                     eval_every=6, home=str(lab["home"])))
    assert (result["pooling"], result["lm_aux_weight"]) == ("last", 0.5)  # GPT §3.2: λ = 0.5
    train = [r for r in runs.read_metrics(out) if r["split"] == "train"]
    assert len(train) == 6
    for row in train:
        assert set(row["losses"]) == {"task", "lm"}
        assert row["loss"] == pytest.approx(row["losses"]["task"] + 0.5 * row["losses"]["lm"], rel=1e-5)
        assert row["losses"]["lm"] > 3.0  # a next-token loss over a ~500-token vocabulary, not a 3-way one
    off = finetune(FinetuneConfig(run_dir=str(lab["gpt"]), task="sentiment", steps=2, lm_aux_weight=0.0,
                                  out=str(out.with_name(out.name + "-off")), home=str(lab["home"])))
    assert off["lm_aux_weight"] == 0.0
    assert all(set(r["losses"]) == {"task"} for r in runs.read_metrics(out.with_name(out.name + "-off"))
               if r["split"] == "train")


@pytest.mark.slow
def test_bert_tags_words(lab):
    out = lab["home"] / "finetunes" / "bert-tiny-test--tagging--fixture"
    result = finetune(FinetuneConfig(run_dir=str(lab["bert"]), task="tagging", out=str(out), steps=30, lr=2e-3,
                                     eval_every=30, home=str(lab["home"])))
    task = load_task("tagging")
    words = sum(len(e.words) for e in task.validation)
    assert result["scored"] == words  # one prediction per word: its first piece
    assert result["pooling"] == "per-token" and len(result["label_names"]) == 10
    assert result["accuracy"] > task.majority_baseline() + 0.2, result


@pytest.mark.slow
def test_bad_cli_arguments_exit_2_with_one_line(lab, capsys):
    process = subprocess.run([sys.executable, "-m", "lab_models", "finetune", "--run", str(lab["bert"]), "--task",
                              "poetry"], cwd=REPO, env=_env(lab["home"]), capture_output=True, text=True, timeout=120)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "error: unknown task 'poetry': choose one of sentiment, topic, entailment, tagging, scope, story_order, or csv "
        "with a CSV file"]
    cases = [
        (["--task", "topic"], "--run is required"),
        (["--run", str(lab["home"] / "runs" / "nope"), "--task", "topic"], "no run folder at"),
        (["--run", str(lab["bert"]), "--task", "topic", "--pool", "middle"], "unknown pooling 'middle'"),
        (["--run", str(lab["bert"]), "--task", "topic", "--steps", "0"], "steps must be a whole number >= 1"),
        (["--run", str(lab["bert"]), "--csv", str(lab["home"] / "none.csv"), "--text-column", "t",
          "--label-column", "l"], "no CSV file at"),
        (["--run", str(lab["bert"]), "--task", "topic", "--max-len", "4000"], "longer than the run's 128 positions"),
        (["--run", str(lab["bert"]), "--task", "topic", "--oops"], "unrecognized arguments: --oops"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (argv, lines)


@pytest.mark.slow
def test_job_manager_queues_shows_progress_and_stops_a_finetune(lab):
    from lab_models.training.jobs.manager import JobManager

    manager = JobManager(lab["home"], recover=False, stop_timeout_s=60, env={"OMP_NUM_THREADS": "1"})
    try:
        with pytest.raises(ValueError, match="no CSV file at"):
            start_finetune(manager, "bert-tiny-test", "csv", csv_path=str(lab["home"] / "none.csv"),
                           text_column="t", label_column="l")
        finetune_id = start_finetune(manager, "bert-tiny-test", "sentiment", steps=100_000, eval_every=50_000)
        assert finetune_id.startswith("bert-tiny-test--sentiment--")
        folder = lab["home"] / "finetunes" / finetune_id
        assert manager.run_dir(finetune_id) == folder
        assert manager.status(finetune_id)["total_steps"] == 100_000
        assert manager.command(finetune_id)[1:4] == ["-m", "lab_models", "finetune"]
        deadline = time.time() + 120
        while time.time() < deadline:
            status = manager.status(finetune_id)
            if status["state"] == "running" and status["step"] >= 3:
                break
            assert status["state"] in ("queued", "running"), status
            time.sleep(0.2)
        else:
            pytest.fail(f"the fine-tuning did not start: {manager.status(finetune_id)}")
        assert manager.summary(finetune_id)["total_steps"] == 100_000
        manager.stop(finetune_id)
        deadline = time.time() + 90
        while manager.status(finetune_id)["state"] != "stopped" and time.time() < deadline:
            time.sleep(0.2)
        status = manager.status(finetune_id)
        assert status["state"] == "stopped", status
        result = json.loads((folder / RESULT_FILE).read_text())
        assert result["state"] == "stopped" and 3 <= result["steps"] == status["step"] < 100_000
        assert 0 <= result["accuracy"] <= 1
        assert any(r["split"] == "val" and r["step"] == result["steps"] for r in runs.read_metrics(folder))
        with pytest.raises(ValueError, match="cannot be resumed"):
            manager.resume(finetune_id)
        assert finetune_id not in manager.run_ids()  # the runs table lists pretraining runs only
    finally:
        manager.close()


@pytest.mark.slow
def test_leaderboard_lists_the_finished_finetunes(lab, topic_result):
    out, result = topic_result
    board = finetune_leaderboard(lab["home"])
    assert list(board.columns) == LEADERBOARD_COLUMNS
    row = board[board["finetune"] == out.name].iloc[0]
    assert (row["pretrained run"], row["family"], row["task"], row["steps"]) == ("bert-tiny-test", "bert", "topic", 60)
    assert row["accuracy"] == pytest.approx(result["accuracy"]) and row["macro F1"] == pytest.approx(result["macro_f1"])
    assert row["seconds"] > 0 and row["state"] == "finished"
    topic_only = finetune_leaderboard(lab["home"], tasks=["topic"], runs_filter=["bert-tiny-test"])
    assert set(topic_only["task"]) == {"topic"} and out.name in set(topic_only["finetune"])
    assert finetune_leaderboard(lab["home"], runs_filter=["no-such-run"]).empty
    listed = {row["finetune_id"]: row for row in list_finetunes(lab["home"])}
    assert listed[out.name]["state"] == "finished" and listed[out.name]["has_result"]

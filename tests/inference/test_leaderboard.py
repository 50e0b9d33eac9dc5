"""The equal-budget leaderboard (lab_models/inference/leaderboard.py, app/leaderboard/tab.py).

The tiny gpt, bert and t5 runs of tests/support/tiny_runs.py (30 steps each, trained once per session by the CLI) are
copied into a lab home of this module's own, with a fourth run: the BERT run again, relabelled as trained on another
corpus (a text file), for the "same corpus" filter; the BERT run is fine-tuned on the topic task (10 steps, in
process; once to the end and once stopped at its first step) for the classification column. The app tests drive
every leaderboard_ endpoint through `gradio_client` against the session's app, whose home holds the same three runs.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from gradio_client import Client

from app.leaderboard.figures import display_table, leaderboard_figure, notes_markdown
from app.leaderboard.tab import ALL_CORPORA, LeaderboardView
from lab_models import api
from lab_models.training import runs
from lab_models.text.corpora import load_corpus
from lab_models.inference.finetuning.config import FinetuneConfig
from lab_models.inference.finetuning.run import finetune
from lab_models.inference.loading import load_run
from lab_models.inference.probing import FEATURES_FILE
from lab_models.inference.leaderboard import (CACHE_FILE, HeldOutExamples, _fill_mask_score, _infill_score,
                                              held_out_examples, held_out_sentences)

from tests.support.tiny_runs import E2E_FAMILIES, trained_runs  # noqa: F401  (the module-scoped fixture, reused)

EXAMPLES = 12  # held-out sentences per metric in these tests: enough to score, fast to compute
OTHER_CORPUS_TEXT = ("The river runs past the old mill. A heron waits in the reeds.\n\n"
                     "Children fold paper boats at dawn. The boats drift toward the bridge.\n\n"
                     "Rain falls on the tin roof all night. In the morning the garden shines.\n")
BASE_COLUMNS = ["run_id", "family", "predicts", "preset", "corpus", "steps", "training_tokens", "parameters",
                "val_bits_per_byte", "fill_mask_accuracy", "fill_mask_examples", "infill_exact_match",
                "infill_examples", "best_probe_layer", "probe_accuracy", "training_flops", "seed"]
NOTE_COLUMNS = ["fill_mask_note", "infill_note", "probe_note"]
PROBE_LAYER_COLUMNS = ["best_probe_stream", "best_probe_layer_name", "best_probe_depth"]
BASELINES = ["baseline_val_bits_per_byte", "baseline_fill_mask_accuracy", "baseline_infill_exact_match"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def board(tmp_path_factory, lab_home_dir, trained_runs):  # noqa: F811
    """A lab home with copies of the three trained runs, a BERT copy on another corpus, and two fine-tunings."""
    home = tmp_path_factory.mktemp("leaderboard-home")
    api.lab_home(home)
    ids = {}
    for family, run_id in trained_runs.items():
        # without the caches: probe features another module computed (under another thread count, which may
        # change a float16 feature's last bit) would make the first table differ from a recomputed one
        shutil.copytree(Path(lab_home_dir) / "runs" / run_id, home / "runs" / run_id,
                        ignore=shutil.ignore_patterns(CACHE_FILE, FEATURES_FILE))
        ids[family] = run_id
    other_file = home / "river-notes.txt"
    other_file.write_text(OTHER_CORPUS_TEXT, encoding="utf-8")
    other_id = "bert-tiny-leaderboard-other-corpus"
    shutil.copytree(home / "runs" / ids["bert"], home / "runs" / other_id)
    config = runs.read_config(home / "runs" / other_id)
    config.update(corpus=str(other_file), corpus_fingerprint=load_corpus(str(other_file)).fingerprint)
    runs.write_config(home / "runs" / other_id, config)
    bert_dir = home / "runs" / ids["bert"]
    finished = finetune(FinetuneConfig(run_dir=str(bert_dir), task="topic", steps=10, eval_every=10, home=str(home),
                                       out=str(home / "finetunes" / "bert--topic--finished")))
    stopped = finetune(FinetuneConfig(run_dir=str(bert_dir), task="topic", steps=10, eval_every=10, home=str(home),
                                      out=str(home / "finetunes" / "bert--topic--stopped")), should_stop=lambda: True)
    return {"home": home, "ids": ids, "other": other_id, "other_corpus": str(other_file),
            "finished": finished, "stopped": stopped}


@pytest.fixture(scope="module")
def table(board):
    """The synthetic corpus's leaderboard, computed once (the first call evaluates every run)."""
    return api.leaderboard(board["home"], "synthetic", max_examples=EXAMPLES, seed=0)


def row_of(frame: pd.DataFrame, run_id: str) -> pd.Series:
    rows = frame[frame["run_id"] == run_id]
    assert len(rows) == 1, f"{run_id} is not in the table once: {list(frame['run_id'])}"
    return rows.iloc[0]


# ------------------------------------------------------------------------------------------------ held-out text
def test_sentences_are_split_and_fragments_dropped():
    assert held_out_sentences(["the cat sees a ball . it runs home .", "e.g. x", "猫看见球。它跑回家。"]) == [
        "the cat sees a ball .", "it runs home .", "猫看见球。", "它跑回家。"]
    assert held_out_sentences(["Is it?  Yes!\nThe   end."]) == ["Is it?", "The end."]  # "Yes!": 3 letters only


def test_examples_are_deterministic_and_seeded():
    validation = load_corpus("synthetic").validation
    first, again = held_out_examples(validation, 20, seed=0), held_out_examples(validation, 20, seed=0)
    assert first == again and len(first.fill_mask) == len(first.infill) == 20
    assert held_out_examples(validation, 20, seed=1) != first
    for sentence, start, length in first.infill:
        words = sentence.split()
        assert 4 <= len(words) <= 32 and 1 <= length <= 3 and 1 <= start and start + length <= len(words)
    assert all(0 <= u < 1 for _, u in first.fill_mask)
    assert {sentence for sentence, _ in first.fill_mask} <= set(held_out_sentences(validation))


# ------------------------------------------------------------------------------------------------ the table
@pytest.mark.slow
def test_columns_and_one_row_per_run_of_the_corpus(table, board):
    assert list(table.columns) == BASE_COLUMNS + ["accuracy_topic", *NOTE_COLUMNS, *PROBE_LAYER_COLUMNS, *BASELINES,
                                                  "baseline_accuracy_topic"]
    assert sorted(table["run_id"]) == sorted(board["ids"].values())  # the other corpus's run is not here
    assert set(table["corpus"]) == {"synthetic"}
    bits = list(table["val_bits_per_byte"])
    assert bits == sorted(bits)  # best (lowest) first


@pytest.mark.slow
def test_facts_come_from_the_run_files(table, board):
    for family, run_id in board["ids"].items():
        row = row_of(table, run_id)
        run_dir = board["home"] / "runs" / run_id
        config = runs.read_config(run_dir)
        val = [r for r in runs.read_metrics(run_dir) if r.get("split") == "val"]
        assert row["family"] == family and row["preset"] == "tiny" and row["steps"] == 30
        assert row["parameters"] == config["num_parameters"]
        assert row["val_bits_per_byte"] == pytest.approx(val[-1]["bits_per_byte"]) and row["val_bits_per_byte"] > 0
        per_token = [r["flops_per_token"] for r in runs.read_metrics(run_dir) if r.get("flops_per_token")][-1]
        assert row["training_flops"] == pytest.approx(row["training_tokens"] * per_token)  # the compute it had
    gpt = row_of(table, board["ids"]["gpt"])
    assert gpt["training_tokens"] == 30 * 16 * 64  # steps x batch x seq_len at the tiny preset


@pytest.mark.slow
def test_scores_are_in_range_or_nan_with_a_reason(table, board):
    gpt, bert, t5 = (row_of(table, board["ids"][family]) for family in ("gpt", "bert", "t5"))
    # GPT reads left to right: neither a [MASK] nor a blank
    assert math.isnan(gpt["fill_mask_accuracy"]) and gpt["fill_mask_examples"] == 0
    assert "left to right" in gpt["fill_mask_note"] and "left to right" in gpt["infill_note"]
    assert math.isnan(gpt["infill_exact_match"]) and gpt["infill_examples"] == 0
    # BERT fills masks but has no infill mode; T5 does both
    assert 0 <= bert["fill_mask_accuracy"] <= 1 and bert["fill_mask_examples"] == EXAMPLES
    assert bert["fill_mask_note"] == "" and math.isnan(bert["infill_exact_match"]) and "BERT" in bert["infill_note"]
    assert 0 <= t5["fill_mask_accuracy"] <= 1 and t5["fill_mask_examples"] == EXAMPLES
    assert 0 <= t5["infill_exact_match"] <= 1 and t5["infill_examples"] == EXAMPLES
    assert t5["fill_mask_note"] == t5["infill_note"] == ""
    # fractions of EXAMPLES: hits / scored
    for value in (bert["fill_mask_accuracy"], t5["fill_mask_accuracy"], t5["infill_exact_match"]):
        assert (value * EXAMPLES) == pytest.approx(round(value * EXAMPLES))
    # every family has a best probe layer (the words' roles), the api's own best row of its probe table
    for family, run_id in board["ids"].items():
        row = row_of(table, run_id)
        probes = api.probe_layers(board["home"] / "runs" / run_id, "roles")
        best = api.best_probe_layer(probes)
        assert row["probe_accuracy"] == pytest.approx(best["accuracy"]) and row["probe_note"] == ""
        assert row["best_probe_layer"] == f"{best['stream']}: {best['layer_name']} (depth {best['depth']:.2f})"
        assert (row["best_probe_stream"], row["best_probe_layer_name"]) == (best["stream"], best["layer_name"])
        assert row["best_probe_depth"] == pytest.approx(best["depth"])


@pytest.mark.slow
def test_each_score_has_its_trivial_baseline(table, board):
    """The most frequent token (fill-mask) or word (infill) of the training text, a unigram model of the run's tokens
    (bits per byte), the majority class (a fine-tuning task): what a run must beat to have learned anything."""
    for family in ("gpt", "bert", "t5"):
        row = row_of(table, board["ids"][family])
        assert 0 <= row["baseline_fill_mask_accuracy"] <= 1 and 0 <= row["baseline_infill_exact_match"] <= 1
        assert 1.0 < row["baseline_val_bits_per_byte"] < 8.0  # a unigram model of English: a few bits per byte
        assert (row["baseline_fill_mask_accuracy"] * EXAMPLES) == pytest.approx(
            round(row["baseline_fill_mask_accuracy"] * EXAMPLES))  # a fraction of the same slots
        assert row["predicts"] == {"gpt": "next_token", "bert": "masked_tokens", "t5": "spans"}[family]
    # the infill baseline does not depend on the run (the same spans, the same most frequent word)
    assert table["baseline_infill_exact_match"].nunique() == 1
    assert 0 < table["baseline_accuracy_topic"].iloc[0] < 1 and table["baseline_accuracy_topic"].nunique() == 1


@pytest.mark.slow
def test_trivial_baselines_on_a_known_text(board):
    from lab_models.inference.leaderboard import HeldOutExamples, trivial_baselines

    run = load_run(board["home"] / "runs" / board["ids"]["bert"])  # its WordPiece tokenizer; the model is not used
    examples = HeldOutExamples(fill_mask=(("the cat sees the dog .", 0.0), ("a cat sees the dog .", 0.0)),
                               infill=(("a cat sees the dog", 3, 1), ("a cat sees the dog", 1, 1)),
                               reference=("the the the cat .",), validation=("the cat .",))
    baselines = trivial_baselines(run, examples)
    # the most frequent token and word are "the": the first slot of sentence one is "the" (a hit), of two "a"
    assert baselines["baseline_fill_mask_accuracy"] == 0.5
    assert baselines["baseline_infill_exact_match"] == 0.5  # the spans are "the" (a hit) and "cat"
    def ids(text):  # the run's own tokens ("cat" may be one token or two, as its tokenizer learned)
        return run.tokenizer.encode(text, add_special_tokens=False).ids

    counts = {token: ids("the the the cat .").count(token) for token in set(ids("the the the cat ."))}
    total, size = sum(counts.values()), run.vocab.size  # the reference's tokens, add-one smoothed over the vocabulary
    bits = sum(-math.log2((counts.get(token, 0) + 1) / (total + size)) for token in ids("the cat ."))
    assert baselines["baseline_val_bits_per_byte"] == pytest.approx(bits / len("the cat ."))
    assert all(math.isnan(value) for value in trivial_baselines(run, HeldOutExamples((), ())).values())


@pytest.mark.slow
def test_classification_is_the_best_finished_finetuning(table, board):
    assert board["finished"]["steps"] == 10 and board["stopped"]["steps"] < 10
    bert = row_of(table, board["ids"]["bert"])
    assert bert["accuracy_topic"] == pytest.approx(board["finished"]["accuracy"])  # the stopped one never counts
    for family in ("gpt", "t5"):
        assert math.isnan(row_of(table, board["ids"][family])["accuracy_topic"])
    assert table.attrs["tasks"] == ["topic"]


@pytest.mark.slow
def test_fill_mask_scores_the_same_prediction_as_api_fill_mask(board):
    """A sentence whose masked word is BERT's own top guess (by `api.fill_mask`) is a hit; another word is a miss."""
    run_dir = board["home"] / "runs" / board["ids"]["bert"]
    run = load_run(run_dir)
    best = api.fill_mask(run_dir, "the girl [MASK] a red apple .", top_k=2)[0]
    encode = lambda text: run.tokenizer.encode(text, add_special_tokens=False).ids  # noqa: E731
    guess = next(token.strip() for token, _ in best if len(encode(token.strip())) == 1)
    other = next(word for word in ("eats", "sees", "buys", "the") if word != guess and len(encode(word)) == 1)
    for word, expected in ((guess, 1.0), (other, 0.0)):
        sentence = f"the girl {word} a red apple ."
        position = encode("the girl")
        assert encode(sentence)[len(position)] == encode(word)[0]  # the word is the third token
        u = (len(position) + 0.5) / len(encode(sentence))  # the relative position of that token
        accuracy, scored, note = _fill_mask_score(run, HeldOutExamples(fill_mask=((sentence, u),), infill=()))
        assert (accuracy, scored, note) == (expected, 1, "")


@pytest.mark.slow
def test_infill_scores_the_fill_of_api_generate(board):
    """Each held-out blank is scored by the fill `api.generate(mode="infill")` writes, against the span, ignoring case
    and whitespace."""
    run_dir = board["home"] / "runs" / board["ids"]["t5"]
    run = load_run(run_dir)
    encode = lambda text: run.tokenizer.encode(text, add_special_tokens=False).ids  # noqa: E731
    squash = lambda text: "".join(text.lower().split())  # noqa: E731
    examples = held_out_examples(load_corpus("synthetic").validation, 6, seed=3)
    hits = 0
    for sentence, start, length in examples.infill:
        words = sentence.split()
        left, span, right = " ".join(words[:start]), " ".join(words[start:start + length]), " ".join(
            words[start + length:])
        k = len(encode(f"{left} {span}")) - len(encode(left))
        prompt = f"{left} ___ {right}" if right else f"{left} ___"
        fill = api.generate(run_dir, prompt, mode="infill", blank_length=k, max_new_tokens=k + 4).new_text
        hits += squash(fill) == squash(run.tokenizer.decode(encode(span)))
    assert _infill_score(run, examples) == (hits / 6, 6, "")

    zebra = HeldOutExamples(fill_mask=(), infill=(("the girl zebra a red apple .", 2, 1),))
    own = api.generate(run_dir, "the girl ___ a red apple .", mode="infill", blank_length=len(encode(" zebra")),
                       max_new_tokens=len(encode(" zebra")) + 4).new_text
    assert _infill_score(run, zebra) == (float(squash(own) == "zebra"), 1, "")


@pytest.mark.slow
def test_the_second_call_reads_the_cache(table, board):
    home = board["home"]
    assert sorted(table.attrs["computed"]) == sorted(board["ids"].values()) and table.attrs["cached"] == []
    cache_files = {run_id: home / "runs" / run_id / CACHE_FILE for run_id in board["ids"].values()}
    stamps = {run_id: path.stat().st_mtime_ns for run_id, path in cache_files.items()}
    entry = next(iter(json.loads(cache_files[board["ids"]["gpt"]].read_text())["entries"]))
    assert f"n{EXAMPLES}|seed0" in entry and "model.safetensors" in entry
    again = api.leaderboard(home, "synthetic", max_examples=EXAMPLES, seed=0)
    assert again.attrs["computed"] == [] and sorted(again.attrs["cached"]) == sorted(board["ids"].values())
    assert {run_id: path.stat().st_mtime_ns for run_id, path in cache_files.items()} == stamps  # not rewritten
    pd.testing.assert_frame_equal(again, table)
    # new weights (a newer modification time) are measured again; the other runs stay cached
    weights = home / "runs" / board["ids"]["t5"] / runs.MODEL_FILE
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    third = api.leaderboard(home, "synthetic", max_examples=EXAMPLES, seed=0)
    assert third.attrs["computed"] == [board["ids"]["t5"]] and len(third.attrs["cached"]) == 2
    pd.testing.assert_frame_equal(third, table)  # the same weights give the same scores
    # other settings are other questions: a new entry beside the old one
    fourth = api.leaderboard(home, "synthetic", max_examples=EXAMPLES, seed=1)
    assert sorted(fourth.attrs["computed"]) == sorted(board["ids"].values())
    assert len(json.loads(cache_files[board["ids"]["bert"]].read_text())["entries"]) == 2


@pytest.mark.slow
def test_corpus_filter(board, table):
    home, other = board["home"], board["other"]
    assert api.leaderboard_corpora(home) == ["synthetic", board["other_corpus"]]  # the most runs first
    only = api.leaderboard(home, board["other_corpus"], max_examples=EXAMPLES)
    assert list(only["run_id"]) == [other] and list(only["corpus"]) == [board["other_corpus"]]
    # the same weights as the BERT run, asked about the other corpus's held-out text
    assert only.iloc[0]["fill_mask_examples"] > 0 and only.iloc[0]["fill_mask_note"] == ""
    everything = api.leaderboard(home, None, max_examples=EXAMPLES)
    assert len(everything) == 4 and list(everything["corpus"]) == sorted(everything["corpus"])  # grouped
    assert everything.attrs["cached"] and other in everything.attrs["cached"]
    with pytest.raises(ValueError, match="No run with weights was trained on corpus 'nope'.*synthetic"):
        api.leaderboard(home, "nope")


@pytest.mark.slow
def test_bad_settings_are_clear_errors(board):
    with pytest.raises(ValueError, match="max_examples must be a whole number from 1 to"):
        api.leaderboard(board["home"], max_examples=0)
    with pytest.raises(ValueError, match="seed must be a whole number"):
        api.leaderboard(board["home"], seed="x")
    with pytest.raises(ValueError, match="corpus must be a corpus name"):
        api.leaderboard(board["home"], corpus=3)
    empty = api.leaderboard(board["home"] / "no-runs-here")
    assert len(empty) == 0 and list(empty.columns) == BASE_COLUMNS + NOTE_COLUMNS + PROBE_LAYER_COLUMNS + BASELINES


@pytest.mark.slow
def test_csv_export_round_trips(table, tmp_path):
    path = api.leaderboard_csv(table, tmp_path / "board.csv")
    back = pd.read_csv(path)
    back[NOTE_COLUMNS] = back[NOTE_COLUMNS].fillna("")
    pd.testing.assert_frame_equal(back, table, check_dtype=False)
    default = api.leaderboard_csv(table)  # a fresh temporary folder
    assert default.suffix == ".csv" and default.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="Compute the leaderboard first"):
        api.leaderboard_csv(None)


@pytest.mark.slow
def test_display_table_and_figure(table):
    shown = display_table(table)
    assert list(shown.columns) == ["run", "family", "its bits per byte are on", "preset", "corpus", "steps",
                                   "training tokens · FLOPs", "parameters", "val bits/byte ↓", "fill-mask acc ↑", "infill EM ↑",
                                   "probe acc (roles) ↑", "best probe layer", "topic acc ↑"]
    gpt = shown[shown["family"] == "gpt"].iloc[0]
    assert gpt["fill-mask acc ↑"] == "— (1)"  # (1): its reason's number
    # the tokens, then the FLOPs they cost: the FLOPs per token the trainer counted times the tokens
    flops = table[table["family"] == "gpt"]["training_flops"].iloc[0]
    mantissa, exponent = f"{flops:.1e}".split("e")
    assert gpt["training tokens · FLOPs"] == f"30,720 · {float(mantissa):g}e{int(exponent)}" and flops > 30720 * 1e4
    assert gpt["its bits per byte are on"] == "next token"
    assert shown.iloc[-1]["run"] == "trivial baseline"  # the last row: each score's trivial baseline
    assert gpt["val bits/byte ↓"] == f"{table[table['family'] == 'gpt']['val_bits_per_byte'].iloc[0]:.3f}"
    notes = notes_markdown(table).splitlines()
    # GPT's two reasons, BERT's infill, and GPT's and T5's topic accuracy (not fine-tuned on it)
    assert notes[0] == "**Why some scores are missing**" and len(notes) == 5
    # numbered in the order the table shows the runs (it follows their scores): (1) is GPT's first, then one each
    assert [line[:6] for line in notes[1:]] == ["- (1) ", "- (2) ", "- (3) ", "- (4) "]
    assert notes[1].startswith("- (1) fill-mask, **gpt-tiny-compare-tab**: GPT reads left to right")
    assert any(line[6:] == ("topic accuracy, **gpt-tiny-compare-tab**, **t5-tiny-compare-tab**: not fine-tuned on "
                            "topic yet (Understand tab, Fine-tune).") for line in notes)
    assert any(line[6:].startswith("infill, **bert-tiny-compare-tab**: BERT") for line in notes)
    figure = leaderboard_figure(table)
    titles = [annotation.text for annotation in figure.layout.annotations]
    assert titles[0] == ("validation bits per byte (lower is better)<br>compare within a group:<br>each objective "
                         "predicts other tokens") and len(titles) == 5
    assert "linear probe accuracy" in titles[3] and "topic accuracy" in titles[4]
    bars = [trace for trace in figure.data if trace.type == "bar"]
    assert {trace.name for trace in bars} == set(E2E_FAMILIES)
    gpt_bits = next(trace for trace in bars if trace.name == "gpt" and trace.xaxis == "x")
    assert list(gpt_bits.x) == [pytest.approx(table[table["family"] == "gpt"]["val_bits_per_byte"].iloc[0])]
    missing = [trace for trace in figure.data if trace.type == "scatter" and trace.mode == "text"]
    assert missing and all(text.startswith("n/a (") for trace in missing for text in trace.text)


# ------------------------------------------------------------------------------------------------ through the app
@pytest.fixture(scope="module")
def client(running_app, trained_runs):  # noqa: F811
    url, _ = running_app
    return Client(url, verbose=False)


def test_corpora_endpoints_list_the_corpora_with_runs(client):
    empty = {"headers": ["run"], "data": []}
    for endpoint, extra in (("/leaderboard_corpora_list", ()), ("/leaderboard_on_select", (None, empty))):
        update = client.predict("nope", *extra, api_name=endpoint)
        update = update[0] if extra else update  # opening the tab also redraws the empty table and plot
        assert update["value"] == "synthetic"  # an unknown choice falls back to the corpus with the most runs
        assert ["synthetic", "synthetic"] in [list(choice) for choice in update["choices"]]
        again = client.predict(ALL_CORPORA, *extra, api_name=endpoint)
        assert (again[0] if extra else again)["value"] == ALL_CORPORA
    # opening the tab also draws the zoo's picker at once (not at the timer's next tick): empty here, with no zoo (an
    # API client gets no value for the zoo's row and the timer's signature: a layout block and a session state)
    corpus, zoo_picker, table, _ = client.predict("synthetic", None, empty, api_name="/leaderboard_on_select")
    assert corpus["value"] == "synthetic" and zoo_picker == {"choices": [], "value": None, "__type__": "update"}
    assert table["headers"][0] == "run" and table["data"] == []


def test_compute_endpoint_gives_table_figure_and_csv(client, trained_runs):  # noqa: F811
    status, shown, notes, figure, csv_file = client.predict("synthetic", 16, 0, api_name="/leaderboard_compute")
    shown = pd.DataFrame(shown["data"], columns=shown["headers"])
    for family, run_id in trained_runs.items():
        assert shown[shown["run"] == run_id].iloc[0]["family"] == family
    assert "lower is better" in status and "on **synthetic**" in status
    assert any(f"**{trained_runs['gpt']}**" in line and "GPT reads left to right" in line
               for line in notes.splitlines()) and figure is not None
    frame = pd.read_csv(csv_file)
    assert set(trained_runs.values()) <= set(frame["run_id"]) and set(frame["corpus"]) == {"synthetic"}
    assert list(frame.columns[:len(BASE_COLUMNS)]) == BASE_COLUMNS
    again, *_ = client.predict("synthetic", 16, 0, api_name="/leaderboard_compute")
    assert "from the cache" in again and "evaluated now" not in again


def test_compute_endpoint_errors_are_messages(client):
    with pytest.raises(Exception, match="No run with weights was trained on corpus 'nope'"):
        client.predict("nope", 16, 0, api_name="/leaderboard_compute")
    page = LeaderboardView(Path(os.environ["PRETRAINING_LAB_HOME"]))
    with pytest.raises(ValueError, match="Held-out sentences must be a whole number from 1 to"):
        page.compute("synthetic", 2.5, 0, progress=lambda *args, **kwargs: None)


def test_a_missing_bits_per_byte_is_explained_under_the_table():
    from app.leaderboard.figures import notes_markdown

    frame = pd.DataFrame({"run_id": ["tagger", "lm"], "val_bits_per_byte": [float("nan"), 1.9],
                          "fill_mask_note": ["", ""], "infill_note": ["", ""]})
    notes = notes_markdown(frame)
    assert "- (1) bits per byte, **tagger**: no validation bits per byte" in notes and "**lm**" not in notes


def test_a_note_that_names_a_token_shows_it_as_text():
    """An imported T5's notes name tokens such as <pad>: Markdown would take them for HTML tags and hide the rest."""
    from app.leaderboard.figures import notes_markdown

    frame = pd.DataFrame({"run_id": ["t5"], "val_bits_per_byte": [1.0], "fill_mask_note": [""],
                          "infill_note": ["the decoder starts <pad> <extra_id_0> and stops at </s>"]})
    assert "- (1) infill, **t5**: the decoder starts &lt;pad&gt; &lt;extra_id_0&gt; and stops at &lt;/s&gt;" in \
        notes_markdown(frame)

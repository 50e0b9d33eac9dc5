"""Corpora in any script: a Chinese, a mixed Chinese/English and an emoji-heavy text train every family at the tiny
preset with default settings, the vocabulary rising to what the alphabet needs (lab_models/text/vocab_fit.py).

The texts are built here, deterministically, so that the test needs no file from outside the repository: a few
natural Chinese sentences plus sentences of every 7th (or 11th) code point of the CJK Unified Ideographs block, so
that each text has 600 to 850 distinct characters, more than the tiny preset's 512 tokens hold; the emoji text uses
600 distinct pictographs (U+1F300 onwards) between English words.

Every family trains for 2 steps in-process (a subprocess per run would cost a torch import each). CI runs all 17
families on the Chinese text and one family per tokenizer kind (plus CoVe, whose tokenizer also reads the translation
pairs) on the other two; `LAB_SLOW_TESTS=1` runs all 17 on all three (about a minute and a half on a quiet 2-core
machine for the 51 runs).
"""
from __future__ import annotations

import json
import os
import re
import signal

import pytest

from lab_models import api
from lab_models.training import run as train
from lab_models.training.config import PRESET_DEFAULTS
from lab_models.text import vocab_fit
from lab_models.text.corpora import load_corpus
from lab_models.text.vocab_fit import build_tokenizer
from lab_models.experiments.zoo import ZOO_ORDER

CHINESE = [
    "小猫在花园里追一只蝴蝶，它跑得很快，可是蝴蝶飞得更高。",
    "今天早上下了一场大雨，街上的行人都撑着伞匆匆走过。",
    "我的朋友喜欢在周末去图书馆看书，有时候一坐就是一整天。",
    "这家饭馆的面条非常好吃，价格也不贵，所以每天中午都有很多人排队。",
    "春天来了，山上的桃花都开了，远远看去像一片粉红色的云。",
    "老师告诉学生们，学习语言最重要的是每天坚持练习。",
    "火车站离我家不远，走路大概二十分钟就能到。",
    "妈妈在厨房里做饭，爸爸在客厅里看报纸，弟弟在房间里写作业。",
]
ENGLISH = ["the small cat sees a red ball in the garden .", "a tall man reads the old newspaper at home .",
           "my friend likes the new library near the station .", "the teacher tells the students to practise ."]
EMOJI_WORDS = ["the", "cat", "sees", "a", "red", "ball", "we", "love", "pizza", "party", "today", "!"]
ALL_FAMILIES = os.environ.get("LAB_SLOW_TESTS") == "1"
ONE_PER_TOKENIZER = ("gpt", "bert", "t5", "gpt2", "cove")  # bpe, wordpiece, unigram, byte_bpe; CoVe adds the pairs


def cjk_sentences(count: int, stride: int, per_sentence: int = 13) -> list[str]:
    """`count` distinct CJK ideographs (U+4E00 + i * stride), `per_sentence` to a sentence ending with 。."""
    chars = [chr(0x4E00 + i * stride) for i in range(count)]
    return ["".join(chars[i:i + per_sentence]) + "。" for i in range(0, count, per_sentence)]


def chinese_documents() -> list[str]:
    sentences = CHINESE * 4 + cjk_sentences(700, 7)
    return ["".join(sentences[i:i + 2]) for i in range(0, len(sentences), 2)]


def mixed_documents() -> list[str]:
    chinese = CHINESE * 3 + cjk_sentences(600, 11)
    return [f"{ENGLISH[i % len(ENGLISH)]} {chinese[i]}" + (" 我们 use both languages ." if i % 4 == 0 else "")
            for i in range(len(chinese))]


def emoji_documents() -> list[str]:
    emoji = [chr(0x1F300 + i) for i in range(600)]
    return [" ".join(f"{EMOJI_WORDS[(d * 7 + k) % len(EMOJI_WORDS)]} {emoji[(d * 30 + k) % 600] * (1 + k % 2)}"
                     for k in range(30)) for d in range(60)]


TEXTS = {"chinese": chinese_documents, "mixed": mixed_documents, "emoji": emoji_documents}


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory) -> dict[str, str]:
    """name -> a .txt file (documents separated by blank lines, as uploads are read)."""
    folder = tmp_path_factory.mktemp("scripts")
    files = {}
    for name, documents in TEXTS.items():
        path = folder / f"{name}.txt"
        path.write_text("\n\n".join(documents()) + "\n", encoding="utf-8")
        files[name] = str(path)
    return files


@pytest.fixture
def keep_signal_handlers():
    """The trainer installs SIGTERM/SIGINT handlers (a clean stop); put pytest's back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_the_texts_need_more_than_the_tiny_vocabulary():
    for name, documents in TEXTS.items():
        distinct = set("".join(documents()))
        assert len(distinct) > PRESET_DEFAULTS["tiny"]["vocab_size"], name


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "unigram"])
def test_build_tokenizer_raises_the_size_to_the_smallest_that_works(corpus_files, lab_home_dir, kind):
    corpus = load_corpus(corpus_files["chinese"], home=lab_home_dir)
    minimum = vocab_fit.minimum_vocab_size(kind, corpus.train)
    assert minimum > 512
    with pytest.raises(api.VocabSizeTooSmall):  # the smallest size really is the smallest
        api.train_tokenizer(kind, corpus.train, minimum - 1)
    choice = build_tokenizer(corpus, kind, 512, home=lab_home_dir)
    assert choice.vocab_size == minimum and choice.requested_vocab_size == 512
    assert f"raised from 512 to {minimum}" in choice.note and "alphabet" in choice.note


def test_byte_level_bpe_keeps_the_requested_size_on_any_script(corpus_files, lab_home_dir):
    for name in TEXTS:
        corpus = load_corpus(corpus_files[name], home=lab_home_dir)
        choice = build_tokenizer(corpus, "byte_bpe", 512, home=lab_home_dir)
        assert choice.vocab_size == 512 and choice.note == "", name


def test_the_proposal_is_the_largest_minimum_of_the_ticked_kinds(corpus_files, lab_home_dir):
    corpus = load_corpus(corpus_files["mixed"], home=lab_home_dir)
    proposal = api.propose_vocab_size(["bpe", "byte_bpe", "wordpiece"], corpus.train, 512)
    assert proposal.minimums["byte_bpe"] == 257
    assert proposal.size == max(proposal.minimums.values()) > 512 and proposal.raised
    for kind in ("bpe", "wordpiece"):  # the proposal works for every ticked kind
        assert api.train_tokenizer(kind, corpus.train, proposal.size).get_vocab_size() == proposal.size
    assert str(proposal.size) in proposal.message() and "BPE (GPT)" in proposal.message()
    assert not api.propose_vocab_size(["byte_bpe"], corpus.train, 512).raised


def _cases():
    for name in TEXTS:
        for family in ZOO_ORDER:
            if name == "chinese" or ALL_FAMILIES or family in ONE_PER_TOKENIZER:
                yield pytest.param(name, family, id=f"{name}-{family}")


@pytest.mark.slow
@pytest.mark.parametrize("name, family", list(_cases()))
def test_every_family_trains_at_the_tiny_preset_with_default_settings(corpus_files, lab_home_dir, tmp_path, name,
                                                                      family, keep_signal_handlers):
    out = tmp_path / "run"
    code = train.main(["--family", family, "--out", str(out), "--corpus", corpus_files[name], "--steps", "2",
                       "--home", str(lab_home_dir)])
    status = json.loads((out / "status.json").read_text())
    assert code == 0 and status["state"] == "finished", status.get("message")
    config = json.loads((out / "config.json").read_text())
    tokenizer = config["tokenizer"]
    if tokenizer["kind"] == "byte_bpe":
        assert tokenizer["trained_vocab_size"] == 512 and not tokenizer["note"]
    else:  # the alphabet did not fit in 512: raised, and the run says so
        assert tokenizer["trained_vocab_size"] > 512 and "raised from 512" in tokenizer["note"]
        assert "raised from 512" in (out / "train.log").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if row.get("split", "train") == "train"] == [1, 2]
    assert (out / "model.safetensors").is_file()
    if (name, family) == ("chinese", "bert"):  # the Compare and Understand tabs read Chinese sensibly
        generation = api.generate(out, "小猫在[MASK]园里。", mode="mask_predict", iterations=2)
        spaced = re.search(r"[\u4e00-\u9fff] [\u4e00-\u9fff]", generation.text)  # WordPiece's spaces, closed
        assert generation.text.startswith("小猫在") and spaced is None, generation.text
        similarity = api.contextual_similarity(out, "小猫在花园里。", "我的小猫喜欢睡觉。", "小猫")
        assert set(similarity["pieces_a"]) == {"小 猫"}  # the word found inside the sentence, as its two characters


def no_progress(*args, **kwargs):
    """Stands in for gr.Progress outside a page."""


def test_the_tokenizer_lab_proposes_the_size_instead_of_failing(corpus_files, tmp_path):
    from app.tokenizer_lab.tab import TokenizerLab

    home = api.lab_home(tmp_path / "home")
    api.import_corpus(corpus_files["chinese"], name="chinese", home=home)
    lab = TokenizerLab(home)
    kinds = ["bpe", "wordpiece", "byte_bpe"]
    status, *_, button, proposed = lab.train("chinese", 512, kinds, "小猫", progress=no_progress)
    texts = api.load_corpus("chinese", home=home).train
    minimum = vocab_fit.minimum_vocab_size("bpe", texts)  # BPE's alphabet is the largest (each character twice)
    assert minimum > vocab_fit.minimum_vocab_size("wordpiece", texts)
    assert proposed == minimum and button["visible"] is True and button["value"] == f"Use vocabulary size {minimum}"
    assert "Trained 1 tokenizer(s)" in status and f"{minimum} is the smallest size" in status
    assert lab.use_proposed_size(proposed) == minimum
    # (this small test text cannot fill that many WordPiece tokens, so train the two that can)
    status, *_, button, proposed = lab.train("chinese", minimum, ["bpe", "byte_bpe"], "小猫", progress=no_progress)
    assert "Trained 2 tokenizer(s)" in status and proposed is None and button["visible"] is False
    # a bare-alphabet BPE has no merges: the replay still works (its slider keeps a maximum above 0)
    _, slider = lab.replay("chinese", minimum, "bpe", "小猫", 0)
    assert slider["maximum"] >= 1
    # every ticked kind too small: still no error, only the proposal
    status, *_, button, proposed = lab.train("chinese", 300, ["bpe"], "小猫", progress=no_progress)
    assert "No tokenizer was trained" in status and proposed == minimum


def test_the_mask_explorer_splits_chinese_per_character_and_says_so(tmp_path):
    from app.explorer.tab import MaskExplorer

    assert api.split_for_explorer("小猫看见一个红球。") == list("小猫看见一个红球。")
    assert api.split_for_explorer("the cat 小猫", split="characters") == list("thecat小猫")
    explorer = MaskExplorer(api.lab_home(tmp_path))
    choices = ("", None, None, "", None, "", True)  # masked, mode, src_len, order, num_predict, spans, shuffle
    outputs = explorer.explore("小猫看见一个红球。", "whitespace", ["bert"], 0, *choices)
    assert "whitespace alone gives 1 token" in outputs[-1] and "9 tokens" in outputs[-1]

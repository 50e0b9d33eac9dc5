"""Tests for lab_models.text.tokenization: the four tokenizer kinds, the cache, display pieces, BPE merge replay and
stats.

Every tokenizer here trains on a small in-memory corpus (a seeded pseudo-English text plus Chinese, emoji and code
lines), so the whole file runs in seconds.
"""
from __future__ import annotations

import json
import random
import re

import pandas
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from lab_models.text.tokenizer_kinds import TOKENIZER_KINDS
from lab_models.text.tokenization import (TokenizerResult, _trim_unigram, cached_tokenizer, load_tokenizer_file,
                                          special_tokens, tokenizer_cache_key, train_tokenizer)
from lab_models.text.tokenizer_inspect import (TokenPiece, merge_count, merge_replay, surface_text,
                                               token_length_histogram, tokenize_for_display, tokenizer_kind,
                                               tokenizer_stats, vocab_overlap)

KINDS = list(TOKENIZER_KINDS)
BPE_KINDS = ["bpe", "byte_bpe"]
VOCAB_SIZE = 400
EXTRA_LINES = [
    "中文测试 你好世界 我们 学习 语言 模型",
    "emoji time 🙂🚀👍🏽 and more 🙂",
    "def square(x):\n    return x ** 2  # 3.14159, 2026, 42",
    "for (int i = 0; i < n; i++) { total += values[i]; }",
    "Naïve café — “quotes” and numbers 1,234.56",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "The tokenizer is on the table: tokenization, leading and repeated spaces.",
]


def english_like_corpus(seed: int = 0, lines: int = 300) -> list[str]:
    """A deterministic pseudo-English text: Zipf-distributed words built from common English syllables."""
    rng = random.Random(seed)
    syllables = ["the", "an", "ing", "er", "tion", "re", "in", "on", "at", "es", "or", "te", "of", "ed", "is", "al",
                 "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de", "hi"]
    lexicon = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(400)})
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    corpus = []
    for _ in range(lines):
        words = rng.choices(lexicon, weights, k=rng.randint(5, 14))
        words[0] = words[0].capitalize()
        corpus.append(" ".join(words) + rng.choice([".", ".", "!", "?", ","]))
    return corpus


CORPUS = english_like_corpus() + EXTRA_LINES * 3
SAMPLES = [
    "The tokenizer is on the table.",
    "中文测试 你好世界",
    "emoji 🙂 time 🙂🚀👍🏽",
    "def square(x):\n    return x ** 2",
    "Naïve café, 1,234.56!",
    "  leading and   repeated spaces  ",
]


@pytest.fixture(scope="module")
def trained() -> dict[str, Tokenizer]:
    return {kind: train_tokenizer(kind, CORPUS, VOCAB_SIZE) for kind in KINDS}


def without_whitespace(text: str) -> str:
    return "".join(text.split())


# ---------------------------------------------------------------------------------------------------------------------
# Training, special tokens, round trips
# ---------------------------------------------------------------------------------------------------------------------
def test_special_tokens_per_family():
    assert special_tokens("wordpiece") == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert special_tokens("byte_bpe") == ["<|endoftext|>"]
    assert special_tokens("bpe") == ["<unk>", "<|endoftext|>"]
    assert special_tokens("unigram")[:3] == ["<pad>", "</s>", "<unk>"]
    assert {"[CLS]", "[SEP]", "[MASK]"} <= set(special_tokens("unigram"))
    special_tokens("bpe").append("mutated")  # a copy: callers cannot change the module's table
    assert special_tokens("bpe") == ["<unk>", "<|endoftext|>"]


@pytest.mark.parametrize("kind", KINDS)
def test_trains_exact_size_with_special_tokens_first(trained, kind):
    tokenizer = trained[kind]
    assert tokenizer.get_vocab_size() == VOCAB_SIZE
    for expected_id, token in enumerate(special_tokens(kind)):
        assert tokenizer.token_to_id(token) == expected_id
    assert tokenizer_kind(tokenizer) == kind


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_keeps_all_non_space_text(trained, kind):
    tokenizer = trained[kind]
    for text in SAMPLES:
        assert not any(piece.is_unknown for piece in tokenize_for_display(tokenizer, text)), (kind, text)
        decoded = tokenizer.decode(tokenizer.encode(text).ids)
        assert without_whitespace(decoded) == without_whitespace(text), (kind, text, decoded)


def test_byte_bpe_and_unigram_round_trip_exactly(trained):
    for text in ["Hello, world!", "中文测试 你好 🙂", "x = 42  # two spaces"]:
        assert trained["byte_bpe"].decode(trained["byte_bpe"].encode(text).ids) == text
    assert trained["unigram"].decode(trained["unigram"].encode("Hello, world! 你好").ids) == "Hello, world! 你好"


def test_special_tokens_in_text_are_matched_whole(trained):
    pieces = tokenize_for_display(trained["wordpiece"], "the [MASK] is")
    mask = [piece for piece in pieces if piece.text == "[MASK]"]
    assert len(mask) == 1 and mask[0].is_special and mask[0].id == 4 and mask[0].display == "[MASK]"
    pieces = tokenize_for_display(trained["byte_bpe"], "end<|endoftext|>")
    assert pieces[-1].text == "<|endoftext|>" and pieces[-1].is_special and pieces[-1].id == 0


def test_lowercase_option():
    cased = train_tokenizer("wordpiece", CORPUS, VOCAB_SIZE)
    lowered = train_tokenizer("wordpiece", CORPUS, VOCAB_SIZE, lowercase=True)
    assert all(token == token.lower() for token in lowered.encode("The CAFÉ").tokens)
    assert lowered.encode("Café").tokens == lowered.encode("cafe").tokens  # uncased BERT also strips accents
    assert any(token != token.lower() for token in cased.encode("The CAFÉ").tokens)
    assert not any(char.isupper() for token in train_tokenizer("unigram", CORPUS, 300, lowercase=True)
                   .get_vocab() if token not in special_tokens("unigram") for char in token)


def test_progress_is_reported():
    calls = []
    train_tokenizer("bpe", CORPUS, VOCAB_SIZE, progress=lambda fraction, message: calls.append((fraction, message)))
    fractions = [fraction for fraction, _ in calls]
    assert len(calls) >= 3 and fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(isinstance(message, str) and message for _, message in calls)


def test_texts_may_be_a_generator_or_a_single_string():
    assert train_tokenizer("byte_bpe", (line for line in CORPUS), 300).get_vocab_size() == 300
    assert train_tokenizer("bpe", "low lower lowest " * 5, 17).get_vocab_size() == 17


# ---------------------------------------------------------------------------------------------------------------------
# Markers, unknowns, display offsets
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "text", "marker_test"), [
    ("bpe", "the table", lambda token: token.endswith("</w>")),
    ("byte_bpe", "the table", lambda token: token.startswith("Ġ")),
    ("wordpiece", "tokenization", lambda token: token.startswith("##")),
    ("unigram", "the table", lambda token: token.startswith("▁")),
])
def test_markers_are_visible_in_piece_text(trained, kind, text, marker_test):
    pieces = tokenize_for_display(trained[kind], text)
    assert any(marker_test(piece.text) for piece in pieces), [piece.text for piece in pieces]
    assert all(isinstance(piece, TokenPiece) for piece in pieces)


@pytest.mark.parametrize(("kind", "unknown"), [("bpe", "<unk>"), ("wordpiece", "[UNK]"), ("unigram", "<unk>")])
def test_unseen_character_maps_to_the_unknown_token(trained, kind, unknown):
    pieces = tokenize_for_display(trained[kind], "the Ω")
    flagged = [piece for piece in pieces if piece.is_unknown]
    assert flagged and all(piece.text == unknown for piece in flagged)
    assert all(not piece.is_special for piece in flagged)
    assert any(piece.display == "Ω" for piece in flagged)
    assert not any(piece.is_unknown for piece in tokenize_for_display(trained[kind], "the"))


def test_wordpiece_unknown_covers_the_whole_word(trained):
    pieces = tokenize_for_display(trained["wordpiece"], "the ☃snow")
    assert [piece.text for piece in pieces][-1] == "[UNK]"
    assert pieces[-1].display == "☃snow" and pieces[-1].is_unknown


def test_byte_bpe_never_unknown(trained):
    for text in ["Ω ☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\x00\x07 tab\there", "한국어 العربية हिन्दी"]:
        assert not any(piece.is_unknown for piece in tokenize_for_display(trained["byte_bpe"], text))


@pytest.mark.parametrize("kind", KINDS)
def test_display_is_the_input_substring_for_cjk_and_emoji(trained, kind):
    text = "Hi 中文 🙂 x=42"
    pieces = tokenize_for_display(trained[kind], text)
    assert pieces
    for piece in pieces:
        assert 0 <= piece.start <= piece.end <= len(text)
        assert piece.display == text[piece.start:piece.end]
    covered = {char for piece in pieces for char in piece.display}
    assert {"中", "文", "🙂", "4", "2"} <= covered


def test_byte_pieces_that_split_a_character_share_its_display(trained):
    pieces = tokenize_for_display(trained["byte_bpe"], "Ω")  # 2 UTF-8 bytes, unseen as a whole in training
    assert len(pieces) == 2 and all(piece.display == "Ω" and (piece.start, piece.end) == (0, 1) for piece in pieces)


def test_unigram_prepended_marker_covers_no_input(trained):
    pieces = tokenize_for_display(trained["unigram"], "中")
    assert pieces[0].text in {"▁", "▁中"}
    if pieces[0].text == "▁":
        assert pieces[0].display == "" and pieces[0].start == pieces[0].end == 0


def test_surface_text_strips_markers():
    assert surface_text("Ġthe", "byte_bpe") == "the"
    assert surface_text("ä¸Ń", "byte_bpe") == "中"
    assert surface_text("##ing", "wordpiece") == "ing"
    assert surface_text("low</w>", "bpe") == "low"
    assert surface_text("▁the", "unigram") == "the"


# ---------------------------------------------------------------------------------------------------------------------
# BPE merge replay
# ---------------------------------------------------------------------------------------------------------------------
def test_merge_replay_golden_example():
    tokenizer = train_tokenizer("bpe", ["low lower lowest"] * 3, vocab_size=17)  # 2 specials + 10 symbols + 5 merges
    assert merge_count(tokenizer) == 5
    assert merge_replay(tokenizer, "lower", 0) == [["l", "o", "w", "e", "r</w>"]]
    assert merge_replay(tokenizer, "lower, lowest", 0)[1] == ["<unk>"]  # "," never occurred in training
    # Which of the tied pairs merges first is the trainer's choice, so only the end point is pinned down.
    assert merge_replay(tokenizer, "lowest", 5) == [tokenizer.encode("lowest").tokens]
    assert merge_replay(tokenizer, "low low", 5) == [["low</w>"], ["low</w>"]]


@pytest.mark.parametrize("kind", BPE_KINDS)
def test_zero_merges_gives_single_symbols(trained, kind):
    words = merge_replay(trained[kind], "the table 学习" if kind == "bpe" else "the table 中文", 0)
    for pieces in words:
        for at, piece in enumerate(pieces):
            core = piece.removesuffix("</w>") if (kind == "bpe" and at == len(pieces) - 1) else piece
            assert len(core) == 1, pieces
    if kind == "bpe":
        assert words[0] == ["t", "h", "e</w>"]
    else:
        assert words[1] == ["Ġ", "t", "a", "b", "l", "e"] and words[2] == ["Ġ", "ä", "¸", "Ń", "æ", "ĸ", "ĩ"]


@pytest.mark.parametrize("kind", BPE_KINDS)
def test_full_merges_equal_the_real_tokenization(trained, kind):
    tokenizer = trained[kind]
    total = merge_count(tokenizer)
    assert 0 < total < VOCAB_SIZE
    texts = SAMPLES + ["unseen Ω and ☃ characters", "a <|endoftext|> b", "tokenization!!! ???", "x" * 30]
    for text in texts:
        replayed = [piece for pieces in merge_replay(tokenizer, text, total) for piece in pieces]
        assert replayed == tokenizer.encode(text).tokens, text
    assert merge_replay(tokenizer, texts[0], total + 1000) == merge_replay(tokenizer, texts[0], total)  # clamped


@pytest.mark.parametrize("kind", BPE_KINDS)
def test_piece_counts_never_grow_with_more_merges(trained, kind):
    tokenizer = trained[kind]
    text = "The tokenizer is on the table, 中文测试 🙂 and return x ** 2."
    counts = [sum(map(len, merge_replay(tokenizer, text, n))) for n in range(0, merge_count(tokenizer) + 1, 7)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]


def test_merge_replay_rejects_bad_input(trained):
    assert merge_count(trained["wordpiece"]) == 0 and merge_count(trained["unigram"]) == 0
    for kind in ("wordpiece", "unigram"):
        with pytest.raises(ValueError, match="merge replay needs a BPE tokenizer"):
            merge_replay(trained[kind], "the", 1)
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="n_merges"):
            merge_replay(trained["bpe"], "the", bad)
    with pytest.raises(ValueError, match="type some text"):
        merge_replay(trained["bpe"], "", 1)


# ---------------------------------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------------------------------
def must_not_be_read():
    raise AssertionError("a cache hit must not read the texts")
    yield  # pragma: no cover


def test_cache_hit_on_second_call(tmp_path):
    first = cached_tokenizer("bpe", CORPUS, VOCAB_SIZE, corpus_fingerprint="corpus-v1", home=tmp_path)
    assert isinstance(first, TokenizerResult) and not first.from_cache
    assert first.path == tmp_path / "tokenizers" / first.cache_key / "tokenizer.json"
    meta = json.loads((first.path.parent / "meta.json").read_text())
    assert meta["kind"] == "bpe" and meta["vocab_size"] == VOCAB_SIZE and meta["corpus_fingerprint"] == "corpus-v1"
    assert meta["options"] == {"lowercase": False} and meta["train_seconds"] >= 0
    second = cached_tokenizer("bpe", must_not_be_read(), VOCAB_SIZE, corpus_fingerprint="corpus-v1", home=tmp_path)
    assert second.from_cache and second.cache_key == first.cache_key and second.vocab_size == VOCAB_SIZE
    assert second.train_seconds == pytest.approx(meta["train_seconds"])
    assert second.tokenizer.to_str() == first.tokenizer.to_str()
    assert load_tokenizer_file(first.path).get_vocab() == first.tokenizer.get_vocab()
    assert Tokenizer.from_file(str(first.path)).get_vocab_size() == VOCAB_SIZE
    assert not [path for path in first.path.parent.iterdir() if path.name.endswith(".tmp")]


def test_cache_keys_differ_by_size_kind_fingerprint_and_options():
    base = tokenizer_cache_key("bpe", 400, corpus_fingerprint="a")
    assert base == tokenizer_cache_key("bpe", 400, corpus_fingerprint="a", options={"lowercase": False})
    others = {
        tokenizer_cache_key("bpe", 401, corpus_fingerprint="a"),
        tokenizer_cache_key("wordpiece", 400, corpus_fingerprint="a"),
        tokenizer_cache_key("bpe", 400, corpus_fingerprint="b"),
        tokenizer_cache_key("bpe", 400, corpus_fingerprint="a", options={"lowercase": True}),
    }
    assert len(others) == 4 and base not in others


def test_cache_results_for_different_settings_live_apart(tmp_path):
    small = cached_tokenizer("unigram", CORPUS, 300, corpus_fingerprint="c", home=tmp_path)
    large = cached_tokenizer("unigram", CORPUS, 350, corpus_fingerprint="c", home=tmp_path)
    assert small.path != large.path and small.vocab_size == 300 and large.vocab_size == 350


def test_damaged_cache_entry_is_retrained(tmp_path):
    first = cached_tokenizer("wordpiece", CORPUS, VOCAB_SIZE, corpus_fingerprint="d", home=tmp_path)
    first.path.write_text("{ not json")
    again = cached_tokenizer("wordpiece", CORPUS, VOCAB_SIZE, corpus_fingerprint="d", home=tmp_path)
    assert not again.from_cache and load_tokenizer_file(again.path).get_vocab_size() == VOCAB_SIZE


# ---------------------------------------------------------------------------------------------------------------------
# Every bad input raises ValueError with a message a person can act on
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("texts", [[], [""], ["   ", "\n"], None, [1, 2]])
def test_empty_or_invalid_texts(texts):
    with pytest.raises(ValueError, match="empty|strings|texts"):
        train_tokenizer("bpe", texts, 100)


@pytest.mark.parametrize("vocab_size", [0, -5, 3.5, "100", True, None])
def test_invalid_vocab_size(vocab_size):
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer("wordpiece", CORPUS, vocab_size)


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(ValueError) as error:
        train_tokenizer("sentencepiece", CORPUS, 100)
    assert all(kind in str(error.value) for kind in KINDS)
    with pytest.raises(ValueError, match="Unknown tokenizer kind"):
        special_tokens("gpt")


@pytest.mark.parametrize("kind", KINDS)
def test_too_small_names_a_minimum_that_works(kind):
    with pytest.raises(ValueError, match="too small") as error:
        train_tokenizer(kind, CORPUS, 10)
    minimum = int(re.search(r"at least (\d+)", str(error.value)).group(1))
    assert train_tokenizer(kind, CORPUS, minimum).get_vocab_size() == minimum
    with pytest.raises(ValueError, match=f"at least {minimum}"):
        train_tokenizer(kind, CORPUS, minimum - 1)
    if kind == "byte_bpe":
        assert minimum == 257


@pytest.mark.parametrize("kind", KINDS)
def test_too_large_for_the_corpus(kind):
    with pytest.raises(ValueError, match=r"this corpus supports at most ~\d+ tokens .*lower the vocabulary size"):
        train_tokenizer(kind, CORPUS, 100_000)


def test_unigram_trim_keeps_specials_and_characters(trained):
    trimmed = _trim_unigram(train_tokenizer("unigram", CORPUS, VOCAB_SIZE), 250)
    assert trimmed.get_vocab_size() == 250
    assert [trimmed.id_to_token(index) for index in range(6)] == special_tokens("unigram")
    single_characters = {token for token in trained["unigram"].get_vocab() if len(token) == 1}
    assert single_characters <= set(trimmed.get_vocab())
    text = "The tokenizer is on the table 中文"
    assert trimmed.decode(trimmed.encode(text).ids) == text


def test_display_rejects_empty_text(trained):
    with pytest.raises(ValueError, match="type some text"):
        tokenize_for_display(trained["bpe"], "")
    with pytest.raises(ValueError, match="string"):
        tokenize_for_display(trained["bpe"], None)
    with pytest.raises(ValueError, match="tokenizer"):
        tokenize_for_display("not a tokenizer", "text")


def test_cache_rejects_bad_options_and_fingerprints(tmp_path):
    with pytest.raises(ValueError, match="Unknown tokenizer option"):
        cached_tokenizer("bpe", CORPUS, 100, corpus_fingerprint="x", home=tmp_path, options={"uppercase": True})
    with pytest.raises(ValueError, match="True or False"):
        cached_tokenizer("bpe", CORPUS, 100, corpus_fingerprint="x", home=tmp_path, options={"lowercase": "yes"})
    with pytest.raises(ValueError, match="corpus_fingerprint"):
        cached_tokenizer("bpe", CORPUS, 100, corpus_fingerprint="", home=tmp_path)


def test_load_tokenizer_file_errors(tmp_path):
    with pytest.raises(ValueError, match="No tokenizer file"):
        load_tokenizer_file(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": "1.0", "model": 3}')
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        load_tokenizer_file(broken)
    with pytest.raises(ValueError, match="path"):
        load_tokenizer_file("")


# ---------------------------------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_stats(trained, kind):
    stats = tokenizer_stats(trained[kind], SAMPLES, train_seconds=0.5)
    assert set(stats) == {"kind", "vocab_size", "tokens", "tokens_per_word", "tokens_per_char", "unknown_rate",
                          "avg_token_chars", "train_seconds"}
    assert stats["kind"] == kind and stats["vocab_size"] == VOCAB_SIZE and stats["train_seconds"] == 0.5
    assert stats["tokens"] > 0 and stats["tokens_per_word"] >= 1 and 0 < stats["tokens_per_char"] <= 1
    assert 0 <= stats["unknown_rate"] <= 1 and stats["avg_token_chars"] > 0
    if kind == "byte_bpe":
        assert stats["unknown_rate"] == 0
    else:
        assert tokenizer_stats(trained[kind], ["Ω Ω Ω"])["unknown_rate"] > 0
    with pytest.raises(ValueError, match="No text"):
        tokenizer_stats(trained[kind], ["", "  "])


@pytest.mark.parametrize("kind", KINDS)
def test_length_histogram_covers_the_vocabulary(trained, kind):
    histogram = token_length_histogram(trained[kind])
    assert sum(histogram.values()) == VOCAB_SIZE - len(special_tokens(kind))
    assert list(histogram) == sorted(histogram) and histogram.get(1, 0) > 0


def test_vocab_overlap_is_a_symmetric_jaccard_table(trained):
    table = vocab_overlap(trained)
    assert isinstance(table, pandas.DataFrame) and list(table.index) == list(table.columns) == KINDS
    for row in KINDS:
        assert table.loc[row, row] == pytest.approx(1.0)
        for column in KINDS:
            assert 0 <= table.loc[row, column] <= 1
            assert table.loc[row, column] == pytest.approx(table.loc[column, row])
    assert table.loc["bpe", "wordpiece"] > 0
    with pytest.raises(ValueError, match="at least one"):
        vocab_overlap({})


# ---------------------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------------------
VALID_CHARACTERS = st.characters(exclude_categories=("Cs",))  # lone surrogates are not text (they raise ValueError)


def test_lone_surrogate_is_a_value_error(trained):
    for call in (lambda: tokenize_for_display(trained["byte_bpe"], "a\ud800b"),
                 lambda: merge_replay(trained["bpe"], "a\ud800b", 3),
                 lambda: tokenizer_stats(trained["unigram"], ["a\ud800b"]),
                 lambda: train_tokenizer("bpe", ["a\ud800b"] * 3, 50)):
        with pytest.raises(ValueError):
            call()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(VALID_CHARACTERS, min_size=1, max_size=60))
def test_byte_bpe_encodes_any_unicode(trained, text):
    tokenizer = trained["byte_bpe"]
    pieces = tokenize_for_display(tokenizer, text)
    assert not any(piece.is_unknown for piece in pieces)
    assert all(0 <= piece.start <= piece.end <= len(text) for piece in pieces)
    if "<|endoftext|>" not in text:
        assert tokenizer.decode([piece.id for piece in pieces]) == text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(VALID_CHARACTERS, min_size=1, max_size=40), kind=st.sampled_from(KINDS))
def test_every_kind_handles_any_unicode(trained, text, kind):
    for piece in tokenize_for_display(trained[kind], text):
        assert 0 <= piece.start <= piece.end <= len(text)
        assert piece.display == text[piece.start:piece.end]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(alphabet=st.sampled_from(list("theorning asl,.!?中文🙂Ω\n\t0123\u0301<|>")) | VALID_CHARACTERS,
                 min_size=1, max_size=40),
    kind=st.sampled_from(BPE_KINDS),
)
def test_full_replay_matches_the_tokenizer_on_any_text(trained, text, kind):
    tokenizer = trained[kind]
    replayed = [piece for pieces in merge_replay(tokenizer, text, merge_count(tokenizer)) for piece in pieces]
    assert replayed == tokenizer.encode(text).tokens


def test_merge_replay_follows_fuse_unk_of_loaded_tokenizers():
    from tokenizers import models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, end_of_word_suffix="</w>"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(["hello world low lower"] * 3, trainers.BpeTrainer(
        vocab_size=40, special_tokens=["<unk>"], end_of_word_suffix="</w>", show_progress=False))
    for text in ["hello ΩΩworld", "heΩΩΩllo Ω", "ΩhΩ"]:
        replayed = [piece for pieces in merge_replay(tokenizer, text, merge_count(tokenizer)) for piece in pieces]
        assert replayed == tokenizer.encode(text).tokens


def test_unigram_learns_a_frequent_word_that_is_no_part_of_another_word():
    # the tokenizers trainer alone seeds only substrings of two distinct words: "two" and "station" would be spelled
    # letter by letter however often they occur
    corpus = ["two judges watch a tourist near the station ."] * 300 + ["the judge sees two cats ."] * 200
    tokenizer = train_tokenizer("unigram", corpus, 45)  # about the most this corpus supports
    assert tokenizer.encode("two judges near the station").tokens == ["▁two", "▁judges", "▁near", "▁the",
                                                                        "▁station"]
    assert not {token for token in tokenizer.get_vocab() if "twotwo" in token}  # the doubles are seeds only

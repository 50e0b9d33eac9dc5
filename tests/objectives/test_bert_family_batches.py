"""The BERT family's batch builders: BERT, RoBERTa, ALBERT, SpanBERT, ELECTRA and UniLM.

Cheapest first: golden examples (each module docstring's worked example, asserted literally), hypothesis properties
over random lengths and seeds, statistics over many seeded draws, errors, and make_batch shapes.
"""
from __future__ import annotations

import doctest
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from lab_models.objectives import masks
from lab_models.objectives.anatomy import build_anatomy
from lab_models.batch import IGNORE_INDEX
from lab_models.objectives import albert, bert, electra, objective_module, roberta, spanbert, unilm
from lab_models.objectives.common import BatchConfig, StringVocab, count_to_mask

FAMILIES = ("bert", "roberta", "albert", "spanbert", "electra", "unilm")
MODULES = (bert, roberta, albert, spanbert, electra, unilm)
EXACT_COUNT = ("bert", "roberta", "electra", "unilm")  # exactly count_to_mask(n, 0.15) targets
WHOLE_WORD = ("albert", "spanbert")  # whole words, never over the budget


def ones(n: int) -> list[list[int]]:
    return [[1] * n for _ in range(n)]


def words_vocab() -> StringVocab:
    """50 ordinary words, every token a word start."""
    return StringVocab([f"w{i}" for i in range(50)])


def wordpiece_vocab() -> StringVocab:
    """30 word-start tokens and 10 WordPiece continuations (##), for whole-word rules."""
    return StringVocab([f"w{i}" for i in range(30)] + [f"##c{i}" for i in range(10)])


def config(module, vocab: StringVocab, **overrides) -> BatchConfig:
    return BatchConfig(settings=module.Settings(**overrides), vocab=vocab.info)


def random_rows(vocab: StringVocab, lengths, generator: torch.Generator) -> list[torch.Tensor]:
    ordinary = torch.tensor(vocab.info.random_ids)
    return [ordinary[torch.randint(len(ordinary), (n,), generator=generator)] for n in lengths]


def original_of(input_ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The uncorrupted sequence: the target where there is one, the input elsewhere."""
    return torch.where(targets != IGNORE_INDEX, targets, input_ids)


def runs_of(positions: torch.Tensor) -> list[tuple[int, int]]:
    """Maximal runs of consecutive positions, half-open."""
    runs: list[list[int]] = []
    for p in sorted(positions.tolist()):
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    return [tuple(r) for r in runs]


# ======================================================================================================================
# 1. Golden tests: the docstrings' worked examples, asserted literally.


def test_golden_bert_docstring_example():
    a = build_anatomy("bert", "my dog is hairy , he likes play ##ing .".split(), seed=0)
    assert a.inputs == ["my", "dog", "is", "[MASK]", ",", "he", "likes", "play", "##ing", "."]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]
    assert a.segments == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert a.targets == ["my", None, None, "hairy", None, None, None, None, None, None]
    assert a.extras == {"nsp_label": 0}
    assert a.choices == {"copy": 4, "split": 6, "nsp_label": 0, "masked": [0, 3]}
    assert a.attention["self"].int().tolist() == [
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    ]
    assert a.rule == bert.RULE


def test_golden_bert_with_given_positions():
    # Static masking: the fates come from the content hash, so "dog" gets the same first coin ("keep") as "my" above.
    a = build_anatomy("bert", "my dog is hairy , he likes play ##ing .".split(), seed=0, masked=[1, 4])
    assert a.inputs == ["my", "dog", "is", "hairy", "[MASK]", "he", "likes", "play", "##ing", "."]
    assert a.targets == [None, "dog", None, None, ",", None, None, None, None, None]
    assert a.segments == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert a.choices["masked"] == [1, 4]


def test_golden_roberta_docstring_example():
    a = build_anatomy("roberta", "Ġthe Ġcat Ġsat Ġon Ġthe Ġmat Ġtoday Ġ.".split(), seed=0)
    assert a.inputs == ["Ġthe", "Ġcat", "Ġsat", "Ġon", "Ġmat", "Ġmat", "Ġtoday", "Ġ."]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert a.targets == [None, None, None, None, "Ġthe", None, None, None]
    assert a.segments is None and a.extras == {}
    assert a.choices == {"masked": [4]}
    assert a.attention["self"].int().tolist() == ones(8)


def test_golden_albert_docstring_example():
    tokens = "▁the ▁quick ▁brown ▁fox ▁jump s ▁over ▁the ▁lazy ▁dog".split()
    a = build_anatomy("albert", tokens, seed=1)
    assert a.inputs == ["[MASK]", "[MASK]", "▁over", "▁the", "▁lazy", "▁dog", "▁the", "▁quick", "▁brown", "▁fox"]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]
    assert a.segments == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert a.targets == ["▁jump", "s", None, None, None, None, None, None, None, None]
    assert a.extras == {"sop_label": 1}
    assert a.choices == {"split": 4, "sop_label": 1, "masked": [0, 1]}
    assert a.attention["self"].int().tolist() == ones(10)


def test_golden_spanbert_docstring_example():
    tokens = "the quick brown fox jumped over the lazy dog today".split()
    a = build_anatomy("spanbert", tokens, seed=2)
    assert a.inputs == ["the", "quick", "brown", "fox", "jumped", "over", "the", "[MASK]", "dog", "[MASK]"]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]
    assert a.targets == [None, None, None, None, None, None, None, "lazy", None, "today"]
    assert a.segments == [0] * 10
    x = IGNORE_INDEX
    assert a.extras == {"sbo_left": [x, x, x, x, x, x, x, 6, x, x],
                        "sbo_right": [x, x, x, x, x, x, x, 8, x, x],
                        "sbo_relative_position": [x, x, x, x, x, x, x, 1, x, x]}
    assert a.choices == {"masked": [7, 9]}
    assert a.attention["self"].int().tolist() == ones(10)
    # The same draw with edge spans kept: "today" gets the outside boundary -1 on its right.
    kept = build_anatomy("spanbert", tokens, seed=2, settings=spanbert.Settings(sbo_skip_edge_spans=False))
    assert kept.extras == {"sbo_left": [x, x, x, x, x, x, x, 6, x, 8],
                           "sbo_right": [x, x, x, x, x, x, x, 8, x, -1],
                           "sbo_relative_position": [x, x, x, x, x, x, x, 1, x, 1]}


def test_golden_spanbert_given_positions_form_spans():
    tokens = "the quick brown fox jumped over the lazy dog today".split()
    a = build_anatomy("spanbert", tokens, seed=0, masked=[0, 1, 2, 5])  # spans [0, 3) (at the edge) and [5, 6)
    assert a.inputs == ["[MASK]", "[MASK]", "[MASK]", "fox", "jumped", "[MASK]", "the", "lazy", "dog", "today"]
    x = IGNORE_INDEX
    assert a.extras["sbo_left"] == [x, x, x, x, x, 4, x, x, x, x]
    assert a.extras["sbo_right"] == [x, x, x, x, x, 6, x, x, x, x]
    assert a.extras["sbo_relative_position"] == [x, x, x, x, x, 1, x, x, x, x]


def test_golden_electra_docstring_example():
    a = build_anatomy("electra", "the chef cooked the meal and we ate it".split(), seed=1)
    assert a.inputs == ["the", "chef", "cooked", "the", "[MASK]", "and", "we", "ate", "it"]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 6, 7, 8]]
    assert a.targets == [None, None, None, None, "meal", None, None, None, None]
    assert a.segments == [0] * 9
    assert a.extras == {"original_ids": [16, 17, 18, 16, 19, 20, 21, 22, 23],
                        "masked": [False, False, False, False, True, False, False, False, False]}
    assert a.attention["self"].int().tolist() == ones(9)


def test_golden_electra_discriminator_targets():
    vocab = StringVocab("the chef cooked the meal and we ate it dish".split())
    encode = vocab.encode
    original = encode("the chef cooked the meal and we ate it".split())
    generator_input = encode("the chef cooked the [MASK] and we ate it".split())
    masked = torch.tensor([False, False, False, False, True, False, False, False, False])
    inputs, is_replaced = electra.discriminator_targets(original, generator_input, masked, encode(["dish"]))
    assert [vocab.decode(t) for t in inputs] == "the chef cooked the dish and we ate it".split()
    assert is_replaced.tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    same, is_replaced = electra.discriminator_targets(original, generator_input, masked, encode(["meal"]))
    assert torch.equal(same, original) and is_replaced.tolist() == [0] * 9  # a correct sample counts as original
    # (B, T) form, with sampled ids given at full shape (only the masked entries are read); a kept position (15%
    # case: masked but unchanged in the generator input) is overwritten by the sample too.
    original = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    generator_input = torch.tensor([[5, 1, 7, 8], [9, 10, 11, 1]])
    masked = torch.tensor([[False, True, True, False], [False, False, False, True]])
    sampled = torch.tensor([[0, 6, 3, 0], [0, 0, 0, 4]])
    inputs, is_replaced = electra.discriminator_targets(original, generator_input, masked, sampled)
    assert inputs.tolist() == [[5, 6, 3, 8], [9, 10, 11, 4]]
    assert is_replaced.tolist() == [[0, 0, 1, 0], [0, 0, 0, 1]]
    flat_inputs, flat_labels = electra.discriminator_targets(original, generator_input, masked,
                                                             torch.tensor([6, 3, 4]))
    assert torch.equal(flat_inputs, inputs) and torch.equal(flat_labels, is_replaced)


def test_golden_unilm_docstring_example():
    a = build_anatomy("unilm", "the cat sat on the mat".split(), seed=11, mode="seq2seq", src_len=3)
    assert a.inputs == ["the", "cat", "sat", "on", "the", "[MASK]"]
    assert a.positions == [[0, 1, 2, 3, 4, 5]]
    assert a.segments == [0, 0, 0, 1, 1, 1]
    assert a.targets == [None, None, None, None, None, "mat"]
    assert a.extras == {"mode": 3, "nsp_label": IGNORE_INDEX}
    assert a.choices == {"mode": "seq2seq", "src_len": 3, "masked": [5]}
    assert a.attention["self"].int().tolist() == [
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1],
    ]


def test_golden_unilm_modes():
    tokens = "the cat sat on the mat".split()
    r2l = build_anatomy("unilm", tokens, seed=0, mode="right_to_left")
    assert r2l.attention["self"].int().tolist() == [
        [1, 1, 1, 1, 1, 1],
        [0, 1, 1, 1, 1, 1],
        [0, 0, 1, 1, 1, 1],
        [0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 1],
    ]
    assert r2l.segments == [0] * 6 and r2l.extras["mode"] == 2 and r2l.choices["src_len"] is None
    l2r = build_anatomy("unilm", tokens, seed=0, mode="left_to_right")
    assert l2r.attention["self"].int().tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1],
    ]
    assert l2r.extras == {"mode": 1, "nsp_label": IGNORE_INDEX}
    bidirectional = build_anatomy("unilm", tokens, seed=0, mode="bidirectional", src_len=2)
    assert bidirectional.attention["self"].int().tolist() == ones(6)
    assert bidirectional.segments == [0, 0, 1, 1, 1, 1]
    assert bidirectional.extras == {"mode": 0, "nsp_label": 0}
    implied = build_anatomy("unilm", tokens, seed=0, src_len=2)  # src_len alone means seq2seq
    assert implied.choices["mode"] == "seq2seq" and implied.segments == [0, 0, 1, 1, 1, 1]
    assert implied.attention["self"].int().tolist() == masks.materialize(masks.prefix(2), 6).int().tolist()
    code_ids = build_anatomy("unilm", tokens, seed=0, mode="seq2seq", src_len=2,
                             settings=unilm.Settings(lm_segment_ids=True))
    assert code_ids.segments == [4, 4, 5, 5, 5, 5]


def test_golden_unilm_seq2seq_without_src_len_draws_one():
    a = build_anatomy("unilm", "the cat sat on the mat".split(), seed=0, mode="seq2seq")
    src_len = a.segments.count(0)
    assert 1 <= src_len <= 5
    assert a.attention["self"].int().tolist() == masks.materialize(masks.prefix(src_len), 6).int().tolist()


@pytest.mark.parametrize("family", WHOLE_WORD)
def test_golden_whole_word_fallback_when_no_word_fits(family):
    # One 3-token word; the budget is 1 token. Rather than mask nothing (the released ALBERT code would), the one
    # shortest word is masked whole.
    a = build_anatomy(family, ["un", "##believ", "##able"], seed=0, settings=objective_module(family).Settings(
        **({"sop": False} if family == "albert" else {})))
    assert a.targets == ["un", "##believ", "##able"]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_anatomy_runs_with_given_masked(family):
    tokens = "a b c d e f g h".split()
    a = build_anatomy(family, tokens, seed=3, masked=[2, 5])
    assert [i for i, t in enumerate(a.targets) if t is not None] == [2, 5]
    # the targets are the tokens of the input order (ALBERT may have swapped the two segments first)
    shown = tokens if a.extras.get("sop_label") != 1 else tokens[a.choices["split"]:] + tokens[:a.choices["split"]]
    assert [a.targets[2], a.targets[5]] == [shown[2], shown[5]]
    assert a.rule


def test_small_golden_helpers():
    assert [round(p * 11) for p in albert.ngram_probabilities(3)] == [6, 3, 2]
    assert [round(p * 11) for p in albert.ngram_probabilities(3, favor_shorter=False)] == [2, 3, 6]
    probs = spanbert.span_length_probabilities(0.2, 10)
    assert math.isclose(float(probs.sum()), 1.0)
    assert math.isclose(float((probs * torch.arange(1, 11)).sum()), 3.797, abs_tol=5e-4)
    assert spanbert.spans_of(torch.tensor([1, 2, 3, 6, 8, 9]), 10) == [(1, 4), (6, 7), (8, 10)]
    assert bert.validate_masked(5, [3, 1]).tolist() == [1, 3]


@pytest.mark.parametrize("module", MODULES)
def test_module_doctests(module):
    result = doctest.testmod(module)
    assert result.failed == 0


# ======================================================================================================================
# 2. Properties over random lengths, batch sizes and seeds.


def check_example_row(family: str, batch, b: int, n: int, vocab: StringVocab, rows_originals=None):
    """Invariants every BERT-family row satisfies; returns (original ids, target positions)."""
    info = vocab.info
    attention = batch.attention["self"][b]  # (T, T) padded
    assert attention.any(dim=-1).all(), "a query row with nothing to attend makes softmax NaN"
    inputs, targets = batch.input_ids[b, :n], batch.targets[b, :n]
    assert (batch.targets[b, n:] == IGNORE_INDEX).all()
    positions = torch.nonzero(targets != IGNORE_INDEX).flatten()
    assert positions.numel() >= 1
    # [MASK] appears only at target positions (the originals never contain it).
    assert ((inputs == info.mask_id) <= (targets != IGNORE_INDEX)).all()
    assert torch.equal(batch.position_ids[b, :n], torch.arange(n))
    if batch.segment_ids is not None:
        segments = batch.segment_ids[b, :n]
        if not (family == "unilm" and batch.extras["mode"][b] in (1, 2)):
            assert set(segments.tolist()) <= {0, 1}
            assert (segments[1:] >= segments[:-1]).all(), "segment A must come before segment B"
    return original_of(inputs, targets), positions


@settings(max_examples=60, deadline=None)
@given(family=st.sampled_from(FAMILIES), lengths=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       seed=st.integers(0, 2**31 - 1))
def test_properties_make_batch(family, lengths, seed):
    module = objective_module(family)
    vocab = wordpiece_vocab()
    generator = torch.Generator().manual_seed(seed)
    rows = random_rows(vocab, lengths, generator)
    batch = module.make_batch(rows, generator, config(module, vocab))
    assert batch.input_ids.shape == (len(rows), max(lengths))
    assert batch.attention["self"].shape == (len(rows), max(lengths), max(lengths))
    for b, n in enumerate(lengths):
        original, positions = check_example_row(family, batch, b, n, vocab)
        budget = count_to_mask(n, 0.15)
        if family in EXACT_COUNT:
            assert positions.numel() == budget
        if family in WHOLE_WORD:
            starts = vocab.info.starts_word(original)
            check_budget(positions, starts, budget)
            for start, end in runs_of(positions):
                assert starts[start], "a masked run must begin at a word start"
                assert end == n or starts[end], "a masked run must end at a word end"
        attention = batch.attention["self"][b, :n, :n]
        if family == "unilm":
            mode = int(batch.extras["mode"][b])
            src_len = int((batch.segment_ids[b, :n] == 0).sum())
            expected = {0: masks.bidirectional, 1: masks.causal, 2: masks.anticausal, 3: masks.prefix(src_len)}[mode]
            assert torch.equal(attention, masks.materialize(expected, n))
            if mode == 1:
                assert torch.equal(attention, attention.tril())
            if mode == 2:
                assert torch.equal(attention, attention.triu())
            if mode == 3:
                assert 1 <= src_len <= n - 1
        else:
            assert attention.all()
        if family == "spanbert":
            check_spanbert_row(batch, b, n, original, positions, vocab)
        if family in ("bert", "roberta", "electra"):  # unchanged outside the targets
            assert torch.equal(batch.input_ids[b, :n][batch.targets[b, :n] == IGNORE_INDEX],
                               original[batch.targets[b, :n] == IGNORE_INDEX])
        if family == "electra":
            assert torch.equal(batch.extras["original_ids"][b, :n], original)
            assert torch.equal(batch.extras["masked"][b, :n], batch.targets[b, :n] != IGNORE_INDEX)
            assert not ((batch.input_ids[b, :n] != original) & (batch.input_ids[b, :n] != vocab.info.mask_id)).any()


def word_sizes(starts: torch.Tensor) -> list[int]:
    word_starts = torch.nonzero(starts).flatten().tolist() + [starts.numel()]
    return [b - a for a, b in zip(word_starts, word_starts[1:])]


def check_budget(positions: torch.Tensor, starts: torch.Tensor, budget: int):
    """Never over the budget, except the documented fallback: no word fits, so one shortest word is masked."""
    if positions.numel() <= budget:
        return
    sizes = word_sizes(starts)
    assert min(sizes) > budget and positions.numel() == min(sizes) and len(runs_of(positions)) == 1


def check_spanbert_row(batch, b, n, original, positions, vocab):
    left, right = batch.extras["sbo_left"][b], batch.extras["sbo_right"][b]
    relative = batch.extras["sbo_relative_position"][b]
    assert (left[n:] == IGNORE_INDEX).all() and (relative[n:] == IGNORE_INDEX).all()
    has_sbo = relative[:n] != IGNORE_INDEX
    assert (has_sbo <= (batch.targets[b, :n] != IGNORE_INDEX)).all()
    for start, end in runs_of(positions):
        span = slice(start, end)
        fates = batch.input_ids[b, span] == vocab.info.mask_id
        assert fates.all() or not fates.any(), "SpanBERT decides 80/10/10 once per span"
        if start == 0 or end == n:
            assert not has_sbo[span].any()
        else:
            assert (left[span] == start - 1).all() and (right[span] == end).all()
            assert relative[span].tolist() == list(range(1, end - start + 1))


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**31 - 1))
def test_properties_sampled_spans_and_ngrams(n, seed):
    vocab = wordpiece_vocab()
    generator = torch.Generator().manual_seed(seed)
    ids = random_rows(vocab, [n], generator)[0]
    starts = vocab.info.starts_word(ids)
    budget = count_to_mask(n, 0.15)
    for chosen in (spanbert.sample_spans(starts, budget, generator, spanbert.Settings()),
                   albert.sample_ngrams(starts, budget, generator, albert.Settings())):
        covered = torch.zeros(n, dtype=torch.int)
        for start, end, n_words in chosen:
            assert 0 <= start < end <= n and starts[start] and (end == n or starts[end])
            assert int(starts[start:end].sum()) == n_words
            covered[start:end] += 1
        assert covered.max() <= 1, "spans / n-grams must not overlap"
        check_budget(torch.nonzero(covered).flatten(), starts, budget)
        assert covered.sum() >= 1
        if bool(starts.all()):
            assert int(covered.sum()) == budget  # one-token words: the budget is met exactly
    assert unilm.sample_masked(n, unilm.Settings(), generator).numel() == budget


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(unilm.MODES))
def test_properties_unilm_given_modes(n, seed, mode):
    tokens = [f"t{i}" for i in range(n)]
    if mode == "seq2seq" and n < 2:
        with pytest.raises(ValueError, match="at least 2 tokens"):
            build_anatomy("unilm", tokens, seed=seed, mode=mode)
        return
    a = build_anatomy("unilm", tokens, seed=seed, mode=mode)
    m = a.attention["self"]
    assert m.any(dim=-1).all()
    assert m.diagonal().all()
    if mode == "left_to_right":
        assert torch.equal(m, m.tril())
    elif mode == "right_to_left":
        assert torch.equal(m, m.triu())
    elif mode == "seq2seq":
        src_len = a.segments.count(0)
        assert torch.equal(m, masks.materialize(masks.prefix(src_len), n))
        assert m[:src_len, src_len:].sum() == 0, "the source never sees the target"
    assert sum(t is not None for t in a.targets) == count_to_mask(n, 0.15)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 30))
def test_properties_nsp_pairs_come_from_the_batch(seed, n):
    vocab = words_vocab()
    info = vocab.info
    cycle = torch.arange(n) % 25
    rows = [torch.tensor(info.random_ids[:25])[cycle], torch.tensor(info.random_ids[25:50])[cycle]]  # disjoint words
    generator = torch.Generator().manual_seed(seed)
    batch = bert.make_batch(rows, generator, config(bert, vocab, static_masking=False))
    for b in range(2):
        original = original_of(batch.input_ids[b], batch.targets[b])
        split = int((batch.segment_ids[b] == 0).sum())
        label = int(batch.extras["nsp_label"][b])
        assert torch.equal(original[:split], rows[b][:split])
        if label == bert.IS_NEXT:
            assert torch.equal(original, rows[b])
        else:
            other = rows[1 - b]
            segment_b = original[split:]
            assert any(torch.equal(other[o:o + segment_b.numel()], segment_b)
                       for o in range(other.numel() - segment_b.numel() + 1))


# ======================================================================================================================
# 3. Statistics over many seeded draws (deterministic; tolerances generous but meaningful).


def fate_fractions(module, vocab, **overrides):
    generator = torch.Generator().manual_seed(1234)
    cfg = config(module, vocab, **overrides)
    mask = random = kept = 0
    for _ in range(40):  # 40 batches x 64 rows x 8 picks = 20480 picks
        rows = random_rows(vocab, [50] * 64, generator)
        batch = module.make_batch(torch.stack(rows), generator, cfg)
        picked = batch.targets != IGNORE_INDEX
        inputs, targets = batch.input_ids[picked], batch.targets[picked]
        mask += int((inputs == vocab.info.mask_id).sum())
        kept += int((inputs == targets).sum())
        random += int(((inputs != targets) & (inputs != vocab.info.mask_id)).sum())
    total = mask + random + kept
    assert total >= 20_000
    return mask / total, random / total, kept / total


def test_statistics_bert_80_10_10():
    mask, random, kept = fate_fractions(bert, words_vocab())
    # a random token equals the original 1 time in 50
    assert abs(mask - 0.8) < 0.02 and abs(random - 0.1 * 49 / 50) < 0.02 and abs(kept - (0.1 + 0.1 / 50)) < 0.02


def test_statistics_electra_85_15():
    mask, random, kept = fate_fractions(electra, words_vocab())
    assert abs(mask - 0.85) < 0.02 and random == 0 and abs(kept - 0.15) < 0.02


def test_statistics_spanbert_span_lengths():
    """The first span of a long row is never cut short by other spans: its length follows the truncated geometric."""
    generator = torch.Generator().manual_seed(7)
    starts = torch.ones(400, dtype=torch.bool)  # every token a word
    lengths = torch.tensor([spanbert.sample_spans(starts, 10, generator, spanbert.Settings())[0][2]
                            for _ in range(3000)])
    assert abs(lengths.double().mean().item() - 3.797) < 0.2
    expected = spanbert.span_length_probabilities(0.2, 10)
    observed = torch.bincount(lengths - 1, minlength=10).double() / lengths.numel()
    assert (observed - expected).abs().max() < 0.03
    assert lengths.max() <= 10


def test_statistics_spanbert_fates_per_span():
    vocab = words_vocab()
    generator = torch.Generator().manual_seed(3)
    batch = spanbert.make_batch(torch.stack(random_rows(vocab, [400] * 96, generator)), generator,
                                config(spanbert, vocab))
    fates = []
    for b in range(96):
        for start, end in runs_of(torch.nonzero(batch.targets[b] != IGNORE_INDEX).flatten()):
            fates.append(bool((batch.input_ids[b, start:end] == vocab.info.mask_id).all()))
    assert len(fates) > 1000
    assert abs(sum(fates) / len(fates) - 0.8) < 0.04  # 80% of spans are all-[MASK]


def test_statistics_albert_ngram_lengths():
    """The first n-gram of a long row: p(n) = 6/11, 3/11, 2/11."""
    generator = torch.Generator().manual_seed(11)
    starts = torch.ones(300, dtype=torch.bool)
    first = torch.tensor([albert.sample_ngrams(starts, 45, generator, albert.Settings())[0][2] for _ in range(3000)])
    observed = torch.bincount(first, minlength=4)[1:].double() / first.numel()
    assert torch.allclose(observed, torch.tensor([6 / 11, 3 / 11, 2 / 11], dtype=torch.float64), atol=0.03)


def test_statistics_unilm_mode_mix():
    vocab = words_vocab()
    cfg = config(unilm, vocab)
    generator = torch.Generator().manual_seed(5)
    ids = random_rows(vocab, [12], generator)[0]
    counts = {mode: 0 for mode in unilm.MODES}
    for _ in range(6000):
        counts[unilm.sample_choices(ids, generator, cfg)["mode"]] += 1
    expected = {"bidirectional": 1 / 3, "seq2seq": 1 / 3, "left_to_right": 1 / 6, "right_to_left": 1 / 6}
    for mode, p in expected.items():
        assert abs(counts[mode] / 6000 - p) < 0.02, mode


def test_statistics_unilm_ngram_share():
    """20% of the starts take a bigram or trigram: runs of 2+ tokens make up a clear share of masked tokens."""
    generator = torch.Generator().manual_seed(9)
    in_runs = total = 0
    for _ in range(400):
        positions = unilm.sample_masked(200, unilm.Settings(), generator)
        total += positions.numel()
        in_runs += sum(end - start for start, end in runs_of(positions) if end - start >= 2)
    # Expected about 0.2 * 2.5 / (0.8 + 0.2 * 2.5) = 38% of tokens in n-grams, plus chance adjacency
    assert 0.3 < in_runs / total < 0.55
    plain = unilm.sample_masked(200, unilm.Settings(ngram_rate=0.0), generator)
    assert plain.numel() == 30


@pytest.mark.parametrize("module,key,overrides", [(bert, "nsp_label", {"static_masking": False}),
                                                  (bert, "nsp_label", {}),
                                                  (albert, "sop_label", {})])
def test_statistics_nsp_and_sop_half(module, key, overrides):
    vocab = words_vocab()
    generator = torch.Generator().manual_seed(17)
    cfg = config(module, vocab, **overrides)
    labels = torch.cat([module.make_batch(torch.stack(random_rows(vocab, [16] * 64, generator)), generator,
                                          cfg).extras[key] for _ in range(25)])
    assert labels.numel() == 1600 and set(labels.tolist()) <= {0, 1}
    assert abs(labels.double().mean().item() - 0.5) < 0.04


def test_roberta_dynamic_masking_differs_between_calls():
    vocab = words_vocab()
    generator = torch.Generator().manual_seed(0)
    row = torch.stack(random_rows(vocab, [64], generator))
    cfg = config(roberta, vocab)
    first = roberta.make_batch(row, generator, cfg)
    second = roberta.make_batch(row, generator, cfg)
    assert not torch.equal(first.targets, second.targets)


@pytest.mark.parametrize("module", [bert, roberta])
def test_static_masking_has_at_most_dupe_factor_maskings(module):
    vocab = words_vocab()
    row = torch.stack(random_rows(vocab, [40], torch.Generator().manual_seed(0)))
    cfg = config(module, vocab, static_masking=True, dupe_factor=4)
    seen = set()
    for seed in range(60):  # fresh outer generators: only the copy index may vary
        batch = module.make_batch(row, torch.Generator().manual_seed(seed), cfg)
        seen.add((tuple(batch.input_ids[0].tolist()), tuple(batch.targets[0].tolist())))
    assert 2 <= len(seen) <= 4
    dynamic = config(module, vocab, static_masking=False)
    assert len({tuple(module.make_batch(row, torch.Generator().manual_seed(s), dynamic).targets[0].tolist())
                for s in range(60)}) > 4


# ======================================================================================================================
# 4. Errors: bad choices, bad settings, empty input.


@pytest.mark.parametrize("family", ("bert", "roberta", "albert", "spanbert", "electra"))
@pytest.mark.parametrize("masked,match", [
    ([0, 9], "out of range"), ([-1], "out of range"), ([2, 2], "more than once"), ([1.5], "integer"),
    (["1"], "integer"), ([True], "integer"), ([], "empty"), ("1,2", "list of token positions"), (3, "list"),
])
def test_bad_masked_choices(family, masked, match):
    module = objective_module(family)
    with pytest.raises(ValueError, match=match):
        module.validate_choices(5, {"masked": masked})
    with pytest.raises(ValueError, match=match):
        build_anatomy(family, list("abcde"), masked=masked)


@pytest.mark.parametrize("module", MODULES)
def test_unknown_choice_and_empty_input(module):
    with pytest.raises(ValueError, match="does not take"):
        module.validate_choices(5, {"spans": [(0, 1)]})
    with pytest.raises(ValueError, match="empty"):
        module.validate_choices(0, {})


@pytest.mark.parametrize("choices,match", [
    ({"mode": "causal"}, "unknown mode"), ({"mode": 1}, "unknown mode"),
    ({"mode": "seq2seq", "src_len": 0}, r"1\.\.4"), ({"mode": "seq2seq", "src_len": 5}, r"1\.\.4"),
    ({"mode": "seq2seq", "src_len": 2.0}, "integer"), ({"src_len": True}, "integer"),
    ({"mode": "left_to_right", "src_len": 2}, "leave src_len out"),
    ({"mode": "seq2seq", "masked": [7]}, "out of range"),
])
def test_bad_unilm_choices(choices, match):
    with pytest.raises(ValueError, match=match):
        unilm.validate_choices(5, choices)


def test_unilm_seq2seq_needs_two_tokens():
    with pytest.raises(ValueError, match="at least 2 tokens"):
        unilm.validate_choices(1, {"mode": "seq2seq"})
    with pytest.raises(ValueError, match="at least 2 tokens"):
        build_anatomy("unilm", ["solo"], mode="seq2seq")
    one = build_anatomy("unilm", ["solo"], seed=0, mode="bidirectional")  # fine: one segment, no NSP
    assert one.segments == [0] and one.extras["nsp_label"] == IGNORE_INDEX
    for seed in range(30):  # a one-token row never draws seq2seq
        assert build_anatomy("unilm", ["solo"], seed=seed).choices["mode"] != "seq2seq"


def test_empty_input_errors():
    for family in FAMILIES:
        with pytest.raises(ValueError, match="at least one token"):
            build_anatomy(family, [])
        module = objective_module(family)
        cfg = config(module, words_vocab())
        with pytest.raises(ValueError, match="at least one token"):
            module.make_batch(torch.zeros(2, 0, dtype=torch.long), torch.Generator(), cfg)
        with pytest.raises(ValueError, match="empty"):
            module.make_batch([], torch.Generator(), cfg)
        with pytest.raises(ValueError, match=r"\(B, T\)"):
            module.make_batch(torch.ones(5, dtype=torch.long), torch.Generator(), cfg)
        with pytest.raises(ValueError, match="at least one token"):
            module.sample_choices(torch.zeros(0, dtype=torch.long), torch.Generator(), cfg)


@pytest.mark.parametrize("module,kwargs,match", [
    (bert, {"mask_rate": 0.0}, "mask_rate"), (bert, {"mask_rate": 1.5}, "mask_rate"),
    (bert, {"mask_rate": float("nan")}, "mask_rate"), (bert, {"mask_rate": True}, "mask_rate"),
    (bert, {"mask_token_rate": 0.95, "random_token_rate": 0.1}, "at most 1"),
    (bert, {"random_token_rate": -0.1}, "random_token_rate"), (bert, {"nsp_random_rate": 2}, "nsp_random_rate"),
    (bert, {"dupe_factor": 0}, "dupe_factor"), (bert, {"dupe_factor": 2.5}, "dupe_factor"),
    (roberta, {"mask_token_rate": 1.1}, "mask_token_rate"), (roberta, {"dupe_factor": -1}, "dupe_factor"),
    (albert, {"max_ngram": 0}, "max_ngram"), (albert, {"sop_swap_rate": -0.5}, "sop_swap_rate"),
    (spanbert, {"geometric_p": 0.0}, "geometric_p"), (spanbert, {"max_span_words": 0}, "max_span_words"),
    (spanbert, {"sbo_max_tokens": 0}, "sbo_max_tokens"),
    (electra, {"disc_weight": -1.0}, "disc_weight"), (electra, {"generator_size_fraction": 0.0}, "generator_size"),
    (electra, {"generator_size_fraction": 2.0}, "generator_size"),
    (unilm, {"p_bidirectional": 0.5}, "sum to 1"), (unilm, {"p_seq2seq": -0.1}, "p_seq2seq"),
    (unilm, {"max_ngram": 1}, "max_ngram"), (unilm, {"ngram_rate": 1.2}, "ngram_rate"),
])
def test_bad_settings(module, kwargs, match):
    with pytest.raises(ValueError, match=match):
        module.Settings(**kwargs)


def test_settings_defaults_are_the_papers():
    assert bert.Settings().rates.mask == 0.8 and bert.Settings().rates.random == 0.1
    assert bert.Settings().nsp and bert.Settings().static_masking and bert.Settings().dupe_factor == 10
    assert not roberta.Settings().static_masking
    assert albert.Settings().sop and albert.Settings().max_ngram == 3
    assert not spanbert.Settings().nsp and spanbert.Settings().geometric_p == 0.2
    assert spanbert.Settings().max_span_words == 10
    e = electra.Settings()
    assert (e.mask_rate, e.rates.mask, e.rates.random, e.disc_weight, e.generator_size_fraction) == (
        0.15, 0.85, 0.0, 50.0, 0.25)
    u = unilm.Settings()
    assert math.isclose(u.p_bidirectional, 1 / 3) and math.isclose(u.p_right_to_left, 1 / 6)
    assert u.ngram_rate == 0.2 and u.nsp


def test_discriminator_targets_errors():
    ids = torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match="bool"):
        electra.discriminator_targets(ids, ids, torch.tensor([0, 1, 0]), ids)
    with pytest.raises(ValueError, match="share one shape"):
        electra.discriminator_targets(ids, ids[:2], torch.tensor([False, True, False]), ids)
    with pytest.raises(ValueError, match="one id per masked"):
        electra.discriminator_targets(ids, ids, torch.tensor([False, True, False]), torch.tensor([4, 5]))


# ======================================================================================================================
# 5. make_batch shapes with a real-looking vocabulary.


@pytest.mark.parametrize("family", FAMILIES)
def test_make_batch_shapes(family):
    module = objective_module(family)
    vocab = words_vocab()
    generator = torch.Generator().manual_seed(0)
    token_ids = torch.stack(random_rows(vocab, [16] * 4, generator))  # (B, T) = (4, 16)
    batch = module.make_batch(token_ids, generator, config(module, vocab))
    assert batch.input_ids.shape == (4, 16) and batch.targets.shape == (4, 16)
    assert batch.position_ids.shape == (4, 16)
    assert batch.attention["self"].shape == (4, 16, 16) and batch.attention["self"].dtype == torch.bool
    assert (batch.targets != IGNORE_INDEX).sum(dim=1).min() >= 1
    if family == "roberta":
        assert batch.segment_ids is None
    else:
        assert batch.segment_ids.shape == (4, 16)
    expected_extras = {"bert": {"nsp_label"}, "roberta": set(), "albert": {"sop_label"},
                       "spanbert": set(spanbert.SBO_KEYS), "electra": {"original_ids", "masked"},
                       "unilm": {"mode", "nsp_label"}}[family]
    assert set(batch.extras) == expected_extras
    for key, value in batch.extras.items():
        assert value.shape in ((4,), (4, 16)), key
    assert batch.to("cpu").input_ids.shape == (4, 16)


def test_make_batch_ragged_rows_pad_extras_as_no_target():
    vocab = wordpiece_vocab()
    generator = torch.Generator().manual_seed(4)
    rows = random_rows(vocab, [30, 7], generator)
    batch = spanbert.make_batch(rows, generator, config(spanbert, vocab))
    assert batch.input_ids.shape == (2, 30)
    for key in spanbert.SBO_KEYS:
        assert (batch.extras[key][1, 7:] == IGNORE_INDEX).all()
    assert (batch.input_ids[1, 7:] == vocab.info.pad_id).all()


def test_toggles_change_the_batch():
    vocab = words_vocab()
    generator = torch.Generator().manual_seed(0)
    rows = torch.stack(random_rows(vocab, [20] * 3, generator))
    no_nsp = bert.make_batch(rows, generator, config(bert, vocab, nsp=False))
    assert (no_nsp.segment_ids == 0).all() and "nsp_label" not in no_nsp.extras
    no_sop = albert.make_batch(rows, generator, config(albert, vocab, sop=False))
    assert (no_sop.segment_ids == 0).all() and "sop_label" not in no_sop.extras
    with_nsp = spanbert.make_batch(rows, generator, config(spanbert, vocab, nsp=True))
    assert set(with_nsp.extras["nsp_label"].tolist()) <= {0, 1} and (with_nsp.segment_ids[:, -1] == 1).all()
    no_unilm_nsp = unilm.make_batch(rows, generator, config(unilm, vocab, nsp=False))
    assert "nsp_label" not in no_unilm_nsp.extras
    only_l2r = unilm.make_batch(rows, generator, config(unilm, vocab, p_bidirectional=0.0, p_seq2seq=0.0,
                                                        p_left_to_right=1.0, p_right_to_left=0.0))
    assert (only_l2r.extras["mode"] == 1).all()
    assert torch.equal(only_l2r.attention["self"][0], torch.ones(20, 20, dtype=torch.bool).tril())
    long_spans = build_anatomy("spanbert", [f"t{i}" for i in range(40)], seed=0, masked=list(range(5, 30)),
                               settings=spanbert.Settings(sbo_max_tokens=3))
    assert long_spans.extras["sbo_relative_position"][5:9] == [1, 2, 3, IGNORE_INDEX]
    all_mask = build_anatomy("bert", list("abcdefghij"), seed=0, masked=[2, 3],
                             settings=bert.Settings(mask_token_rate=1.0, random_token_rate=0.0))
    assert all_mask.inputs[2:4] == ["[MASK]", "[MASK]"]
    tokens = [f"t{i}" for i in range(20)]
    token_ngrams = build_anatomy("albert", tokens, seed=0, settings=albert.Settings(whole_word=False, sop=False))
    assert token_ngrams.segments == [0] * 20 and "sop_label" not in token_ngrams.extras

"""Batch builders of the two-stream (XLNet, MPNet), blank-infilling (GLM) and encoder-decoder (MASS, T5) families.

Cheapest first: the docstring worked examples as golden tests, then hypothesis properties over random lengths, orders
and spans, then statistics of the samplers, then errors, then make_batch shapes and padding.
"""
from __future__ import annotations

import math
import re
from collections import Counter

import pytest
import torch
from hypothesis import given, settings, strategies as st

from lab_models.objectives.anatomy import build_anatomy
from lab_models.batch import IGNORE_INDEX
from lab_models.objectives import glm, mass, mpnet, t5, xlnet
from lab_models.objectives.common import BatchConfig, StringVocab
from tests.support.masks import as_lists

FAST = settings(max_examples=60, deadline=None)


def matrix(text: str) -> list[list[int]]:
    """A 0/1 matrix written one row per line, e.g. "1 0\\n1 1"."""
    return [[int(v) for v in line.split()] for line in text.strip().splitlines()]


def assert_rows_in_docstring(module, text: str) -> None:
    """Each row of the golden matrix appears in the module docstring, in order: the docstring and test agree."""
    doc = re.sub(r"[ \t]+", " ", module.__doc__)
    at = 0
    for line in text.strip().splitlines():
        row = " ".join(line.split())
        found = doc.find(row, at)
        assert found >= 0, f"row {row!r} of the golden matrix is missing from {module.__name__}'s docstring"
        at = found + len(row)


def string_config(module, tokens, settings_=None, num_sentinels: int = 8):
    vocab = StringVocab(tokens, num_sentinels=num_sentinels)
    cfg = BatchConfig(settings=settings_ if settings_ is not None else module.Settings(), vocab=vocab.info)
    return vocab, cfg


def build(module, tokens, choices, *, seed=0, settings_=None, num_sentinels: int = 8):
    vocab, cfg = string_config(module, tokens, settings_, num_sentinels)
    example = module.build_example(vocab.encode(tokens), choices, torch.Generator().manual_seed(seed), cfg)
    return vocab, example


def decode(vocab: StringVocab, ids: torch.Tensor) -> list:
    return [None if int(t) == IGNORE_INDEX else vocab.decode(t) for t in ids]


# --------------------------------------------------------------------------------------------------- 1. golden tests
XLNET_TOKENS = ["New", "York", "is", "a", "big", "city"]
XLNET_CONTENT = """
1 0 1 1 1 1
1 1 1 1 1 1
0 0 1 1 0 0
0 0 0 1 0 0
0 0 1 1 1 1
0 0 1 1 0 1
"""
XLNET_QUERY = """
0 0 1 1 1 1
1 0 1 1 1 1
0 0 0 1 0 0
0 0 0 0 0 0
0 0 1 1 0 1
0 0 1 1 0 0
"""


def test_xlnet_golden():
    a = build_anatomy("xlnet", XLNET_TOKENS, seed=0, order=[3, 2, 5, 4, 0, 1], num_predict=2)
    assert a.inputs == XLNET_TOKENS
    assert a.positions == [[0, 1, 2, 3, 4, 5]]
    assert a.targets == ["New", "York", None, None, None, None]
    assert a.query_slots == [0, 1, 2, 3, 4, 5]
    assert list(a.attention) == ["content", "query"]
    assert as_lists(a.attention["content"]) == matrix(XLNET_CONTENT)
    assert as_lists(a.attention["query"]) == matrix(XLNET_QUERY)
    assert a.choices == {"order": [3, 2, 5, 4, 0, 1], "num_predict": 2}
    assert_rows_in_docstring(xlnet, XLNET_CONTENT)
    assert_rows_in_docstring(xlnet, XLNET_QUERY)


def test_xlnet_golden_through_build_example_and_leak_demo():
    choices = {"order": torch.tensor([3, 2, 5, 4, 0, 1]), "num_predict": 2}
    vocab, ex = build(xlnet, XLNET_TOKENS, choices)
    assert as_lists(ex.attention["content"]) == matrix(XLNET_CONTENT)
    assert decode(vocab, ex.targets) == ["New", "York", None, None, None, None]
    # two_stream=False: one "self" stream = the content mask, so each target attends its own token (the leak).
    vocab, leak = build(xlnet, XLNET_TOKENS, choices, settings_=xlnet.Settings(two_stream=False))
    assert list(leak.attention) == ["self"] and leak.query_slots is None
    assert as_lists(leak.attention["self"]) == matrix(XLNET_CONTENT)
    target_rows = (leak.targets != IGNORE_INDEX).nonzero().flatten()
    assert leak.attention["self"][target_rows, target_rows].all()


def test_xlnet_bidirectional_context_golden():
    a = build_anatomy("xlnet", XLNET_TOKENS, settings=xlnet.Settings(bidirectional_context=True),
                      order=[3, 2, 5, 4, 0, 1], num_predict=2)
    assert as_lists(a.attention["content"]) == matrix("""
        1 0 1 1 1 1
        1 1 1 1 1 1
        0 0 1 1 1 1
        0 0 1 1 1 1
        0 0 1 1 1 1
        0 0 1 1 1 1""")
    assert as_lists(a.attention["query"]) == matrix("""
        0 0 1 1 1 1
        1 0 1 1 1 1
        0 0 0 0 0 0
        0 0 0 0 0 0
        0 0 0 0 0 0
        0 0 0 0 0 0""")
    assert a.targets == ["New", "York", None, None, None, None]


MPNET_TOKENS = ["x0", "x1", "x2", "x3", "x4", "x5"]
MPNET_CONTENT = """
1 0 1 0 1 0 1 1 1
1 1 1 1 1 1 0 0 0
1 0 1 0 1 0 1 1 1
1 0 1 1 1 0 0 1 1
1 0 1 0 1 0 1 1 1
1 0 1 1 1 1 0 0 1
1 0 1 0 1 0 1 1 1
1 0 1 0 1 0 1 1 1
1 0 1 0 1 0 1 1 1
"""
MPNET_QUERY = """
1 0 1 0 1 0 1 1 1
1 0 1 1 1 0 0 1 1
1 0 1 1 1 1 0 0 1
"""


def test_mpnet_golden():
    a = build_anatomy("mpnet", MPNET_TOKENS, seed=1, order=[0, 2, 4, 3, 5, 1], num_predict=3)
    assert a.inputs == ["x0", "x1", "x2", "x3", "x4", "x5", "[MASK]", "[MASK]", "[MASK]"]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 3, 5, 1]]
    assert a.targets == [None] * 6 + ["x3", "x5", "x1"]
    assert a.query_slots == [6, 7, 8]
    assert as_lists(a.attention["content"]) == matrix(MPNET_CONTENT)
    assert as_lists(a.attention["query"]) == matrix(MPNET_QUERY)
    assert_rows_in_docstring(mpnet, MPNET_CONTENT)
    assert_rows_in_docstring(mpnet, MPNET_QUERY)


def test_mpnet_matches_reference_block_layout():
    """Reordered into the reference's physical layout (context, predicted in order, slots), the masks are exactly the
    blocks of microsoft/MPNet's make_query_and_content_mask(a=n, b)."""
    n, b = 9, 4
    order = torch.randperm(n, generator=torch.Generator().manual_seed(3))
    vocab, ex = build(mpnet, [f"t{i}" for i in range(n)], {"order": order, "num_predict": b})
    layout = torch.cat([order, torch.arange(n, n + b)])  # physical index -> our index
    content = ex.attention["content"][layout][:, layout].float()
    query = ex.attention["query"][:, layout].float()
    tri = torch.ones(b, b)
    middle = torch.cat([torch.zeros(n - b, b), tri.tril(), torch.zeros(b, b)])
    ref_content = torch.cat([torch.ones(n + b, n - b), middle, 1 - middle], dim=1)
    ref_query = torch.cat([torch.ones(b, n - b), 1 - tri.triu(), tri.triu()], dim=1)
    assert torch.equal(content, ref_content) and torch.equal(query, ref_query)


def test_mpnet_xlnet_and_mlm_modes_golden():
    choices = dict(order=[0, 2, 4, 3, 5, 1], num_predict=3)
    a = build_anatomy("mpnet", MPNET_TOKENS, settings=mpnet.Settings(input_mode="xlnet"), **choices)
    assert a.inputs == MPNET_TOKENS and a.positions == [[0, 1, 2, 3, 4, 5]]
    assert a.targets == [None, "x1", None, "x3", None, "x5"]
    assert a.query_slots == [3, 5, 1]
    assert as_lists(a.attention["content"]) == matrix("""
        1 0 1 0 1 0
        1 1 1 1 1 1
        1 0 1 0 1 0
        1 0 1 1 1 0
        1 0 1 0 1 0
        1 0 1 1 1 1""")
    assert as_lists(a.attention["query"]) == matrix("""
        1 0 1 0 1 0
        1 0 1 1 1 0
        1 0 1 1 1 1""")
    a = build_anatomy("mpnet", MPNET_TOKENS, seed=1, settings=mpnet.Settings(input_mode="mlm"), **choices)
    assert a.inputs == ["x0", "[MASK]", "x2", "[MASK]", "x4", "[MASK]"]
    assert a.targets == [None, "x1", None, "x3", None, "x5"]
    assert list(a.attention) == ["self"] and a.attention["self"].all() and a.query_slots is None


MASS_TOKENS = ["x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"]
MASS_DECODER = """
1 0 0 0
1 1 0 0
1 1 1 0
1 1 1 1
"""


def test_mass_golden():
    a = build_anatomy("mass", MASS_TOKENS, seed=1, span=(2, 6))
    assert a.inputs == ["x1", "x2", "[MASK]", "[MASK]", "[MASK]", "[MASK]", "x7", "x8"]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 6, 7]]
    assert a.decoder_inputs == ["x2", "x3", "x4", "x5"]
    assert a.decoder_positions == [[2, 3, 4, 5]]
    assert a.targets == ["x3", "x4", "x5", "x6"]
    assert list(a.attention) == ["encoder", "decoder", "cross"]
    assert as_lists(a.attention["encoder"]) == [[1] * 8] * 8
    assert as_lists(a.attention["decoder"]) == matrix(MASS_DECODER)
    assert as_lists(a.attention["cross"]) == [[1] * 8] * 4
    assert_rows_in_docstring(mass, MASS_DECODER)


def test_mass_fragment_at_start_reads_bos_and_reference_enc_mask():
    a = build_anatomy("mass", MASS_TOKENS[:6], seed=1, span=(2, 5))
    assert a.inputs == ["x1", "x2", "[MASK]", "[MASK]", "[MASK]", "x6"]
    assert (a.decoder_inputs, a.decoder_positions, a.targets) == (["x2", "x3", "x4"], [[2, 3, 4]], ["x3", "x4", "x5"])
    a = build_anatomy("mass", MASS_TOKENS[:6], seed=1, span=(0, 3))
    assert a.inputs == ["[MASK]", "[MASK]", "[MASK]", "x4", "x5", "x6"]
    assert a.decoder_inputs == ["[BOS]", "x1", "x2"] and a.decoder_positions == [[0, 1, 2]]
    assert a.targets == ["x1", "x2", "x3"]
    a = build_anatomy("mass", MASS_TOKENS[:6], seed=1, span=(0, 3),
                      settings=mass.Settings(cross_attends_masks=False))
    assert as_lists(a.attention["cross"]) == [[0, 0, 0, 1, 1, 1]] * 3
    # Everything masked (k = n): the reference's enc_mask would empty every row, so the rows keep all columns.
    a = build_anatomy("mass", MASS_TOKENS[:3], seed=1, span=(0, 3), settings=mass.Settings(cross_attends_masks=False))
    assert a.inputs == ["[MASK]"] * 3 and a.attention["cross"].all()


GLM_SELF = """
1 1 1 1 1 0 0 0 0 0
1 1 1 1 1 0 0 0 0 0
1 1 1 1 1 0 0 0 0 0
1 1 1 1 1 0 0 0 0 0
1 1 1 1 1 0 0 0 0 0
1 1 1 1 1 1 0 0 0 0
1 1 1 1 1 1 1 0 0 0
1 1 1 1 1 1 1 1 0 0
1 1 1 1 1 1 1 1 1 0
1 1 1 1 1 1 1 1 1 1
"""


def test_glm_golden_paper_figure():
    a = build_anatomy("glm", ["x1", "x2", "x3", "x4", "x5", "x6"], spans=[(4, 6), (2, 3)], shuffle=False)
    assert a.inputs == ["x1", "x2", "[MASK]", "x4", "[MASK]", "[S]", "x5", "x6", "[S]", "x3"]
    assert a.positions == [[0, 1, 2, 3, 4, 4, 4, 4, 2, 2], [0, 0, 0, 0, 0, 1, 2, 3, 1, 2]]
    assert a.targets == [None] * 5 + ["x5", "x6", "[E]", "x3", "[E]"]
    assert as_lists(a.attention["self"]) == matrix(GLM_SELF)
    assert a.extras == {"span_order": [0, 1], "part_a_length": 5}
    assert_rows_in_docstring(glm, GLM_SELF)


def test_glm_golden_in_text_order():
    tokens = ["x1", "x2", "x3", "x4", "x5", "x6", "x7"]
    a = build_anatomy("glm", tokens, seed=0, spans=[(1, 3), (5, 6)], shuffle=False)
    assert a.inputs == ["x1", "[MASK]", "x4", "x5", "[MASK]", "x7", "[S]", "x2", "x3", "[S]", "x6"]
    assert a.positions == [[0, 1, 2, 3, 4, 5, 1, 1, 1, 4, 4], [0, 0, 0, 0, 0, 0, 1, 2, 3, 1, 2]]
    assert a.targets == [None] * 6 + ["x2", "x3", "[E]", "x6", "[E]"]
    expected = [[1] * 6 + [0] * 5 for _ in range(6)] + [[1] * (7 + r) + [0] * (4 - r) for r in range(5)]
    assert as_lists(a.attention["self"]) == expected
    # The same spans listed the other way round put Part B in that order (shuffle=False keeps the given order).
    b = build_anatomy("glm", tokens, seed=0, spans=[(5, 6), (1, 3)], shuffle=False)
    assert b.inputs[6:] == ["[S]", "x6", "[S]", "x2", "x3"] and b.extras["span_order"] == [0, 1]


T5_TOKENS = "Thank you for inviting me to your party last week .".split()
T5_DECODER = """
1 0 0 0 0 0
1 1 0 0 0 0
1 1 1 0 0 0
1 1 1 1 0 0
1 1 1 1 1 0
1 1 1 1 1 1
"""


def test_t5_golden_paper_figure():
    a = build_anatomy("t5", T5_TOKENS, spans=[(2, 4), (8, 9)])
    assert a.inputs == ["Thank", "you", "<extra_id_0>", "me", "to", "your", "party", "<extra_id_1>", "week", "."]
    assert a.positions == [list(range(10))]
    assert a.decoder_inputs == ["[PAD]", "<extra_id_0>", "for", "inviting", "<extra_id_1>", "last"]  # T5's start
    assert a.targets == ["<extra_id_0>", "for", "inviting", "<extra_id_1>", "last", "<extra_id_2>"]
    assert a.decoder_positions == [[0, 1, 2, 3, 4, 5]]
    assert as_lists(a.attention["encoder"]) == [[1] * 10] * 10
    assert as_lists(a.attention["decoder"]) == matrix(T5_DECODER)
    assert as_lists(a.attention["cross"]) == [[1] * 10] * 6
    assert_rows_in_docstring(t5, T5_DECODER)
    # The code's variant: EOS instead of the final sentinel; the spans may be given in any order.
    b = build_anatomy("t5", T5_TOKENS, spans=[(8, 9), (2, 4)], settings=t5.Settings(final_token="eos"))
    assert b.inputs == a.inputs and b.choices == {"spans": [[2, 4], [8, 9]]}
    assert b.targets == ["<extra_id_0>", "for", "inviting", "<extra_id_1>", "last", "[EOS]"]


def test_rules_are_set():
    for module in (xlnet, mpnet, mass, glm, t5):
        assert isinstance(module.RULE, str) and 20 < len(module.RULE) and "\n" not in module.RULE


# ----------------------------------------------------------------------------------------------- 2. property tests
@st.composite
def order_case(draw, min_n=2, max_n=40):
    n = draw(st.integers(min_n, max_n))
    order = draw(st.permutations(list(range(n))))
    return n, order, draw(st.integers(1, n - 1))


@st.composite
def spans_case(draw, min_n=2, max_n=40):
    """n and a non-empty list of non-overlapping, non-empty spans (in random order)."""
    n = draw(st.integers(min_n, max_n))
    points = draw(st.lists(st.integers(0, n), min_size=2, max_size=n + 1, unique=True))
    points = sorted(points)[: 2 * (len(points) // 2)]
    spans = [(points[i], points[i + 1]) for i in range(0, len(points), 2)]
    return n, draw(st.permutations(spans))


def words(n: int) -> list[str]:
    return [f"w{i}" for i in range(n)]


@FAST
@given(order_case(), st.booleans())
def test_xlnet_properties(case, bidirectional):
    n, order, b = case
    vocab, ex = build(xlnet, words(n), {"order": order, "num_predict": b},
                      settings_=xlnet.Settings(bidirectional_context=bidirectional))
    content, query = ex.attention["content"], ex.attention["query"]
    is_target = ex.targets != IGNORE_INDEX
    assert int(is_target.sum()) == b and torch.equal(is_target[torch.tensor(order[n - b:])], torch.ones(b).bool())
    assert torch.equal(ex.targets[is_target], ex.input_ids[is_target])
    assert content.diagonal().all() and not query.diagonal().any()  # content sees itself; query never does
    assert query[is_target].any(dim=1).all()  # every query row with a target sees something
    context = ~is_target
    assert not content[context][:, is_target].any()  # the context never sees a target
    assert content[is_target][:, context].all() and query[is_target][:, context].all()  # targets see all context
    assert torch.equal(ex.query_slots, torch.arange(n)) and torch.equal(ex.position_ids, torch.arange(n))
    if not bidirectional:  # the paper's rule, literally
        rank = torch.empty(n, dtype=torch.long)
        rank[torch.tensor(order)] = torch.arange(n)
        assert torch.equal(content, rank[None, :] <= rank[:, None])
        assert torch.equal(query, rank[None, :] < rank[:, None])
    else:
        assert content[context][:, context].all()  # the official code: context is bidirectional


@FAST
@given(order_case())
def test_mpnet_properties(case):
    n, order, b = case
    vocab, ex = build(mpnet, words(n), {"order": order, "num_predict": b})
    predicted = torch.tensor(order[n - b:])
    content, query = ex.attention["content"], ex.attention["query"]
    assert content.shape == (n + b, n + b) and query.shape == (b, n + b)
    assert torch.equal(ex.query_slots, torch.arange(n, n + b))
    assert torch.equal(ex.position_ids, torch.cat([torch.arange(n), predicted]))
    assert torch.equal(ex.targets, torch.cat([torch.full((n,), IGNORE_INDEX), ex.input_ids[predicted]]))
    assert content.any(dim=1).all() and query.any(dim=1).all()
    for s in range(b):
        seen = ex.position_ids[query[s]]
        assert sorted(seen.tolist()) == list(range(n))  # every position exactly once (position compensation)
        assert not query[s, predicted[s]]  # never the content of its own target
        assert query[s, n + s]  # its own [MASK] slot, which carries the target's position
        assert int(ex.position_ids[ex.query_slots[s]]) == int(predicted[s])
    is_predicted = torch.zeros(n + b, dtype=torch.bool)
    is_predicted[predicted] = True
    non_predicted_rows = ~is_predicted
    assert not content[non_predicted_rows][:, is_predicted].any()  # context and slots never see predicted content


@FAST
@given(spans_case(min_n=1), st.booleans(), st.integers(0, 2**31 - 1))
def test_glm_properties(case, shuffle, seed):
    n, spans = case
    vocab, ex = build(glm, words(n), {"spans": spans, "shuffle": shuffle}, seed=seed)
    k = len(spans)
    la = int(ex.extras["part_a_length"])
    total = ex.input_ids.numel()
    span_len = sum(e - s for s, e in spans)
    assert la == n - span_len + k and total == la + span_len + k
    mask = ex.attention["self"]
    assert not mask[:la, la:].any() and mask[:la, :la].all()  # Part A: bidirectional, never Part B
    assert mask[la:, :la].all() and torch.equal(mask[la:, la:], torch.ones(total - la, total - la).bool().tril())
    ids = ex.input_ids.tolist()
    assert ids.count(vocab.info.start_id) == k and ex.targets.tolist().count(vocab.info.end_id) == k
    assert ids[:la].count(vocab.info.mask_id) == k
    assert (ex.targets[:la] == IGNORE_INDEX).all() and (ex.targets[la:] != IGNORE_INDEX).all()
    pos1, pos2 = ex.position_ids
    assert torch.equal(pos1[:la], torch.arange(la)) and not pos2[:la].any()
    assert (ex.input_ids[pos1[la:]] == vocab.info.mask_id).all()  # Part B points at its [MASK] in Part A
    order = ex.extras["span_order"].tolist()
    assert sorted(order) == list(range(k)) and (shuffle or order == list(range(k)))
    at, original = la, vocab.encode(words(n))
    filled = {}
    for i in order:  # walk Part B: [S] span, targets span [E], row 2 = 1..len+1
        start, end = spans[i]
        length = end - start
        assert ids[at] == vocab.info.start_id
        assert torch.equal(ex.input_ids[at + 1:at + 1 + length], original[start:end])
        assert torch.equal(ex.targets[at:at + length], original[start:end])
        assert torch.equal(pos2[at:at + length + 1], torch.arange(1, length + 2))
        assert len(set(pos1[at:at + length + 1].tolist())) == 1
        filled[int(pos1[at])] = original[start:end]
        at += length + 1
    rebuilt = torch.cat([filled[j] if j in filled else ex.input_ids[j:j + 1] for j in range(la)])
    assert torch.equal(rebuilt, original)  # Part A with its blanks filled is the text


@FAST
@given(spans_case(), st.sampled_from(["sentinel", "eos"]))
def test_t5_properties(case, final_token):
    n, spans = case
    vocab, ex = build(t5, words(n), {"spans": spans}, settings_=t5.Settings(final_token=final_token),
                      num_sentinels=48)
    sentinels = vocab.info.sentinel_ids
    k = len(spans)
    enc, tgt = ex.input_ids.tolist(), ex.targets.tolist()
    enc_sentinels = [t for t in enc if t in sentinels]
    tgt_sentinels = [t for t in tgt if t in sentinels]
    assert enc_sentinels == list(sentinels[:k])  # k-th sentinel once, in order
    assert tgt_sentinels == list(sentinels[:k + (final_token == "sentinel")])
    assert tgt[-1] == (sentinels[k] if final_token == "sentinel" else vocab.info.eos_id)
    # Reconstruct: replace each encoder sentinel by the target tokens that follow the same sentinel.
    fill, current = {}, None
    for t in tgt:
        if t in sentinels:
            current = t
            fill[current] = []
        elif t != vocab.info.eos_id:
            fill[current].append(t)
    rebuilt = [w for t in enc for w in (fill[t] if t in sentinels else [t])]
    assert rebuilt == vocab.encode(words(n)).tolist()
    s, e = len(tgt), len(enc)
    assert torch.equal(ex.decoder_input_ids, torch.tensor([vocab.info.pad_id] + tgt[:-1]))  # T5 starts with pad
    assert torch.equal(ex.attention["decoder"], torch.ones(s, s).bool().tril())
    assert ex.attention["encoder"].shape == (e, e) and ex.attention["encoder"].all()
    assert ex.attention["cross"].shape == (s, e) and ex.attention["cross"].all()
    assert torch.equal(ex.position_ids, torch.arange(e)) and torch.equal(ex.decoder_position_ids, torch.arange(s))


@FAST
@given(st.integers(1, 40), st.data(), st.integers(0, 2**31 - 1))
def test_mass_properties(n, data, seed):
    start = data.draw(st.integers(0, n - 1))
    end = data.draw(st.integers(start + 1, n))
    vocab, ex = build(mass, words(n), {"span": (start, end)}, seed=seed)
    original = vocab.encode(words(n))
    s = end - start
    assert torch.equal(ex.targets, original[start:end])  # the fragment, left to right
    assert torch.equal(ex.input_ids[:start], original[:start]) and torch.equal(ex.input_ids[end:], original[end:])
    first = original[start - 1] if start else vocab.info.bos_id
    assert torch.equal(ex.decoder_input_ids, torch.cat([torch.tensor([first]), original[start:end - 1]]))
    assert torch.equal(ex.decoder_position_ids, torch.arange(start, end))
    assert torch.equal(ex.attention["decoder"], torch.ones(s, s).bool().tril())
    assert ex.attention["encoder"].all() and ex.attention["cross"].shape == (s, n) and ex.attention["cross"].all()


@FAST
@given(st.integers(2, 60), st.integers(0, 2**31 - 1))
def test_sampled_choices_are_valid(n, seed):
    """sample_choices draws what validate_choices accepts, for every family, and build_example runs on it."""
    tokens = words(n)
    for module in (xlnet, mpnet, mass, glm, t5):
        vocab, cfg = string_config(module, tokens, num_sentinels=32)
        g = torch.Generator().manual_seed(seed)
        choices = module.sample_choices(vocab.encode(tokens), g, cfg)
        checked = module.validate_choices(n, {k: v for k, v in choices.items()})
        assert set(checked) == set(choices)
        module.build_example(vocab.encode(tokens), choices, g, cfg)
    g = torch.Generator().manual_seed(seed)
    vocab, cfg = string_config(glm, tokens)
    spans = glm.sample_choices(vocab.encode(tokens), g, cfg)["spans"]
    assert sum(e - s for s, e in spans) >= max(1, int(0.15 * n))  # covers the goal ...
    assert all(s2 > e1 for (_, e1), (s2, _) in zip(spans, spans[1:]))  # ... with a gap between spans


# ---------------------------------------------------------------------------------------------- 3. statistics
def test_glm_span_lengths_follow_poisson_conditioned_on_positive():
    vocab, cfg = string_config(glm, ["w"])
    g = torch.Generator().manual_seed(1234)
    lengths = []
    for _ in range(250):
        spans = glm.sample_choices(torch.zeros(512, dtype=torch.long), g, cfg)["spans"]
        covered = sum(e - s for s, e in spans)
        assert covered >= 76 and covered - max(e - s for s, e in spans) < 76  # stop as soon as int(0.15 n) is met
        lengths += [e - s for s, e in spans]
    lam = 3.0
    norm = 1 - math.exp(-lam)
    assert abs(sum(lengths) / len(lengths) - lam / norm) < 0.1  # 3.157
    counts = Counter(lengths)
    for length in range(1, 7):
        expected = math.exp(-lam) * lam ** length / math.factorial(length) / norm
        assert abs(counts[length] / len(lengths) - expected) < 0.025, (length, counts[length] / len(lengths))


def test_t5_noise_counts_for_512_tokens():
    assert t5.noise_counts(512, 0.15, 3.0) == (77, 26)
    vocab, cfg = string_config(t5, ["w"])
    g = torch.Generator().manual_seed(7)
    all_lengths = []
    for _ in range(100):
        spans = t5.sample_choices(torch.zeros(512, dtype=torch.long), g, cfg)["spans"]
        lengths = [e - s for s, e in spans]
        assert len(spans) == 26 and sum(lengths) == 77 and min(lengths) >= 1
        assert spans[0][0] >= 1 and all(s2 > e1 for (_, e1), (s2, _) in zip(spans, spans[1:]))  # non-noise first
        all_lengths += lengths
    assert abs(sum(all_lengths) / len(all_lengths) - 3.0) < 0.05
    assert max(all_lengths) > 6  # lengths vary: a random segmentation, not fixed-size spans


def test_xlnet_and_mpnet_default_counts():
    assert [xlnet.default_num_predict(n, 6) for n in (2, 6, 9, 12, 512)] == [1, 1, 2, 2, 85]
    assert [mpnet.default_num_predict(n, 0.15) for n in (2, 6, 10, 512)] == [1, 1, 2, 77]
    assert [mass.fragment_length(n, 0.5) for n in (1, 5, 8)] == [1, 2, 4]


# ----------------------------------------------------------------------------------------------------- 4. errors
@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_order_errors(family):
    tokens = words(6)
    with pytest.raises(ValueError, match="permutation of range"):
        build_anatomy(family, tokens, order=[0, 0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="6 token indices"):
        build_anatomy(family, tokens, order=[0, 1, 2])
    with pytest.raises(ValueError, match="list of integers"):
        build_anatomy(family, tokens, order="012345")
    for bad in (0, 6, -1):
        with pytest.raises(ValueError, match="num_predict must be between 1 and 5"):
            build_anatomy(family, tokens, num_predict=bad)
    with pytest.raises(ValueError, match="num_predict must be an integer"):
        build_anatomy(family, tokens, num_predict=1.5)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        build_anatomy(family, ["solo"])


def test_span_errors():
    tokens = words(6)
    with pytest.raises(ValueError, match=re.escape("(1, 3) and (2, 4) overlap")):
        build_anatomy("glm", tokens, spans=[(2, 4), (1, 3)])
    with pytest.raises(ValueError, match=re.escape("span (4, 9) is out of range")):
        build_anatomy("glm", tokens, spans=[(0, 1), (4, 9)])
    with pytest.raises(ValueError, match=re.escape("span (3, 3) is empty")):
        build_anatomy("t5", tokens, spans=[(3, 3)])
    with pytest.raises(ValueError, match=re.escape("(0, 2) and (1, 2) overlap")):
        build_anatomy("t5", tokens, spans=[(0, 2), (1, 2)])
    with pytest.raises(ValueError, match="at least one span"):
        build_anatomy("t5", tokens, spans=[])
    with pytest.raises(ValueError, match="pair"):
        build_anatomy("glm", tokens, spans=[(1, 2, 3)])
    with pytest.raises(ValueError, match="shuffle must be True or False"):
        build_anatomy("glm", tokens, shuffle="no")
    with pytest.raises(ValueError, match=re.escape("span (2, 7) must be a non-empty")):
        build_anatomy("mass", tokens, span=(2, 7))
    with pytest.raises(ValueError, match=re.escape("span (4, 2) must be a non-empty")):
        build_anatomy("mass", tokens, span=(4, 2))
    with pytest.raises(ValueError, match="one \\(start, end\\) pair"):
        build_anatomy("mass", tokens, span=[(1, 2)])
    with pytest.raises(ValueError, match="its choices are: span"):
        build_anatomy("mass", tokens, spans=[(1, 2)])


def test_too_few_sentinels_and_too_short_inputs():
    vocab, cfg = string_config(t5, words(12), num_sentinels=2)
    ids = vocab.encode(words(12))
    g = torch.Generator()
    with pytest.raises(ValueError, match="needs 3 sentinel tokens for 2 noise spans.*only 2"):
        t5.build_example(ids, {"spans": [(1, 2), (5, 7)]}, g, cfg)
    eos_cfg = BatchConfig(settings=t5.Settings(final_token="eos"), vocab=cfg.vocab)
    t5.build_example(ids, {"spans": [(1, 2), (5, 7)]}, g, eos_cfg)  # EOS ending: 2 sentinels are enough
    with pytest.raises(ValueError, match="at least 2 tokens"):
        build_anatomy("t5", ["solo"])
    with pytest.raises(ValueError, match="at least 2 tokens"):
        xlnet.sample_choices(torch.tensor([5]), g, BatchConfig(xlnet.Settings(), cfg.vocab))


@pytest.mark.parametrize("module, kwargs, pattern", [
    (xlnet, {"k": 0}, "k"), (xlnet, {"two_stream": "yes"}, "two_stream"),
    (xlnet, {"bidirectional_context": 1}, "bidirectional_context"),
    (mpnet, {"predict_rate": 1.5}, "predict_rate"), (mpnet, {"input_mode": "bert"}, "input_mode"),
    (mpnet, {"mask_prob": 0.95, "random_prob": 0.1}, "corruption rates"),
    (mass, {"fragment_ratio": 0.0}, "fragment_ratio"), (mass, {"fragment_ratio": 1.5}, "fragment_ratio"),
    (mass, {"fragment_at_start_prob": 0.7, "fragment_at_end_prob": 0.7}, "sum to at most 1"),
    (mass, {"cross_attends_masks": None}, "cross_attends_masks"),
    (glm, {"mask_ratio": 1.0}, "mask_ratio"), (glm, {"poisson_lambda": 0}, "poisson_lambda"),
    (glm, {"shuffle": "yes"}, "shuffle"),
    (t5, {"noise_density": 0.0}, "noise_density"), (t5, {"mean_noise_span_length": 0.5}, "mean_noise_span_length"),
    (t5, {"final_token": "pad"}, "final_token"),
])
def test_bad_settings(module, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        module.Settings(**kwargs)


def test_settings_are_frozen_with_paper_defaults():
    assert (xlnet.Settings().k, xlnet.Settings().two_stream, xlnet.Settings().bidirectional_context) == (6, True, False)
    assert (mpnet.Settings().predict_rate, mpnet.Settings().input_mode) == (0.15, "mpnet")
    assert mass.Settings().fragment_ratio == 0.5
    assert (glm.Settings().mask_ratio, glm.Settings().poisson_lambda, glm.Settings().shuffle) == (0.15, 3.0, True)
    assert (t5.Settings().noise_density, t5.Settings().mean_noise_span_length) == (0.15, 3.0)
    with pytest.raises(Exception):
        t5.Settings().noise_density = 0.5


# -------------------------------------------------------------------------------------------------- 5. make_batch
def batch_config(module, settings_=None):
    vocab = StringVocab(words(50), num_sentinels=40)
    return vocab, BatchConfig(settings=settings_ if settings_ is not None else module.Settings(), vocab=vocab.info)


def random_rows(vocab, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    pool = torch.tensor(vocab.info.random_ids)
    return [pool[torch.randint(len(pool), (n,), generator=g)] for n in lengths]


def assert_no_empty_rows(batch, allow_empty_query_without_target=False):
    for stream, m in batch.attention.items():
        nonempty = m.any(dim=-1)  # (B, rows)
        if stream == "query" and allow_empty_query_without_target:
            has_target = batch.targets.gather(1, batch.query_slots) != IGNORE_INDEX  # (B, Q)
            nonempty = nonempty | ~has_target
        assert nonempty.all(), stream


@pytest.mark.parametrize("B, T", [(3, 12), (4, 33)])
def test_make_batch_shapes_on_a_tensor(B, T):
    g = torch.Generator().manual_seed(0)
    vocab, cfg = batch_config(xlnet)
    ids = torch.stack(random_rows(vocab, [T] * B))  # (B, T)
    batch = xlnet.make_batch(ids, g, cfg)
    assert batch.input_ids.shape == (B, T) and batch.targets.shape == (B, T) and batch.position_ids.shape == (B, T)
    assert batch.attention["content"].shape == batch.attention["query"].shape == (B, T, T)
    assert batch.query_slots.shape == (B, T)
    assert ((batch.targets != IGNORE_INDEX).sum(1) == xlnet.default_num_predict(T, 6)).all()
    assert_no_empty_rows(batch, allow_empty_query_without_target=True)

    vocab, cfg = batch_config(mpnet)
    b = mpnet.default_num_predict(T, 0.15)
    batch = mpnet.make_batch(ids, g, cfg)
    assert batch.input_ids.shape == (B, T + b) and batch.attention["content"].shape == (B, T + b, T + b)
    assert batch.attention["query"].shape == (B, b, T + b) and batch.query_slots.shape == (B, b)
    assert_no_empty_rows(batch)

    vocab, cfg = batch_config(mass)
    k = mass.fragment_length(T, 0.5)
    batch = mass.make_batch(ids, g, cfg)
    assert batch.input_ids.shape == (B, T) and batch.decoder_input_ids.shape == (B, k) and batch.targets.shape == (B, k)
    assert batch.attention["decoder"].shape == (B, k, k) and batch.attention["cross"].shape == (B, k, T)
    assert_no_empty_rows(batch)

    vocab, cfg = batch_config(t5)
    noise, spans = t5.noise_counts(T, 0.15, 3.0)
    batch = t5.make_batch(ids, g, cfg)
    e, s = T - noise + spans, noise + spans + 1
    assert batch.input_ids.shape == (B, e) and batch.targets.shape == (B, s)
    assert batch.attention["cross"].shape == (B, s, e)
    assert_no_empty_rows(batch)

    vocab, cfg = batch_config(glm)
    batch = glm.make_batch(ids, g, cfg)
    assert batch.position_ids.shape[:2] == (B, 2) and batch.extras["part_a_length"].shape == (B,)
    assert_no_empty_rows(batch)


@pytest.mark.parametrize("module", [xlnet, mpnet, mass, glm, t5])
def test_make_batch_pads_rows_of_different_lengths(module):
    vocab, cfg = batch_config(module)
    rows = random_rows(vocab, [5, 17, 9, 30], seed=3)
    batch = module.make_batch(rows, torch.Generator().manual_seed(5), cfg)
    examples = [module.build_example(r, module.sample_choices(r, g, cfg), g, cfg)
                for g in [torch.Generator().manual_seed(5)] for r in rows]
    assert_no_empty_rows(batch, allow_empty_query_without_target=module is xlnet)
    for b, ex in enumerate(examples):  # the same draws, so each row is its example, then padding
        length = ex.input_ids.numel()
        assert torch.equal(batch.input_ids[b, :length], ex.input_ids)
        assert (batch.input_ids[b, length:] == vocab.info.pad_id).all()
        targets = ex.targets.numel()
        assert torch.equal(batch.targets[b, :targets], ex.targets)
        assert (batch.targets[b, targets:] == IGNORE_INDEX).all()
        for stream, m in ex.attention.items():
            padded = batch.attention[stream][b]
            assert torch.equal(padded[: m.shape[0], : m.shape[1]], m)
            assert not padded[: m.shape[0], m.shape[1]:].any()  # real rows never attend padding


def test_make_batch_is_deterministic_given_the_generator():
    for module in (xlnet, mpnet, mass, glm, t5):
        vocab, cfg = batch_config(module)
        ids = torch.stack(random_rows(vocab, [20] * 3))
        a = module.make_batch(ids, torch.Generator().manual_seed(9), cfg)
        b = module.make_batch(ids, torch.Generator().manual_seed(9), cfg)
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.targets, b.targets)
        assert all(torch.equal(a.attention[k], b.attention[k]) for k in a.attention)

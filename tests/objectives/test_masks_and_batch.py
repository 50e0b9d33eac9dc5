"""Mask predicates, collation, the shared corruption helpers, device selection and atomic writes."""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings, strategies as st

from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, Example, collate
from lab_models.training.device import select_device
from lab_models.home import atomic_write_text, lab_home
from lab_models.objectives.common import CorruptionRates, StringVocab, corrupt, count_to_mask
from tests.support.masks import as_lists


def test_golden_predicates():
    assert as_lists(masks.materialize(masks.causal, 3)) == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert as_lists(masks.materialize(masks.anticausal, 3)) == [[1, 1, 1], [0, 1, 1], [0, 0, 1]]
    assert as_lists(masks.materialize(masks.bidirectional, 2, 3)) == [[1, 1, 1], [1, 1, 1]]
    assert as_lists(masks.materialize(masks.prefix(2), 4)) == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0],
                                                               [1, 1, 1, 1]]
    assert as_lists(masks.materialize(masks.same_segment([0, 0, 1]), 3)) == [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    assert as_lists(masks.materialize(masks.padding([True, True, False]), 3)) == [[1, 1, 0]] * 3
    # order 2, 0, 3, 1: ranks x0=1, x1=3, x2=0, x3=2
    assert as_lists(masks.materialize(masks.permutation_content([2, 0, 3, 1]), 4)) == [
        [1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 1, 0], [1, 0, 1, 1]]
    assert as_lists(masks.materialize(masks.permutation_query([2, 0, 3, 1]), 4)) == [
        [0, 0, 1, 0], [1, 0, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]]


def test_combinators():
    causal_same_doc = masks.and_masks(masks.causal, masks.same_segment([0, 0, 1, 1]))
    assert as_lists(masks.materialize(causal_same_doc, 4)) == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0],
                                                               [0, 0, 1, 1]]
    either = masks.or_masks(masks.causal, masks.anticausal)
    assert masks.materialize(either, 5).all()
    with pytest.raises(ValueError):
        masks.and_masks()


@pytest.mark.parametrize("order", [[0, 0, 1], [0, 2], [1, 2, 3]])
def test_order_must_be_a_permutation(order):
    with pytest.raises(ValueError, match="permutation"):
        masks.ranks_of(order)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(0, 2**31 - 1))
def test_permutation_streams_properties(n, seed):
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    content = masks.materialize(masks.permutation_content(order), n)
    query = masks.materialize(masks.permutation_query(order), n)
    assert content.diagonal().all() and not query.diagonal().any()  # content sees itself, query never
    assert torch.equal(content, query | torch.eye(n, dtype=torch.bool))
    # reindexed by the order, both are triangular
    assert torch.equal(content[order][:, order], torch.ones(n, n, dtype=torch.bool).tril())
    assert torch.equal(query[order][:, order], torch.ones(n, n, dtype=torch.bool).tril(-1))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(0, 30))
def test_prefix_properties(n, prefix_len):
    mask = masks.materialize(masks.prefix(prefix_len), n)
    assert mask.any(dim=1).all()
    source = min(prefix_len, n)
    assert mask[:source, :source].all() and not mask[:source, source:].any()
    assert torch.equal(mask[source:, source:], torch.ones(n - source, n - source, dtype=torch.bool).tril())


def test_collate_pads_and_keeps_rows_non_empty():
    short = Example(input_ids=torch.tensor([5, 6]), attention={"self": masks.materialize(masks.causal, 2)},
                    position_ids=torch.arange(2), targets=torch.tensor([6, IGNORE_INDEX]))
    long = Example(input_ids=torch.tensor([5, 6, 7]), attention={"self": masks.materialize(masks.causal, 3)},
                   position_ids=torch.arange(3), targets=torch.tensor([6, 7, IGNORE_INDEX]))
    batch = collate([short, long], pad_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 0], [5, 6, 7]]
    assert batch.targets.tolist() == [[6, IGNORE_INDEX, IGNORE_INDEX], [6, 7, IGNORE_INDEX]]
    assert as_lists(batch.attention["self"][0]) == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert batch.attention["self"].any(dim=-1).all()
    with pytest.raises(ValueError):
        collate([], pad_id=0)


def test_count_to_mask_rounds_half_to_even():
    assert [count_to_mask(n, 0.15) for n in (0, 1, 10, 30, 50, 512)] == [0, 1, 2, 4, 8, 77]
    assert count_to_mask(70, 0.15) == 10  # 10.5 rounds to the even 10


def test_corrupt_follows_rates_per_group():
    vocab = StringVocab([f"w{i}" for i in range(50)])
    ids = vocab.encode([f"w{i}" for i in range(50)])
    generator = torch.Generator().manual_seed(0)
    all_masked = corrupt(ids, [torch.tensor([1, 2, 3])], CorruptionRates(mask=1.0, random=0.0), vocab.info,
                         generator)
    assert all_masked[1:4].tolist() == [vocab.info.mask_id] * 3 and torch.equal(all_masked[4:], ids[4:])
    kept = corrupt(ids, [torch.tensor([1, 2])], CorruptionRates(mask=0.0, random=0.0), vocab.info, generator)
    assert torch.equal(kept, ids)
    with pytest.raises(ValueError):
        CorruptionRates(mask=0.9, random=0.2)


def test_select_device():
    assert select_device("cpu").type == "cpu"
    assert select_device("auto").type in ("cpu", "cuda", "mps")
    with pytest.raises(ValueError, match="Unknown device"):
        select_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            select_device("cuda")


def test_lab_home_and_atomic_write(tmp_path, monkeypatch):
    monkeypatch.setenv("PRETRAINING_LAB_HOME", str(tmp_path / "home"))
    home = lab_home()
    assert home == (tmp_path / "home").resolve()
    assert all((home / sub).is_dir() for sub in ("corpora", "tokenizers", "runs"))
    target = home / "runs" / "note.txt"
    atomic_write_text(target, "first")
    atomic_write_text(target, "second")
    assert target.read_text() == "second"
    assert os.listdir(target.parent) == ["note.txt"]  # no temporary files left behind

"""Tests for lab_models.inference.seed_intervals: each family's mean and 95% interval over its seeds, the interval
over examples where there is one seed, and which families the intervals do not tell apart."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from lab_models.inference.seed_intervals import mean_interval, overlap, seed_summary, wilson_interval


def _board(rows):
    base = {"corpus": "stories", "val_bits_per_byte": 1.0, "fill_mask_examples": 64, "infill_exact_match": math.nan,
            "infill_examples": 0, "probe_accuracy": math.nan}
    return pd.DataFrame([{**base, **row} for row in rows])


def test_three_seeds_give_the_t_interval_of_their_mean_and_overlaps_are_not_told_apart():
    board = _board([
        {"run_id": "bert-0", "family": "bert", "seed": 0, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.30},
        {"run_id": "bert-1", "family": "bert", "seed": 1, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.32},
        {"run_id": "bert-2", "family": "bert", "seed": 2, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.34},
        {"run_id": "roberta-0", "family": "roberta", "seed": 0, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.31},
        {"run_id": "roberta-1", "family": "roberta", "seed": 1, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.33},
        {"run_id": "roberta-2", "family": "roberta", "seed": 2, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.35},
        {"run_id": "albert-0", "family": "albert", "seed": 0, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.10},
        {"run_id": "albert-1", "family": "albert", "seed": 1, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.11},
        {"run_id": "albert-2", "family": "albert", "seed": 2, "fill_mask_examples": 100_000, "fill_mask_accuracy": 0.12},
    ])
    summary = seed_summary(board).set_index("family")
    assert list(summary.index) == ["roberta", "bert", "albert"]  # by mean, best first
    bert = summary.loc["bert"]
    half = 4.303 * 0.02 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert bert["fill_mask_accuracy_mean"] == pytest.approx(0.32)
    assert (bert["fill_mask_accuracy_low"], bert["fill_mask_accuracy_high"]) == pytest.approx((0.32 - half, 0.32 + half))
    assert bert["fill_mask_accuracy_interval"] == "seeds" and bert["fill_mask_accuracy_seeds"] == 3
    assert bert["seed_values"] == [0, 1, 2] and bert["runs"] == ["bert-0", "bert-1", "bert-2"]
    assert bert["not_told_apart_from"] == ["roberta"] and summary.loc["albert", "not_told_apart_from"] == []
    assert bert["val_bits_per_byte_interval"] == "seeds"  # equal values: a zero-width interval
    assert bert["val_bits_per_byte_low"] == bert["val_bits_per_byte_high"] == 1.0


def test_seeds_that_agree_still_carry_the_noise_of_their_held_out_sentences():
    summary = seed_summary(_board([
        {"run_id": "bert-0", "family": "bert", "seed": 0, "fill_mask_accuracy": 0.25},
        {"run_id": "bert-1", "family": "bert", "seed": 1, "fill_mask_accuracy": 0.25},
    ])).iloc[0]
    assert summary["fill_mask_accuracy_interval"] == "seeds and examples"
    assert (summary["fill_mask_accuracy_low"], summary["fill_mask_accuracy_high"]) == \
        pytest.approx(wilson_interval(0.25, 64))


def test_one_seed_gets_an_interval_over_its_examples_where_the_score_is_a_hit_rate():
    summary = seed_summary(_board([
        {"run_id": "gpt-0", "family": "gpt", "seed": 0, "fill_mask_accuracy": math.nan},
        {"run_id": "bert-0", "family": "bert", "seed": 0, "fill_mask_accuracy": 0.5},
        {"run_id": "t5-0", "family": "t5", "seed": 0, "fill_mask_accuracy": 0.45},
    ])).set_index("family")
    assert summary.loc["bert", "fill_mask_accuracy_interval"] == "examples"
    assert (summary.loc["bert", "fill_mask_accuracy_low"], summary.loc["bert", "fill_mask_accuracy_high"]) == \
        pytest.approx(wilson_interval(0.5, 64))
    assert summary.loc["bert", "not_told_apart_from"] == ["t5"]  # 64 examples cannot tell 0.50 from 0.45
    assert summary.loc["gpt", "fill_mask_accuracy_interval"] == "none" and summary.loc["gpt", "not_told_apart_from"] == []
    assert summary.loc["bert", "val_bits_per_byte_interval"] == "none"  # not a hit rate: one seed says nothing
    assert list(summary.index)[-1] == "gpt"  # no score: last


def test_the_interval_helpers_and_bad_arguments():
    mean, low, high = mean_interval([0.4, math.nan])  # one value: no interval
    assert mean == 0.4 and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(value) for value in mean_interval([]))
    assert overlap((0.1, 0.2), (0.2, 0.3)) and not overlap((0.1, 0.2), (0.21, 0.3))
    assert not overlap((0.1, math.nan), (0.0, 1.0))
    low, high = wilson_interval(1.0, 10)
    assert high == pytest.approx(1.0) and 0.6 < low < 0.8
    with pytest.raises(ValueError, match="rank_by must be one of"):
        seed_summary(_board([]), rank_by="loss")
    assert list(seed_summary(pd.DataFrame()).columns)[:2] == ["corpus", "family"]

"""Scores with their noise: each family's mean and 95% interval over its seeds, and which families the intervals do not
tell apart.

    seed_summary(frame, rank_by="fill_mask_accuracy") -> pandas.DataFrame, one row per (corpus, family)

`frame` is a leaderboard (lab_models/inference/leaderboard.py: one row per run, with its `seed`); a zoo trained with
`--seeds N` (lab_models/experiments/zoo.py) has N runs per family. For every score of `SUMMARY_METRICS` the summary
gives `<score>_mean`, `<score>_low` and `<score>_high` (the 95% interval) and `<score>_interval`, which says what the
interval is over:

- "seeds", with two seeds or more: Student's t interval of the mean over the seeds,
  mean +- t(0.975, n - 1) * sd / sqrt(n), sd the sample standard deviation (ddof 1). It answers "what would another
  seed's mean be near", the question a comparison of two families asks. For a hit rate it is widened to cover
  Wilson's interval over the examples too ("seeds and examples" when that is wider): every seed is scored on the
  same held-out sentences, so the seeds' spread leaves out how much the choice of sentences moves the score (two
  seeds that both answer "the" everywhere would otherwise get an interval of width 0).
- "examples", with one seed, for a score that is a hit rate over held-out examples (fill-mask, infill: the examples
  the leaderboard scored): Wilson's score interval for a binomial proportion. It says how much the choice of examples
  moves the score; it cannot say what a second seed would do.
- "none": one seed of a score that is not a hit rate (bits per byte), or no value.

`not_told_apart_from` lists, for the `rank_by` score, the families of the same corpus whose interval overlaps this
family's: a difference between them is within the noise measured. `seeds` is the number of runs with a value.

Deviations: the issue of a fair comparison asks for a bootstrap over examples where there is one seed; for a hit rate
Wilson's interval is the closed form such a bootstrap approximates, and it needs only the hit rate and the number of
examples the leaderboard keeps. Overlapping 95% intervals is a conservative test (two means can differ significantly
while their intervals overlap a little); it is the one a reader can check by eye on the page.
"""
from __future__ import annotations

import math

import pandas as pd

from lab_models.messages import LabError

# score -> the column holding the number of examples it is a hit rate over (None: not a hit rate)
SUMMARY_METRICS: dict[str, str | None] = {"val_bits_per_byte": None, "fill_mask_accuracy": "fill_mask_examples",
                                          "infill_exact_match": "infill_examples", "probe_accuracy": None}
Z_95 = 1.959963984540054
# t(0.975, df) for df = 1 .. 30; beyond, the normal quantile is within 2% of it
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(degrees_of_freedom: int) -> float:
    """t(0.975, df), the multiplier of a 95% interval of a mean of df + 1 values.

    >>> t_quantile(1), t_quantile(4), round(t_quantile(500), 2)
    (12.706, 2.776, 1.96)
    """
    if degrees_of_freedom < 1:
        raise LabError("a t interval needs at least two values, got {count}", count=degrees_of_freedom + 1)
    return T_975[degrees_of_freedom - 1] if degrees_of_freedom <= len(T_975) else Z_95


def mean_interval(values) -> tuple[float, float, float]:
    """(mean, low, high) of the 95% t interval of the mean of `values` (NaNs dropped); with one value, (it, NaN, NaN).

    >>> [round(x, 3) for x in mean_interval([0.2, 0.3, 0.4])]  # sd 0.1, n 3: 0.3 +- 4.303 * 0.1 / sqrt(3)
    [0.3, 0.052, 0.548]
    """
    clean = [float(value) for value in values if value is not None and not math.isnan(float(value))]
    if not clean:
        return math.nan, math.nan, math.nan
    mean = sum(clean) / len(clean)
    if len(clean) == 1:
        return mean, math.nan, math.nan
    variance = sum((value - mean) ** 2 for value in clean) / (len(clean) - 1)
    half = t_quantile(len(clean) - 1) * math.sqrt(variance / len(clean))
    return mean, mean - half, mean + half


def wilson_interval(rate: float, examples: int) -> tuple[float, float]:
    """Wilson's 95% score interval of a hit rate over `examples` examples.

    >>> [round(x, 3) for x in wilson_interval(0.5, 64)]
    [0.381, 0.619]
    >>> [round(x, 3) for x in wilson_interval(0.0, 20)]  # never 0 wide at the edges
    [0.0, 0.161]
    """
    if not examples or math.isnan(rate):
        return math.nan, math.nan
    z2 = Z_95 ** 2
    centre = (rate + z2 / (2 * examples)) / (1 + z2 / examples)
    half = Z_95 * math.sqrt(rate * (1 - rate) / examples + z2 / (4 * examples ** 2)) / (1 + z2 / examples)
    return max(0.0, centre - half), min(1.0, centre + half)


def overlap(first: tuple[float, float], second: tuple[float, float]) -> bool:
    """Whether two intervals (low, high) share a point; an interval with a NaN end overlaps nothing."""
    if any(math.isnan(end) for end in (*first, *second)):
        return False
    return first[0] <= second[1] and second[0] <= first[1]


def seed_summary(frame: pd.DataFrame, rank_by: str = "fill_mask_accuracy") -> pd.DataFrame:
    """One row per (corpus, family) of a leaderboard: its seeds and run ids, each score's mean and 95% interval
    (module docstring), and `not_told_apart_from` on `rank_by`. LabError (a ValueError) for a score it does not
    summarise."""
    if rank_by not in SUMMARY_METRICS:
        raise LabError("rank_by must be one of {scores}, got {rank_by!r}", scores=", ".join(SUMMARY_METRICS),
                       rank_by=rank_by)
    rows = []
    if frame is None or not len(frame):
        return pd.DataFrame(columns=_columns())
    for (corpus, family), runs in frame.groupby(["corpus", "family"], sort=False, dropna=False):
        row = {"corpus": corpus, "family": family, "runs": list(runs["run_id"]),
               "seed_values": sorted(int(seed) for seed in runs["seed"]) if "seed" in runs else []}
        for metric, examples_column in SUMMARY_METRICS.items():
            values = list(runs[metric]) if metric in runs else []
            mean, low, high = mean_interval(values)
            counted = sum(not math.isnan(float(value)) for value in values)
            kind = "seeds" if counted >= 2 else "none"
            if counted and examples_column is not None and examples_column in runs:
                examples = min(int(n) for n, value in zip(runs[examples_column], values) if not math.isnan(value))
                over_examples = wilson_interval(mean, examples)
                if counted == 1 and examples:
                    (low, high), kind = over_examples, "examples"
                elif examples and (over_examples[0] < low or over_examples[1] > high):
                    low, high = min(low, over_examples[0]), max(high, over_examples[1])
                    kind = "seeds and examples"
            row.update({f"{metric}_mean": mean, f"{metric}_low": low, f"{metric}_high": high,
                        f"{metric}_interval": kind, f"{metric}_seeds": counted})
        rows.append(row)
    summary = pd.DataFrame(rows)
    told = []
    for index, row in summary.iterrows():
        mine = (row[f"{rank_by}_low"], row[f"{rank_by}_high"])
        told.append([other["family"] for other_index, other in summary.iterrows()
                     if other_index != index and other["corpus"] == row["corpus"]
                     and overlap(mine, (other[f"{rank_by}_low"], other[f"{rank_by}_high"]))])
    summary["not_told_apart_from"] = told
    higher_is_better = rank_by != "val_bits_per_byte"
    return summary.sort_values(["corpus", f"{rank_by}_mean"], ascending=[True, not higher_is_better],
                               na_position="last").reset_index(drop=True)[_columns()]


def _columns() -> list[str]:
    per_metric = [f"{metric}_{part}" for metric in SUMMARY_METRICS
                  for part in ("mean", "low", "high", "interval", "seeds")]
    return ["corpus", "family", "seed_values", "runs", *per_metric, "not_told_apart_from"]

"""`lab_models.api`'s leaderboard section (re-exported there: the UI imports only `lab_models.api`).

The equal-budget leaderboard (lab_models/leaderboard.py): one row per run with weights (validation bits per byte,
fill-mask accuracy and infill exact match on held-out text, classification accuracy per fine-tuning task,
parameters, training tokens), filtered to one corpus; the forward-pass scores are cached in each run folder.
"""
from __future__ import annotations

from pathlib import Path

from .. import leaderboard as _leaderboard

LEADERBOARD_COLUMNS = _leaderboard.LEADERBOARD_COLUMNS
LEADERBOARD_NOTE_COLUMNS = _leaderboard.NOTE_COLUMNS
LEADERBOARD_METRICS = _leaderboard.METRIC_COLUMNS
LEADERBOARD_ACCURACY_PREFIX = _leaderboard.ACCURACY_PREFIX
LEADERBOARD_DEFAULT_EXAMPLES = _leaderboard.DEFAULT_MAX_EXAMPLES
LEADERBOARD_MAX_EXAMPLES = _leaderboard.MAX_EXAMPLES_LIMIT
leaderboard = _leaderboard.leaderboard
leaderboard_corpora = _leaderboard.leaderboard_corpora
__all__ = ["LEADERBOARD_COLUMNS", "LEADERBOARD_NOTE_COLUMNS", "LEADERBOARD_METRICS", "LEADERBOARD_ACCURACY_PREFIX",
            "LEADERBOARD_DEFAULT_EXAMPLES", "LEADERBOARD_MAX_EXAMPLES", "leaderboard", "leaderboard_corpora",
            "leaderboard_csv"]


def leaderboard_csv(frame, path=None) -> Path:
    """Write a `leaderboard(...)` table as CSV (no index; NaN as an empty field; `pandas.read_csv` reads it back)
    to `path`, or, when None, to leaderboard-<YYYYmmdd-HHMMSS>.csv in a new temporary folder. Returns the path.
    ValueError when `frame` is not a table."""
    import tempfile
    import time as _time

    if path is None:
        folder = Path(tempfile.mkdtemp(prefix="pretraining-lab-leaderboard-"))
        path = folder / f"leaderboard-{_time.strftime('%Y%m%d-%H%M%S')}.csv"
    return _leaderboard.write_leaderboard_csv(frame, path)

"""Files the tests write and read: bytes into a file whose folder may not exist yet, and a run's metrics rows."""
from __future__ import annotations

import json


def write(path, content: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def rows_of(out):
    """Every row of the run folder `out`'s metrics.jsonl, in order."""
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]

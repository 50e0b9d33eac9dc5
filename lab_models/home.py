"""The lab home: the one folder that holds everything a user makes (corpora, tokenizers, runs).

Default `~/.pretraining-lab`; override with the environment variable `PRETRAINING_LAB_HOME` or by passing a path.
Nothing user-made is ever written inside the package. Writes go through `atomic_write_*` so that a crash or a kill
never leaves a half-written file behind.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

HOME_ENV_VAR = "PRETRAINING_LAB_HOME"
DEFAULT_HOME = Path("~/.pretraining-lab")
SUBFOLDERS = ("corpora", "tokenizers", "runs")


def lab_home(home: str | os.PathLike | None = None) -> Path:
    """Resolve the lab home (argument, then $PRETRAINING_LAB_HOME, then ~/.pretraining-lab) and create its folders."""
    chosen = home if home is not None else os.environ.get(HOME_ENV_VAR) or DEFAULT_HOME
    root = Path(chosen).expanduser().resolve()
    for sub in SUBFOLDERS:
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to a temporary file beside `path`, fsync it, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")

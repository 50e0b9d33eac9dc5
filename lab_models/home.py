"""The lab home: the one folder that holds everything a user makes (corpora, tokenizers, runs), how files are written
into it, and how names from a request become paths inside it.

Default `~/.pretraining-lab`; override with the environment variable `PRETRAINING_LAB_HOME` or by passing a path.
Nothing user-made is ever written inside the package. Writes go through `atomic_write_*` so that a crash or a kill
never leaves a half-written file behind.

Names from a request. The page refers to runs, fine-tunings and corpora by name (a run id such as
`bert-tiny-20260101-120000-ab12`), and a name from a request may be anything: `..`, `/etc/passwd`, `a/../../b`, a NUL
byte, 10,000 characters. Every such name goes through `plain_name` (one path component of safe characters) and then
`child` (the joined path, resolved with symlinks followed, must still lie inside its folder). A folder the user names
on the server (an import) is checked the other way round with `inside`: whatever is read from it must resolve inside
it.

    >>> plain_name("bert-tiny-20260101-120000-ab12")
    'bert-tiny-20260101-120000-ab12'
    >>> plain_name("../etc")
    Traceback (most recent call last):
    lab_models.messages.LabError: '../etc' is not a name: use letters, digits, '.', '_' and '-' only, starting with a
    letter or digit (no '/', no '..').

The Python API (`lab_models.api`) is a local caller and keeps taking folder paths (docs/contract.md §1); these checks
are for what arrives from the page.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from lab_models.messages import LabError, Message, with_records

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
    """`obj` as a JSON file; a message in it is written as its English with its record beside it (`with_records`),
    so that a reader of the lab gets the message back (`messages_restored`)."""
    return atomic_write_text(path, json.dumps(with_records(obj), indent=2, ensure_ascii=False, sort_keys=True) + "\n")


# ------------------------------------------------------------------------------------------------ names from a request
MAX_NAME_CHARS = 200  # run ids are about 40 characters, corpus names at most 80; file systems allow 255 bytes
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def shown(text: str, limit: int = 80) -> str:
    """`text` as a message may quote it: its repr, cut in the middle when long.

    >>> shown("x" * 500, limit=20)
    "'xxxxxxxx…(484 more)…xxxxxxxx'"
    """
    quoted = repr(text)
    if len(quoted) <= limit:
        return quoted
    head, tail = quoted[:limit // 2 - 1], quoted[-(limit // 2 - 1):]
    return f"{head}…({len(quoted) - len(head) - len(tail)} more)…{tail}"


def plain_name(name, what: Message = Message("name")) -> str:
    """`name` (surrounding spaces removed) when it is one safe path component, else a ValueError that says why: not
    text, empty, too long, or holding anything but letters, digits, '.', '_' and '-' (so no '/', '\\', NUL, control
    characters, and nothing starting with '.' such as '..')."""
    if not isinstance(name, str):
        raise LabError("A {what} must be text, got {name_type}.", what=what, name_type=type(name).__name__)
    name = name.strip()
    if not name:
        raise LabError("The {what} is empty.", what=what)
    if len(name) > MAX_NAME_CHARS:
        raise LabError("{name} is not a {what}: it has {length:,} characters, more than "
                       "{max_name_chars}.",
                       name=shown(name), what=what, length=len(name), max_name_chars=MAX_NAME_CHARS)
    if not _NAME.fullmatch(name):
        raise LabError("{name} is not a {what}: use letters, digits, '.', '_' and '-' only, starting "
                       "with a letter or digit (no '/', no '..').", name=shown(name), what=what)
    return name


def inside(root: str | os.PathLike, path: str | os.PathLike, what: Message = Message("path")) -> Path:
    """`path` resolved (symlinks followed; relative paths are taken relative to `root`), when it is `root` itself or
    lies under it; else a ValueError. For reading from a folder the user named: nothing outside it is reached, even
    through a symlink inside it."""
    root = Path(root).expanduser().resolve()
    candidate = Path(path).expanduser()
    if "\0" in str(candidate):
        raise LabError("The {what} contains a NUL character.", what=what)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop, a name too long for the file system
        raise LabError("The {what} {path} cannot be resolved: {error}.",
                       what=what, path=shown(str(path)), error=error) from None
    if resolved != root and root not in resolved.parents:
        raise LabError("The {what} {path} leads outside {root}; only what lies inside it is read.",
                       what=what, path=shown(str(path)), root=root)
    return resolved


def is_inside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether `path` resolves to `root` or under it (`inside` without the error)."""
    try:
        inside(root, path)
    except ValueError:
        return False
    return True


def child(root: str | os.PathLike, name, what: Message = Message("name")) -> Path:
    """`root / name` for a request's `name`: `plain_name` first, then the joined path must resolve inside `root`
    (a symlink inside `root` that points elsewhere is refused). Returns the unresolved `root / name`."""
    name = plain_name(name, what)
    path = Path(root) / name
    inside(root, path, what)
    return path

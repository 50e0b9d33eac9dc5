"""What the command-line entry points (`python -m lab_models.train`, `finetune`, `zoo`, `sweep`, `import_hf`,
`export_hf`) write to the terminal: report lines on stdout and the one-line `error: ...` on stderr that the
interface promises (a failed command writes exactly one such line, then exits non-zero). The library itself logs
instead; only these CLIs write here.

>>> one_line("shape  mismatch:\\n  expected (4, 8)")
'shape mismatch: expected (4, 8)'
"""
from __future__ import annotations

import sys


def one_line(message) -> str:
    """`message` with its whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(message).split())


def say(line: str, *, stream=None) -> None:
    """One report line on stdout (or `stream`), flushed so that a pipe sees it at once."""
    stream = stream if stream is not None else sys.stdout
    stream.write(line + "\n")
    stream.flush()


def say_error(message) -> None:
    """The CLI's `error: <message on one line>` on stderr."""
    say(f"error: {one_line(message)}", stream=sys.stderr)

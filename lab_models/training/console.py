"""What the commands of `python -m lab_models` (train, zoo, sweep, finetune, import-hf, export-hf) share at the
terminal: report lines on stdout, the one-line `error: ...` on stderr that the interface promises (a failed command
writes exactly one such line, then exits non-zero), and the argument parser whose usage errors become that line.
The library itself logs instead; only the commands write here.

>>> one_line("shape  mismatch:\\n  expected (4, 8)")
'shape mismatch: expected (4, 8)'
"""
from __future__ import annotations

import argparse
import sys

from lab_models.messages import LabError, Message, message_of


def one_line(message) -> str:
    """`message` with its whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(message).split())


def status_message(error: BaseException) -> Message | str:
    """What a status file says of `error`, on one line: a message of the lab as it is (it keeps its template), any
    other text collapsed by `one_line`."""
    message = message_of(error)
    return message if isinstance(message, Message) and one_line(message) == message else one_line(message)


def say(line: str, *, stream=None) -> None:
    """One report line on stdout (or `stream`), flushed so that a pipe sees it at once."""
    stream = stream if stream is not None else sys.stdout
    stream.write(line + "\n")
    stream.flush()


def say_error(message) -> None:
    """The CLI's `error: <message on one line>` on stderr."""
    say(f"error: {one_line(message)}", stream=sys.stderr)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is a `ValueError` (the command turns it into its one `error: ...` line) instead of
    argparse's usage block and exit."""

    def error(self, message):
        raise LabError.of(message)  # argparse's own English

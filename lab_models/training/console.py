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
from pathlib import Path

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


# ------------------------------------------------------------------------------------------------ training progress
def duration_text(seconds: float) -> str:
    """A duration as a person reads it at a terminal.

    >>> [duration_text(s) for s in (4.2, 185, 3725)]
    ['4 s', '3 min 05 s', '1 h 02 min']
    """
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class TrainProgress:
    """The lines `python -m lab_models train` prints while it trains: the first step, then at most one line every
    `every_s` seconds and the last step (step, loss, tokens per second, time so far and the time left at this pace,
    from the steps of this process, so a resumed run's estimate is its own), each evaluation, and where the run is
    when it ends. The run's files (train.log, metrics.jsonl) keep everything; these lines are for a person watching.

    >>> progress = TrainProgress(total_steps=100, start_step=0, started_at=0.0, every_s=10.0)
    >>> progress.step_line(1, 5.4321, 1234.5, now=0.5)
    'step     1/100  loss 5.432  1,234 tokens/s  0 s so far'
    >>> progress.step_line(2, 5.1, 1300.0, now=1.0) is None   # the next line comes 10 s later
    True
    >>> progress.step_line(21, 4.0, 1300.0, now=10.5)
    'step    21/100  loss 4.000  1,300 tokens/s  10 s so far, about 40 s left'
    >>> TrainProgress(None, 0, 0.0).step_line(3, 5.0, None, now=1.0)  # a wall-time budget still timing its steps
    'step     3/?  loss 5.000  1 s so far'
    """

    def __init__(self, total_steps: int | None, start_step: int, started_at: float, every_s: float = 10.0):
        self.total_steps = total_steps
        self.start_step = start_step
        self.started_at = started_at
        self.every_s = every_s
        self.last_line_at: float | None = None

    def step_line(self, step: int, loss: float, tokens_per_s: float | None, *, now: float) -> str | None:
        """The line for `step`, or None when the last line is more recent than `every_s` (the first step and the
        last always get one)."""
        total = self.total_steps
        due = self.last_line_at is None or now - self.last_line_at >= self.every_s or (total and step >= total)
        if not due:
            return None
        self.last_line_at = now
        width = len(str(total or step))
        parts = [f"step {step:>{max(width, 5)}}/{total or '?'}", f"loss {loss:.3f}"]
        if tokens_per_s:
            parts.append(f"{tokens_per_s:,.0f} tokens/s")
        elapsed = now - self.started_at
        timing = f"{duration_text(elapsed)} so far"
        done = step - self.start_step
        if done > 1 and total and step < total:
            timing += f", about {duration_text(elapsed / done * (total - step))} left"
        parts.append(timing)
        return "  ".join(parts)

    @staticmethod
    def evaluation_line(step: int, loss: float, bits_per_byte: float) -> str:
        """
        >>> TrainProgress.evaluation_line(200, 3.14159, 1.5)
        'step   200  validation loss 3.142, 1.500 bits per byte'
        """
        return f"step {step:>5}  validation loss {loss:.3f}, {bits_per_byte:.3f} bits per byte"

    def end_lines(self, state: str, step: int, out: Path, *, now: float) -> list[str]:
        """Where the run is and how to open it, after it finished or stopped.

        >>> for line in TrainProgress(100, 0, 0.0).end_lines("finished", 100, Path("/h/runs/r1"), now=75.0):
        ...     print(line)
        finished 100 steps in 1 min 15 s; the run is in /h/runs/r1
        open it in the app: python app.py --home /h (Train, Compare and Understand list run r1)
        """
        lines = [f"{state} {'at step ' if state == 'stopped' else ''}{step}{' steps' if state == 'finished' else ''} "
                 f"in {duration_text(now - self.started_at)}; the run is in {out}"]
        if state == "stopped":
            lines[0] += " (resume with --resume)"
        if out.parent.name == "runs":  # a run folder of a lab home
            lines.append(f"open it in the app: python app.py --home {out.parent.parent} (Train, Compare and Understand "
                         f"list run {out.name})")
        else:
            lines.append("to open it in the app, train it inside a lab home: --out HOME/runs/NAME, then "
                         "python app.py --home HOME")
        return lines

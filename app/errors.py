"""Turn the backend's `ValueError`s into messages in the page, in the reader's language (app/i18n/messages.py), so bad
input never takes the app down; and make a failed event leave the page as it was.

- `user_errors(handler)`: a `ValueError` becomes a `gr.Error` (the toast, and the message an API client gets); the
  app's log gets one line for it (a refused input is not a fault of the server), while an unexpected exception is
  logged with its traceback.
- `keep_outputs_on_failure(demo)`: when an event fails, Gradio marks every output of it with a red "Error" badge and
  blanks its plots. After this, each event is followed on failure by a server-free step that writes nothing
  (`gr.skip()`), so the outputs keep what they showed and their badges are cleared; only a line that describes the
  input itself (a component with the `CLEARED_ON_ERROR` class, e.g. the Mask Explorer's "Split used: ..." line) is
  emptied, since it no longer matches what the reader typed. The toast still says what to do.
"""
from __future__ import annotations

import functools
import logging

import gradio as gr
from gradio.events import EventListener

from app.i18n.language import tr
from app.i18n.messages import translate

logger = logging.getLogger(__name__)


MAX_MESSAGE_CHARS = 600  # a message quoting a 1 MB input is cut in the middle: a toast is read, not scrolled
MAX_LOG_CHARS = 300  # the log's line for a refused input
CLEARED_ON_ERROR = "lab-cleared-on-error"  # elem_classes of an output that describes the input: emptied on failure


def readable(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` cut in the middle when it is longer than `limit` characters.

    >>> readable("Unknown corpus 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx': choose one of a, b.", limit=40)
    "Unknown corpus ' … (42 characters cut) … ose one of a, b."
    """
    if len(message) <= limit:
        return message
    head, tail = message[:limit * 2 // 5], message[-(limit * 2 // 5):]
    return f"{head} … ({len(message) - len(head) - len(tail):,} characters cut) … {tail}"


def one_line(message: str) -> str:
    """A message as one log line: its newlines as spaces, cut in the middle past MAX_LOG_CHARS.

    >>> one_line("Type a sentence first:\\nthe sentence is empty.")
    'Type a sentence first: the sentence is empty.'
    """
    return readable(" ".join(str(message).split()), MAX_LOG_CHARS)


def user_errors(handler):
    """Decorator: a `ValueError` from the backend becomes a `gr.Error` (shown in the page, sent to API clients),
    logged as one line; any other exception is logged with its traceback and shown as an unexpected error."""

    @functools.wraps(handler)
    def wrapped(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except gr.Error as error:  # a handler's own refusal, already in the reader's language
            logger.info("%s refused the input: %s", handler.__name__, one_line(error.message))
            error.print_exception = False
            raise
        except ValueError as error:
            logger.info("%s refused the input: %s", handler.__name__, one_line(str(error)))
            raise gr.Error(readable(translate(error)), print_exception=False) from error
        except Exception as error:  # keep the app up; say what happened
            logger.exception("unexpected error in %s", handler.__name__)
            raise gr.Error(readable(tr("header.unexpected_error", handler=handler.__name__,
                                       error=f"{type(error).__name__}: {error}")),
                           print_exception=False) from error

    return wrapped


def _cleared(component):
    """What a `CLEARED_ON_ERROR` output shows after a failure: nothing."""
    return gr.update(value="") if isinstance(component, (gr.Markdown, gr.HTML, gr.Textbox)) else gr.update(value=None)


def _is_timer_tick(fn) -> bool:
    return fn.trigger_after is None and bool(fn.targets) and all(event == "tick" for _, event in fn.targets)


def keep_outputs_on_failure(demo: gr.Blocks) -> int:
    """Follow every event of `demo` that has outputs with a step that runs only when it fails and leaves those outputs
    as they were (see the module docstring). Call it inside `with demo:`, after the whole page is built. Returns how
    many events it followed. Timer ticks are left alone: their handlers never fail (they skip instead)."""
    followed = 0
    for fn in list(demo.fns.values()):
        if fn.fn is None or not fn.outputs or fn.trigger_only_on_failure or _is_timer_tick(fn):
            continue
        outputs = list(fn.outputs)
        kept = [_cleared(component) if CLEARED_ON_ERROR in (getattr(component, "elem_classes", None) or [])
                else gr.skip() for component in outputs]

        def leave_as_they_were(kept=tuple(kept)):
            return kept if len(kept) > 1 else kept[0]

        name = fn.api_name or f"event_{fn._id}"
        EventListener("failure", has_trigger=False, trigger_after=fn._id, trigger_only_on_failure=True).listener(
            None, leave_as_they_were, None, outputs, api_name=f"{name}_failed", api_visibility="private",
            show_progress="hidden", queue=False)
        followed += 1
    return followed

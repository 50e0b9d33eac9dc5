"""Turn the backend's `ValueError`s into messages in the page, in the reader's language (app/i18n/messages.py), so bad
input never takes the app down."""
from __future__ import annotations

import functools
import logging

import gradio as gr

from app.i18n.language import tr
from app.i18n.messages import translate_message

logger = logging.getLogger(__name__)


MAX_MESSAGE_CHARS = 600  # a message quoting a 1 MB input is cut in the middle: a toast is read, not scrolled


def readable(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`message` cut in the middle when it is longer than `limit` characters.

    >>> readable("Unknown corpus 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx': choose one of a, b.", limit=40)
    "Unknown corpus ' … (42 characters cut) … ose one of a, b."
    """
    if len(message) <= limit:
        return message
    head, tail = message[:limit * 2 // 5], message[-(limit * 2 // 5):]
    return f"{head} … ({len(message) - len(head) - len(tail):,} characters cut) … {tail}"


def user_errors(handler):
    """Decorator: a `ValueError` from the backend becomes a `gr.Error` (shown in the page, sent to API clients)."""

    @functools.wraps(handler)
    def wrapped(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except gr.Error:
            raise
        except ValueError as error:
            raise gr.Error(readable(translate_message(str(error)))) from error
        except Exception as error:  # keep the app up; say what happened
            logger.exception("unexpected error in %s", handler.__name__)
            raise gr.Error(readable(tr("header.unexpected_error", handler=handler.__name__,
                                       error=f"{type(error).__name__}: {error}"))) from error

    return wrapped

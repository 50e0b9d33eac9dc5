"""Turn the backend's `ValueError`s into messages in the page, so bad input never takes the app down."""
from __future__ import annotations

import functools
import logging

import gradio as gr

logger = logging.getLogger(__name__)


def user_errors(handler):
    """Decorator: a `ValueError` from the backend becomes a `gr.Error` (shown in the page, sent to API clients)."""

    @functools.wraps(handler)
    def wrapped(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except gr.Error:
            raise
        except ValueError as error:
            raise gr.Error(str(error)) from error
        except Exception as error:  # keep the app up; say what happened
            logger.exception("unexpected error in %s", handler.__name__)
            raise gr.Error(f"Something went wrong in {handler.__name__}: {type(error).__name__}: {error}") from error

    return wrapped

"""The lab's messages in the reader's language: `lab_models` writes its errors, status lines, notes and explanations as
`Message`s (English that keeps its `str.format` template and fields, lab_models/messages.py); the page translates the
template first and formats it after, so no finished message is ever read back.

The catalogue follows gettext's convention: the English template is the message's id. English needs no catalogue (the
template is the text); the Chinese lives in `app/i18n/locales/zh/messages/*.json`, one JSON object per file from the
English template to the Chinese one, with the same named fields (their order is the language's):

    "Unknown family {name!r}: choose one of {families}."  ->  "未知的模型家族 {name!r}：可选 {families}。"

`translate(message)` formats the translation with the message's fields; a field that is a message itself (a control's
name such as "Steps", a run's failure inside "gpt-1: ...") is translated the same way, and a `Joined` list of messages
(an explanation's clauses) is joined with the language's own joiner ("；" for "; "). Other fields (numbers, paths,
what the user typed, family names) are shown as they are. A plain `str` is looked up whole as a template without
fields (a stage name read back from metrics.jsonl), else shown as it is; an exception that is not a `LabError` (a
library's, English only) is shown after a lead-in saying that it is English.

`tests/app/i18n/test_messages.py` finds every message the code builds (an AST scan of `lab_models/` and `app/`) and
checks that each has its Chinese, with the same fields.
"""
from __future__ import annotations

import json
import string
from functools import lru_cache
from pathlib import Path

from lab_models.api import Joined, LabError, Message

from app.i18n.language import LOCALES, current_language

UNTRANSLATED_LEAD = {"zh": "出错了（原文为英文）：{}"}  # before an exception's English that has no template
JOINERS = {"zh": {"; ": "；", " ": "", ", ": "，", " or ": " 或 "}}  # a Joined's separator, per language
CAPITALIZED = "capitalized"  # a field's format spec in an English template: the field with a capital first letter


def catalogue_files(language: str) -> list[Path]:
    return sorted((LOCALES / language / "messages").glob("*.json"))


@lru_cache(maxsize=4)
def catalogue(language: str) -> dict[str, str]:
    """{English template: translated template} for `language`, from all of its message files (empty for English)."""
    entries: dict[str, str] = {}
    for path in catalogue_files(language):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f"{path} must be one JSON object of English template -> translated template.")
        entries.update(data)
    return entries


class _Formatter(string.Formatter):
    """`str.format`, with the `capitalized` spec of the lab's messages understood for any text."""

    def format_field(self, value, format_spec):
        if format_spec == CAPITALIZED:
            text = str(value)
            return text[:1].upper() + text[1:]
        return super().format_field(value, format_spec)


FORMATTER = _Formatter()


def translate(message, language: str | None = None) -> str:
    """`message` (a `Message`, a `LabError`, another exception or a plain `str`) in `language` (default: the
    reader's, `app.i18n.language.current_language`).

    >>> translate(LabError("Unknown family {name!r}: choose one of {families}.", name="gpx", families="gpt, bert"),
    ...           "zh")
    "未知的模型家族 'gpx'：可选 gpt, bert。"
    >>> translate(LabError("Choose a corpus first."), "en")
    'Choose a corpus first.'
    """
    language = language or current_language()
    if isinstance(message, BaseException) and not isinstance(message, LabError):
        text = str(message)
        lead = UNTRANSLATED_LEAD.get(language)
        return lead.format(text) if lead and text else text
    if isinstance(message, LabError):
        message = message.message
    if message is None:
        return ""
    if language == "en" or not message:
        return str(message)
    return _translated(message, language)


def _translated(message, language: str) -> str:
    if isinstance(message, Joined):
        joiner = JOINERS.get(language, {}).get(message.separator, message.separator)
        return joiner.join(_translated(part, language) for part in message.parts)
    known = catalogue(language)
    if isinstance(message, Message):
        fields = {name: _translated(value, language) if isinstance(value, Message) else value
                  for name, value in message.fields.items()}
        for template in (known.get(message.template), message.template):  # a template with no entry: its English
            if template is not None:
                try:
                    return FORMATTER.format(template, **fields)
                except (KeyError, IndexError, ValueError):
                    continue
        return str(message)
    text = str(message)
    template = known.get(text.replace("{", "{{").replace("}", "}}"))  # a plain text that is a template without fields
    if template is None:
        return text
    try:
        return FORMATTER.format(template)
    except (KeyError, IndexError, ValueError):
        return text

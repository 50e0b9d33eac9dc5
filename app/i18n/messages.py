"""The backend's messages in the reader's language: `lab_models` writes its errors and status lines in English (it is
a Python library, and its API users read English); the page shows them in Chinese to a Chinese reader.

The Chinese lives in `app/i18n/locales/zh/messages/*.json`, one JSON object per file whose keys are the English
templates, as the backend's code writes them with every `{...}` field of an f-string as `{}`, and whose values are the
Chinese with the same fields as `{}` (in order) or `{0}`, `{1}`, ... (reordered). A message is matched against the
templates (longest fixed text first), and its fields are carried over, themselves translated when they are messages too:

    "Unknown family 'gpx': choose one of gpt, bert."  matches  "Unknown family {}: choose one of {}."
    -> "未知的模型家族 'gpx'：可选 gpt, bert。"

`tests/app/i18n/test_messages.py` reads every `raise ValueError(...)` of `lab_models/` and `app/` and checks that each
one has its Chinese. A message with no template (built from a variable, or from a library) keeps its English after a
Chinese lead-in, so a reader still learns what went wrong.

Deviation from gettext: the backend is not marked up for translation; the English text is the key, so changing an
English message means changing its key here too (the test says which).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from app.i18n.language import LOCALES, current_language

FIELD = "{}"
MIN_FIXED_CHARS = 6  # a template with less fixed text than this would match nearly anything
MAX_MATCHED_CHARS = 4000  # longer messages (quoting a whole input) keep their English: matching them is not worth it
UNTRANSLATED_LEAD = {"zh": "出错了（原文为英文）：{}"}


def catalogue_files(language: str) -> list[Path]:
    return sorted((LOCALES / language / "messages").glob("*.json"))


@lru_cache(maxsize=4)
def catalogue(language: str) -> dict[str, str]:
    """{English template: translation} for `language`, from all of its message files (empty for English)."""
    entries: dict[str, str] = {}
    for path in catalogue_files(language):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f"{path} must be one JSON object of English template -> translation.")
        entries.update(data)
    return entries


def template_pattern(template: str) -> re.Pattern:
    """The regular expression that an English template's messages match: fixed text as is, each `{}` any text."""
    parts = template.split(FIELD)
    return re.compile("(.*?)".join(re.escape(part) for part in parts), re.DOTALL)


def fixed_chars(template: str) -> int:
    return len(template.replace(FIELD, ""))


@lru_cache(maxsize=4)
def compiled_templates(language: str) -> list[tuple[re.Pattern, str, str]]:
    """(pattern, translation, first fixed text) per template, the longest fixed text first (the most specific)."""
    templates = sorted((t for t in catalogue(language) if fixed_chars(t) >= MIN_FIXED_CHARS),
                       key=lambda t: (-fixed_chars(t), t.count(FIELD)))  # the most fixed text, then the fewest fields
    return [(template_pattern(t), catalogue(language)[t], t.split(FIELD)[0]) for t in templates]


def translate_message(message: str, language: str | None = None, *, _depth: int = 0) -> str:
    """`message` (English, from the backend) in `language` (default: the reader's,
    `app.i18n.language.current_language`).

    >>> translate_message("Unknown family 'gpx': choose one of gpt, bert.", "en")
    "Unknown family 'gpx': choose one of gpt, bert."
    """
    language = language or current_language()
    if language == "en" or not message:
        return message
    translated = _translated(message, language, _depth)
    if translated is not None:
        return translated
    if _depth:
        return message
    lead = UNTRANSLATED_LEAD.get(language)
    return lead.format(message) if lead else message


def backend_text(english: str) -> str:
    """A sentence from `lab_models` that is no error (a run's status message, a stage's name) in the reader's language
    when the catalogue has it, else as it is: unlike `translate_message`, no "untranslated" lead.

    >>> backend_text("stopped before it started")
    'stopped before it started'
    """
    if not english or current_language() == "en":
        return english
    translated = translate_message(english)
    lead = UNTRANSLATED_LEAD.get(current_language())
    return english if lead and translated == lead.format(english) else translated


def _translated(message: str, language: str, depth: int) -> str | None:
    if len(message) > MAX_MATCHED_CHARS:
        return None
    known = catalogue(language)
    if FIELD not in message and message in known:  # a whole text with no fields (or a control's name as a field)
        return known[message].format()
    for pattern, translation, start in compiled_templates(language):
        if not message.startswith(start):
            continue
        match = pattern.fullmatch(message)
        if match is None:
            continue
        fields = tuple(_field(field, language, depth) for field in match.groups())
        try:
            return translation.format(*fields)
        except (IndexError, KeyError, ValueError):
            return None
    # "<name>: <message>" (a run's or a family's message in a list of them): the name as is, the message translated
    named = NAMED_MESSAGE.fullmatch(message)
    if named is not None:
        inner = _translated(named.group(2), language, depth + 1)
        if inner is not None:
            return f"{named.group(1)}：{inner}"
    return None


NAMED_MESSAGE = re.compile(r"([^\s:]{1,80}): (.+)", re.DOTALL)


def _field(field: str, language: str, depth: int) -> str:
    """A message's field in `language`: a control's name or a fixed phrase exactly as the catalogue has it, a
    nested message (up to two levels), else as it is (a path, a number, a list of choices, what the user typed)."""
    known = catalogue(language)
    if FIELD not in field and field in known:
        return known[field].format()
    if depth < 2 and len(field) > 12:
        return translate_message(field, language, _depth=depth + 1)
    return field

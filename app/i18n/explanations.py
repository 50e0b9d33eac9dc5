"""The backend's explanations in the reader's language: how a generation was decoded, why a family cannot do a mode,
which mask an attention or routing probe used (`Generation.explanation`, `AttentionMaps.note`, `RoutingView.note`).

`lab_models` writes these in English, as a few clauses joined by "; " ("left to right with a KV cache, after [EOS] (a
document start); greedy; stopped at [EOS]"), each clause built from smaller pieces. Their Chinese lives in the same
catalogue as the backend's error messages (`app/i18n/locales/zh/messages/*.json`, English template -> Chinese; see
app/i18n/messages.py); this module matches the text clause by clause, the longest run of clauses that one template
covers first, and translates the fields of a match that are themselves known pieces (the cache text inside a decoding
plan, the part of the model inside a probe's note).

Unlike `app.i18n.messages.translate_message` (for errors), a clause with no template keeps its English with no lead-in:
an explanation is a footnote, and a half-translated footnote reads better than one flagged as untranslated. A field
never spans two clauses, so a template ending in a field cannot swallow the clauses after it.

    >>> explain("left to right with a KV cache, after [EOS] (a document start); greedy; stopped at [EOS]", "en")
    'left to right with a KV cache, after [EOS] (a document start); greedy; stopped at [EOS]'
    >>> explain("greedy; stopped at [EOS]", "zh")
    '贪心；在 [EOS] 处停止'
"""
from __future__ import annotations

from app.i18n.language import current_language
from app.i18n.messages import compiled_templates

CLAUSE = "; "
JOINERS = {"zh": "；"}  # how the translated clauses are joined, per language
MAX_FIELD_DEPTH = 2  # a plan's text holds a cache text; a note holds a view's description; no deeper


def known_text(text: str, language: str, depth: int = 0) -> str | None:
    """`text` in `language` when one template covers it whole (fields that are known pieces translated too), else
    None. A match whose field holds a clause separator is refused: the clauses are matched one run at a time."""
    for pattern, translation, start in compiled_templates(language):
        if not text.startswith(start):
            continue
        match = pattern.fullmatch(text)
        if match is None or any(CLAUSE in field for field in match.groups()):
            continue
        fields = match.groups()
        if depth < MAX_FIELD_DEPTH:
            fields = tuple(known_text(field, language, depth + 1) or field for field in fields)
        try:
            return translation.format(*fields)
        except (IndexError, KeyError, ValueError):
            return None
    return None


def explain(text: str, language: str | None = None) -> str:
    """An explanation from the backend in `language` (default: the reader's), clause by clause; unknown clauses keep
    their English."""
    language = language or current_language()
    if language == "en" or not text:
        return text
    clauses = str(text).split(CLAUSE)
    parts, start = [], 0
    while start < len(clauses):
        for end in range(len(clauses), start, -1):  # the longest run of clauses that one template covers
            translated = known_text(CLAUSE.join(clauses[start:end]), language)
            if translated is not None:
                break
        else:
            translated, end = clauses[start], start + 1
        parts.append(translated)
        start = end
    return JOINERS.get(language, CLAUSE).join(parts)

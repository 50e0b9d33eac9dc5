"""Splitting a sentence into words for the pages that draw one cell per word, in any script.

Chinese and Japanese put no spaces between words, so "split on whitespace" turns a Chinese sentence into one token.
The split used here follows BERT's basic tokenizer (Devlin et al. 2019, `tokenize_chinese_chars`): split on
whitespace, and make every wide character (a CJK ideograph, kana, hangul, full-width punctuation, an emoji: Unicode
East Asian Width W or F) a token of its own, so "小猫看见 a ball" gives 小 猫 看 见 a ball. Mode "characters" makes every
non-space character a token (useful for a short English word, or to count characters). Every split says which rule it
used, so the page can show it next to the drawing.

Deviation from BERT: BERT isolates the CJK Unified Ideographs blocks only; East Asian Width also isolates kana, hangul,
full-width punctuation and emoji, which a whitespace split would glue together just the same.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from lab_models.messages import LabError, Message

SPLIT_MODES = ("whitespace", "characters")


@dataclass(frozen=True)
class WordSplit:
    tokens: list[str]
    mode: str  # "whitespace", "whitespace+wide" (wide characters one by one) or "characters"
    note: Message  # which split was used, in words, for the page


def is_wide(char: str) -> bool:
    """A character that stands without spaces around it: CJK, kana, hangul, full-width forms, most emoji.

    >>> is_wide("猫"), is_wide("。"), is_wide("a"), is_wide("🙂")
    (True, True, False, True)
    """
    return unicodedata.east_asian_width(char) in ("W", "F")


def wide_split(text: str) -> list[str]:
    """Whitespace words, with every wide character a token of its own (BERT's rule for Chinese).

    >>> wide_split("小猫看见一个红球。 the cat")
    ['小', '猫', '看', '见', '一', '个', '红', '球', '。', 'the', 'cat']
    """
    tokens: list[str] = []
    for word in text.split():
        current = ""
        for char in word:
            if is_wide(char):
                if current:
                    tokens.append(current)
                    current = ""
                tokens.append(char)
            else:
                current += char
        if current:
            tokens.append(current)
    return tokens


def split_words(text: str, mode: str = "whitespace") -> WordSplit:
    """`text` as tokens: "whitespace" (wide characters split one by one when the text has any) or "characters".

    >>> split_words("the cat sees a ball").note
    'split on whitespace'
    >>> split = split_words("小猫看见一个红球。")
    >>> len(split.tokens), split.mode
    (9, 'whitespace+wide')
    >>> split_words("猫 cat", "characters").tokens
    ['猫', 'c', 'a', 't']
    """
    if mode not in SPLIT_MODES:
        raise LabError("Unknown split {mode!r}: choose one of {split_modes}.",
                       mode=mode, split_modes=', '.join(SPLIT_MODES))
    if mode == "characters":
        tokens = [char for char in text if not char.isspace()]
        return WordSplit(tokens, "characters", Message("one token per character (spaces dropped)"))
    words = text.split()
    if not any(is_wide(char) for char in text):
        return WordSplit(words, "whitespace", Message("split on whitespace"))
    tokens = wide_split(text)
    if len(words) == 1:
        note = Message("split on whitespace, with each Chinese, Japanese or Korean character (and emoji) as its own "
                       "token: whitespace alone gives {n_words} token for this text", n_words=len(words))
    else:
        note = Message("split on whitespace, with each Chinese, Japanese or Korean character (and emoji) as its own "
                       "token: whitespace alone gives {n_words} tokens for this text", n_words=len(words))
    return WordSplit(tokens, "whitespace+wide", note)


def close_wide_spaces(text: str) -> str:
    """`text` without the spaces between two wide characters, which a WordPiece decoder puts there (BERT's normaliser
    makes every CJK character a word of its own, so decoding spaces them all). Other spaces stay.

    >>> close_wide_spaces("小 猫 看 见 a red ball 。")
    '小猫看见 a red ball 。'
    """
    kept = []
    for i, char in enumerate(text):
        if char == " " and 0 < i < len(text) - 1 and is_wide(text[i - 1]) and is_wide(text[i + 1]):
            continue
        kept.append(char)
    return "".join(kept)


def word_pattern(word: str) -> str:
    """A regular expression for `word` as a whole word: not inside a longer word of letters or digits. A word edge
    that is a wide character needs no boundary (Chinese has no spaces: 猫 is a word inside 小猫看见).

    >>> import re
    >>> bool(re.search(word_pattern("cat"), "the cats")), bool(re.search(word_pattern("猫"), "小猫看见"))
    (False, True)
    """
    before = "" if word[:1] and is_wide(word[0]) else r"(?<!\w)"
    after = "" if word[-1:] and is_wide(word[-1]) else r"(?!\w)"
    return before + re.escape(word) + after

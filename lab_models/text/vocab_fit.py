"""Vocabulary sizes that fit the corpus's script: the smallest size that works, per tokenizer kind and for several.

A subword vocabulary starts from its alphabet: every character of the training text (BPE, WordPiece, Unigram), or the
256 bytes (byte-level BPE), plus the kind's special tokens. English needs about a hundred symbols; Chinese needs one
per distinct character, a thousand or more, and BPE counts a character twice when it also ends a word (`字</w>`), so
the tiny preset's 512 tokens cannot even hold the alphabet of a Chinese corpus. Where the preset's size is too small,
the lab raises it to the smallest size that works instead of failing:

* in training (`build_tokenizer` below): the run's tokenizer kind gets the smallest size that holds its
  alphabet (`VocabSizeTooSmall.minimum`, which `tokenizers` reports after counting the alphabet), and the run says so
  in train.log and config.json "tokenizer.note" (the mirror of the "lowered" rule for sizes the corpus cannot fill);
* byte-level BPE (GPT-2, RoBERTa, MASS) never needs it: its 256-byte alphabet covers every script (a Chinese
  character is 3 byte tokens until merges join them), so its minimum is 257 whatever the text;
* in the Tokenizer Lab (`propose_vocab_size`): the smallest size that works for every ticked kind at once, offered
  as a one-click fix.

Deviation from SentencePiece: SentencePiece keeps the vocabulary size and drops rare characters instead
(`character_coverage` 0.9995 for Chinese, unknown or byte fallback for the rest). Raising the size keeps every
character of the training text, at the cost of a vocabulary without merges when the size is exactly the minimum (one
token per character, which is how BERT's Chinese model tokenizes Chinese anyway).

Vocabulary size: the tokenizer is asked for the requested size; if the corpus cannot support it (the tokenizer's
ValueError "supports at most ~N"), `build_tokenizer` retries with N (the "~" means N can move by a few tokens between
trainings, so it retries a few times with the new figure) and reports the lowered size in `TokenizerChoice.note`.
If the size is too small to hold the corpus's alphabet (Chinese at the tiny preset's 512: `VocabSizeTooSmall`), it is
raised to the smallest size that holds it and the note says so (lab_models/text/vocab_fit.py).
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lab_models.messages import LabError, Message, messages_restored
from lab_models.text.tokenizer_kinds import TOKENIZER_KINDS, UNIGRAM_PIPELINE_VERSION
from tokenizers import Tokenizer

from lab_models.text.corpora import Corpus
from lab_models.home import atomic_write_json, lab_home
from lab_models.text.tokenization import (VocabSizeTooLarge, VocabSizeTooSmall, cached_tokenizer,
                                         load_cached_tokenizer, special_tokens, train_tokenizer)

logger = logging.getLogger(__name__)

BYTE_LEVEL_MINIMUM = len(special_tokens("byte_bpe")) + 256  # specials + the 256 bytes: enough for any script


def minimum_vocab_size(kind: str, texts: Iterable[str], *, lowercase: bool = False) -> int:
    """The smallest vocabulary a `kind` tokenizer can have on `texts`: its special tokens plus its alphabet.

    >>> minimum_vocab_size("bpe", ["ab ba"])  # <unk> <|endoftext|> a b a</w> b</w>
    6
    >>> minimum_vocab_size("byte_bpe", ["小猫"])  # the 256 bytes and <|endoftext|>, whatever the text
    257
    """
    if kind == "byte_bpe":
        return BYTE_LEVEL_MINIMUM
    try:  # a request of 1 token always fails, and the error carries the minimum the trainer counted
        train_tokenizer(kind, texts, 1, lowercase=lowercase)
    except VocabSizeTooSmall as error:
        return error.minimum
    raise AssertionError("a one-token vocabulary cannot hold any alphabet")  # pragma: no cover


@dataclass(frozen=True)
class VocabProposal:
    """The smallest vocabulary size that works for every kind asked about, and why."""

    size: int  # max(requested, every kind's minimum)
    requested: int
    minimums: dict[str, int]  # kind -> its smallest working size on the corpus

    @property
    def raised(self) -> bool:
        return self.size > self.requested

    def message(self) -> str:
        """One sentence for the page, naming the kinds whose alphabet does not fit the requested size.

        >>> VocabProposal(947, 512, {"bpe": 947, "wordpiece": 701, "byte_bpe": 257}).message()
        'The corpus needs a larger vocabulary than 512: BPE (GPT) needs at least 947 tokens, WordPiece (BERT) 701.
        947 is the smallest size that works for every kind.'
        """
        if not self.raised:
            return f"{self.requested} works for every kind."
        short = sorted(((kind, minimum) for kind, minimum in self.minimums.items() if minimum > self.requested),
                       key=lambda item: -item[1])
        needs = ", ".join(f"{TOKENIZER_KINDS[kind]} needs at least {minimum} tokens" if i == 0 else
                          f"{TOKENIZER_KINDS[kind]} {minimum}" for i, (kind, minimum) in enumerate(short))
        return (f"The corpus needs a larger vocabulary than {self.requested}: {needs}. {self.size} is the smallest "
                "size that works for every kind.")


def propose_vocab_size(kinds: Iterable[str], texts, requested: int, *, known: dict[str, int] | None = None
                       ) -> VocabProposal:
    """The smallest size that works for all `kinds` on `texts`, at least `requested`. `known` holds minimums already
    learned (a `VocabSizeTooSmall` caught while training), so those kinds are not counted again."""
    texts = list(texts)
    minimums = {kind: (known or {}).get(kind) or minimum_vocab_size(kind, texts) for kind in kinds}
    if not minimums:
        raise LabError("Tick at least one tokenizer kind.")
    return VocabProposal(max([requested, *minimums.values()]), requested, minimums)


def raised_note(kind: str, requested: int, size: int, corpus_name: str) -> Message:
    """What a run records when its vocabulary was raised (config.json "tokenizer.note", train.log).

    >>> raised_note("bpe", 512, 947, "my-chinese")
    'vocabulary size raised from 512 to 947: the my-chinese corpus has more distinct characters than 512 bpe tokens
    hold (947 is the smallest size that holds its alphabet and the special tokens)'
    """
    return Message("vocabulary size raised from {requested} to {size}: the {corpus_name} corpus has more distinct "
                   "characters than {requested} {kind} tokens hold ({size} is the smallest size that holds its "
                   "alphabet and the special tokens)",
                   requested=requested, size=size, corpus_name=corpus_name, kind=kind)


# ------------------------------------------------------------------------------------------------ a corpus's tokenizer

_MAX_VOCAB_RETRIES = 4


@dataclass(frozen=True)
class TokenizerChoice:
    """The trained (not yet prepared) tokenizer and how its size was decided."""

    tokenizer: Tokenizer
    kind: str
    requested_vocab_size: int
    vocab_size: int  # what the tokenizer was trained to (before the lab's special tokens are added)
    note: str  # "" or why the size differs from the request
    cache_key: str


def build_tokenizer(corpus: Corpus | Callable[[], Corpus], kind: str, vocab_size: int, *, home=None,
                    fingerprint: str | None = None) -> TokenizerChoice:
    """Train (or load from the lab home's cache) a `kind` tokenizer of `vocab_size` on `corpus.train`, lowering the
    size to what the corpus supports when it is too large, raising it to what the alphabet needs when it is too small.

    `corpus` may be a function that returns the Corpus, called only when the tokenizer has to be trained: with
    `fingerprint` naming what it would return, a second run finds its tokenizer through the fit record (below) without
    reading a corpus too big to hold (lab_models/text/corpus_sources.py samples it).

    The alphabet is fitted once: a BPE or WordPiece trainer asked for fewer tokens than the alphabet holds has made
    the alphabet-only vocabulary already, which is kept (`fit_alphabet`); a Unigram trainer refuses at once (before
    any EM round), then trains once at the size it needs. The decision is written to a fit record,
    `<home>/tokenizers/_fits/<hash>.json` (the size, the note and the cache entry), so the next run with the same
    corpus, kind and request loads the tokenizer straight away.

    Examples: wordpiece at 8000 on the synthetic corpus -> vocab_size ~822 and a note "lowered from 8000 ..."; bpe at
    512 on a Chinese corpus of ~470 distinct characters -> ~940 (each character, and each as a word end) and a note
    "raised from 512 ...".
    """
    if callable(corpus) and fingerprint is None:
        raise LabError("build_tokenizer needs the fingerprint of a corpus given as a function")
    identity = fingerprint if fingerprint is not None else corpus.fingerprint
    record_path = _fit_record_path(home, identity, kind, vocab_size)
    recorded = _recorded_choice(record_path, kind, vocab_size, home)
    if recorded is not None:
        return recorded
    if callable(corpus):
        corpus = corpus()
    texts = list(corpus.train) or list(corpus.validation)
    size = vocab_size
    for _ in range(_MAX_VOCAB_RETRIES):
        try:
            result = cached_tokenizer(kind, texts, size, corpus_fingerprint=corpus.fingerprint, home=home,
                                      fit_alphabet=True)
        except VocabSizeTooSmall as error:  # Unigram: its alphabet does not fit; the smallest size that does
            if error.minimum <= size:
                raise
            logger.info("corpus %s needs at least %d %s tokens; retrying with that", corpus.name, error.minimum, kind)
            size = error.minimum
            continue
        except VocabSizeTooLarge as error:
            supported = error.supported
            size = supported if supported < size else size - max(1, size // 100)
            logger.info("corpus %s supports about %d %s tokens; retrying with %d", corpus.name, supported, kind, size)
            continue
        size = result.vocab_size if result.vocab_size > size else size  # BPE/WordPiece: the alphabet-only vocabulary
        note = "" if size == vocab_size else raised_note(kind, vocab_size, size, corpus.name) if size > vocab_size \
            else Message("vocabulary size lowered from {requested} to {size}: the {corpus_name} corpus supports no "
                         "more {kind} tokens", requested=vocab_size, size=size, corpus_name=corpus.name, kind=kind)
        if note:
            logger.warning(note)
        choice = TokenizerChoice(result.tokenizer, kind, vocab_size, result.vocab_size, note, result.cache_key)
        _write_fit_record(record_path, choice)
        return choice
    raise LabError("could not train a {kind} tokenizer near {vocab_size} tokens on corpus {name}; "
                   "choose a smaller --vocab-size", kind=kind, vocab_size=vocab_size, name=corpus.name)


_FIT_RECORD_VERSION = 1


def _fit_record_path(home, fingerprint: str, kind: str, vocab_size: int) -> Path:
    # the unigram pipeline's version is part of the key, so that a record never points at a unigram tokenizer the
    # code would no longer train (tokenizer_cache_key changes with it too)
    versions = [UNIGRAM_PIPELINE_VERSION] if kind == "unigram" else []
    key = hashlib.sha256(json.dumps([_FIT_RECORD_VERSION, fingerprint, kind, int(vocab_size), *versions]).encode()
                         ).hexdigest()
    return lab_home(home) / "tokenizers" / "_fits" / f"{key[:32]}.json"


def _recorded_choice(path: Path, kind: str, vocab_size: int, home) -> TokenizerChoice | None:
    try:
        record = messages_restored(json.loads(path.read_text(encoding="utf-8")))
        result = load_cached_tokenizer(record["cache_key"], kind, int(record["vocab_size"]), home=home)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if result is None:  # the cache entry was deleted: train again
        return None
    logger.info("tokenizer fit record %s: %s, %d tokens", path.name, kind, result.vocab_size)
    note = record.get("note") or ""
    if note:  # said again by every run that uses it (train.log), as when it was decided
        logger.warning(note)
    return TokenizerChoice(result.tokenizer, kind, vocab_size, result.vocab_size, note, result.cache_key)


def _write_fit_record(path: Path, choice: TokenizerChoice) -> None:
    try:
        atomic_write_json(path, {"kind": choice.kind, "requested_vocab_size": choice.requested_vocab_size,
                                 "vocab_size": choice.vocab_size, "note": choice.note, "cache_key": choice.cache_key})
    except OSError as error:  # a read-only home: the tokenizer is found through its cache entry only
        logger.warning("could not write the tokenizer fit record %s: %s", path, error)

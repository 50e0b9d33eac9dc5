"""Tokenizers for the lab: train, cache, inspect and replay the four subword families the surveyed models use.

What each kind follows (built on Hugging Face `tokenizers`; the training algorithms are the library's):

| kind        | paper                                             | normaliser               | pre-tokenizer                  | markers |
| ----------- | ------------------------------------------------- | ------------------------ | ------------------------------ | ------- |
| `bpe`       | Sennrich et al. 2016 BPE, as used by GPT-1        | NFC                      | whitespace + punctuation split | `</w>` end-of-word suffix |
| `byte_bpe`  | Radford et al. 2019 (GPT-2) byte-level BPE        | none                     | GPT-2 regex over bytes         | `Ġ` (a space byte) |
| `wordpiece` | Wu et al. 2016 / Devlin et al. 2019 (BERT)        | BERT (CJK chars spaced)  | BERT whitespace + punctuation  | `##` continuation prefix |
| `unigram`   | Kudo 2018 unigram LM, as in SentencePiece         | NFKC                     | Metaspace, `▁` for spaces      | `▁` word start |

Decisions and deviations from the papers, stated once here:

* Case is kept by default for every kind (`lowercase=False`). GPT-1 and BERT-uncased lowercased their text; pass
  `lowercase=True` (or `options={"lowercase": True}` to `cached_tokenizer`) to do the same. With WordPiece it also
  strips accents, as BERT-uncased does.
* `bpe` splits on whitespace and isolates each punctuation character (`BertPreTokenizer`), then marks the last symbol of
  every word with `</w>` as GPT-1's BPE did. GPT-1 pre-tokenized with spaCy and ftfy; that dependency is not worth it
  here. Because of the split, decoding puts spaces around punctuation ("hello , world !").
* `byte_bpe` starts from all 256 bytes (GPT-2's byte-to-unicode map), so nothing is ever unknown. No prefix space is
  added, and there is no post-processor: offsets keep the leading space of a `Ġ` token.
* `wordpiece` is trained with the BPE-style `WordPieceTrainer` of `tokenizers` (BERT's original WordPiece trainer, which
  picks merges by likelihood, was never released). A word with a character outside the vocabulary becomes one `[UNK]`.
* `unigram` prunes its seed vocabulary faster than SentencePiece (keeps 50% of the pieces per EM round instead of
  75%): half the training time, about 1.5% more tokens per text.
* `unigram` uses the `tokenizers` unigram trainer, not SentencePiece itself: no character-coverage cut-off (every
  character seen in training is kept) and no byte fallback, so unseen characters become `<unk>`. That trainer seeds
  its vocabulary only with substrings of at least two distinct words, which on a small lexicon leaves frequent words
  spelled letter by letter ("▁ t w o"); it also reads every distinct word once doubled (`unigram_seed_text`), so
  that every word can become a piece, as SentencePiece's seeding allows.
* No kind adds framing tokens when encoding (no `[CLS] ... [SEP]` post-processor): the objectives insert their own
  special tokens. Special tokens come first in every vocabulary, with ids in the order `special_tokens(kind)` lists
  them.

Vocabulary size rule (precise, tested): a trained vocabulary must have exactly the requested size.

* Bigger than requested means the request cannot even hold the special tokens plus the initial alphabet; a
  `ValueError` names that minimum (for `byte_bpe` it is known before training: specials + 256 bytes).
* Smaller than requested means the trainer ran out of pairs to merge (BPE, WordPiece) or of candidate pieces (Unigram):
  the corpus cannot support that many tokens, and a `ValueError` says how many it could support ("~N": BPE-style
  trainers break ties in hash order, so N can move by a few tokens between runs).
* Unigram only: near the corpus's limit the EM step can land a little short (asked 5000, got 4492) even though the
  corpus supports more. Then the trainer is asked once for 20% more and the result is cut to the best-scoring pieces
  (SentencePiece finalises its vocabulary the same way); only if that also falls short is it an error.

Training is not bit-for-bit reproducible: the `tokenizers` trainers break ties between equally frequent pairs in hash
order. `cached_tokenizer` is what makes a tokenizer stable: train once, then reuse the saved file.

Beside it: lab_models/text/tokenizer_kinds.py (the kinds, their special tokens and markers, the argument checks) and
lab_models/text/tokenizer_inspect.py (kind detection, surface text, display pieces, BPE merge replay, statistics and
vocabulary overlap). This module trains and caches tokenizers.

Worked example (a corpus of one line, `bpe`)::

    >>> tok = train_tokenizer("bpe", ["low lower lowest"] * 3, vocab_size=17)  # 2 specials + 10 symbols + 5 merges
    >>> from lab_models.text.tokenizer_inspect import merge_count, merge_replay
    >>> merge_replay(tok, "lower", 0)
    [['l', 'o', 'w', 'e', 'r</w>']]
    >>> merge_replay(tok, "lower", merge_count(tok)) == [tok.encode("lower").tokens]
    True
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_json, atomic_write_text, lab_home

from lab_models.text.tokenizer_kinds import (TOKENIZER_KINDS, SPECIAL_TOKENS, END_OF_WORD_SUFFIX, CONTINUATION_PREFIX,
                                             METASPACE, UNIGRAM_SHRINKING_FACTOR, CACHE_FORMAT_VERSION,
                                             UNIGRAM_PIPELINE_VERSION,
                                             ProgressCallback, check_kind, check_vocab_size, check_texts,
                                             resolve_options, report_progress, pre_tokens)
from lab_models.text.tokenizer_inspect import model_json, tokenizer_kind

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# Building and training
# --------------------------------------------------------------------------------------------------------------------
def special_tokens(kind: str) -> list[str]:
    """The special tokens of a family, in id order: `special_tokens("wordpiece")[1] == "[UNK]"` has id 1."""
    return list(SPECIAL_TOKENS[check_kind(kind)])


def _empty_tokenizer(kind: str, lowercase: bool) -> Tokenizer:
    """An untrained tokenizer with the normaliser, pre-tokenizer and decoder of `kind` (see the module table)."""
    if kind == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix=END_OF_WORD_SUFFIX))
        steps = [normalizers.NFC()] + ([normalizers.Lowercase()] if lowercase else [])
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD_SUFFIX)
    elif kind == "byte_bpe":
        tokenizer = Tokenizer(models.BPE())  # no unk token: all 256 bytes are in the vocabulary
        if lowercase:
            tokenizer.normalizer = normalizers.Lowercase()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tokenizer.decoder = decoders.ByteLevel()
    elif kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=CONTINUATION_PREFIX))
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    else:  # unigram
        tokenizer = Tokenizer(models.Unigram())
        steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
        tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    return tokenizer


def _trainer(kind: str, vocab_size: int):
    specials = special_tokens(kind)
    if kind == "bpe":
        return trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=specials, end_of_word_suffix=END_OF_WORD_SUFFIX, show_progress=False
        )
    if kind == "byte_bpe":
        return trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    if kind == "wordpiece":
        return trainers.WordPieceTrainer(
            vocab_size=vocab_size, special_tokens=specials, continuing_subword_prefix=CONTINUATION_PREFIX,
            show_progress=False,
        )
    return trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>", max_piece_length=16, show_progress=False,
        shrinking_factor=UNIGRAM_SHRINKING_FACTOR,
    )


def _unigram_minimum(tokenizer: Tokenizer, texts: list[str]) -> int:
    """Smallest vocabulary the unigram trainer accepts: specials + every distinct character (▁ included) + 1.

    The "+ 1" is the `tokenizers` unigram trainer's own margin; the test suite checks this number against the trainer.
    """
    characters: set[str] = set()
    for text in texts:
        for piece in pre_tokens(tokenizer, text):
            characters.update(piece)
    return len(special_tokens("unigram")) + len(characters) + 1


def _initial_vocabulary_size(kind: str, tokenizer: Tokenizer) -> int:
    """How many tokens a trained tokenizer holds before any merge: its special tokens plus its initial alphabet."""
    if kind in ("bpe", "byte_bpe"):
        return tokenizer.get_vocab_size() - len(model_json(tokenizer)["merges"])
    specials = set(special_tokens(kind))
    single_symbols = [
        token for token in tokenizer.get_vocab()
        if token not in specials and len(token.removeprefix(CONTINUATION_PREFIX) or token) == 1
    ]
    return len(specials) + len(single_symbols)


class VocabSizeTooSmall(LabError):
    """The requested vocabulary cannot hold the special tokens plus the corpus's alphabet; `minimum` is the smallest
    size that works for `kind` on that corpus (lab_models/text/vocab_fit.py raises a run's size to it)."""

    def __init__(self, kind: str, requested: int, minimum: int):
        super().__init__(
            "vocab_size {requested} is too small for {kind_title} on this corpus: it needs at least {minimum} tokens "
            "({n_special} special tokens plus the initial alphabet); raise the vocabulary size.",
            requested=requested, kind_title=TOKENIZER_KINDS[kind], minimum=minimum,
            n_special=len(special_tokens(kind)))
        self.kind, self.requested, self.minimum = kind, requested, minimum


def _too_small(kind: str, vocab_size: int, minimum: int) -> VocabSizeTooSmall:
    return VocabSizeTooSmall(kind, vocab_size, minimum)


class VocabSizeTooLarge(LabError):
    """The corpus cannot fill the requested vocabulary; `supported` is about the most tokens it supports for `kind`
    (lab_models/text/vocab_fit.py lowers a run's size to it)."""

    def __init__(self, kind: str, requested: int, supported: int):
        super().__init__(
            "vocab_size {vocab_size} is too large: this corpus supports at most ~{supported} tokens for "
            "{kind_title}; lower the vocabulary size or use a bigger corpus.",
            vocab_size=requested, supported=supported, kind_title=TOKENIZER_KINDS[kind])
        self.kind, self.requested, self.supported = kind, requested, supported


def _too_large(kind: str, vocab_size: int, supported: int) -> VocabSizeTooLarge:
    return VocabSizeTooLarge(kind, vocab_size, supported)


def _trim_unigram(tokenizer: Tokenizer, vocab_size: int) -> Tokenizer:
    """Keep the special tokens, every single character, then the best-scoring pieces, until `vocab_size` remain.

    This is how SentencePiece finalises a unigram vocabulary (top pieces by log-probability); ids keep their order.
    """
    model = model_json(tokenizer)
    entries = model["vocab"]
    specials = set(special_tokens("unigram"))
    required = [index for index, (piece, _) in enumerate(entries) if piece in specials or len(piece) == 1]
    optional = sorted(
        (index for index, (piece, _) in enumerate(entries) if not (piece in specials or len(piece) == 1)),
        key=lambda index: -entries[index][1],
    )
    kept = sorted(required + optional[: max(0, vocab_size - len(required))])
    kept_pieces = [(entries[index][0], entries[index][1]) for index in kept]
    unk_id = next(position for position, (piece, _) in enumerate(kept_pieces) if piece == "<unk>")
    tokenizer.model = models.Unigram(kept_pieces, unk_id, False)
    return tokenizer


def _retrain_unigram_larger(
    tokenizer: Tokenizer, corpus: list[str], vocab_size: int, learned: int, lowercase: bool,
    progress: ProgressCallback | None,
) -> tuple[Tokenizer, int]:
    """The unigram EM step drops pieces whose expected count falls below 0.5, so near the corpus's limit the trainer
    can land below the requested size (asked 5000, got 4492). Ask once for 20% more and trim the result to size."""
    larger = int(vocab_size * 1.2) + 8
    report_progress(progress, 0.85,
                    Message("Unigram stopped at {learned} tokens; retraining for {larger} to trim down to "
                            "{vocab_size}", learned=learned, larger=larger, vocab_size=vocab_size))
    retrained = _fit(_empty_tokenizer("unigram", lowercase), corpus, "unigram", larger)
    retrained_size = retrained.get_vocab_size()
    logger.info("unigram retrain: asked %d, got %d (first attempt %d)", larger, retrained_size, learned)
    if retrained_size < vocab_size:
        return (tokenizer, learned) if learned >= retrained_size else (retrained, retrained_size)
    trimmed = _trim_unigram(retrained, vocab_size)
    return trimmed, trimmed.get_vocab_size()


def unigram_seed_text(tokenizer: Tokenizer, corpus: list[str]) -> str:
    """One more training text for the unigram trainer: every distinct word of `corpus` once, doubled ("twotwo").

    The `tokenizers` unigram trainer seeds its vocabulary only with substrings found in at least two distinct
    pre-tokenized words, so on a small lexicon a word that is no part of another word ("two", "near", "station" in
    the stories) never becomes a piece and is spelled letter by letter. Doubled, every word is in two distinct words
    (itself and its double); a double occurs once, so its own pieces do not survive the EM rounds, and it adds no
    character to the alphabet.

    >>> tok = _empty_tokenizer("unigram", False)
    >>> unigram_seed_text(tok, ["two cats", "two dogs"])
    'catscats dogsdogs twotwo'
    """
    words = {piece.removeprefix(METASPACE) for text in corpus for piece in pre_tokens(tokenizer, text)}
    return " ".join(word + word for word in sorted(words) if word)


def _fit(tokenizer: Tokenizer, corpus: list[str], kind: str, vocab_size: int) -> Tokenizer:
    """Run the `tokenizers` trainer; its errors (bare `Exception`s) come back as `ValueError`s with advice. The unigram
    trainer also reads `unigram_seed_text`."""
    if kind == "unigram":
        corpus = [*corpus, unigram_seed_text(tokenizer, corpus)]
    try:
        tokenizer.train_from_iterator(corpus, _trainer(kind, vocab_size), length=len(corpus))
    except Exception as error:
        if kind == "unigram" and "not large enough" in str(error):
            raise _too_small(kind, vocab_size, _unigram_minimum(tokenizer, corpus)) from None
        raise LabError("Training the {kind_title} tokenizer failed ({error}); check the corpus text.",
                       kind_title=TOKENIZER_KINDS[kind], error=error) from None
    return tokenizer


def train_tokenizer(
    kind: str,
    texts: Iterable[str],
    vocab_size: int,
    *,
    progress: ProgressCallback | None = None,
    lowercase: bool = False,
    fit_alphabet: bool = False,
) -> Tokenizer:
    """Train a tokenizer of `kind` with exactly `vocab_size` tokens on `texts` (see the module docstring for the rule).

    `progress(fraction, message)` is called a few times: `tokenizers` trainers expose no callback, so the steps are
    coarse. `fit_alphabet=True`: when the alphabet does not fit in `vocab_size`, a BPE or WordPiece trainer has
    already made the smallest vocabulary that holds it (the alphabet and no merge); return that instead of raising
    `VocabSizeTooSmall`, so the raised size costs no second training (lab_models/text/vocab_fit.py).

    >>> tok = train_tokenizer("wordpiece", ["hello world"], vocab_size=17)  # 5 specials + 7 chars + 5 "##" chars
    >>> tok.token_to_id("[UNK]"), tok.encode("hello").tokens
    (1, ['h', '##e', '##l', '##l', '##o'])
    """
    kind = check_kind(kind)
    vocab_size = check_vocab_size(vocab_size)
    if not isinstance(lowercase, bool):
        raise LabError("lowercase must be True or False, not {lowercase!r}.", lowercase=lowercase)
    if kind == "byte_bpe" and vocab_size < len(special_tokens(kind)) + 256:
        raise _too_small(kind, vocab_size, len(special_tokens(kind)) + 256)
    report_progress(progress, 0.0, Message("Reading the training texts"))
    corpus = check_texts(texts)
    tokenizer = _empty_tokenizer(kind, lowercase)
    report_progress(progress, 0.1, Message("Training {kind_title} with {vocab_size} tokens on {n_texts} texts",
                                           kind_title=TOKENIZER_KINDS[kind], vocab_size=vocab_size,
                                           n_texts=len(corpus)))
    started = time.perf_counter()
    tokenizer = _fit(tokenizer, corpus, kind, vocab_size)
    report_progress(progress, 0.8, Message("Checking the vocabulary size"))
    learned = tokenizer.get_vocab_size()
    if learned > vocab_size:
        minimum = _unigram_minimum(tokenizer, corpus) if kind == "unigram" else _initial_vocabulary_size(kind, tokenizer)
        if fit_alphabet and kind in ("bpe", "wordpiece") and minimum == learned:
            logger.info("%s: the alphabet needs %d tokens, more than %d: kept the alphabet-only vocabulary", kind,
                        learned, vocab_size)
            report_progress(progress, 1.0, Message("Trained {kind_title}: {learned} tokens (its alphabet)",
                                                   kind_title=TOKENIZER_KINDS[kind], learned=learned))
            return tokenizer
        raise _too_small(kind, vocab_size, minimum)
    if learned < vocab_size and kind == "unigram":
        tokenizer, learned = _retrain_unigram_larger(tokenizer, corpus, vocab_size, learned, lowercase, progress)
    if learned < vocab_size:
        raise _too_large(kind, vocab_size, learned)
    seconds = time.perf_counter() - started
    logger.info("trained %s tokenizer: %d tokens from %d texts in %.2f s", kind, learned, len(corpus), seconds)
    report_progress(progress, 1.0, Message("Trained {kind_title}: {learned} tokens in {seconds:.2f} s",
                                           kind_title=TOKENIZER_KINDS[kind], learned=learned, seconds=seconds))
    return tokenizer


# --------------------------------------------------------------------------------------------------------------------
# On-disk cache
# --------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenizerResult:
    tokenizer: Tokenizer
    kind: str
    vocab_size: int
    path: Path  # the saved tokenizer.json
    train_seconds: float  # time of the original training, also on a cache hit
    from_cache: bool
    cache_key: str


def tokenizer_cache_key(kind: str, vocab_size: int, *, corpus_fingerprint: str, options: dict | None = None) -> str:
    """The cache folder name: a hash of (format version, corpus fingerprint, kind, vocab size, resolved options)."""
    identity = {
        "format_version": CACHE_FORMAT_VERSION,
        "corpus_fingerprint": corpus_fingerprint,
        "kind": check_kind(kind),
        "vocab_size": check_vocab_size(vocab_size),
        "options": sorted(resolve_options(options).items()),
    }
    if kind == "unigram":  # the unigram pipeline changed on its own (unigram_seed_text): the other kinds' keys stand
        identity["unigram_version"] = UNIGRAM_PIPELINE_VERSION
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:24]


def _load_cached(folder: Path, kind: str, vocab_size: int, cache_key: str) -> TokenizerResult | None:
    tokenizer_path, meta_path = folder / "tokenizer.json", folder / "meta.json"
    if not (tokenizer_path.is_file() and meta_path.is_file()):  # meta.json is written last: it marks a complete entry
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        if tokenizer.get_vocab_size() != vocab_size or tokenizer_kind(tokenizer) != kind:
            raise LabError("holds a {tokenizer_kind} tokenizer of {vocab_size} tokens",
                           tokenizer_kind=tokenizer_kind(tokenizer), vocab_size=tokenizer.get_vocab_size())
    except Exception as error:  # a damaged entry is retrained and overwritten, never fatal
        logger.warning("ignoring damaged tokenizer cache entry %s: %s", folder, error)
        return None
    return TokenizerResult(
        tokenizer=tokenizer, kind=kind, vocab_size=tokenizer.get_vocab_size(), path=tokenizer_path,
        train_seconds=float(meta.get("train_seconds", 0.0)), from_cache=True, cache_key=cache_key,
    )


def cached_tokenizer(
    kind: str,
    texts: Iterable[str],
    vocab_size: int,
    *,
    corpus_fingerprint: str,
    home: str | os.PathLike | None = None,
    progress: ProgressCallback | None = None,
    options: dict | None = None,
    fit_alphabet: bool = False,
) -> TokenizerResult:
    """Train once, then reuse: `<lab home>/tokenizers/<cache_key>/tokenizer.json` plus `meta.json`.

    `corpus_fingerprint` must identify the texts (for example a hash of the corpus file); the texts are not read on a
    cache hit. `options` takes the keys of `TOKENIZER_OPTIONS` (currently only `lowercase`). `fit_alphabet` as in
    `train_tokenizer`: a larger, alphabet-only result is cached under its own size.
    """
    kind = check_kind(kind)
    vocab_size = check_vocab_size(vocab_size)
    if not isinstance(corpus_fingerprint, str) or not corpus_fingerprint.strip():
        raise LabError("corpus_fingerprint must be a non-empty string that identifies the corpus (e.g. its hash).")
    resolved = resolve_options(options)
    cache_key = tokenizer_cache_key(kind, vocab_size, corpus_fingerprint=corpus_fingerprint, options=resolved)
    folder = lab_home(home) / "tokenizers" / cache_key
    cached = _load_cached(folder, kind, vocab_size, cache_key)
    if cached is not None:
        logger.info("tokenizer cache hit %s (%s, %d tokens)", cache_key, kind, vocab_size)
        report_progress(progress, 1.0, Message("Loaded a cached {kind_title} tokenizer",
                                               kind_title=TOKENIZER_KINDS[kind]))
        return cached
    started = time.perf_counter()
    tokenizer = train_tokenizer(kind, texts, vocab_size, progress=progress, fit_alphabet=fit_alphabet, **resolved)
    train_seconds = time.perf_counter() - started
    learned = tokenizer.get_vocab_size()
    if learned != vocab_size:  # fit_alphabet: the alphabet-only vocabulary, cached under its own size
        cache_key = tokenizer_cache_key(kind, learned, corpus_fingerprint=corpus_fingerprint, options=resolved)
        folder = lab_home(home) / "tokenizers" / cache_key
    tokenizer_path = atomic_write_text(folder / "tokenizer.json", tokenizer.to_str())
    atomic_write_json(folder / "meta.json", {
        "format_version": CACHE_FORMAT_VERSION,
        "kind": kind,
        "vocab_size": learned,
        "corpus_fingerprint": corpus_fingerprint,
        "options": resolved,
        "train_seconds": train_seconds,
        "tokenizers_version": tokenizers.__version__,
    })
    return TokenizerResult(
        tokenizer=tokenizer, kind=kind, vocab_size=learned, path=tokenizer_path,
        train_seconds=train_seconds, from_cache=False, cache_key=cache_key,
    )


def load_cached_tokenizer(cache_key: str, kind: str, vocab_size: int, *, home=None) -> TokenizerResult | None:
    """The cache entry `cache_key` (`tokenizer_cache_key`) when it is complete and holds a `kind` tokenizer of
    `vocab_size` tokens; None otherwise (missing, half-written or damaged)."""
    if not isinstance(cache_key, str) or not re.fullmatch(r"[0-9a-f]{24}", cache_key):
        return None
    return _load_cached(lab_home(home) / "tokenizers" / cache_key, check_kind(kind), int(vocab_size), cache_key)


def load_tokenizer_file(path: str | os.PathLike) -> Tokenizer:
    """Load a `tokenizer.json` (or a folder holding one), with a clear `ValueError` when it is missing or invalid."""
    if path is None or (isinstance(path, str) and not path.strip()):
        raise LabError("No tokenizer path given; pass the path of a tokenizer.json file.")
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise LabError("No tokenizer file at {path}; train a tokenizer first or check the path.", path=path)
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise LabError("{path} is not a valid tokenizer.json file ({first_line}); retrain or re-export it.",
                       path=path, first_line=first_line) from None

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
  every word with `</w>` as GPT-1's BPE did. GPT-1 pre-tokenized with spaCy and ftfy; that dependency is not worth it here.
  Because of the split, decoding puts spaces around punctuation ("hello , world !").
* `byte_bpe` starts from all 256 bytes (GPT-2's byte-to-unicode map), so nothing is ever unknown. No prefix space is added,
  and there is no post-processor: offsets keep the leading space of a `Ġ` token.
* `wordpiece` is trained with the BPE-style `WordPieceTrainer` of `tokenizers` (BERT's original WordPiece trainer, which
  picks merges by likelihood, was never released). A word with a character outside the vocabulary becomes one `[UNK]`.
* `unigram` prunes its seed vocabulary faster than SentencePiece (keeps 50% of the pieces per EM round instead of
  75%): half the training time, about 1.5% more tokens per text.
* `unigram` uses the `tokenizers` unigram trainer, not SentencePiece itself: no character-coverage cut-off (every
  character seen in training is kept) and no byte fallback, so unseen characters become `<unk>`.
* No kind adds framing tokens when encoding (no `[CLS] ... [SEP]` post-processor): the objectives insert their own
  special tokens. Special tokens come first in every vocabulary, with ids in the order `special_tokens(kind)` lists them.

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

Worked example (a corpus of one line, `bpe`)::

    >>> tok = train_tokenizer("bpe", ["low lower lowest"] * 3, vocab_size=17)  # 2 specials + 10 symbols + 5 merges
    >>> merge_replay(tok, "lower", 0)
    [['l', 'o', 'w', 'e', 'r</w>']]
    >>> merge_replay(tok, "lower", merge_count(tok)) == [tok.encode("lower").tokens]
    True
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import numbers
import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import pandas
import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from lab_models.home import atomic_write_json, atomic_write_text, lab_home

logger = logging.getLogger(__name__)

TOKENIZER_KINDS: dict[str, str] = {
    "bpe": "BPE (GPT)",
    "byte_bpe": "Byte-level BPE (GPT-2)",
    "wordpiece": "WordPiece (BERT)",
    "unigram": "Unigram (ALBERT / XLNet / T5)",
}

_SPECIAL_TOKENS: dict[str, tuple[str, ...]] = {
    "bpe": ("<unk>", "<|endoftext|>"),
    "byte_bpe": ("<|endoftext|>",),
    "wordpiece": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
    # T5's order (pad 0, eos 1, unk 2), then ALBERT's sentence-pair and masking tokens.
    "unigram": ("<pad>", "</s>", "<unk>", "[CLS]", "[SEP]", "[MASK]"),
}

END_OF_WORD_SUFFIX = "</w>"  # GPT-1 style BPE: the last symbol of each word carries this suffix.
CONTINUATION_PREFIX = "##"  # WordPiece: every piece that does not start a word carries this prefix.
METASPACE = "\u2581"  # "▁", SentencePiece's visible space.

# SentencePiece keeps 75% of the pieces per pruning round; keeping 50% halves Unigram's training time on 1 MB
# (2.2 s -> 1.1 s at vocabulary 2000, benchmarks/bench_tokenizers.py) for ~1.5% more tokens on the same text.
UNIGRAM_SHRINKING_FACTOR = 0.5
CACHE_FORMAT_VERSION = 2  # Bump when the pipeline of any kind changes, so old cached tokenizers are not reused.
TOKENIZER_OPTIONS: dict[str, bool] = {"lowercase": False}  # option name -> default

ProgressCallback = Callable[[float, str], None]


# --------------------------------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------------------------------
def _check_kind(kind) -> str:
    if not isinstance(kind, str) or kind not in TOKENIZER_KINDS:
        choices = ", ".join(f"'{name}' ({title})" for name, title in TOKENIZER_KINDS.items())
        raise ValueError(f"Unknown tokenizer kind {kind!r}; choose one of {choices}.")
    return kind


def _check_vocab_size(vocab_size) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
        raise ValueError(f"vocab_size must be a whole number such as 8000, not {vocab_size!r}.")
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive (for example 8000), not {vocab_size}.")
    return int(vocab_size)


def _check_texts(texts) -> list[str]:
    """Materialise `texts` (a single string counts as one text) and make sure there is something to learn from."""
    if texts is None:
        raise ValueError("No training texts given; pass a list of strings (a corpus).")
    if isinstance(texts, str):
        texts = [texts]
    try:
        materialised = list(texts)
    except TypeError:
        raise ValueError(f"texts must be an iterable of strings, not {type(texts).__name__}.") from None
    for position, text in enumerate(materialised):
        if not isinstance(text, str):
            raise ValueError(f"texts must all be strings; item {position} is a {type(text).__name__}.")
        _check_encodable(text)
    if not any(text.strip() for text in materialised):
        raise ValueError("The training texts are empty (or only whitespace); give the tokenizer a corpus with some text.")
    return materialised


def _resolve_options(options: dict | None) -> dict[str, bool]:
    """Fill defaults in and reject options this module does not know, so that equal settings give equal cache keys."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(TOKENIZER_OPTIONS))
    if unknown:
        raise ValueError(f"Unknown tokenizer option(s) {unknown}; the options are {sorted(TOKENIZER_OPTIONS)}.")
    resolved = dict(TOKENIZER_OPTIONS)
    for name, value in options.items():
        if not isinstance(value, bool):
            raise ValueError(f"Tokenizer option {name!r} must be True or False, not {value!r}.")
        resolved[name] = value
    return resolved


def _check_tokenizer(tokenizer) -> Tokenizer:
    if not isinstance(tokenizer, Tokenizer):
        raise ValueError(f"Expected a trained tokenizers.Tokenizer, got {type(tokenizer).__name__}; train or load one first.")
    return tokenizer


def _check_text(text) -> str:
    if not isinstance(text, str):
        raise ValueError(f"Text must be a string, not {type(text).__name__}.")
    if not text:
        raise ValueError("The text is empty; type some text to tokenize.")
    _check_encodable(text)
    return text


def _check_encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"The text holds a lone surrogate ({text[error.start]!r} at character {error.start}), which is "
                         "not valid Unicode; remove it or paste the text again.") from None


def _report(progress: ProgressCallback | None, fraction: float, message: str) -> None:
    logger.debug("tokenizer progress %.2f: %s", fraction, message)
    if progress is not None:
        progress(fraction, message)


# --------------------------------------------------------------------------------------------------------------------
# Building and training
# --------------------------------------------------------------------------------------------------------------------
def special_tokens(kind: str) -> list[str]:
    """The special tokens of a family, in id order: `special_tokens("wordpiece")[1] == "[UNK]"` has id 1."""
    return list(_SPECIAL_TOKENS[_check_kind(kind)])


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


def _pre_tokens(tokenizer: Tokenizer, text: str) -> list[str]:
    """`text` normalised and pre-tokenized exactly as `tokenizer` does it (special tokens are not split out here)."""
    normalized = tokenizer.normalizer.normalize_str(text) if tokenizer.normalizer is not None else text
    if tokenizer.pre_tokenizer is None:
        return [normalized] if normalized else []
    return [piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(normalized)]


def _unigram_minimum(tokenizer: Tokenizer, texts: list[str]) -> int:
    """Smallest vocabulary the unigram trainer accepts: specials + every distinct character (▁ included) + 1.

    The "+ 1" is the `tokenizers` unigram trainer's own margin; the test suite checks this number against the trainer.
    """
    characters: set[str] = set()
    for text in texts:
        for piece in _pre_tokens(tokenizer, text):
            characters.update(piece)
    return len(special_tokens("unigram")) + len(characters) + 1


def _initial_vocabulary_size(kind: str, tokenizer: Tokenizer) -> int:
    """How many tokens a trained tokenizer holds before any merge: its special tokens plus its initial alphabet."""
    if kind in ("bpe", "byte_bpe"):
        return tokenizer.get_vocab_size() - len(_model_json(tokenizer)["merges"])
    specials = set(special_tokens(kind))
    single_symbols = [
        token for token in tokenizer.get_vocab()
        if token not in specials and len(token.removeprefix(CONTINUATION_PREFIX) or token) == 1
    ]
    return len(specials) + len(single_symbols)


class VocabSizeTooSmall(ValueError):
    """The requested vocabulary cannot hold the special tokens plus the corpus's alphabet; `minimum` is the smallest
    size that works for `kind` on that corpus (lab_models/vocab_fit.py raises a run's size to it)."""

    def __init__(self, kind: str, requested: int, minimum: int):
        super().__init__(
            f"vocab_size {requested} is too small for {TOKENIZER_KINDS[kind]} on this corpus: it needs at least "
            f"{minimum} tokens ({len(special_tokens(kind))} special tokens plus the initial alphabet); raise the "
            "vocabulary size.")
        self.kind, self.requested, self.minimum = kind, requested, minimum


def _too_small(kind: str, vocab_size: int, minimum: int) -> VocabSizeTooSmall:
    return VocabSizeTooSmall(kind, vocab_size, minimum)


def _too_large(kind: str, vocab_size: int, supported: int) -> ValueError:
    return ValueError(
        f"vocab_size {vocab_size} is too large: this corpus supports at most ~{supported} tokens for "
        f"{TOKENIZER_KINDS[kind]}; lower the vocabulary size or use a bigger corpus."
    )


def _trim_unigram(tokenizer: Tokenizer, vocab_size: int) -> Tokenizer:
    """Keep the special tokens, every single character, then the best-scoring pieces, until `vocab_size` remain.

    This is how SentencePiece finalises a unigram vocabulary (top pieces by log-probability); ids keep their order.
    """
    model = _model_json(tokenizer)
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
    _report(progress, 0.85, f"Unigram stopped at {learned} tokens; retraining for {larger} to trim down to {vocab_size}")
    retrained = _fit(_empty_tokenizer("unigram", lowercase), corpus, "unigram", larger)
    retrained_size = retrained.get_vocab_size()
    logger.info("unigram retrain: asked %d, got %d (first attempt %d)", larger, retrained_size, learned)
    if retrained_size < vocab_size:
        return (tokenizer, learned) if learned >= retrained_size else (retrained, retrained_size)
    trimmed = _trim_unigram(retrained, vocab_size)
    return trimmed, trimmed.get_vocab_size()


def _fit(tokenizer: Tokenizer, corpus: list[str], kind: str, vocab_size: int) -> Tokenizer:
    """Run the `tokenizers` trainer; its errors (bare `Exception`s) come back as `ValueError`s with advice."""
    try:
        tokenizer.train_from_iterator(corpus, _trainer(kind, vocab_size), length=len(corpus))
    except Exception as error:
        if kind == "unigram" and "not large enough" in str(error):
            raise _too_small(kind, vocab_size, _unigram_minimum(tokenizer, corpus)) from None
        raise ValueError(f"Training the {TOKENIZER_KINDS[kind]} tokenizer failed ({error}); check the corpus text.") from None
    return tokenizer


def train_tokenizer(
    kind: str,
    texts: Iterable[str],
    vocab_size: int,
    *,
    progress: ProgressCallback | None = None,
    lowercase: bool = False,
) -> Tokenizer:
    """Train a tokenizer of `kind` with exactly `vocab_size` tokens on `texts` (see the module docstring for the rule).

    `progress(fraction, message)` is called a few times: `tokenizers` trainers expose no callback, so the steps are coarse.

    >>> tok = train_tokenizer("wordpiece", ["hello world"], vocab_size=17)  # 5 specials + 7 chars + 5 "##" chars
    >>> tok.token_to_id("[UNK]"), tok.encode("hello").tokens
    (1, ['h', '##e', '##l', '##l', '##o'])
    """
    kind = _check_kind(kind)
    vocab_size = _check_vocab_size(vocab_size)
    if not isinstance(lowercase, bool):
        raise ValueError(f"lowercase must be True or False, not {lowercase!r}.")
    if kind == "byte_bpe" and vocab_size < len(special_tokens(kind)) + 256:
        raise _too_small(kind, vocab_size, len(special_tokens(kind)) + 256)
    _report(progress, 0.0, "Reading the training texts")
    corpus = _check_texts(texts)
    tokenizer = _empty_tokenizer(kind, lowercase)
    _report(progress, 0.1, f"Training {TOKENIZER_KINDS[kind]} with {vocab_size} tokens on {len(corpus)} texts")
    started = time.perf_counter()
    tokenizer = _fit(tokenizer, corpus, kind, vocab_size)
    _report(progress, 0.8, "Checking the vocabulary size")
    learned = tokenizer.get_vocab_size()
    if learned > vocab_size:
        minimum = _unigram_minimum(tokenizer, corpus) if kind == "unigram" else _initial_vocabulary_size(kind, tokenizer)
        raise _too_small(kind, vocab_size, minimum)
    if learned < vocab_size and kind == "unigram":
        tokenizer, learned = _retrain_unigram_larger(tokenizer, corpus, vocab_size, learned, lowercase, progress)
    if learned < vocab_size:
        raise _too_large(kind, vocab_size, learned)
    seconds = time.perf_counter() - started
    logger.info("trained %s tokenizer: %d tokens from %d texts in %.2f s", kind, learned, len(corpus), seconds)
    _report(progress, 1.0, f"Trained {TOKENIZER_KINDS[kind]}: {learned} tokens in {seconds:.2f} s")
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
        "kind": _check_kind(kind),
        "vocab_size": _check_vocab_size(vocab_size),
        "options": sorted(_resolve_options(options).items()),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:24]


def _load_cached(folder: Path, kind: str, vocab_size: int, cache_key: str) -> TokenizerResult | None:
    tokenizer_path, meta_path = folder / "tokenizer.json", folder / "meta.json"
    if not (tokenizer_path.is_file() and meta_path.is_file()):  # meta.json is written last: it marks a complete entry
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        if tokenizer.get_vocab_size() != vocab_size or tokenizer_kind(tokenizer) != kind:
            raise ValueError(f"holds a {tokenizer_kind(tokenizer)} tokenizer of {tokenizer.get_vocab_size()} tokens")
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
) -> TokenizerResult:
    """Train once, then reuse: `<lab home>/tokenizers/<cache_key>/tokenizer.json` plus `meta.json`.

    `corpus_fingerprint` must identify the texts (for example a hash of the corpus file); the texts are not read on a
    cache hit. `options` takes the keys of `TOKENIZER_OPTIONS` (currently only `lowercase`).
    """
    kind = _check_kind(kind)
    vocab_size = _check_vocab_size(vocab_size)
    if not isinstance(corpus_fingerprint, str) or not corpus_fingerprint.strip():
        raise ValueError("corpus_fingerprint must be a non-empty string that identifies the corpus (e.g. its hash).")
    resolved = _resolve_options(options)
    cache_key = tokenizer_cache_key(kind, vocab_size, corpus_fingerprint=corpus_fingerprint, options=resolved)
    folder = lab_home(home) / "tokenizers" / cache_key
    cached = _load_cached(folder, kind, vocab_size, cache_key)
    if cached is not None:
        logger.info("tokenizer cache hit %s (%s, %d tokens)", cache_key, kind, vocab_size)
        _report(progress, 1.0, f"Loaded a cached {TOKENIZER_KINDS[kind]} tokenizer")
        return cached
    started = time.perf_counter()
    tokenizer = train_tokenizer(kind, texts, vocab_size, progress=progress, **resolved)
    train_seconds = time.perf_counter() - started
    tokenizer_path = atomic_write_text(folder / "tokenizer.json", tokenizer.to_str())
    atomic_write_json(folder / "meta.json", {
        "format_version": CACHE_FORMAT_VERSION,
        "kind": kind,
        "vocab_size": vocab_size,
        "corpus_fingerprint": corpus_fingerprint,
        "options": resolved,
        "train_seconds": train_seconds,
        "tokenizers_version": tokenizers.__version__,
    })
    return TokenizerResult(
        tokenizer=tokenizer, kind=kind, vocab_size=tokenizer.get_vocab_size(), path=tokenizer_path,
        train_seconds=train_seconds, from_cache=False, cache_key=cache_key,
    )


def load_tokenizer_file(path: str | os.PathLike) -> Tokenizer:
    """Load a `tokenizer.json` (or a folder holding one), with a clear `ValueError` when it is missing or invalid."""
    if path is None or (isinstance(path, str) and not path.strip()):
        raise ValueError("No tokenizer path given; pass the path of a tokenizer.json file.")
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"No tokenizer file at {path}; train a tokenizer first or check the path.")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{path} is not a valid tokenizer.json file ({first_line}); retrain or re-export it.") from None


# --------------------------------------------------------------------------------------------------------------------
# Inspection
# --------------------------------------------------------------------------------------------------------------------
def _model_json(tokenizer: Tokenizer) -> dict:
    return json.loads(tokenizer.to_str())["model"]


def tokenizer_kind(tokenizer: Tokenizer) -> str:
    """Which of `TOKENIZER_KINDS` a tokenizer belongs to, read from its model and pre-tokenizer."""
    model = _check_tokenizer(tokenizer).model
    if isinstance(model, models.BPE):
        byte_level = isinstance(tokenizer.pre_tokenizer, pre_tokenizers.ByteLevel) or isinstance(
            tokenizer.decoder, decoders.ByteLevel
        )
        return "byte_bpe" if byte_level else "bpe"
    if isinstance(model, models.WordPiece):
        return "wordpiece"
    if isinstance(model, models.Unigram):
        return "unigram"
    raise ValueError(f"Unsupported tokenizer model {type(model).__name__}; the lab knows {sorted(TOKENIZER_KINDS)}.")


def _unknown_id(tokenizer: Tokenizer) -> int | None:
    model = _model_json(tokenizer)
    if model.get("type") == "Unigram":
        return model.get("unk_id")
    unk_token = model.get("unk_token")
    return tokenizer.token_to_id(unk_token) if unk_token else None


def _special_ids(tokenizer: Tokenizer) -> set[int]:
    return {token_id for token_id, added in tokenizer.get_added_tokens_decoder().items() if added.special}


def _byte_level_char_to_byte() -> dict[str, int]:
    """GPT-2's printable-character -> byte table, from the published rule (Radford et al. 2019, encoder.py):
    printable Latin-1 bytes stand for themselves, the other 68 bytes get U+0100 onwards in byte order (space -> Ġ)."""
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAC + 1)) | set(range(0xAE, 0xFF + 1))
    table, shifted = {}, 0
    for value in range(256):
        if value in printable:
            table[chr(value)] = value
        else:
            table[chr(0x100 + shifted)] = value
            shifted += 1
    return table


BYTE_LEVEL_CHAR_TO_BYTE: dict[str, int] = _byte_level_char_to_byte()


def _byte_level_to_text(token: str) -> str:
    """Undo GPT-2's byte-to-printable-character map; a piece that cuts a UTF-8 character decodes to U+FFFD."""
    return bytes(BYTE_LEVEL_CHAR_TO_BYTE.get(char, ord("?")) for char in token).decode("utf-8", errors="replace")


def surface_text(token: str, kind: str) -> str:
    """The text a vocabulary entry stands for, with the kind's marker removed.

    >>> surface_text("Ġthe", "byte_bpe"), surface_text("##ing", "wordpiece"), surface_text("low</w>", "bpe")
    ('the', 'ing', 'low')
    >>> surface_text("▁the", "unigram")
    'the'
    """
    kind = _check_kind(kind)
    if kind == "bpe":
        return token.removesuffix(END_OF_WORD_SUFFIX)
    if kind == "byte_bpe":
        return _byte_level_to_text(token).removeprefix(" ")
    if kind == "wordpiece":
        return token.removeprefix(CONTINUATION_PREFIX)
    return token.removeprefix(METASPACE)


@dataclass(frozen=True)
class TokenPiece:
    text: str  # the token as the vocabulary stores it, markers visible (Ġ, ##, ▁, </w>)
    display: str  # the input text it covers (input[start:end]); pieces that split one character share it
    id: int
    start: int  # character offsets into the input
    end: int
    is_unknown: bool
    is_special: bool


def tokenize_for_display(tokenizer: Tokenizer, text: str) -> list[TokenPiece]:
    """Encode `text` and return one `TokenPiece` per token, offsets in characters of `text`.

    `is_special` marks a special token written in the input (`[MASK]`, `<|endoftext|>`); an unknown piece stands for
    input text, so it has `is_unknown=True` and `is_special=False` even though the unknown token is itself special.
    Byte-level pieces that cut a multi-byte character (a CJK character, an emoji) all carry that character's offsets.
    The lone `▁` that Metaspace prepends to the first word covers no input: it gets an empty span and display.

    >>> tok = train_tokenizer("byte_bpe", ["ab ab"], vocab_size=259)
    >>> [(piece.text, piece.display) for piece in tokenize_for_display(tok, "ab ab")]
    [('ab', 'ab'), ('Ġab', ' ab')]
    """
    tokenizer = _check_tokenizer(tokenizer)
    text = _check_text(text)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    unknown_id, special_ids = _unknown_id(tokenizer), _special_ids(tokenizer)
    pieces = []
    for token, token_id, (start, end) in zip(encoding.tokens, encoding.ids, encoding.offsets):
        covered = text[start:end]
        if token == METASPACE and not covered.isspace():  # the prepended word-start marker
            end, covered = start, ""
        is_unknown = unknown_id is not None and token_id == unknown_id
        if is_unknown:  # Unigram encodings carry the unseen input text here; show the vocabulary's entry instead
            token = tokenizer.id_to_token(token_id)
        pieces.append(TokenPiece(
            text=token, display=covered, id=token_id, start=start, end=end,
            is_unknown=is_unknown, is_special=token_id in special_ids and not is_unknown,
        ))
    return pieces


# --------------------------------------------------------------------------------------------------------------------
# BPE merge replay
# --------------------------------------------------------------------------------------------------------------------
def _bpe_merges(tokenizer: Tokenizer) -> tuple[dict, list[tuple[str, str]]]:
    if not isinstance(_check_tokenizer(tokenizer).model, models.BPE):
        raise ValueError(f"This is a {type(tokenizer.model).__name__} tokenizer, and merge replay needs a BPE tokenizer "
                         "(kind 'bpe' or 'byte_bpe'): only BPE learns an ordered list of merges.")
    model = _model_json(tokenizer)
    # tokenizers >= 0.20 stores [left, right] pairs; older files store "left right" strings.
    merges = [tuple(entry) if isinstance(entry, list) else tuple(entry.split(" ", 1)) for entry in model["merges"]]
    return model, merges


def merge_count(tokenizer: Tokenizer) -> int:
    """Number of learned merges of a BPE tokenizer; 0 for WordPiece and Unigram, which have no merge list."""
    if not isinstance(_check_tokenizer(tokenizer).model, models.BPE):
        return 0
    return len(_bpe_merges(tokenizer)[1])


def _split_on_added_tokens(tokenizer: Tokenizer, text: str) -> list[tuple[str, bool]]:
    """Cut `text` around added tokens, as `tokenizers` does for special tokens before normalising.

    >>> tok = train_tokenizer("byte_bpe", ["ab ab"], vocab_size=259)
    >>> _split_on_added_tokens(tok, "a<|endoftext|>b")
    [('a', False), ('<|endoftext|>', True), ('b', False)]
    """
    contents = sorted({added.content for added in tokenizer.get_added_tokens_decoder().values()}, key=len, reverse=True)
    if not contents:
        return [(text, False)]
    pattern = re.compile("|".join(re.escape(content) for content in contents))
    segments, position = [], 0
    for match in pattern.finditer(text):
        if match.start() > position:
            segments.append((text[position:match.start()], False))
        segments.append((match.group(), True))
        position = match.end()
    if position < len(text):
        segments.append((text[position:], False))
    return segments


def _apply_merges(symbols: list[str], ranks: dict[tuple[str, str], int], n_merges: int) -> list[str]:
    """Standard BPE: while some adjacent pair has rank < n_merges, merge the leftmost pair of lowest rank."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best_rank, best_at = n_merges, -1
        for at in range(len(symbols) - 1):
            rank = ranks.get((symbols[at], symbols[at + 1]))
            if rank is not None and rank < best_rank:
                best_rank, best_at = rank, at
        if best_at < 0:
            break
        symbols[best_at:best_at + 2] = [symbols[best_at] + symbols[best_at + 1]]
    return symbols


def merge_replay(tokenizer: Tokenizer, text: str, n_merges: int) -> list[list[str]]:
    """Tokenize `text` with only the first `n_merges` learned merges: one list of pieces per pre-token.

    Pre-tokens are split into initial symbols (characters, or byte-level characters for `byte_bpe`; the last symbol of a
    word gets `</w>` for `bpe`); a symbol outside the vocabulary becomes the unknown token and is never merged. With
    `n_merges == merge_count(tokenizer)` the pieces equal the tokenizer's own output. `n_merges` above the count is
    clamped.

    >>> tok = train_tokenizer("bpe", ["low lower lowest"] * 3, vocab_size=17)
    >>> merge_replay(tok, "lower, lowest", 0)  # "," never occurred in training
    [['l', 'o', 'w', 'e', 'r</w>'], ['<unk>'], ['l', 'o', 'w', 'e', 's', 't</w>']]
    """
    model, merges = _bpe_merges(tokenizer)
    text = _check_text(text)
    if isinstance(n_merges, bool) or not isinstance(n_merges, numbers.Integral):
        raise ValueError(f"n_merges must be a whole number, not {n_merges!r}.")
    if n_merges < 0:
        raise ValueError(f"n_merges must be 0 or more (0 shows the initial symbols), not {n_merges}.")
    n_merges = min(int(n_merges), len(merges))
    ranks: dict[tuple[str, str], int] = {}
    for rank, pair in enumerate(merges):
        ranks.setdefault(pair, rank)
    vocab = model["vocab"]
    unk_token = model.get("unk_token")
    prefix = model.get("continuing_subword_prefix") or ""
    suffix = model.get("end_of_word_suffix") or ""
    fuse_unknowns = bool(model.get("fuse_unk"))
    # Tokenizers saved with ignore_merges (e.g. Llama 3's) emit a word found whole in the vocabulary without merging.
    whole_words_first = bool(model.get("ignore_merges")) and n_merges == len(merges)

    replayed: list[list[str]] = []
    for segment, is_added in _split_on_added_tokens(tokenizer, text):
        if is_added:
            replayed.append([segment])
            continue
        for word in _pre_tokens(tokenizer, segment):
            if whole_words_first and word in vocab:
                replayed.append([word])
                continue
            symbols, known = [], []
            for at, char in enumerate(word):
                symbol = (prefix if at > 0 else "") + char + (suffix if at == len(word) - 1 else "")
                symbols.append(symbol if symbol in vocab or unk_token is None else unk_token)
                known.append(symbol in vocab)
            # Unknown symbols split the word: merges never cross them (their pair is not in the merge list).
            pieces, run, previous_known = [], [], True
            for symbol, is_known in zip(symbols, known):
                if is_known:
                    run.append(symbol)
                else:
                    pieces += _apply_merges(run, ranks, n_merges)
                    if not (fuse_unknowns and not previous_known and not run):
                        pieces.append(symbol)
                    run = []
                previous_known = is_known
            pieces += _apply_merges(run, ranks, n_merges)
            replayed.append(pieces)
    return replayed


# --------------------------------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------------------------------
def _surface_lengths(tokenizer: Tokenizer, kind: str) -> dict[int, int]:
    """token id -> length in characters of its marker-stripped surface text (special tokens left out)."""
    special_ids = _special_ids(tokenizer)
    return {
        token_id: len(surface_text(token, kind))
        for token, token_id in tokenizer.get_vocab().items() if token_id not in special_ids
    }


def tokenizer_stats(
    tokenizer: Tokenizer, texts: Iterable[str], *, train_seconds: float | None = None, kind: str | None = None
) -> dict:
    """How a tokenizer does on `texts`: counts and rates for a comparison table.

    `tokens_per_word` divides by whitespace-separated words, `tokens_per_char` by characters, `unknown_rate` is the share of
    unknown tokens and `avg_token_chars` the mean marker-stripped length of the tokens produced.
    """
    tokenizer = _check_tokenizer(tokenizer)
    kind = _check_kind(kind) if kind is not None else tokenizer_kind(tokenizer)
    if isinstance(texts, str):
        texts = [texts]
    if texts is None:
        raise ValueError("No text to measure the tokenizer on; give a list of strings.")
    corpus = list(texts)
    if not all(isinstance(text, str) for text in corpus):
        raise ValueError("tokenizer_stats needs a list of strings.")
    corpus = [text for text in corpus if text]
    words = sum(len(text.split()) for text in corpus)
    characters = sum(len(text) for text in corpus)
    if not words:
        raise ValueError("No text to measure the tokenizer on; give at least one non-empty text.")
    for text in corpus:
        _check_encodable(text)
    encodings = tokenizer.encode_batch(corpus, add_special_tokens=False)
    ids = [token_id for encoding in encodings for token_id in encoding.ids]
    unknown_id = _unknown_id(tokenizer)
    lengths = _surface_lengths(tokenizer, kind)
    token_count = len(ids)
    return {
        "kind": kind,
        "vocab_size": tokenizer.get_vocab_size(),
        "tokens": token_count,
        "tokens_per_word": token_count / words,
        "tokens_per_char": token_count / characters,
        "unknown_rate": (sum(1 for token_id in ids if token_id == unknown_id) / token_count) if token_count else 0.0,
        "avg_token_chars": (sum(lengths.get(token_id, 0) for token_id in ids) / token_count) if token_count else 0.0,
        "train_seconds": train_seconds,
    }


def token_length_histogram(tokenizer: Tokenizer) -> dict[int, int]:
    """Vocabulary entries per surface length (markers stripped, special tokens left out), sorted by length.

    A token that is only a marker (a bare `▁`, or `Ġ` for a lone space) counts as length 0.
    """
    tokenizer = _check_tokenizer(tokenizer)
    counts = Counter(_surface_lengths(tokenizer, tokenizer_kind(tokenizer)).values())
    return dict(sorted(counts.items()))


def vocab_overlap(tokenizers: dict[str, Tokenizer]) -> pandas.DataFrame:
    """Pairwise Jaccard similarity |A ∩ B| / |A ∪ B| of marker-stripped vocabularies (special tokens left out).

    The frame is square, indexed and columned by the dict's names, with 1.0 on the diagonal. Byte-level pieces that cut
    a UTF-8 character are not text, so they are left out too.
    """
    if not isinstance(tokenizers, dict) or not tokenizers:
        raise ValueError("vocab_overlap needs a dict of {name: tokenizer} with at least one tokenizer.")
    surfaces: dict[str, set[str]] = {}
    for name, tokenizer in tokenizers.items():
        _check_tokenizer(tokenizer)
        kind, special_ids = tokenizer_kind(tokenizer), _special_ids(tokenizer)
        surfaces[name] = {
            surface_text(token, kind) for token, token_id in tokenizer.get_vocab().items() if token_id not in special_ids
        }
        surfaces[name] = {surface for surface in surfaces[name] if surface and "\ufffd" not in surface}
    names = list(surfaces)
    table = [
        [
            len(surfaces[row] & surfaces[column]) / len(surfaces[row] | surfaces[column])
            if surfaces[row] | surfaces[column] else math.nan
            for column in names
        ]
        for row in names
    ]
    return pandas.DataFrame(table, index=names, columns=names)

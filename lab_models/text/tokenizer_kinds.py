"""What the tokenizer trainer (lab_models/text/tokenization.py) and the tokenizer inspection
(lab_models/text/tokenizer_inspect.py) share: the four kinds and their special tokens, the markers each kind writes
(`</w>`, `##`, `▁`), and the argument checks that turn bad input into a `ValueError` that says what to do.

lab_models/text/tokenization.py's docstring has the kinds, their papers and the deviations.
"""
from __future__ import annotations

import logging
import numbers
from typing import Callable

from tokenizers import Tokenizer

from lab_models.messages import LabError, Message

logger = logging.getLogger(__name__)


TOKENIZER_KINDS: dict[str, str] = {
    "bpe": "BPE (GPT)",
    "byte_bpe": "Byte-level BPE (GPT-2)",
    "wordpiece": "WordPiece (BERT)",
    "unigram": "Unigram (ALBERT / XLNet / T5)",
}

SPECIAL_TOKENS: dict[str, tuple[str, ...]] = {
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
UNIGRAM_PIPELINE_VERSION = 2  # the same for the unigram pipeline alone (2: its trainer reads unigram_seed_text)
TOKENIZER_OPTIONS: dict[str, bool] = {"lowercase": False}  # option name -> default

ProgressCallback = Callable[[float, str], None]


# --------------------------------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------------------------------
def check_kind(kind) -> str:
    if not isinstance(kind, str) or kind not in TOKENIZER_KINDS:
        choices = ", ".join(f"'{name}' ({title})" for name, title in TOKENIZER_KINDS.items())
        raise LabError("Unknown tokenizer kind {kind!r}; choose one of {choices}.", kind=kind, choices=choices)
    return kind


# The largest vocabulary the lab trains (262,144 = 2**18: more than any released model of these families has; the
# Tokenizer Lab, the training CLI and the API refuse more, docs/reliability.md "Bad input").
MAX_VOCAB_SIZE = 262_144


def check_vocab_size(vocab_size) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
        raise LabError("vocab_size must be a whole number such as 8000, not {vocab_size!r}.", vocab_size=vocab_size)
    if vocab_size <= 0:
        raise LabError("vocab_size must be positive (for example 8000), not {vocab_size}.", vocab_size=vocab_size)
    if vocab_size > MAX_VOCAB_SIZE:
        raise LabError("vocab_size must be at most {max_vocab_size:,} (for example 8000), not {vocab_size:,}.",
                       max_vocab_size=MAX_VOCAB_SIZE, vocab_size=vocab_size)
    return int(vocab_size)


def check_texts(texts) -> list[str]:
    """Materialise `texts` (a single string counts as one text) and make sure there is something to learn from."""
    if texts is None:
        raise LabError("No training texts given; pass a list of strings (a corpus).")
    if isinstance(texts, str):
        texts = [texts]
    try:
        materialised = list(texts)
    except TypeError:
        raise LabError("texts must be an iterable of strings, not {texts_type}.",
                       texts_type=type(texts).__name__) from None
    for position, text in enumerate(materialised):
        if not isinstance(text, str):
            raise LabError("texts must all be strings; item {position} is a {text_type}.",
                           position=position, text_type=type(text).__name__)
        check_encodable(text)
    if not any(text.strip() for text in materialised):
        raise LabError("The training texts are empty (or only whitespace); give the tokenizer a corpus with some text.")
    return materialised


def resolve_options(options: dict | None) -> dict[str, bool]:
    """Fill defaults in and reject options this module does not know, so that equal settings give equal cache keys."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(TOKENIZER_OPTIONS))
    if unknown:
        raise LabError("Unknown tokenizer option(s) {unknown}; the options are {tokenizer_options}.",
                       unknown=unknown, tokenizer_options=sorted(TOKENIZER_OPTIONS))
    resolved = dict(TOKENIZER_OPTIONS)
    for name, value in options.items():
        if not isinstance(value, bool):
            raise LabError("Tokenizer option {name!r} must be True or False, not {value!r}.", name=name, value=value)
        resolved[name] = value
    return resolved


def check_tokenizer(tokenizer) -> Tokenizer:
    if not isinstance(tokenizer, Tokenizer):
        raise LabError("Expected a trained tokenizers.Tokenizer, got {tokenizer_type}; train or load one first.",
                       tokenizer_type=type(tokenizer).__name__)
    return tokenizer


def check_text(text) -> str:
    if not isinstance(text, str):
        raise LabError("Text must be a string, not {text_type}.", text_type=type(text).__name__)
    if not text:
        raise LabError("The text is empty; type some text to tokenize.")
    check_encodable(text)
    return text


def check_encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise LabError("The text holds a lone surrogate ({character!r} at character {start}), which is "
                       "not valid Unicode; remove it or paste the text again.",
                       character=text[error.start], start=error.start) from None


def report_progress(progress: ProgressCallback | None, fraction: float, message: Message) -> None:
    logger.debug("tokenizer progress %.2f: %s", fraction, message)
    if progress is not None:
        progress(fraction, message)


def pre_tokens(tokenizer: Tokenizer, text: str) -> list[str]:
    """`text` normalised and pre-tokenized exactly as `tokenizer` does it (special tokens are not split out here)."""
    normalized = tokenizer.normalizer.normalize_str(text) if tokenizer.normalizer is not None else text
    if tokenizer.pre_tokenizer is None:
        return [normalized] if normalized else []
    return [piece for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(normalized)]

"""The one backend module the UI (`app/`) imports. See ../shared/CONTRACT.md for the stable part of this surface.

Everything here is a thin, documented entry point: it validates arguments (raising `ValueError` with a message a person
can act on) and delegates to the module that does the work. No model logic lives in the UI; no UI lives here.
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from . import corpora, tokenization
from .anatomy import Anatomy, build_anatomy
from .device import describe_device, select_device
from .families import FamilySpec, ObjectiveSpec, all_families, family_spec
from .home import lab_home

logger = logging.getLogger(__name__)

__all__ = [
    "Anatomy", "FamilySpec", "ObjectiveSpec", "anatomy", "families", "family", "train_tokenizer", "device_label",
    "select_device", "lab_home", "TOKENIZER_KINDS",
    # corpora
    "BUILTIN_CORPORA", "list_corpora", "load_corpus", "import_corpus", "inspect_file", "corpus_card",
    # tokenizer lab
    "cached_tokenizer", "tokenize_for_display", "merge_replay", "merge_count", "tokenizer_stats",
    "token_length_histogram", "vocab_overlap", "load_tokenizer_file", "split_for_explorer",
]

TOKENIZER_KINDS = tokenization.TOKENIZER_KINDS
BUILTIN_CORPORA = corpora.BUILTIN_CORPORA

list_corpora = corpora.list_corpora
load_corpus = corpora.load_corpus
import_corpus = corpora.import_corpus
inspect_file = corpora.inspect_file
corpus_card = corpora.corpus_card

cached_tokenizer = tokenization.cached_tokenizer
tokenize_for_display = tokenization.tokenize_for_display
merge_replay = tokenization.merge_replay
merge_count = tokenization.merge_count
tokenizer_stats = tokenization.tokenizer_stats
token_length_histogram = tokenization.token_length_histogram
vocab_overlap = tokenization.vocab_overlap
load_tokenizer_file = tokenization.load_tokenizer_file


def families() -> list[FamilySpec]:
    """One `FamilySpec` per family the lab knows (CONTRACT.md §1)."""
    return all_families()


def family(name: str) -> FamilySpec:
    """The `FamilySpec` of one family; ValueError for an unknown name."""
    return family_spec(name)


def train_tokenizer(kind: str, texts, vocab_size: int):
    """A trained `tokenizers.Tokenizer` of `kind` (bpe, byte_bpe, wordpiece, unigram) on `texts`."""
    return tokenization.train_tokenizer(kind, texts, vocab_size)


def anatomy(family: str, tokens, *, seed: int = 0, **choices) -> Anatomy:
    """What one training example of `family` looks like for the given token strings (CONTRACT.md §1).

    Built by the family's own `build_example`, the code that builds its training batches.
    """
    if not isinstance(family, str):
        raise ValueError(f"family must be a name such as 'bert', got {family!r}")
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of token strings, not one string: split it first, e.g. text.split().")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    return build_anatomy(family, list(tokens), seed=seed, **choices)


def split_for_explorer(text: str, tokenizer_path: str | Path | None = None, *, max_tokens: int = 64) -> list[str]:
    """Split `text` into token strings for the Mask Explorer: on whitespace, or with a saved tokenizer.json."""
    if not text or not text.strip():
        raise ValueError("Type a sentence first: the input is empty.")
    if tokenizer_path is None:
        tokens = text.split()
    else:
        tokenizer = tokenization.load_tokenizer_file(tokenizer_path)
        tokens = [t for t in tokenizer.encode(text, add_special_tokens=False).tokens if t]
    if not tokens:
        raise ValueError("The tokenizer produced no tokens for this text.")
    if len(tokens) > max_tokens:
        raise ValueError(f"The sentence has {len(tokens)} tokens; the Mask Explorer draws at most {max_tokens}. "
                         "Shorten it.")
    return tokens


def device_label() -> str:
    """The compute device in use, for the page header."""
    return describe_device(select_device("auto"))


def torch_version() -> str:
    return torch.__version__

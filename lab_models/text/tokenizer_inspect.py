"""Looking inside a trained tokenizer: its kind, each token's surface text (`Ġ`, `##`, `▁` and `</w>` turned back
into the text they stand for), an encoding as display pieces with character offsets, BPE merge replay (the text
tokenized with only the first N learned merges, as Sennrich et al. 2016 apply them in rank order), and statistics
(token lengths, tokens per word, unknown rate, vocabulary overlap between tokenizers).

The tokenizers themselves are trained in lab_models/text/tokenization.py.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

import pandas
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from lab_models.messages import LabError
from lab_models.text.tokenizer_kinds import (TOKENIZER_KINDS, END_OF_WORD_SUFFIX, CONTINUATION_PREFIX, METASPACE,
                                             check_kind, check_tokenizer, check_text, check_encodable, pre_tokens)


# --------------------------------------------------------------------------------------------------------------------
# Inspection
# --------------------------------------------------------------------------------------------------------------------
def model_json(tokenizer: Tokenizer) -> dict:
    return json.loads(tokenizer.to_str())["model"]


def tokenizer_kind(tokenizer: Tokenizer) -> str:
    """Which of `TOKENIZER_KINDS` a tokenizer belongs to, read from its model and pre-tokenizer."""
    model = check_tokenizer(tokenizer).model
    if isinstance(model, models.BPE):
        byte_level = isinstance(tokenizer.pre_tokenizer, pre_tokenizers.ByteLevel) or isinstance(
            tokenizer.decoder, decoders.ByteLevel
        )
        return "byte_bpe" if byte_level else "bpe"
    if isinstance(model, models.WordPiece):
        return "wordpiece"
    if isinstance(model, models.Unigram):
        return "unigram"
    raise LabError("Unsupported tokenizer model {model_type}; the lab knows {tokenizer_kinds}.",
                   model_type=type(model).__name__, tokenizer_kinds=sorted(TOKENIZER_KINDS))


def unknown_token_id(tokenizer: Tokenizer) -> int | None:
    model = model_json(tokenizer)
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
    kind = check_kind(kind)
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

    >>> from lab_models.text.tokenization import train_tokenizer
    >>> tok = train_tokenizer("byte_bpe", ["ab ab"], vocab_size=259)
    >>> [(piece.text, piece.display) for piece in tokenize_for_display(tok, "ab ab")]
    [('ab', 'ab'), ('Ġab', ' ab')]
    """
    tokenizer = check_tokenizer(tokenizer)
    text = check_text(text)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    unknown_id, special_ids = unknown_token_id(tokenizer), _special_ids(tokenizer)
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
    if not isinstance(check_tokenizer(tokenizer).model, models.BPE):
        raise LabError("This is a {model_type} tokenizer, and merge replay needs a BPE tokenizer "
                       "(kind 'bpe' or 'byte_bpe'): only BPE learns an ordered list of merges.",
                       model_type=type(tokenizer.model).__name__)
    model = model_json(tokenizer)
    # tokenizers >= 0.20 stores [left, right] pairs; older files store "left right" strings.
    merges = [tuple(entry) if isinstance(entry, list) else tuple(entry.split(" ", 1)) for entry in model["merges"]]
    return model, merges


def merge_count(tokenizer: Tokenizer) -> int:
    """Number of learned merges of a BPE tokenizer; 0 for WordPiece and Unigram, which have no merge list."""
    if not isinstance(check_tokenizer(tokenizer).model, models.BPE):
        return 0
    return len(_bpe_merges(tokenizer)[1])


def _split_on_added_tokens(tokenizer: Tokenizer, text: str) -> list[tuple[str, bool]]:
    """Cut `text` around added tokens, as `tokenizers` does for special tokens before normalising.

    >>> from lab_models.text.tokenization import train_tokenizer
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

    >>> from lab_models.text.tokenization import train_tokenizer
    >>> tok = train_tokenizer("bpe", ["low lower lowest"] * 3, vocab_size=17)
    >>> merge_replay(tok, "lower, lowest", 0)  # "," never occurred in training
    [['l', 'o', 'w', 'e', 'r</w>'], ['<unk>'], ['l', 'o', 'w', 'e', 's', 't</w>']]
    """
    model, merges = _bpe_merges(tokenizer)
    text = check_text(text)
    if isinstance(n_merges, bool) or not isinstance(n_merges, numbers.Integral):
        raise LabError("n_merges must be a whole number, not {n_merges!r}.", n_merges=n_merges)
    if n_merges < 0:
        raise LabError("n_merges must be 0 or more (0 shows the initial symbols), not {n_merges}.", n_merges=n_merges)
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
        for word in pre_tokens(tokenizer, segment):
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

    `tokens_per_word` divides by whitespace-separated words, `tokens_per_char` by characters, `unknown_rate` is the
    share of unknown tokens and `avg_token_chars` the mean marker-stripped length of the tokens produced.
    """
    tokenizer = check_tokenizer(tokenizer)
    kind = check_kind(kind) if kind is not None else tokenizer_kind(tokenizer)
    if isinstance(texts, str):
        texts = [texts]
    if texts is None:
        raise LabError("No text to measure the tokenizer on; give a list of strings.")
    corpus = list(texts)
    if not all(isinstance(text, str) for text in corpus):
        raise LabError("tokenizer_stats needs a list of strings.")
    corpus = [text for text in corpus if text]
    words = sum(len(text.split()) for text in corpus)
    characters = sum(len(text) for text in corpus)
    if not words:
        raise LabError("No text to measure the tokenizer on; give at least one non-empty text.")
    for text in corpus:
        check_encodable(text)
    encodings = tokenizer.encode_batch(corpus, add_special_tokens=False)
    ids = [token_id for encoding in encodings for token_id in encoding.ids]
    unknown_id = unknown_token_id(tokenizer)
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
    tokenizer = check_tokenizer(tokenizer)
    counts = Counter(_surface_lengths(tokenizer, tokenizer_kind(tokenizer)).values())
    return dict(sorted(counts.items()))


def vocab_overlap(tokenizers: dict[str, Tokenizer]) -> pandas.DataFrame:
    """Pairwise Jaccard similarity |A ∩ B| / |A ∪ B| of marker-stripped vocabularies (special tokens left out).

    The frame is square, indexed and columned by the dict's names, with 1.0 on the diagonal. Byte-level pieces that cut
    a UTF-8 character are not text, so they are left out too.
    """
    if not isinstance(tokenizers, dict) or not tokenizers:
        raise LabError("vocab_overlap needs a dict of {{name: tokenizer}} with at least one tokenizer.")
    surfaces: dict[str, set[str]] = {}
    for name, tokenizer in tokenizers.items():
        check_tokenizer(tokenizer)
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

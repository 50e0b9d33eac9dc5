"""From a trained tokenizer to what training needs: the lab's special tokens, `VocabInfo`, and bytes per token.

`prepare_tokenizer` adds the special tokens the objectives insert (common.SPECIAL_TOKENS: [PAD] [MASK] [CLS] [SEP]
[BOS] [EOS] [S] [E], plus T5's sentinels <extra_id_0> .. <extra_id_31>) to a copy of a tokenizer when they are
missing, and reads the `VocabInfo` the batch builders take. The lab's names are always added as they are, even where a
kind has a token of the same role (`<pad>`, `</s>`, `<|endoftext|>`): every prepared tokenizer then has "[EOS]",
"[MASK]", ... under the same names, whatever its kind. Calling it twice adds nothing the second time. The tokenizer of
an imported checkpoint (lab_models/interop) keeps the special tokens its model was trained with instead:
`prepare_tokenizer(tokenizer, roles)` reads which token plays each lab role (BERT's [MASK], RoBERTa's <mask>, GPT-2's
<|endoftext|> as [EOS]) from the run's config.json "token_roles" and adds nothing.

Word starts, per kind, from the vocabulary's markers (SpanBERT and ALBERT mask whole words):

| kind        | a token starts a word when ...                                   |
| ----------- | ---------------------------------------------------------------- |
| `wordpiece` | it does not begin with `##`                                      |
| `byte_bpe`  | it begins with `Ġ` (a space byte)                                |
| `unigram`   | it begins with `▁`                                               |
| `bpe`       | the token *before* it ends with `</w>` (GPT-1's end-of-word mark) |

The last row depends on the previous token, not on the id alone, so a `bpe` tokenizer gets an `EndMarkedVocabInfo`
whose `starts_word` reads the previous token's end mark. Special tokens count as whole words. The first token of a
row always starts a word.

`token_byte_lengths` says how many UTF-8 bytes of text each id stands for, so that bits per byte compare models with
different tokenizers (bits per byte = sum of the targets' NLL / ln 2 / sum of their bytes):

| kind        | bytes of a token                                                                                   |
| ----------- | -------------------------------------------------------------------------------------------------- |
| `byte_bpe`  | exact: one byte per symbol of GPT-2's byte alphabet (`Ġthe` = 4: the space and "the")            |
| `unigram`   | the UTF-8 bytes of the piece with `▁` read as a space (`▁the` = 4)                                |
| `wordpiece` | the piece without `##`, plus 1 for the space before a word start (`the` = 4, `##ing` = 3)         |
| `bpe`       | the piece without `</w>`, plus 1 for the space after a word end (`the</w>` = 4, `lo` = 2)         |

`wordpiece` and `bpe` pre-tokenizers drop whitespace, so the space a word boundary stands for is counted on the
token next to it; a token that is a lone punctuation or CJK character gets no space (English puts no space before
"," and Chinese none between characters). These are approximations (off by about one byte per document); byte-level
BPE is exact. Special tokens, unknown tokens included, count 0 bytes: the text an unknown token replaced is unknown.

Worked example (a word-piece vocabulary): `token_byte_lengths` of ["[PAD]", "the", "##ing", ","] is [0, 4, 3, 1].
"""
from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import torch
from tokenizers import AddedToken, Tokenizer

from lab_models.messages import LabError
from lab_models.text.tokenizer_inspect import BYTE_LEVEL_CHAR_TO_BYTE, tokenizer_kind
from lab_models.text.tokenizer_kinds import CONTINUATION_PREFIX, END_OF_WORD_SUFFIX, METASPACE

# The special tokens an objective may insert. Tokenizers for training map these names to their own ids.
PAD, MASK, CLS, SEP, BOS, EOS, GLM_START, GLM_END = "[PAD]", "[MASK]", "[CLS]", "[SEP]", "[BOS]", "[EOS]", "[S]", "[E]"
NUM_SENTINELS = 100  # T5 reserves 100 sentinels <extra_id_0> ... <extra_id_99>


def sentinel(k: int) -> str:
    """T5's k-th sentinel token string: sentinel(0) == '<extra_id_0>'."""
    return f"<extra_id_{k}>"


@dataclass(frozen=True)
class VocabInfo:
    """The vocabulary facts a batch builder needs. Ids of the special tokens; `word_start[i]` says whether token id i
    begins a word (SpanBERT masks whole words); `random_ids` are the ids a 10%-random replacement may draw."""

    size: int
    pad_id: int
    mask_id: int
    cls_id: int
    sep_id: int
    bos_id: int
    eos_id: int
    start_id: int  # GLM's [S]
    end_id: int  # GLM's [E]
    sentinel_ids: tuple[int, ...]  # T5's <extra_id_k>, k = 0, 1, ...
    random_ids: tuple[int, ...]  # ordinary (non-special) ids, for random replacement
    word_start: tuple[bool, ...] | None = None  # per id; None = every token starts a word

    def __post_init__(self):
        if self.size <= 0:
            raise LabError("vocabulary size must be positive, got {size}", size=self.size)
        if not self.random_ids:
            raise LabError("the vocabulary has no ordinary tokens to draw random replacements from")

    @functools.cached_property
    def _word_start_table(self) -> torch.Tensor:
        """`word_start` as a (size,) bool tensor, built once: converting the tuple costs milliseconds per call."""
        return torch.tensor(self.word_start, dtype=torch.bool)

    def starts_word(self, token_ids: torch.Tensor) -> torch.Tensor:
        """(T,) bool: which tokens begin a word. The first token always does."""
        if self.word_start is None:
            starts = torch.ones(token_ids.shape, dtype=torch.bool)
        else:
            starts = self._word_start_table[token_ids]  # a fresh tensor: advanced indexing copies
        if starts.numel():
            starts[0] = True
        return starts


SPECIAL_TOKENS = (PAD, MASK, CLS, SEP, BOS, EOS, GLM_START, GLM_END)

NUM_LAB_SENTINELS = 32  # <extra_id_0> .. <extra_id_31>: T5 rarely uses more than a few per row at these lengths
LAB_SPECIAL_TOKENS: tuple[str, ...] = SPECIAL_TOKENS + tuple(sentinel(k) for k in range(NUM_LAB_SENTINELS))
BYTE_LEVEL_SPACE = "\u0120"  # "Ġ": GPT-2's printable stand-in for the space byte


@dataclass(frozen=True)
class EndMarkedVocabInfo(VocabInfo):
    """`VocabInfo` for vocabularies that mark the *end* of a word (GPT-1's `</w>`): token i starts a word exactly
    when token i - 1 ends one. `word_end[id]` says whether that id ends a word (special tokens do)."""

    word_end: tuple[bool, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        if len(self.word_end) != self.size:
            raise LabError("word_end needs one entry per id ({size}), got {n_word_end}",
                           size=self.size, n_word_end=len(self.word_end))

    @functools.cached_property
    def _word_end_table(self) -> torch.Tensor:
        return torch.tensor(self.word_end, dtype=torch.bool)

    def starts_word(self, token_ids: torch.Tensor) -> torch.Tensor:
        """(T,) bool: True at 0 and wherever the previous token ends a word.

        >>> info = EndMarkedVocabInfo(size=3, pad_id=0, mask_id=0, cls_id=0, sep_id=0, bos_id=0, eos_id=0,
        ...     start_id=0, end_id=0, sentinel_ids=(), random_ids=(1, 2), word_end=(True, False, True))
        >>> info.starts_word(torch.tensor([1, 2, 2, 1, 2])).tolist()   # "lo" "w</w>" "x</w>" "lo" "w</w>"
        [True, False, True, True, False]
        """
        ends = self._word_end_table[token_ids]  # (T,)
        starts = torch.ones_like(ends)
        starts[1:] = ends[:-1]
        return starts


def _check_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    if not isinstance(tokenizer, Tokenizer):
        raise LabError("expected a trained tokenizers.Tokenizer, got {tokenizer_type}",
                       tokenizer_type=type(tokenizer).__name__)
    return tokenizer


def _copy(tokenizer: Tokenizer) -> Tokenizer:
    return Tokenizer.from_str(_check_tokenizer(tokenizer).to_str())


def special_ids(tokenizer: Tokenizer) -> set[int]:
    """Ids of the tokenizer's special tokens (the trainer's, such as [UNK], and every lab special)."""
    return {token_id for token_id, added in tokenizer.get_added_tokens_decoder().items() if added.special}


def _is_unspaced_char(text: str) -> bool:
    """A lone punctuation mark or CJK character: text that is not separated from its neighbours by a space."""
    if len(text) != 1:
        return False
    category = unicodedata.category(text)
    if category.startswith("P") or (text.isascii() and not text.isalnum() and not text.isspace()):
        return True
    return unicodedata.east_asian_width(text) in ("W", "F")


def _id_to_token(tokenizer: Tokenizer) -> list[str]:
    size = tokenizer.get_vocab_size()
    tokens = [""] * size
    for token, token_id in tokenizer.get_vocab().items():
        if 0 <= token_id < size:
            tokens[token_id] = token
    return tokens


def prepare_tokenizer(tokenizer: Tokenizer, roles: dict[str, str] | None = None) -> tuple[Tokenizer, VocabInfo]:
    """A copy of `tokenizer` with the lab's special tokens added where missing, and its `VocabInfo`.

    Example: a word-piece tokenizer trained with [PAD] [UNK] [CLS] [SEP] [MASK] gains [BOS] [EOS] [S] [E] and 32
    sentinels; `info.random_ids` then holds every id except those 41 special ones.

    roles: the tokenizer of an imported checkpoint (lab_models/interop) keeps its own special tokens, which its model
    was trained with: `roles` maps each lab name of SPECIAL_TOKENS to the token that plays it ({"[MASK]": "<mask>",
    "[EOS]": "</s>", ...}; run config.json "token_roles"), and the sentinels it has to themselves (T5's
    <extra_id_k>). Nothing is added then (and the tokenizer itself is returned, not a copy); a role whose token is
    missing is a ValueError.

    >>> from tokenizers import models
    >>> tok = Tokenizer(models.WordPiece({"[UNK]": 0, "[MASK]": 1, "[SEP]": 2, "cat": 3}, unk_token="[UNK]"))
    >>> roles = {name: "[SEP]" for name in SPECIAL_TOKENS} | {"[PAD]": "[UNK]", "[MASK]": "[MASK]"}
    >>> prepared, info = prepare_tokenizer(tok, roles)
    >>> info.size, info.mask_id, info.eos_id, info.random_ids, info.sentinel_ids
    (4, 1, 2, (3,), ())
    """
    # with roles nothing is added, so the tokenizer itself is returned (a copy costs a JSON round trip: 0.2 s at
    # GPT-2's 50k tokens)
    prepared = _copy(tokenizer) if roles is None else _check_tokenizer(tokenizer)
    kind = tokenizer_kind(prepared)
    if roles is None:
        vocab = prepared.get_vocab()
        missing = [token for token in LAB_SPECIAL_TOKENS if token not in vocab]
        if missing:
            prepared.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in missing])
        ids = {token: prepared.token_to_id(token) for token in LAB_SPECIAL_TOKENS}
        sentinel_ids = tuple(ids[sentinel(k)] for k in range(NUM_LAB_SENTINELS))
    else:
        ids = _role_ids(prepared, roles)
        sentinel_ids = tuple(ids[sentinel(k)] for k in range(len(roles)) if sentinel(k) in ids)
    specials = special_ids(prepared) | set(ids.values())
    tokens = _id_to_token(prepared)
    size = len(tokens)
    random_ids = tuple(i for i in range(size) if i not in specials)
    if not random_ids:
        raise LabError("the tokenizer has no ordinary tokens (only special ones); train it on some text first")
    common = dict(
        size=size, pad_id=ids[PAD], mask_id=ids[MASK], cls_id=ids[CLS], sep_id=ids[SEP], bos_id=ids[BOS],
        eos_id=ids[EOS], start_id=ids[GLM_START], end_id=ids[GLM_END],
        sentinel_ids=sentinel_ids, random_ids=random_ids,
    )
    if kind == "bpe":
        word_end = tuple(i in specials or tokens[i].endswith(END_OF_WORD_SUFFIX) for i in range(size))
        return prepared, EndMarkedVocabInfo(**common, word_end=word_end)
    if kind == "wordpiece":
        word_start = tuple(i in specials or not tokens[i].startswith(CONTINUATION_PREFIX) for i in range(size))
    elif kind == "byte_bpe":
        word_start = tuple(i in specials or tokens[i].startswith(BYTE_LEVEL_SPACE) for i in range(size))
    else:  # unigram
        word_start = tuple(i in specials or tokens[i].startswith(METASPACE) for i in range(size))
    return prepared, VocabInfo(**common, word_start=word_start)


def _role_ids(tokenizer: Tokenizer, roles: dict[str, str]) -> dict[str, int]:
    """lab name -> id, for the names `roles` maps (every name of SPECIAL_TOKENS must be there)."""
    if not isinstance(roles, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in roles.items()):
        raise LabError("token roles must map the lab's special-token names to token strings")
    missing = [name for name in SPECIAL_TOKENS if name not in roles]
    if missing:
        raise LabError("the token roles do not say which token plays {missing}", missing=', '.join(missing))
    ids = {}
    for name, token in roles.items():
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise LabError("the token roles say {token!r} plays {name}, but the tokenizer has no such token",
                           token=token, name=name)
        ids[name] = token_id
    return ids


def _byte_length(token: str, kind: str) -> int:
    if kind == "byte_bpe":
        return sum(1 for char in token if char in BYTE_LEVEL_CHAR_TO_BYTE) or len(token.encode("utf-8"))
    if kind == "unigram":
        return len(token.replace(METASPACE, " ").encode("utf-8"))
    if kind == "wordpiece":
        if token.startswith(CONTINUATION_PREFIX) and len(token) > len(CONTINUATION_PREFIX):
            return len(token[len(CONTINUATION_PREFIX):].encode("utf-8"))
        return len(token.encode("utf-8")) + (0 if _is_unspaced_char(token) else 1)
    # bpe: the word-end mark stands for the space after the word
    if token.endswith(END_OF_WORD_SUFFIX):
        surface = token[: -len(END_OF_WORD_SUFFIX)]
        return len(surface.encode("utf-8")) + (0 if _is_unspaced_char(surface) else 1)
    return len(token.encode("utf-8"))


def token_byte_lengths(tokenizer: Tokenizer) -> torch.Tensor:
    """(V,) long: how many UTF-8 bytes of text each id stands for (0 for special tokens); see the module table."""
    if not isinstance(tokenizer, Tokenizer):
        raise LabError("expected a trained tokenizers.Tokenizer, got {tokenizer_type}",
                       tokenizer_type=type(tokenizer).__name__)
    kind = tokenizer_kind(tokenizer)
    specials = special_ids(tokenizer)
    tokens = _id_to_token(tokenizer)
    lengths = [0 if i in specials or not token else _byte_length(token, kind) for i, token in enumerate(tokens)]
    return torch.tensor(lengths, dtype=torch.long)

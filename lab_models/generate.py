"""Generation and fill-mask from trained runs: every trainable family, decoded the way it was trained.

    generate(run_dir, "the girl eats", mode="continue", max_new_tokens=20)      -> Generation
    generate(run_dir, "the girl ___ a red apple .", mode="infill")              -> Generation (the blank filled)
    generate(run_dir, "the girl [MASK] a [MASK] apple .", mode="mask_predict")  -> Generation (each slot filled)
    generate(run_dir, "the cat sees a ball .", mode="translate")                -> Generation (the Chinese)
    fill_mask(run_dir, "the girl [MASK] a red apple .", top_k=5)                -> [[(" eats", 0.41), ...]]

The run is rebuilt with `inference.load_run` (cached and shared: nothing here changes the model) and decoded under
`torch.inference_mode()` on the run's device. `generation_modes(family)` lists what a family can do, its default
first; any other mode returns a `Generation` with `supported=False` and a plain `explanation`, never an exception.

Blanks. `[MASK]` or `___` (three or more underscores) mark a blank. In mask_predict and fill_mask a `[MASK]` is exactly
one token slot; in mask_predict a `___` is `blank_length` slots (default 3), in fill_mask one slot. In infill a blank
is a span whose length the model decides (T5, GLM: until its end token) or `blank_length` tokens (MASS, UniLM: default
3; they have no end-of-span token). The text around a blank is encoded piece by piece (the text before a blank loses
its trailing spaces, so that a byte-level BPE word "Ġsat" is what fills " ___"), so the encoding can differ slightly
from encoding the whole sentence at once.

Modes per family (the paper each follows, and where this deviates):

    family                         modes (default first)
    gpt, gpt2                      continue
    bert, roberta, albert,         mask_predict
    spanbert, electra, mpnet
    unilm                          continue, infill, mask_predict
    xlnet                          continue, mask_predict
    glm                            infill, continue
    mass, t5                       infill, translate
    elmo, ulmfit                   continue
    cove                           translate
    cvt                            (none: a tagger, it writes no text)

- continue, GPT / GPT-2 (Radford et al. 2018, 2019): left to right with a KV cache; the prompt is read as the start of
  a document, so [EOS] (the lab's document separator, data.py) is put before it at position 0; stops at [EOS].
- continue, UniLM (Dong et al. 2019, §2 and its decoding for generation): the left-to-right mask; the next token is
  predicted at a [MASK] appended at the next position, as the cloze objective trains it; the [MASK] is then replaced
  by the chosen token. KV cache: each step feeds the chosen token and a new [MASK] and keeps only the token's keys.
  Segment ids as in training (0, or 2 with `lm_segment_ids`). [EOS] before the prompt as for GPT.
- continue, XLNet (Yang et al. 2019): the left-to-right factorization order. The content stream of the known tokens
  is causal (bidirectional among them with `bidirectional_context`, as the run trained); the query stream at the next
  position (XLNet's w plus that position) reads the content of all earlier positions, never its own. The whole
  sequence is recomputed each step (no cache: the two-stream backbone has none). A run trained with
  `two_stream=False` (the leak demonstration) cannot generate: it learned to copy its input.
- continue, GLM (Du et al. 2022): a blank put at the end of the prompt: Part A = prompt + [MASK], Part B = [S] ...
  generated until [E].
- continue, ELMo (Peters et al. 2018) and ULMFiT (Howard & Ruder 2018): the forward LSTM language model (ELMo's
  forward direction; ULMFiT's AWD-LSTM, whatever stage the run ended in), left to right after [EOS] as for GPT; the
  whole prefix is re-read by the LSTM every step (no cache). ELMo's backward direction is not used for generation.
- translate, CoVe (McCann et al. 2017): the MT-LSTM encoder reads the English, the attentional LSTM decoder writes
  from [BOS] until [EOS]; each step re-reads the decoder's history (no cache), so beam search works as for T5.
- infill, T5 (Raffel et al. 2020): the encoder reads the text with sentinel <extra_id_i> at blank i, as
  objectives/t5.py builds it. The decoder starts with the run's start token (T5's pad token; [BOS] for runs saved
  before `decoder_start` existed) and, as its targets always begin, <extra_id_0> (forced,
  not sampled: prefix-constrained decoding), then writes span 0, <extra_id_1>, span 1, ... and stops at the sentinel
  after the last blank or at [EOS] (the "eos" final token). Only the next sentinel and [EOS] are allowed as special
  tokens. Several blanks are allowed.
- infill, GLM: Part A = the text with one [MASK] per blank (bidirectional), Part B = for each blank in text order,
  [S] + the span generated autoregressively until [E], with GLM's 2-D positions (row 1: the blank's index in Part A,
  row 2: 1 for [S], 2, 3, ... inside the span), under the Part A/B mask of objectives/glm.py. Training shuffles the
  spans; text order is one of the orders it sees. KV cache. Several blanks are allowed.
- infill, MASS (Song et al. 2019): the encoder reads the text with `blank_length` [MASK] slots at the blank (MASS masks
  a fragment with a known length; default 3); the decoder writes the fragment at its positions u .. u+k-1, its first
  input the token before the blank (or [BOS] at the start), as objectives/mass.py builds it; `cross_attends_masks`
  is honoured. Stops after k tokens or at [EOS]. One blank.
- infill, UniLM: the seq2seq mask. The source is the text before the blank (segment 0, bidirectional within itself);
  the fill is the target (segment 1), written left to right with the appended-[MASK] decoding above, `blank_length`
  tokens (default 3) or until [EOS]. The text after the blank is kept in `text` but not read: in training the target
  always ends the row, so the model never saw text after it. One blank, with some text before it.
- mask_predict (Ghazvininejad et al. 2019, "Mask-Predict"): predict every slot at once; then for t = 1 .. T-1
  re-mask the n = N (T - t) / T least confident slots and predict those again (T = `iterations`, stopping when n
  reaches 0). BERT, RoBERTa, ALBERT, SpanBERT read the text with [MASK] at the slots, bidirectionally, segment 0;
  ELECTRA uses its generator (`model.lm_backbone`, the MLM; the discriminator cannot predict tokens); UniLM its
  bidirectional mode; MPNet its query stream at the slots (each slot's [MASK] in the content stream carries the
  slot's position, as MPNet's position compensation; every query sees all tokens and slots: all slots are predicted
  in the same step; a run trained with input_mode "xlnet" has no slots, its query reads only the other tokens,
  and "mlm" is read like BERT); XLNet its query stream at the slots, reading the other tokens (bidirectionally among
  themselves, as XLNet is fine-tuned), never a slot.
- translate (MASS, T5; objectives/translation.py): the encoder reads `translation.encoder_ids` (T5: after the task
  prefix), the decoder starts with its start token (MASS: [BOS]; T5: as in infill) at position 0 and writes the
  Chinese until [EOS]. A run that did not train
  the translation objective still decodes (badly); `explanation` says which.

Decoding. strategy "greedy" (argmax, deterministic), "sample" (temperature, then top-k, then top-p (nucleus), drawn with
a torch.Generator seeded from `seed`: the same seed gives the same sample) or "beam" (`beam_size` beams, scored by the
sum of log-probabilities divided by the length; stops once `beam_size` hypotheses have ended). `beam_size` is read only
by "beam"; mask-predict is greedy or sampled (asked for a beam search, it decodes greedily and says so). Special tokens
([PAD], [MASK], [CLS], [UNK], sentinels, ...) are never generated (their logits are masked) except the mode's end
tokens. `probs` are the model's own probabilities of the chosen tokens (temperature 1, over the tokens allowed at that
step), whatever the strategy. Decoding stops at the end token, at `max_new_tokens`, or where the model's `max_positions`
run out (`explanation` says which). `tokens`, `probs` and `new_text` hold what the model wrote; end tokens and the
separators between blanks (T5's sentinels, GLM's [E]) are left out. With several blanks, `new_text` joins the fills with
" | ".
`translate`: `text` is the translation itself (the English is `prompt`).

fill_mask: one forward pass; every slot is predicted from all the other tokens, never from another slot's guess
(BERT-style families, ELECTRA's generator, UniLM bidirectional, MPNet and XLNet through the query stream as in
mask_predict), except GLM (each slot its own blank: Part A with every slot a [MASK], then [S] of that blank alone,
predicting the blank's first token) and T5 (each slot a one-token span: <extra_id_i> in the encoder; the decoder reads
its start token, <extra_id_0> g_0 <extra_id_1> ..., with g_i the best token of slot i, so slot i is predicted after the best
guesses of the slots before it). GPT, GPT-2 and MASS refuse with a ValueError saying what to use instead.

Deviations, stated (beyond the objectives' own):
- The [EOS] before a continue prompt (GPT, GPT-2, UniLM, XLNet): the lab's rows start anywhere in the packed stream,
  so the models never learned a "start of text" position; [EOS] marks a document start as the stream does.
- T5's <extra_id_0> is forced rather than generated (its targets always begin with it).
- GLM fills several blanks in text order; training draws a random order.
- UniLM's infill does not read the text after the blank (see above); MASS and UniLM need the blank's length.
- XLNet and MPNet in mask-predict and fill_mask predict every slot in one step from the other tokens (no order among
  the slots); XLNet's context tokens see each other bidirectionally, as in fine-tuning, not in a sampled order.
- Mask-predict reports each slot's probability from the round that last chose it, as the paper's confidence.

`use_cache=False` (an extension of the contract, for tests and benchmarks) recomputes the whole sequence each step;
the tokens are the same as with the cache.
"""
from __future__ import annotations

import math
import numbers
import re
import time
from dataclasses import dataclass
from typing import Callable

import torch

from .families import family_spec
from .inference import TrainedRun, load_run
from .text_split import close_wide_spaces
from .tokenization import tokenizer_kind

__all__ = ["Generation", "GENERATION_MODES", "STRATEGIES", "MAX_NEW_TOKENS", "DEFAULT_BLANK_LENGTH",
           "generation_modes", "generate", "fill_mask"]

GENERATION_MODES = ("continue", "infill", "mask_predict", "translate")
STRATEGIES = ("greedy", "sample", "beam")
MAX_NEW_TOKENS = 1024  # more than any preset's max_positions
MAX_BEAM_SIZE = 16
MAX_ITERATIONS = 100
MAX_TOP_K = 100  # fill_mask
DEFAULT_BLANK_LENGTH = 3  # MASS's fragment and UniLM's target length when the prompt does not say (T5's mean span)
BLANK = re.compile(r"\[MASK\]|_{3,}")

FAMILY_MODES: dict[str, tuple[str, ...]] = {
    "gpt": ("continue",), "gpt2": ("continue",),
    "bert": ("mask_predict",), "roberta": ("mask_predict",), "albert": ("mask_predict",),
    "spanbert": ("mask_predict",), "electra": ("mask_predict",), "mpnet": ("mask_predict",),
    "unilm": ("continue", "infill", "mask_predict"),
    "xlnet": ("continue", "mask_predict"),
    "glm": ("infill", "continue"),
    "mass": ("infill", "translate"), "t5": ("infill", "translate"),
    "elmo": ("continue",), "ulmfit": ("continue",), "cove": ("translate",), "cvt": (),
}
FILL_MASK_FAMILIES = ("bert", "roberta", "albert", "spanbert", "electra", "mpnet", "unilm", "xlnet", "glm", "t5")
RNN_FAMILIES = ("elmo", "cove", "ulmfit", "cvt")  # CONTRACT.md's RNN-era families (lab_models/rnn/)
ONE_STREAM_MLM = ("bert", "roberta", "albert", "spanbert", "electra", "unilm")


@dataclass(frozen=True)
class Generation:
    """What `generate` returns (see the module docstring)."""

    run_id: str
    family: str
    mode: str  # "continue" | "infill" | "mask_predict" | "translate"
    supported: bool  # False: this family cannot do this mode; `explanation` says why
    explanation: str  # when supported: how it was decoded
    prompt: str
    text: str  # the prompt with the generated text in place; "" when unsupported
    new_text: str  # only what the model produced
    tokens: list[str]  # the produced tokens as display strings (decoded pieces, whitespace kept)
    probs: list[float]  # the model's probability of each produced token when it was chosen
    seconds: float  # wall time of decoding (not loading)
    ms_per_token: float
    step: int  # the training step of the weights used


# ------------------------------------------------------------------------------------------------------ modes


def _title(family: str) -> str:
    return family_spec(family).title


def generation_modes(family: str) -> list[str]:
    """The modes `family` supports, its default first; [] for a family that writes no text (CVT, a tagger).

    >>> generation_modes("gpt"), generation_modes("t5")
    (['continue'], ['infill', 'translate'])
    """
    if not isinstance(family, str):
        raise ValueError(f"family must be a family name such as 'gpt', got {family!r}")
    name = family.strip().lower()
    if name in FAMILY_MODES:
        return list(FAMILY_MODES[name])
    family_spec(name)  # ValueError for a name the lab does not know
    return []


def _unsupported_reason(family: str, mode: str) -> str:
    """One or two plain sentences: why `family` cannot decode in `mode`."""
    title = _title(family)
    encoders = ("bert", "roberta", "albert", "spanbert", "electra", "mpnet")
    if family == "cvt":
        return "CVT is a sequence tagger (one tag per word): it predicts no tokens and writes no text."
    if family in ("elmo", "ulmfit"):
        return (f"{title} is a left-to-right LSTM language model here: it can only continue a text (Continue)."
                if mode != "translate" else f"{title} has no encoder-decoder: only MASS and T5 (and CoVe, an LSTM "
                                            f"seq2seq) translate here.")
    if family == "cove":
        return "CoVe is an English -> Chinese translation model: it can only translate (Translate)."
    if mode == "continue":
        if family in encoders:
            return (f"{title} reads the whole sentence at once and was never trained to predict the next token; "
                    f"try Mask-predict.")
        return (f"{title} is an encoder-decoder trained to fill blanks, not to continue a text; put a blank (___) at "
                f"the end of the prompt and use Infill.")
    if mode == "infill":
        if family in ("gpt", "gpt2"):
            return f"{title} reads left to right only and never sees the text after a blank; try Continue."
        if family == "xlnet":
            return ("XLNet decodes here left to right only (Continue); to fill single tokens, mark them [MASK] and "
                    "use Mask-predict.")
        return (f"{title} predicts each [MASK] slot on its own and cannot decide how long a blank is; mark one "
                f"[MASK] per token and use Mask-predict.")
    if mode == "mask_predict":
        if family in ("gpt", "gpt2"):
            return f"{title} reads left to right only and cannot fill a [MASK] from both sides; try Continue."
        return (f"{title} writes each blank left to right as a span; use Infill with a blank (___) in the prompt.")
    return (f"{title} has no encoder-decoder trained for it: only MASS and T5 (and CoVe, an LSTM seq2seq) translate "
            f"here.")


# -------------------------------------------------------------------------------------------------- validation


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _whole(value):
    """An integral float (a UI number box's 50.0) as an int; anything else unchanged, for the checks to judge."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check_text(text, what: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be text (a str), got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{what} is empty: type some text for the model to start from")
    return text


def _check_decoding(mode, max_new_tokens, strategy, temperature, top_k, top_p, beam_size, seed, iterations,
                    blank_length) -> None:
    if mode is not None and mode not in GENERATION_MODES:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(GENERATION_MODES)} (or None for the "
                         f"family's default)")
    if not _is_int(max_new_tokens) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS}, got {max_new_tokens!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if not _is_real(temperature):
        raise ValueError(f"temperature must be a number, got {temperature!r}")
    if strategy == "sample" and temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling (lower is more conservative; use strategy='greedy' "
                         f"for the most likely tokens), got {temperature!r}")
    if not _is_int(top_k) or top_k < 0:
        raise ValueError(f"top_k must be a whole number >= 0 (0 = no top-k filter), got {top_k!r}")
    if not _is_real(top_p) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (1 = no nucleus filter), got {top_p!r}")
    if not _is_int(beam_size) or not 1 <= beam_size <= MAX_BEAM_SIZE:
        raise ValueError(f"beam_size must be a whole number from 1 to {MAX_BEAM_SIZE}, got {beam_size!r}")
    if not _is_int(seed):
        raise ValueError(f"seed must be a whole number, got {seed!r}")
    if not _is_int(iterations) or not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be a whole number from 1 to {MAX_ITERATIONS}, got {iterations!r}")
    if blank_length is not None and (not _is_int(blank_length) or not 1 <= blank_length <= MAX_NEW_TOKENS):
        raise ValueError(f"blank_length must be None or a whole number from 1 to {MAX_NEW_TOKENS}, got "
                         f"{blank_length!r}")


def _load(run_dir) -> TrainedRun:
    if run_dir is None or not str(run_dir).strip():
        raise ValueError("choose a run first: one that has weights (finished, stopped, or with a checkpoint)")
    return load_run(str(run_dir).strip())


# ---------------------------------------------------------------------------------------------- the run, decoded


class _Context:
    """A loaded run and what decoding reads from it: the vocabulary facts and the ids never to generate."""

    def __init__(self, run: TrainedRun):
        from .vocab import special_ids

        self.run = run
        self.family = run.family
        self.title = _title(run.family)
        self.model = run.model
        self.backbone = getattr(run.model, "backbone", None)  # None for the LSTM families
        self.vocab = run.vocab
        self.tokenizer = run.tokenizer
        self.spaces_wide = tokenizer_kind(run.tokenizer) == "wordpiece"  # text_split.close_wide_spaces
        self.device = run.device
        self.max_positions = run.max_positions
        V = run.model_config.vocab_size
        self.V = V
        v = run.vocab
        banned = torch.zeros(V, dtype=torch.bool)
        ids = set(special_ids(run.tokenizer)) | {v.pad_id, v.mask_id, v.cls_id, v.sep_id, v.bos_id, v.eos_id,
                                                  v.start_id, v.end_id, *v.sentinel_ids}
        banned[[i for i in ids if 0 <= i < V]] = True
        banned[v.size:] = True  # rows the tokenizer has no token for
        self.banned = banned.to(self.device)
        if run.family in ("mass", "t5"):  # the encoder-decoders' first decoder input (T5: its pad token)
            from .objectives.translation import decoder_start_id

            self.decoder_start = decoder_start_id(run.family, run.settings, v)

    def tensor(self, values, dtype=torch.long) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids) if text.strip() else []

    def decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(list(ids), skip_special_tokens=True)
        return close_wide_spaces(text) if self.spaces_wide else text  # WordPiece spaces every CJK character

    def token_name(self, token_id: int) -> str:
        return self.tokenizer.id_to_token(token_id) or str(token_id)

    def too_long(self, n: int, limit: int, what: str = "the prompt") -> ValueError:
        return ValueError(f"{what} is {n} tokens long, but this {self.title} model can read at most {limit} tokens "
                          f"here (it has {self.max_positions} positions): shorten it")


def _segments(text: str) -> tuple[list[str], list[str]]:
    """The text around the blanks and the blank markers: "a ___ b [MASK]" -> (["a ", " b ", ""], ["___", "[MASK]"])."""
    return BLANK.split(text), BLANK.findall(text)


def _encode_segments(ctx: _Context, segments: list[str]) -> list[list[int]]:
    """Each segment's ids; a segment before a blank loses its trailing spaces (the blank's token carries the space)."""
    out = []
    for i, segment in enumerate(segments):
        if i < len(segments) - 1:
            segment = segment.rstrip()
        out.append(ctx.encode(segment))
    return out


def _pieces(ctx: _Context, context: list[int], produced: list[int]) -> tuple[list[str], str]:
    """Display strings of `produced` written after `context` (whitespace kept), and their text."""
    context = list(context[-32:])  # whitespace depends on the local context only
    base = ctx.decode(context)
    previous = base
    pieces = []
    for k in range(1, len(produced) + 1):
        current = ctx.decode(context + produced[:k])
        if current.startswith(previous):
            pieces.append(current[len(previous):])
        else:  # e.g. a byte-level piece that completes a multi-byte character
            pieces.append(ctx.decode([produced[k - 1]]))
        previous = current
    full = ctx.decode(context + produced)
    text = full[len(base):] if full.startswith(base) else "".join(pieces)
    return pieces, text


def _join(left: str, fill: str, right: str = "") -> str:
    """left + fill + right without doubled spaces: a fill's leading space goes when `left` ends with one (or is
    empty), its trailing space when `right` starts with one.

    >>> _join("the girl ", " eats", " an apple"), _join("the girl ", "", " an apple")
    ('the girl eats an apple', 'the girl an apple')
    """
    if not fill.strip():
        return left.rstrip() + right if left[-1:].isspace() and right[:1].isspace() else left + right
    if not left or left[-1:].isspace():
        fill = fill.lstrip()
    if right[:1].isspace():
        fill = fill.rstrip()
    return left + fill + right


def _assemble(segments: list[str], fills: list[str]) -> str:
    """The text with blank i replaced by fills[i] (blanks past the fills stay empty)."""
    out = segments[0]
    for i, right in enumerate(segments[1:]):
        out = _join(out, fills[i] if i < len(fills) else "", right)
    return out


# --------------------------------------------------------------------------------------------------- decoders


class _Decoder:
    """What a left-to-right search asks of a family: the logits of the first token, the logits after each beam's
    newest token, which special tokens may come next, and whether a history has ended."""

    limit: int  # the most tokens this decoder can produce within the model's positions
    cached: bool
    end_ids: tuple[int, ...] = ()

    def first(self) -> torch.Tensor:  # (1, V)
        raise NotImplementedError

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:  # (B, V)
        raise NotImplementedError

    def allowed_specials(self, history: list[int]) -> list[int]:
        return list(self.end_ids)

    def ends(self, history: list[int]) -> bool:
        return bool(history) and history[-1] in self.end_ids


Item = tuple[int, tuple[int, ...], int]  # (token id, position ids (one per position row), segment id)


class _OneStream(_Decoder):
    """One stream (GPT, GPT-2, UniLM, GLM): a prefix read under its own mask, then the produced tokens, each seeing
    the prefix, the tokens before it and itself. `feed(history, i)` is the input that stands for history[i];
    `query(history)`, if given, is an extra last input whose output predicts the next token (UniLM's [MASK])."""

    def __init__(self, ctx: _Context, backbone, prefix: list[Item], prefix_mask: torch.Tensor,
                 feed: Callable[[list[int], int], Item], query: Callable[[list[int]], Item] | None,
                 use_cache: bool, end_ids: tuple[int, ...]):
        self.ctx, self.backbone = ctx, backbone
        self.prefix, self.prefix_mask = prefix, prefix_mask.to(ctx.device)  # (L, L)
        self.feed, self.query = feed, query
        self.cached = use_cache
        self.end_ids = end_ids
        self.rows = backbone.config.n_position_rows
        self.segments = backbone.config.n_segments > 0
        first_length = len(prefix) + (1 if query else 0)
        self.limit = ctx.max_positions - first_length + 1
        self.cache = None

    def _tensors(self, rows: list[list[Item]]):
        ctx = self.ctx
        ids = ctx.tensor([[item[0] for item in row] for row in rows])  # (B, T)
        positions = ctx.tensor([[list(p) for p in zip(*[item[1] for item in row])] for row in rows])  # (B, rows, T)
        if self.rows == 1:
            positions = positions[:, 0]  # (B, T)
        segments = ctx.tensor([[item[2] for item in row] for row in rows]) if self.segments else None
        return ids, positions, segments

    def _mask(self, past: int, n_prefix: int, n_new: int) -> torch.Tensor:
        """(past + n_prefix + n_new) keys for the n_prefix + n_new new rows: the prefix under its mask, the rest
        seeing everything before them and themselves."""
        L = n_prefix
        T = past + L + n_new
        mask = torch.zeros(L + n_new, T, dtype=torch.bool, device=self.ctx.device)
        if L:
            mask[:L, past:past + L] = self.prefix_mask
        mask[L:, :past + L] = True
        mask[L:, past + L:] = torch.ones(n_new, n_new, dtype=torch.bool, device=self.ctx.device).tril()
        return mask

    def _items(self, history: list[int], start: int) -> list[Item]:
        items = [self.feed(history, i) for i in range(start, len(history))]
        if self.query is not None:
            items.append(self.query(history))
        return items

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.backbone.lm_logits(hidden[:, -1])  # (B, V)

    def _full(self, histories: list[list[int]]) -> torch.Tensor:
        rows = [self.prefix + self._items(h, 0) for h in histories]
        ids, positions, segments = self._tensors(rows)
        B, T = ids.shape
        mask = self._mask(0, len(self.prefix), T - len(self.prefix)).expand(B, T, T)
        return self._logits(self.backbone(ids, mask, positions, segments))

    def first(self) -> torch.Tensor:
        if not self.cached:
            return self._full([[]])
        self.cache = self.backbone.new_cache()
        rows = [self.prefix + self._items([], 0)]
        ids, positions, segments = self._tensors(rows)
        T = ids.shape[1]
        mask = self._mask(0, len(self.prefix), T - len(self.prefix)).unsqueeze(0)
        hidden = self.backbone(ids, mask, positions, segments, cache=self.cache)
        if self.query is not None:
            self.cache.truncate(len(self.prefix))  # the query [MASK] is replaced by the chosen token
        return self._logits(hidden)

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        if not self.cached:
            return self._full(histories)
        if parents != list(range(len(parents))) or len(parents) != self.cache.layers[0].self_attn.k.shape[0]:
            self.cache.reorder(self.ctx.tensor(parents))
        rows = [self._items(h, len(h) - 1) for h in histories]
        ids, positions, segments = self._tensors(rows)
        B, n_new = ids.shape
        past = self.cache.length
        mask = self._mask(past, 0, n_new).expand(B, n_new, past + n_new)
        hidden = self.backbone(ids, mask, positions, segments, cache=self.cache)
        if self.query is not None:
            self.cache.truncate(past + n_new - 1)
        return self._logits(hidden)


class _EncoderDecoder(_Decoder):
    """MASS and T5: the encoder reads its input once; the decoder starts from `prefix` (forced tokens) at positions
    start, start + 1, ... and each produced token is fed at the next position, under a causal mask, attending the
    encoder under `cross` (T,) bool. The cross-attention keys and values are computed once (cached)."""

    def __init__(self, ctx: _Context, encoder_ids: list[int], cross: torch.Tensor, prefix: list[int], start: int,
                 use_cache: bool, end_ids: tuple[int, ...]):
        self.ctx, self.backbone = ctx, ctx.backbone
        self.prefix, self.start = prefix, start
        self.cached = use_cache
        self.end_ids = end_ids
        T = len(encoder_ids)
        ids = ctx.tensor([encoder_ids])  # (1, T)
        full = torch.ones(1, T, T, dtype=torch.bool, device=ctx.device)
        self.memory = self.backbone.encode(ids, full, ctx.tensor([list(range(T))]))  # (1, T, H)
        self.cross = cross.to(ctx.device).view(1, 1, T)
        self.limit = min(ctx.max_positions - start - len(prefix) + 1, ctx.max_positions - len(prefix) + 1)
        self.cache = None

    def _decode(self, histories: list[list[int]], cache=None, start_index: int = 0) -> torch.Tensor:
        ctx = self.ctx
        rows = [(self.prefix + h)[start_index:] for h in histories]
        B, S = len(rows), len(rows[0])
        ids = ctx.tensor(rows)  # (B, S)
        positions = ctx.tensor([list(range(self.start + start_index, self.start + start_index + S))]).expand(B, S)
        past = 0 if cache is None else cache.length
        mask = torch.ones(S, past + S, dtype=torch.bool, device=ctx.device).tril(diagonal=past).expand(B, S, past + S)
        T = self.memory.shape[1]
        hidden = self.backbone.decode(ids, mask, self.cross.expand(B, S, T), positions,
                                      self.memory.expand(B, T, -1), cache=cache)
        return self.backbone.lm_logits(hidden[:, -1])  # (B, V)

    def first(self) -> torch.Tensor:
        if self.cached:
            self.cache = self.backbone.new_cache(decoder=True)
        return self._decode([[]], self.cache)

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        if not self.cached:
            return self._decode(histories)
        if parents != list(range(len(parents))) or len(parents) != self.cache.layers[0].self_attn.k.shape[0]:
            self.cache.reorder(self.ctx.tensor(parents))
        return self._decode(histories, self.cache, start_index=len(self.prefix) + len(histories[0]) - 1)


class _T5Infill(_EncoderDecoder):
    """T5's decoder constraints: after span i only <extra_id_(i+1)> or [EOS] may come as special tokens; the
    sentinel after the last blank (or [EOS]) ends the output."""

    def __init__(self, *args, sentinels: tuple[int, ...], n_blanks: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.sentinels, self.n_blanks = sentinels, n_blanks

    def _spans_done(self, history: list[int]) -> int:
        return sum(1 for t in history if t in self.sentinels)

    def allowed_specials(self, history: list[int]) -> list[int]:
        return [self.ctx.vocab.eos_id, self.sentinels[self._spans_done(history) + 1]]

    def ends(self, history: list[int]) -> bool:
        if not history:
            return False
        last = history[-1]
        return last == self.ctx.vocab.eos_id or (last in self.sentinels and self._spans_done(history) >= self.n_blanks)


class _GLMInfill(_OneStream):
    """GLM's Part B: [E] ends a span; after the last blank's [E] the output ends."""

    def __init__(self, *args, n_blanks: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_blanks = n_blanks

    def ends(self, history: list[int]) -> bool:
        return bool(history) and history[-1] == self.ctx.vocab.end_id \
            and history.count(self.ctx.vocab.end_id) >= self.n_blanks


class _XLNetContinue(_Decoder):
    """XLNet in the left-to-right factorization order, recomputed each step (see the module docstring)."""

    def __init__(self, ctx: _Context, prefix: list[int]):
        self.ctx, self.prefix = ctx, prefix
        self.cached = False
        self.end_ids = (ctx.vocab.eos_id,)
        self.limit = ctx.max_positions - len(prefix)  # the query slot needs a position of its own
        self.bidirectional = bool(ctx.run.settings.bidirectional_context)

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        ctx = self.ctx
        known = [self.prefix + h for h in histories]
        B, n = len(known), len(known[0])
        ids = ctx.tensor([row + [ctx.vocab.mask_id] for row in known])  # (B, n+1): the slot's token is never read
        if self.bidirectional:
            content = torch.ones(n + 1, n + 1, dtype=torch.bool, device=ctx.device)
            content[:n, n] = False
        else:
            content = torch.ones(n + 1, n + 1, dtype=torch.bool, device=ctx.device).tril()  # rank = position
        query = torch.ones(1, n + 1, dtype=torch.bool, device=ctx.device)
        query[0, n] = False  # the query never reads its own slot
        positions = ctx.tensor([list(range(n + 1))]).expand(B, n + 1)
        slots = ctx.tensor([[n]]).expand(B, 1)
        _, g = ctx.backbone.forward_two_stream(ids, content.expand(B, n + 1, n + 1), query.expand(B, 1, n + 1),
                                               positions, slots)
        return ctx.backbone.lm_logits(g[:, 0])  # (B, V)

    def first(self) -> torch.Tensor:
        return self._logits([[]])

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        return self._logits(histories)


class _LSTMContinue(_Decoder):
    """ELMo's forward LM and ULMFiT's AWD-LSTM: the next-token logits after prefix + history, re-read each step."""

    def __init__(self, ctx: _Context, prefix: list[int]):
        self.ctx, self.prefix = ctx, prefix
        self.cached = False
        self.end_ids = (ctx.vocab.eos_id,)
        self.limit = ctx.max_positions - len(prefix)
        model = ctx.model
        self.logits_of = model.forward_logits if ctx.family == "elmo" else model.next_token_logits

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        ids = self.ctx.tensor([self.prefix + h for h in histories])  # (B, n): the histories have one length
        return self.logits_of(ids)[:, -1]  # (B, V)

    def first(self) -> torch.Tensor:
        return self._logits([[]])

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        return self._logits(histories)


class _CoVeTranslate(_Decoder):
    """CoVe's attentional decoder over the encoded English; each step re-reads [BOS] + the history."""

    def __init__(self, ctx: _Context, encoder: list[int]):
        self.ctx = ctx
        self.cached = False
        self.end_ids = (ctx.vocab.eos_id,)
        self.limit = ctx.max_positions
        model = ctx.model
        self.H, self.lengths, final = model.encode(ctx.tensor([encoder]))  # (1, n, 2h)
        self.state = model.bridge(final)  # (L_dec, 1, h) each

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        B = len(histories)
        ids = self.ctx.tensor([[self.ctx.vocab.bos_id] + h for h in histories])  # (B, S)
        state = tuple(s.expand(-1, B, -1).contiguous() for s in self.state)
        logits, _ = self.ctx.model.decoder_logits(ids, self.H.expand(B, -1, -1), self.lengths.expand(B), state)
        return logits[:, -1]  # (B, V)

    def first(self) -> torch.Tensor:
        return self._logits([[]])

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        return self._logits(histories)


# ----------------------------------------------------------------------------------------------------- search


@dataclass
class _Result:
    tokens: list[int]
    probs: list[float]
    stop: str  # "end" (an end token) | "limit" (the plan's token limit)


def _masked(ctx: _Context, dec: _Decoder, logits: torch.Tensor, histories: list[list[int]]) -> torch.Tensor:
    """The logits with every special token masked except the ones `dec` allows next."""
    banned = ctx.banned.unsqueeze(0).repeat(len(histories), 1)  # (B, V)
    for b, history in enumerate(histories):
        allowed = [i for i in dec.allowed_specials(history) if 0 <= i < ctx.V]
        if allowed:
            banned[b, allowed] = False
    return logits.float().masked_fill(banned, float("-inf"))


def _filtered(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Sampling scores (V,): divided by the temperature, then top-k, then top-p (the smallest set of tokens whose
    probability reaches top_p; at least one)."""
    scores = logits / temperature
    if top_k > 0 and top_k < scores.numel():
        kth = torch.topk(scores, top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True)
        cumulative = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
        drop = cumulative - torch.softmax(sorted_scores, dim=-1) >= top_p  # the mass before a token already reached p
        drop[0] = False
        scores = scores.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    return scores


def _pick(logits: torch.Tensor, strategy: str, temperature: float, top_k: int, top_p: float,
          generator: torch.Generator) -> tuple[int, float]:
    """One token from masked logits (V,): (id, the model's probability of it)."""
    probs = torch.softmax(logits, dim=-1)
    if strategy == "sample":
        scores = _filtered(logits, temperature, top_k, top_p)
        token = int(torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator))
    else:
        token = int(torch.argmax(logits))
    return token, float(probs[token])


def _search(ctx: _Context, dec: _Decoder, limit: int, strategy: str, temperature: float, top_k: int, top_p: float,
            beam_size: int, generator: torch.Generator) -> _Result:
    """Greedy, sampled or beam-searched tokens, at most `limit` (already capped at the decoder's limit)."""
    if strategy == "beam":
        return _beam_search(ctx, dec, limit, beam_size)
    tokens: list[int] = []
    probs: list[float] = []
    logits = dec.first()  # (1, V)
    while True:
        token, p = _pick(_masked(ctx, dec, logits, [tokens])[0], strategy, temperature, top_k, top_p, generator)
        tokens.append(token)
        probs.append(p)
        if dec.ends(tokens):
            return _Result(tokens, probs, "end")
        if len(tokens) >= limit:
            return _Result(tokens, probs, "limit")
        logits = dec.next([tokens], [0])


def _beam_search(ctx: _Context, dec: _Decoder, limit: int, beam_size: int) -> _Result:
    """Beam search: keep the `beam_size` best open hypotheses by summed log-probability; a hypothesis that ends is
    set aside; stop when `beam_size` have ended or at the limit; return the best by log-probability per token."""
    beams: list[tuple[list[int], list[float], float]] = [([], [], 0.0)]  # (tokens, probs, sum of log p)
    finished: list[_Result | tuple] = []
    logits = dec.first()
    V = ctx.V
    while True:
        histories = [b[0] for b in beams]
        logp = torch.log_softmax(_masked(ctx, dec, logits, histories), dim=-1)  # (B, V)
        total = logp + torch.tensor([b[2] for b in beams], device=logp.device).unsqueeze(1)
        top = torch.topk(total.view(-1), min(2 * beam_size, total.numel()))
        alive, parents = [], []
        for score, index in zip(top.values.tolist(), top.indices.tolist()):
            if score == float("-inf"):
                break
            parent, token = divmod(index, V)
            tokens = beams[parent][0] + [token]
            probs = beams[parent][1] + [math.exp(float(logp[parent, token]))]
            if dec.ends(tokens):
                finished.append((tokens, probs, score, "end"))
            else:
                alive.append((tokens, probs, score))
                parents.append(parent)
            if len(alive) == beam_size:
                break
        length = len(alive[0][0]) if alive else 0
        if not alive or len(finished) >= beam_size or length >= limit:
            candidates = finished + [(t, p, s, "limit") for t, p, s in alive]
            best = max(candidates, key=lambda c: c[2] / len(c[0]))
            return _Result(best[0], best[1], best[3])
        beams = alive
        logits = dec.next([b[0] for b in beams], parents)


def _strategy_text(strategy: str, temperature: float, top_k: int, top_p: float, beam_size: int, seed: int) -> str:
    if strategy == "greedy":
        return "greedy"
    if strategy == "beam":
        return f"beam search with {beam_size} beam{'s' if beam_size > 1 else ''}"
    filters = [f"temperature {temperature:g}"]
    if top_k:
        filters.append(f"top-k {top_k}")
    if top_p < 1:
        filters.append(f"top-p {top_p:g}")
    return f"sampled ({', '.join(filters)}, seed {seed})"


def _stop_text(ctx: _Context, result: _Result, limit_reason: str) -> str:
    if result.stop == "end":
        return f"stopped at {ctx.token_name(result.tokens[-1])}"
    return limit_reason


# ------------------------------------------------------------------------------------------------ the modes


@dataclass
class _Plan:
    """A prepared left-to-right decode: the decoder, its token limit, and how to turn the tokens into text."""

    decoder: _Decoder
    limit: int
    limit_reason: str  # what reaching `limit` means, e.g. "stopped after 50 tokens (max_new_tokens)"
    how: str  # the decoding, for `explanation`
    separators: tuple[int, ...] = ()  # ids that separate blanks (T5's sentinels, GLM's [E]); dropped from the output


def _max_new_reason(n: int) -> str:
    return f"stopped after {n} tokens (max_new_tokens)"


def _cap(ctx: _Context, dec: _Decoder, max_new: int, fixed: int | None = None) -> tuple[int, str]:
    """(the token limit, what reaching it means): max_new_tokens, a blank's fixed length, or the positions left."""
    options = [(max_new, _max_new_reason(max_new))]
    if fixed is not None:
        options.append((fixed, f"wrote the blank's {fixed} tokens (blank_length)"))
    options.append((dec.limit, f"stopped at the model's limit of {ctx.max_positions} positions"))
    return min(options, key=lambda option: option[0])  # on a tie the earlier (the asked-for) reason


def _cache_text(use_cache: bool) -> str:
    return "with a KV cache" if use_cache else "recomputing every step (no cache)"


def _plan_continue(ctx: _Context, prompt: str, max_new: int, use_cache: bool) -> tuple[_Plan, list[int]]:
    """continue: GPT, GPT-2, UniLM (left to right), XLNet, GLM (a blank at the end)."""
    if BLANK.search(prompt):
        raise ValueError("continue writes after the prompt, but the prompt has a blank ([MASK] or ___): remove it, "
                         "or choose infill to fill it")
    family, v = ctx.family, ctx.vocab
    ids = ctx.encode(prompt)
    if not ids:
        raise ValueError("the prompt encodes to no tokens: type some words")
    if family in ("elmo", "ulmfit"):
        prefix_ids = [v.eos_id] + ids
        if len(prefix_ids) >= ctx.max_positions:
            raise ctx.too_long(len(ids), ctx.max_positions - 2)
        dec = _LSTMContinue(ctx, prefix_ids)
        direction = "ELMo's forward LSTM language model" if family == "elmo" else "the AWD-LSTM language model"
        return _Plan(dec, *_cap(ctx, dec, max_new), f"{direction}, left to right after [EOS] (a document start), "
                                                    f"re-reading the prefix every step (no cache)"), ids
    if family in ("gpt", "gpt2", "unilm"):
        prefix_ids = [v.eos_id] + ids  # the start of a document
        L = len(prefix_ids)
        is_unilm = family == "unilm"
        room = ctx.max_positions - (1 if is_unilm else 0)
        if L > room:
            raise ctx.too_long(len(ids), room - 1)
        segment = 2 if is_unilm and ctx.run.settings.lm_segment_ids else 0
        prefix = [(t, (i,), segment) for i, t in enumerate(prefix_ids)]
        feed = lambda h, i: (h[i], (L + i,), segment)  # noqa: E731
        query = (lambda h: (v.mask_id, (L + len(h),), segment)) if is_unilm else None  # noqa: E731
        causal = torch.ones(L, L, dtype=torch.bool).tril()
        dec = _OneStream(ctx, ctx.backbone, prefix, causal, feed, query, use_cache, (v.eos_id,))
        if is_unilm:
            how = (f"UniLM's left-to-right mask, each next token predicted at an appended [MASK] (its cloze "
                   f"objective), {_cache_text(use_cache)}")
        else:
            how = f"left to right {_cache_text(use_cache)}"
        return _Plan(dec, *_cap(ctx, dec, max_new), how + ", after [EOS] (a document start)"), ids
    if family == "xlnet":
        if not ctx.run.settings.two_stream:
            raise _Unsupported("this XLNet run was trained without the query stream (two_stream=False, the leak "
                               "demonstration): it learned to copy its input and cannot predict a next token.")
        prefix_ids = [v.eos_id] + ids
        if len(prefix_ids) + 1 > ctx.max_positions:
            raise ctx.too_long(len(ids), ctx.max_positions - 2)
        dec = _XLNetContinue(ctx, prefix_ids)
        how = ("the left-to-right factorization order: the query stream at the next position reads the content of "
               "every earlier token; recomputed every step (no cache for two streams), after [EOS]")
        return _Plan(dec, *_cap(ctx, dec, max_new), how), ids
    # glm: a blank at the end of the prompt
    plan = _glm_plan(ctx, [ids, []], max_new, use_cache)
    plan.how = "a blank at the end of the prompt: " + plan.how
    return plan, ids


def _glm_plan(ctx: _Context, pieces: list[list[int]], max_new: int, use_cache: bool) -> _Plan:
    """GLM's Part A (the text with one [MASK] per blank) and Part B ([S] + span, ... until [E] per blank)."""
    v = ctx.vocab
    part_a: list[int] = []
    mask_index: list[int] = []
    for i, piece in enumerate(pieces):
        part_a += piece
        if i < len(pieces) - 1:
            mask_index.append(len(part_a))
            part_a.append(v.mask_id)
    LA = len(part_a)
    if LA + 1 > ctx.max_positions:
        raise ctx.too_long(LA - len(mask_index), ctx.max_positions - 1 - len(mask_index))
    prefix = [(t, (i, 0), 0) for i, t in enumerate(part_a)] + [(v.start_id, (mask_index[0], 1), 0)]
    L = LA + 1
    prefix_mask = torch.zeros(L, L, dtype=torch.bool)
    prefix_mask[:, :LA] = True  # Part A sees Part A; [S] sees Part A and itself
    prefix_mask[LA, LA] = True

    def feed(h: list[int], i: int) -> Item:
        blanks_before = h[:i].count(v.end_id)
        if h[i] == v.end_id:  # the next blank starts with its [S]
            return v.start_id, (mask_index[min(blanks_before + 1, len(mask_index) - 1)], 1), 0
        last_end = max((j for j in range(i) if h[j] == v.end_id), default=-1)
        return h[i], (mask_index[blanks_before], i - last_end + 1), 0

    dec = _GLMInfill(ctx, ctx.backbone, prefix, prefix_mask, feed, None, use_cache, (v.end_id,),
                     n_blanks=len(mask_index))
    how = (f"GLM's Part A (the text with [MASK]) read bidirectionally, Part B ([S] + span until [E]) written left to "
           f"right with 2-D positions, {_cache_text(use_cache)}")
    return _Plan(dec, *_cap(ctx, dec, max_new), how, separators=(v.end_id,))


class _Unsupported(Exception):
    """This run cannot decode in this mode; the message is the explanation."""


def _plan_infill(ctx: _Context, segments: list[str], pieces: list[list[int]], max_new: int, use_cache: bool,
                 blank_length: int | None) -> _Plan:
    family, v = ctx.family, ctx.vocab
    n_blanks = len(segments) - 1
    if n_blanks == 0:
        raise ValueError("infill needs a blank: mark where the model should write with ___ (or [MASK])")
    if family == "glm":
        return _glm_plan(ctx, pieces, max_new, use_cache)
    if family == "t5":
        if n_blanks >= len(v.sentinel_ids):
            raise ValueError(f"T5 can fill at most {len(v.sentinel_ids) - 1} blanks at once; the prompt has "
                             f"{n_blanks}")
        encoder: list[int] = []
        for i, piece in enumerate(pieces):
            encoder += piece
            if i < n_blanks:
                encoder.append(v.sentinel_ids[i])
        if len(encoder) > ctx.max_positions:
            raise ctx.too_long(len(encoder) - n_blanks, ctx.max_positions - n_blanks)
        cross = torch.ones(len(encoder), dtype=torch.bool)
        dec = _T5Infill(ctx, encoder, cross, [ctx.decoder_start, v.sentinel_ids[0]], 0, use_cache, (v.eos_id,),
                        sentinels=tuple(v.sentinel_ids), n_blanks=n_blanks)
        how = (f"the encoder reads the text with a sentinel at each blank; the decoder starts "
               f"{ctx.token_name(ctx.decoder_start)} <extra_id_0> (forced) and writes each span until the next "
               f"sentinel or [EOS], {_cache_text(use_cache)}")
        return _Plan(dec, *_cap(ctx, dec, max_new), how, separators=tuple(v.sentinel_ids))
    if n_blanks > 1:
        raise ValueError(f"{ctx.title} fills one blank at a time, but the prompt has {n_blanks}: keep one ___")
    k = blank_length if blank_length is not None else DEFAULT_BLANK_LENGTH
    left, right = pieces
    if family == "mass":
        encoder = left + [v.mask_id] * k + right
        if len(encoder) > ctx.max_positions:
            raise ctx.too_long(len(left) + len(right), ctx.max_positions - k)
        u = len(left)
        cross = torch.ones(len(encoder), dtype=torch.bool)
        if not ctx.run.settings.cross_attends_masks:
            cross[u:u + k] = False  # the released code's enc_mask: the decoder does not attend the [MASK]s
        first = left[-1] if left else v.bos_id
        dec = _EncoderDecoder(ctx, encoder, cross, [first], u, use_cache, (v.eos_id,))
        how = (f"the encoder reads the text with {k} [MASK] slots at the blank; the decoder writes the fragment at "
               f"its positions, {_cache_text(use_cache)}")
        return _Plan(dec, *_cap(ctx, dec, max_new, k), how)
    # unilm: seq2seq
    if not left:
        raise ValueError("UniLM's seq2seq mode needs some text before the blank (the source it reads)")
    L = len(left)
    if L + 1 > ctx.max_positions:
        raise ctx.too_long(L, ctx.max_positions - 1, "the text before the blank")
    source_segment, target_segment = (4, 5) if ctx.run.settings.lm_segment_ids else (0, 1)
    prefix = [(t, (i,), source_segment) for i, t in enumerate(left)]
    feed = lambda h, i: (h[i], (L + i,), target_segment)  # noqa: E731
    query = lambda h: (v.mask_id, (L + len(h),), target_segment)  # noqa: E731
    source_mask = torch.ones(L, L, dtype=torch.bool)  # the source sees all of itself
    dec = _OneStream(ctx, ctx.backbone, prefix, source_mask, feed, query, use_cache, (v.eos_id,))
    how = (f"UniLM's seq2seq mask: the text before the blank is the source, the fill the target, each token "
           f"predicted at an appended [MASK]; the text after the blank is not read, {_cache_text(use_cache)}")
    return _Plan(dec, *_cap(ctx, dec, max_new, k), how)


def _plan_translate(ctx: _Context, prompt: str, max_new: int, use_cache: bool) -> _Plan:
    from .objectives import translation

    v = ctx.vocab
    if ctx.family == "cove":
        encoder = ctx.encode(prompt)
        if not encoder:
            raise ValueError("the English encodes to no tokens: type some words")
        if len(encoder) > ctx.max_positions:
            raise ctx.too_long(len(encoder), ctx.max_positions, "the English")
        dec = _CoVeTranslate(ctx, encoder)
        how = ("English -> Chinese: CoVe's biLSTM encoder (the MT-LSTM) reads the English, its attentional LSTM "
               "decoder writes from [BOS] until [EOS], re-reading its history every step (no cache)")
        return _Plan(dec, *_cap(ctx, dec, max_new), how)
    encoder = translation.encoder_ids(ctx.family, ctx.tokenizer, v, prompt)
    if len(encoder) > ctx.max_positions:
        raise ctx.too_long(len(encoder), ctx.max_positions, "the English (with the task prefix)"
                           if ctx.family == "t5" else "the English")
    cross = torch.ones(len(encoder), dtype=torch.bool)
    dec = _EncoderDecoder(ctx, encoder, cross, [ctx.decoder_start], 0, use_cache, (v.eos_id,))
    weight = float((ctx.run.config.get("objectives") or {}).get(translation.OBJECTIVE, 0.0) or 0.0)
    trained = (f"this run trained translation (weight {weight:g})" if weight > 0 else
               "this run did not train translation (no 'translation' objective), so expect a poor translation")
    prefix = f" after the task prefix {translation.task_prefix(ctx.family)!r}" if ctx.family == "t5" else ""
    how = (f"English -> Chinese: the encoder reads the English{prefix}, the decoder writes from "
           f"{ctx.token_name(ctx.decoder_start)} until [EOS], {_cache_text(use_cache)}; {trained}")
    return _Plan(dec, *_cap(ctx, dec, max_new), how)


# ------------------------------------------------------------------------------------------ mask slots (MLMs)


def _slot_logits(ctx: _Context, ids: list[int], slots: list[int]) -> torch.Tensor:
    """The vocabulary logits (N, V) at `slots` of `ids` (the slots hold [MASK]), every other token visible: the
    family's masked-token prediction (see the module docstring)."""
    family, model = ctx.family, ctx.model
    n = len(ids)
    x = ctx.tensor([ids])  # (1, n)
    positions = ctx.tensor([list(range(n))])
    slot_t = ctx.tensor(slots)
    if family in ONE_STREAM_MLM or (family == "mpnet" and model.settings.input_mode == "mlm"):
        if family == "electra" and model.objective_weights.get("mlm", 0.0) <= 0:
            raise _Unsupported("this ELECTRA run's generator was never trained (its mlm weight is 0: a discriminator "
                               "imported without --generator, or a run trained with mlm=0), and ELECTRA predicts "
                               "tokens only with its generator; the discriminator only tells replaced tokens apart.")
        backbone = model.lm_backbone  # ELECTRA: the generator
        segments = torch.zeros_like(x) if backbone.config.n_segments else None
        full = torch.ones(1, n, n, dtype=torch.bool, device=ctx.device)
        hidden = backbone(x, full, positions, segments)  # (1, n, H)
        return backbone.lm_logits(hidden[0, slot_t])  # (N, V)
    backbone = ctx.backbone
    is_slot = torch.zeros(n, dtype=torch.bool, device=ctx.device)
    is_slot[slot_t] = True
    if family == "mpnet" and model.settings.input_mode == "mpnet":
        # every token and every [MASK] slot is visible to everyone; a slot is a [MASK] at its position
        content = torch.ones(n, n, dtype=torch.bool, device=ctx.device)
        query = torch.ones(len(slots), n, dtype=torch.bool, device=ctx.device)
    else:  # xlnet, mpnet "xlnet" mode: no slots in the content; the query stream at a slot reads the other tokens
        if family == "xlnet" and not model.settings.two_stream:
            raise _Unsupported("this XLNet run was trained without the query stream (two_stream=False, the leak "
                               "demonstration): it learned to copy its input and cannot predict a masked token.")
        visible = ~is_slot
        content = visible.unsqueeze(0).expand(n, n) | torch.eye(n, dtype=torch.bool, device=ctx.device)
        query = visible.unsqueeze(0).expand(len(slots), n)
    _, g = backbone.forward_two_stream(x, content.unsqueeze(0), query.unsqueeze(0), positions, slot_t.unsqueeze(0))
    return backbone.lm_logits(g[0])  # (N, V)


def _mask_predict(ctx: _Context, ids: list[int], slots: list[int], iterations: int, strategy: str,
                  temperature: float, top_k: int, top_p: float, generator: torch.Generator
                  ) -> tuple[list[int], list[float], int]:
    """Mask-predict (Ghazvininejad et al. 2019): (the slot tokens, their probabilities, the rounds run)."""
    ids = list(ids)
    N = len(slots)
    probs = [0.0] * N
    tokens = [0] * N
    rounds = 0
    masked = list(range(N))
    for t in range(iterations):
        if t > 0:
            n = N * (iterations - t) // iterations
            if n == 0:
                break
            masked = sorted(sorted(range(N), key=lambda i: probs[i])[:n])  # the least confident
            for i in masked:
                ids[slots[i]] = ctx.vocab.mask_id
        logits = _slot_logits(ctx, ids, [slots[i] for i in masked])
        logits = logits.float().masked_fill(ctx.banned, float("-inf"))
        for row, i in enumerate(masked):
            token, p = _pick(logits[row], strategy, temperature, top_k, top_p, generator)
            tokens[i], probs[i] = token, p
            ids[slots[i]] = token
        rounds += 1
    return tokens, probs, rounds


# ---------------------------------------------------------------------------------------------------- generate


def generate(run_dir, prompt: str, *, mode: str | None = None, max_new_tokens: int = 50, strategy: str = "greedy",
             temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, beam_size: int = 1, seed: int = 0,
             iterations: int = 10, blank_length: int | None = None, use_cache: bool = True) -> Generation:
    """Decode from the run in `run_dir` (see the module docstring for the modes and strategies).

    mode None is the family's default (`generation_modes(family)[0]`); a mode the family cannot do returns a
    Generation with supported=False and an explanation. ValueError for bad arguments: an empty prompt, one longer
    than the model reads, infill without a blank, several blanks where one is supported, an unknown mode or strategy,
    max_new_tokens outside 1..1024, temperature <= 0 when sampling, top_p outside (0, 1], beam_size < 1, beam search
    with mask-predict, a run folder without weights.
    """
    return _generate(run_dir, prompt, mode=mode, max_new_tokens=_whole(max_new_tokens), strategy=strategy,
                     temperature=temperature, top_k=_whole(top_k), top_p=top_p, beam_size=_whole(beam_size),
                     seed=_whole(seed), iterations=_whole(iterations), blank_length=_whole(blank_length),
                     use_cache=use_cache)[0]


def _generate(run_dir, prompt: str, *, mode: str | None, max_new_tokens: int, strategy: str, temperature: float,
              top_k: int, top_p: float, beam_size: int, seed: int, iterations: int, blank_length: int | None,
              use_cache: bool) -> tuple[Generation, list[int]]:
    """`generate`, and the ids it chose in order (end tokens and separators included; mask-predict: the slot
    tokens), for tests."""
    _check_text(prompt, "the prompt")
    _check_decoding(mode, max_new_tokens, strategy, temperature, top_k, top_p, beam_size, seed, iterations,
                    blank_length)
    run = _load(run_dir)
    ctx = _Context(run)
    family = run.family
    mode = mode if mode is not None else (FAMILY_MODES[family] or ("continue",))[0]

    def unsupported(reason: str) -> tuple[Generation, list[int]]:
        return Generation(run_id=run.run_id, family=family, mode=mode, supported=False, explanation=reason,
                          prompt=prompt, text="", new_text="", tokens=[], probs=[], seconds=0.0, ms_per_token=0.0,
                          step=run.step), []

    if mode not in FAMILY_MODES[family]:
        return unsupported(_unsupported_reason(family, mode))
    strategy_text = _strategy_text(strategy, float(temperature), top_k, float(top_p), beam_size, seed)
    if mode == "mask_predict" and strategy == "beam":  # one strategy control may serve several runs (Compare tab)
        strategy = "greedy"
        strategy_text = "greedy (beam search does not apply: mask-predict fills every slot at once)"
    generator = torch.Generator(device=ctx.device).manual_seed(int(seed))
    try:
        with torch.inference_mode():
            if mode == "mask_predict":
                return _generate_mask_predict(ctx, prompt, strategy, float(temperature), top_k, float(top_p),
                                              iterations, blank_length, generator, strategy_text)
            segments, _ = _segments(prompt)
            started = time.perf_counter()
            context: list[int] = []
            if mode == "continue":
                plan, context = _plan_continue(ctx, prompt, max_new_tokens, use_cache)
            elif mode == "infill":
                pieces = _encode_segments(ctx, segments)
                plan = _plan_infill(ctx, segments, pieces, max_new_tokens, use_cache, blank_length)
            else:
                plan = _plan_translate(ctx, prompt, max_new_tokens, use_cache)
            result = _search(ctx, plan.decoder, plan.limit, strategy, float(temperature), top_k, float(top_p),
                             beam_size, generator)
            seconds = time.perf_counter() - started
    except _Unsupported as reason:
        return unsupported(str(reason))

    produced = list(result.tokens)
    probs = list(result.probs)
    if result.stop == "end":
        produced, probs = produced[:-1], probs[:-1]
    explanation = f"{plan.how}; {strategy_text}; {_stop_text(ctx, result, plan.limit_reason)}"
    ms = 1000.0 * seconds / max(1, len(result.tokens))
    common = dict(run_id=run.run_id, family=family, mode=mode, supported=True, explanation=explanation,
                  prompt=prompt, seconds=seconds, ms_per_token=ms, step=run.step)
    if mode == "continue":
        pieces_text, new_text = _pieces(ctx, context, produced)
        return Generation(text=_join(prompt, new_text) if new_text else prompt, new_text=new_text,
                          tokens=pieces_text, probs=probs, **common), result.tokens
    if mode == "translate":
        pieces_text, new_text = _pieces(ctx, [], produced)
        generation = Generation(text=new_text, new_text=new_text, tokens=pieces_text, probs=probs, **common)
        return generation, result.tokens
    # infill: split the output into one fill per blank
    fills_ids: list[list[int]] = [[]]
    fills_probs: list[list[float]] = [[]]
    for token, p in zip(produced, probs):
        if token in plan.separators:
            fills_ids.append([])
            fills_probs.append([])
        else:
            fills_ids[-1].append(token)
            fills_probs[-1].append(p)
    left_ids = _encode_segments(ctx, segments)
    tokens_out: list[str] = []
    probs_out: list[float] = []
    fills: list[str] = []
    context_ids: list[int] = []
    for i, (ids, ps) in enumerate(zip(fills_ids, fills_probs)):
        context_ids = context_ids + left_ids[i]
        pieces_text, fill = _pieces(ctx, context_ids, ids)
        context_ids = context_ids + ids
        tokens_out += pieces_text
        probs_out += ps
        fills.append(fill)
    new_text = " | ".join(f.strip() for f in fills) if len(fills) > 1 else fills[0]
    return Generation(text=_assemble(segments, fills), new_text=new_text, tokens=tokens_out, probs=probs_out,
                      **common), result.tokens


def _generate_mask_predict(ctx: _Context, prompt: str, strategy: str, temperature: float, top_k: int, top_p: float,
                           iterations: int, blank_length: int | None, generator: torch.Generator,
                           strategy_text: str) -> tuple[Generation, list[int]]:
    segments, markers = _segments(prompt)
    if not markers:
        raise ValueError("mask-predict needs a blank: write [MASK] (one token) or ___ (blank_length tokens, default "
                         f"{DEFAULT_BLANK_LENGTH}) where the model should fill in")
    k = blank_length if blank_length is not None else DEFAULT_BLANK_LENGTH
    pieces = _encode_segments(ctx, segments)
    ids: list[int] = []
    slots: list[int] = []
    blank_slots: list[list[int]] = []  # slot indices of each blank
    for i, piece in enumerate(pieces):
        ids += piece
        if i < len(markers):
            width = 1 if markers[i] == "[MASK]" else k
            blank_slots.append(list(range(len(slots), len(slots) + width)))
            slots += list(range(len(ids), len(ids) + width))
            ids += [ctx.vocab.mask_id] * width
    if len(ids) > ctx.max_positions:
        raise ctx.too_long(len(ids), ctx.max_positions, "the prompt with its slots")
    started = time.perf_counter()
    tokens, probs, rounds = _mask_predict(ctx, ids, slots, iterations, strategy, temperature, top_k, top_p,
                                          generator)
    seconds = time.perf_counter() - started
    tokens_out: list[str] = []
    fills: list[str] = []
    context_ids: list[int] = []
    for i, members in enumerate(blank_slots):
        fill_ids = [tokens[j] for j in members]
        context_ids = context_ids + pieces[i]
        pieces_text, fill = _pieces(ctx, context_ids, fill_ids)
        context_ids = context_ids + fill_ids
        tokens_out += pieces_text
        fills.append(fill)
    reader = {"electra": "ELECTRA's generator (its MLM)", "unilm": "UniLM's bidirectional mode",
              "mpnet": "MPNet's query stream at the slots", "xlnet": "XLNet's query stream at the slots"}
    who = reader.get(ctx.family, f"{ctx.title}'s masked LM")
    if ctx.family == "mpnet" and ctx.model.settings.input_mode == "mlm":
        who = "MPNet's masked LM (one stream)"
    explanation = (f"mask-predict (Ghazvininejad et al. 2019) with {who}: {len(slots)} slot"
                   f"{'s' if len(slots) != 1 else ''}, {rounds} round{'s' if rounds != 1 else ''} (predict every "
                   f"slot, then re-mask the least confident and predict them again); {strategy_text}")
    new_text = " | ".join(f.strip() for f in fills) if len(fills) > 1 else fills[0]
    return Generation(run_id=ctx.run.run_id, family=ctx.family, mode="mask_predict", supported=True,
                      explanation=explanation, prompt=prompt, text=_assemble(segments, fills), new_text=new_text,
                      tokens=tokens_out, probs=probs, seconds=seconds,
                      ms_per_token=1000.0 * seconds / max(1, len(slots)), step=ctx.run.step), tokens


# --------------------------------------------------------------------------------------------------- fill_mask


def _fill_mask_refusal(family: str) -> str:
    title = _title(family)
    if family in ("gpt", "gpt2"):
        return f"{title} reads left to right only and cannot fill a [MASK]; use a BERT-style run (or generate with " \
               f"mode='continue')"
    if family == "mass":
        return ("MASS predicts a masked fragment left to right with its decoder, not single [MASK] slots; use "
                "generate(mode='infill') with a blank (___), or a BERT-style run")
    return f"{title} cannot fill a [MASK]; use a BERT-style run"


def fill_mask(run_dir, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """The top_k (token display string, probability) pairs for each [MASK] (or ___) slot in `text`, best first.

    One list per slot, in order. Each slot is one token; the other tokens are all visible (BERT-style; XLNet and MPNet
    through their query stream; GLM: the first token of the blank, written at [S] after Part A; T5: each [MASK] a
    one-token span, <extra_id_i> in the encoder, the decoder fed the best token of each earlier slot). The
    probabilities are over ordinary tokens (special tokens excluded), so each list sums to at most 1. ValueError: no
    [MASK], empty text, text longer than the model reads, a family that cannot fill a mask (GPT, GPT-2, MASS).
    """
    _check_text(text, "the text")
    top_k = _whole(top_k)
    if not _is_int(top_k) or not 1 <= top_k <= MAX_TOP_K:
        raise ValueError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, got {top_k!r}")
    run = _load(run_dir)
    if run.family not in FILL_MASK_FAMILIES:
        raise ValueError(_fill_mask_refusal(run.family))
    ctx = _Context(run)
    segments, markers = _segments(text)
    if not markers:
        raise ValueError("the text has no [MASK]: put [MASK] where the model should predict a token")
    pieces = _encode_segments(ctx, segments)
    ids: list[int] = []
    slots: list[int] = []
    for i, piece in enumerate(pieces):
        ids += piece
        if i < len(markers):
            slots.append(len(ids))
            ids.append(ctx.vocab.mask_id)
    with torch.inference_mode():
        try:
            logits = _fill_mask_logits(ctx, ids, slots)  # (N, V)
        except _Unsupported as reason:
            raise ValueError(f"{reason} Use another run.") from None
        probs = torch.softmax(logits.float().masked_fill(ctx.banned, float("-inf")), dim=-1)  # (N, V)
        top = torch.topk(probs, min(top_k, int((~ctx.banned).sum())), dim=-1)
    out = []
    for i, (values, indices) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        left = [t for t in ids[:slots[i]] if t != ctx.vocab.mask_id]
        out.append([(_pieces(ctx, left, [token])[0][0], float(p)) for token, p in zip(indices, values)])
    return out


def _fill_mask_logits(ctx: _Context, ids: list[int], slots: list[int]) -> torch.Tensor:
    """(N, V) logits, one row per slot (see `fill_mask`)."""
    v, family = ctx.vocab, ctx.family
    n = len(ids)
    if family == "glm":
        if n + 1 > ctx.max_positions:
            raise ctx.too_long(n, ctx.max_positions - 1, "the text with its slots")
        N = len(slots)
        rows = torch.tensor([ids + [v.start_id]] * N, dtype=torch.long, device=ctx.device)  # (N, n+1)
        positions = torch.zeros(N, 2, n + 1, dtype=torch.long, device=ctx.device)
        positions[:, 0, :n] = torch.arange(n)
        positions[:, 0, n] = ctx.tensor(slots)  # each row's [S] belongs to one blank
        positions[:, 1, n] = 1
        mask = torch.zeros(n + 1, n + 1, dtype=torch.bool, device=ctx.device)
        mask[:, :n] = True
        mask[n, n] = True
        hidden = ctx.backbone(rows, mask.expand(N, n + 1, n + 1), positions)
        return ctx.backbone.lm_logits(hidden[:, -1])
    if family == "t5":
        if len(slots) >= len(v.sentinel_ids):
            raise ValueError(f"T5 can fill at most {len(v.sentinel_ids) - 1} [MASK] slots at once")
        encoder = list(ids)
        for i, slot in enumerate(slots):
            encoder[slot] = v.sentinel_ids[i]
        if len(encoder) > ctx.max_positions or 2 * len(slots) > ctx.max_positions:
            raise ctx.too_long(n, ctx.max_positions, "the text with its slots")
        dec = _EncoderDecoder(ctx, encoder, torch.ones(n, dtype=torch.bool), [ctx.decoder_start], 0, False, ())
        rows = []
        history: list[int] = []
        for i in range(len(slots)):
            history = history + [v.sentinel_ids[i]]
            logits = dec.next([history], [0])[0]
            rows.append(logits)
            history = history + [int(torch.argmax(logits.float().masked_fill(ctx.banned, float("-inf"))))]
        return torch.stack(rows)
    if n > ctx.max_positions:
        raise ctx.too_long(n, ctx.max_positions, "the text with its slots")
    return _slot_logits(ctx, ids, slots)

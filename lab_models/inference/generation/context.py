"""Generation's shared ground: the limits, the `Generation` record, the modes each family can do, argument checks,
and `DecodingContext` (a loaded run as the decoders see it) with the prompt's blanks split into pieces and joined back.

lab_models/inference/generation/generate.py's docstring has the modes and the papers.

Blanks are encoded piece by piece: the text before a blank loses its trailing spaces, so that a byte-level BPE word
"Ġsat" is what fills " ___"; the encoding can therefore differ slightly from encoding the whole sentence at once.

Framing. `DecodingContext.read(ids)` frames the ids of a text the way the run reads one (`run.framing`,
lab_models/text/framing.py: bare for the lab's runs; `[CLS] ... [SEP]`, `<s> ... </s>`, T5's `</s>`, XLNet's
`<sep> <cls>` for imported checkpoints), and `continuation` is what goes before a prompt to continue ([EOS] for the
lab's runs, nothing for GPT, GPT-2 and XLNet checkpoints). Every mode frames through these two.
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.families import family_record
from lab_models.inference.loading import TrainedRun, load_run
from lab_models.text.word_split import close_wide_spaces
from lab_models.text.tokenizer_inspect import tokenizer_kind
from lab_models.text.vocab import special_ids
from lab_models.text.framing import Framed
from lab_models.objectives.translation import decoder_start_id
from lab_models.training.config import check_seed


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
ONE_STREAM_MLM = ("bert", "roberta", "albert", "spanbert", "electra", "unilm")


@dataclass(frozen=True)
class Generation:
    """What `generate` returns (see the module docstring)."""

    run_id: str
    family: str
    mode: str  # "continue" | "infill" | "mask_predict" | "translate"
    supported: bool  # False: this family cannot do this mode; `explanation` says why
    explanation: Message  # when supported: how it was decoded, clause by clause
    prompt: str
    text: str  # the prompt with the generated text in place; "" when unsupported
    new_text: str  # only what the model produced
    tokens: list[str]  # the produced tokens as display strings (decoded pieces, whitespace kept)
    probs: list[float]  # the model's probability of each produced token when it was chosen
    seconds: float  # wall time of decoding (not loading)
    ms_per_token: float
    step: int  # the training step of the weights used
    note: Message | str = ""  # mode "auto" only: what was done to the prompt to give this family a task, and why
    # ("" = nothing)


# ------------------------------------------------------------------------------------------------------ modes


def family_title(family: str) -> str:
    return family_record(family).title


def generation_modes(family: str) -> list[str]:
    """The modes `family` supports, its default first; [] for a family that writes no text (CVT, a tagger).

    >>> generation_modes("gpt"), generation_modes("t5")
    (['continue'], ['infill', 'translate'])
    """
    if not isinstance(family, str):
        raise LabError("family must be a family name such as 'gpt', got {family!r}", family=family)
    name = family.strip().lower()
    if name in FAMILY_MODES:
        return list(FAMILY_MODES[name])
    family_record(name)  # ValueError for a name the lab does not know
    return []


def unsupported_reason(family: str, mode: str) -> Message:
    """One or two plain sentences: why `family` cannot decode in `mode`."""
    title = family_title(family)
    encoders = ("bert", "roberta", "albert", "spanbert", "electra", "mpnet")
    if family == "cvt":
        return Message("CVT is a sequence tagger (one tag per word): it predicts no tokens and writes no text.")
    if family in ("elmo", "ulmfit") and mode != "translate":
        return Message("{title} is a left-to-right LSTM language model here: it can only continue a text (Continue).",
                       title=title)
    if family in ("elmo", "ulmfit"):
        return Message("{title} has no encoder-decoder: only MASS and T5 (and CoVe, an LSTM seq2seq) translate here.",
                       title=title)
    if family == "cove":
        return Message("CoVe is an English -> Chinese translation model: it can only translate (Translate).")
    if mode == "continue":
        if family in encoders:
            return Message("{title} reads the whole sentence at once and was never trained to predict the next "
                           "token; try Mask-predict.", title=title)
        return Message("{title} is an encoder-decoder trained to fill blanks, not to continue a text; put a blank "
                       "(___) at the end of the prompt and use Infill.", title=title)
    if mode == "infill":
        if family in ("gpt", "gpt2"):
            return Message("{title} reads left to right only and never sees the text after a blank; try Continue.",
                           title=title)
        if family == "xlnet":
            return Message("XLNet decodes here left to right only (Continue); to fill single tokens, mark them [MASK] "
                           "and use Mask-predict.")
        return Message("{title} predicts each [MASK] slot on its own and cannot decide how long a blank is; mark one "
                       "[MASK] per token and use Mask-predict.", title=title)
    if mode == "mask_predict":
        if family in ("gpt", "gpt2"):
            return Message("{title} reads left to right only and cannot fill a [MASK] from both sides; try "
                           "Continue.", title=title)
        return Message("{title} writes each blank left to right as a span; use Infill with a blank (___) in the "
                       "prompt.", title=title)
    return Message("{title} has no encoder-decoder trained for it: only MASS and T5 (and CoVe, an LSTM seq2seq) "
                   "translate here.", title=title)


AUTO = "auto"  # generate's mode that picks, per family, a task it can do from the same prompt (`auto_task`)
AUTO_BLANK = "___"  # the blank Auto adds at the end of a prompt for a family that fills blanks


@dataclass(frozen=True)
class AutoTask:
    """What mode "auto" asks one family to do with a prompt: the mode, the prompt it decodes (the given one, or one
    made from it) and a note that says what was made and why ("" when the prompt is used as it is)."""

    mode: str | None  # None: the family writes no text (CVT); generate then says why
    prompt: str
    note: Message | str


def auto_task(family: str, prompt: str) -> AutoTask:
    """The task a family can do from `prompt` as it stands, so that one prompt gives every family an answer (the
    Compare tab's Auto mode):

    - a prompt without a blank: a continuation for a family that continues text (GPT, GPT-2, UniLM, XLNet, GLM, the
      LSTM LMs); for one that only fills blanks (the MLM families: mask-predict; T5, MASS: infill), the prompt with a
      blank (`___`) added at its end, said in the note;
    - a prompt with a blank: the family's first mode that fills blanks; a family that only continues (GPT, GPT-2, ELMo,
      ULMFiT) continues the text before the first blank, said in the note;
    - CoVe translates the prompt as it is; CVT (a tagger) gets no mode.

    >>> auto_task("gpt", "the cat sees")
    AutoTask(mode='continue', prompt='the cat sees', note='')
    >>> auto_task("bert", "the cat sees").prompt
    'the cat sees ___'
    >>> auto_task("t5", "the cat sees").mode, auto_task("glm", "the cat sees").mode
    ('infill', 'continue')
    >>> task = auto_task("gpt2", "the cat ___ a ball ."); task.mode, task.prompt
    ('continue', 'the cat')
    """
    check_prompt_text(prompt, Message("the prompt"))
    modes = generation_modes(family)
    name = family.strip().lower()
    if not modes:
        return AutoTask(None, prompt, "")
    title = family_title(name)
    blank = BLANK.search(prompt)
    fills = [mode for mode in modes if mode in ("infill", "mask_predict")]
    if blank is None:
        if "continue" in modes or not fills:
            return AutoTask("continue" if "continue" in modes else modes[0], prompt, "")
        return AutoTask(fills[0], f"{prompt.rstrip()} {AUTO_BLANK}",
                        Message("{title} fills blanks and does not continue a text, so a blank ({blank}) was added at "
                                "the end of the prompt", title=title, blank=AUTO_BLANK))
    if fills:
        return AutoTask(fills[0], prompt, "")
    if "continue" in modes:
        before = prompt[:blank.start()].rstrip()
        if before.strip():
            return AutoTask("continue", before, Message("{title} reads left to right and cannot fill a blank, so it "
                                                        "continues the text before the first blank", title=title))
        rest = BLANK.sub(" ", prompt).strip()
        if rest:
            return AutoTask("continue", rest, Message("{title} reads left to right and cannot fill a blank, so it "
                                                      "continues the prompt without its blanks", title=title))
    return AutoTask(modes[0], prompt, "")


# -------------------------------------------------------------------------------------------------- validation


def is_integer_value(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_whole_number(value):
    """An integral float (a UI number box's 50.0) as an int; anything else unchanged, for the checks to judge."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_prompt_text(text, what: Message) -> str:
    if not isinstance(text, str):
        raise LabError("{what} must be text (a str), got {text_type}", what=what, text_type=type(text).__name__)
    if not text.strip():
        raise LabError("{what} is empty: type some text for the model to start from", what=what)
    return text


def check_decoding(mode, max_new_tokens, strategy, temperature, top_k, top_p, beam_size, seed, iterations,
                    blank_length) -> None:
    if mode is not None and mode != AUTO and mode not in GENERATION_MODES:
        raise LabError("unknown mode {mode!r}: choose one of {generation_modes}, {auto} (a task each "
                       "family can do from the prompt) or None (the family's default)",
                       mode=mode, generation_modes=', '.join(GENERATION_MODES), auto=AUTO)
    if not is_integer_value(max_new_tokens) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise LabError("max_new_tokens must be a whole number from 1 to {limit}, got {max_new_tokens!r}",
                       limit=MAX_NEW_TOKENS, max_new_tokens=max_new_tokens)
    if strategy not in STRATEGIES:
        raise LabError("unknown strategy {strategy!r}: choose one of {strategies}",
                       strategy=strategy, strategies=', '.join(STRATEGIES))
    if not _is_real(temperature):
        raise LabError("temperature must be a number, got {temperature!r}", temperature=temperature)
    if strategy == "sample" and temperature <= 0:
        raise LabError("temperature must be > 0 for sampling (lower is more conservative; use strategy='greedy' "
                       "for the most likely tokens), got {temperature!r}", temperature=temperature)
    if not is_integer_value(top_k) or top_k < 0:
        raise LabError("top_k must be a whole number >= 0 (0 = no top-k filter), got {top_k!r}", top_k=top_k)
    if not _is_real(top_p) or not 0 < top_p <= 1:
        raise LabError("top_p must be in (0, 1] (1 = no nucleus filter), got {top_p!r}", top_p=top_p)
    if not is_integer_value(beam_size) or not 1 <= beam_size <= MAX_BEAM_SIZE:
        raise LabError("beam_size must be a whole number from 1 to {max_beam_size}, got {beam_size!r}",
                       max_beam_size=MAX_BEAM_SIZE, beam_size=beam_size)
    if not is_integer_value(seed):
        raise LabError("seed must be a whole number, got {seed!r}", seed=seed)
    check_seed(seed)  # from 0 to MAX_SEED, as a training run's
    if not is_integer_value(iterations) or not 1 <= iterations <= MAX_ITERATIONS:
        raise LabError("iterations must be a whole number from 1 to {max_iterations}, got {iterations!r}",
                       max_iterations=MAX_ITERATIONS, iterations=iterations)
    if blank_length is not None and (not is_integer_value(blank_length) or not 1 <= blank_length <= MAX_NEW_TOKENS):
        raise LabError("blank_length must be None or a whole number from 1 to {max_new_tokens}, got "
                       "{blank_length!r}", max_new_tokens=MAX_NEW_TOKENS, blank_length=blank_length)


def load_decodable_run(run_dir) -> TrainedRun:
    if run_dir is None or not str(run_dir).strip():
        raise LabError("choose a run first: one that has weights (finished, stopped, or with a checkpoint)")
    return load_run(str(run_dir).strip())


# ---------------------------------------------------------------------------------------------- the run, decoded


class DecodingContext:
    """A loaded run and what decoding reads from it: the vocabulary facts and the ids never to generate."""

    def __init__(self, run: TrainedRun):
        self.run = run
        self.family = run.family
        self.title = family_title(run.family)
        self.model = run.model
        self.backbone = getattr(run.model, "backbone", None)  # None for the LSTM families
        self.vocab = run.vocab
        self.tokenizer = run.tokenizer
        self.framing = run.framing
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

            self.decoder_start = decoder_start_id(run.family, run.settings, v)

    def tensor(self, values, dtype=torch.long) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids) if text.strip() else []

    def read(self, ids: list[int]) -> Framed:
        """The ids of one text framed as the run reads a text (bare for the lab's runs)."""
        return self.framing.reading.frame(list(ids))

    @property
    def continuation(self) -> list[int]:
        """The ids before a prompt to continue: [EOS] (a document start) for the lab's runs, what the checkpoint's
        tokenizer puts before a text for an imported one (nothing for GPT, GPT-2, XLNet)."""
        return list(self.framing.continuation)

    def framing_clause(self, continuing: bool = False) -> Message | None:
        """None for the lab's framing (each plan says it itself); for a checkpoint's, one more clause of the
        explanation saying how its tokenizer framed the text."""
        if self.framing.source == "lab":
            return None
        if continuing:
            start = [self.token_name(i) for i in self.framing.continuation]
            if not start:
                return Message("the prompt read as the checkpoint's tokenizer reads it, with no start token")
            return Message("the prompt read after {start}, as the checkpoint's tokenizer starts a text",
                           start=" ".join(start))
        return Message("the text framed as the checkpoint's tokenizer frames it: {framing}",
                       framing=self.framing.describe(self.tokenizer))

    def decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(list(ids), skip_special_tokens=True)
        return close_wide_spaces(text) if self.spaces_wide else text  # WordPiece spaces every CJK character

    def token_name(self, token_id: int) -> str:
        return self.tokenizer.id_to_token(token_id) or str(token_id)

    def too_long(self, n: int, limit: int, what: Message = Message("the prompt")) -> LabError:
        return LabError("{what} is {n} tokens long, but this {title} model can read at most {limit} tokens "
                        "here (it has {max_positions} positions): shorten it",
                        what=what, n=n, title=self.title, limit=limit, max_positions=self.max_positions)


def split_blanks(text: str) -> tuple[list[str], list[str]]:
    """The text around the blanks and the blank markers: "a ___ b [MASK]" -> (["a ", " b ", ""], ["___", "[MASK]"])."""
    return BLANK.split(text), BLANK.findall(text)


def encode_segments(ctx: DecodingContext, segments: list[str]) -> list[list[int]]:
    """Each segment's ids; a segment before a blank loses its trailing spaces (the blank's token carries the space)."""
    out = []
    for i, segment in enumerate(segments):
        if i < len(segments) - 1:
            segment = segment.rstrip()
        out.append(ctx.encode(segment))
    return out


def display_pieces(ctx: DecodingContext, context: list[int], produced: list[int]) -> tuple[list[str], str]:
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


def join_text(left: str, fill: str, right: str = "") -> str:
    """left + fill + right without doubled spaces: a fill's leading space goes when `left` ends with one (or is
    empty), its trailing space when `right` starts with one.

    >>> join_text("the girl ", " eats", " an apple"), join_text("the girl ", "", " an apple")
    ('the girl eats an apple', 'the girl an apple')
    """
    if not fill.strip():
        return left.rstrip() + right if left[-1:].isspace() and right[:1].isspace() else left + right
    if not left or left[-1:].isspace():
        fill = fill.lstrip()
    if right[:1].isspace():
        fill = fill.rstrip()
    return left + fill + right


def fill_blanks(segments: list[str], fills: list[str]) -> str:
    """The text with blank i replaced by fills[i] (blanks past the fills stay empty)."""
    out = segments[0]
    for i, right in enumerate(segments[1:]):
        out = join_text(out, fills[i] if i < len(fills) else "", right)
    return out

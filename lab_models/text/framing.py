"""How a run frames a text: the tokens put around it before the model reads it, decided in one place per run.

The lab's own runs and an imported checkpoint frame text differently, and each must be read the way it was trained:

- **The lab's runs** pack documents into one token stream, `d1 [EOS] d2 [EOS] ...` (text/streams.py), and never see
  `[CLS]` or `[SEP]` around a text. Inference reads a text bare (fill-mask, mask-predict, infilling, translation, the
  probes, the Leaderboard's questions), and a continuation starts after `[EOS]`, the stream's document start.
  Downstream uses (fine-tuning, sentence vectors) add the framing of the papers' fine-tuning: `[CLS] a [SEP]` and
  `[CLS] a [SEP] b [SEP]` (BERT §3), `[BOS] a [EOS]` and `[BOS] a [SEP] b [EOS]` for GPT and GPT-2 (GPT §3.3, start,
  delimiter, extract), nothing for the RNN-era families (which saw none) and `a [EOS] b` for their pairs.
- **An imported checkpoint** was trained with its tokenizer's post-processor, so every use reads a text the way
  `tokenizer(text)` in transformers would give it: BERT, ALBERT, ELECTRA `[CLS] a [SEP]`, RoBERTa and MPNet
  `<s> a </s>`, T5 `a </s>`, XLNet `a <sep> <cls>` (with `<cls>` in segment 2), GPT and GPT-2 nothing at all (no
  BOS). A continuation starts after what the framing puts before a text (nothing for GPT, GPT-2 and XLNet), never
  after what it puts after one (that closes a text). Pairs follow the post-processor's pair template.

The framing of a checkpoint is read once, at import, from its tokenizer (`framing_record`, by post-processing a
probe text and reading which positions the post-processor added: any processor works, TemplateProcessing,
RobertaProcessing, BertProcessing, ByteLevel or a Sequence of them) and recorded in the run's config.json under
"framing" as token strings, so that a person can read it. `run_framing(config, tokenizer, vocab, family)` turns a
run's config back into a `Framing`: the recorded framing, else (a run imported before the record existed) its
tokenizer's post-processor, else the lab's. Callers only ask the `Framing`; none asks whether a run was imported.

Worked example (a BERT-style post-processor):

>>> from tokenizers import Tokenizer, models, pre_tokenizers, processors
>>> tok = Tokenizer(models.WordLevel({"[CLS]": 0, "[SEP]": 1, "a": 2, "b": 3}, unk_token="[CLS]"))
>>> tok.pre_tokenizer = pre_tokenizers.Whitespace()
>>> tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
...                                                    special_tokens=[("[CLS]", 0), ("[SEP]", 1)])
>>> record = framing_record(tok)
>>> record["single"], record["pair"][3:]
([['[CLS]', 0], ['$A', 0], ['[SEP]', 0]], [['$B', 1], ['[SEP]', 1]])
>>> template = template_from_record(record, tok)
>>> template.frame([2, 3]), template.frame([2], [3]).segments
(Framed(ids=[0, 2, 3, 1], segments=[0, 0, 0, 0], start=1), [0, 0, 0, 1, 1])
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer

from lab_models.messages import LabError
from lab_models.families import RNN_FAMILIES

FRAMING_KEY = "framing"  # config.json: the checkpoint's framing, as token strings (`framing_record`)
TEXT_A, TEXT_B = "$A", "$B"
PROBE_TEXTS = ("a", "the", "0", "x", "e", "1", ".")  # a probe that gives at least one token with any tokenizer
DOWNSTREAM_CAUSAL = ("gpt", "gpt2")  # fine-tune with GPT's start / delimiter / extract tokens

Item = tuple  # (token id, or TEXT_A / TEXT_B, segment id)


@dataclass(frozen=True)
class Framed:
    """A framed text: its ids, one segment (token type) id per position, and where the (first) text starts."""

    ids: list[int]
    segments: list[int]
    start: int


@dataclass(frozen=True)
class Template:
    """Where the texts go among the framing tokens: `single` for one text, `pair` for two, each a tuple of (token id,
    segment) and (TEXT_A or TEXT_B, segment) items, in order."""

    single: tuple[Item, ...]
    pair: tuple[Item, ...]

    def frame(self, a: list[int], b: list[int] | None = None) -> Framed:
        """The text `a` (and `b`) framed: ids, segments, and the index where `a` starts."""
        items = self.single if b is None else self.pair
        ids: list[int] = []
        segments: list[int] = []
        start = 0
        for item, segment in items:
            if item == TEXT_A:
                start = len(ids)
                piece = list(a)
            elif item == TEXT_B:
                piece = list(b or [])
            else:
                piece = [item]
            ids += piece
            segments += [segment] * len(piece)
        return Framed(ids, segments, start)

    def added(self, pair: bool = False) -> int:
        """How many framing tokens a text (or a pair) gets."""
        return sum(1 for item, _ in (self.pair if pair else self.single) if item not in (TEXT_A, TEXT_B))

    def before(self) -> tuple[int, ...]:
        """The framing tokens before a single text."""
        out = []
        for item, _ in self.single:
            if item == TEXT_A:
                break
            out.append(item)
        return tuple(out)

    def classifier_position(self, cls_id: int) -> str:
        """"first" or "last": where the text's classification token sits ("first" when it is not framed at all or
        has no such token after the text)."""
        items = [item for item, _ in self.single]
        text_at = items.index(TEXT_A)
        return "last" if cls_id in items[text_at + 1:] and cls_id not in items[:text_at] else "first"

    def pooling(self, default: str, cls_id: int) -> str:
        """The pooling "auto" resolves to: `default` (the family's), except that a framing with its
        classification token after the text (XLNet's `a <sep> <cls>`) pools the last position instead of the
        first."""
        return "last" if default == "first" and self.classifier_position(cls_id) == "last" else default


BARE = Template(single=((TEXT_A, 0),), pair=((TEXT_A, 0), (TEXT_B, 1)))


@dataclass(frozen=True)
class Framing:
    """How one run frames text. `reading`: every inference that reads a text (fill-mask, mask-predict, infilling and
    translation encoders, embeddings, attention maps, the Leaderboard); `downstream`: fine-tuning and sentence
    vectors; `continuation`: the ids before a prompt to continue. `source` says which framing it is ("lab" or
    "checkpoint"), for notes and explanations."""

    source: str
    reading: Template
    downstream: Template
    continuation: tuple[int, ...]

    def describe(self, tokenizer: Tokenizer) -> str:
        """The single-text framing in words: "[CLS] text [SEP]" or "text" (for explanations)."""
        parts = [("text" if item == TEXT_A else (tokenizer.id_to_token(item) or str(item)))
                 for item, _ in self.reading.single]
        return " ".join(parts)


def framing_record(tokenizer: Tokenizer) -> dict:
    """The tokenizer's framing as its post-processor adds it, as token strings: {"single": [[token or "$A",
    segment], ...], "pair": [...]}. Read by post-processing a probe text (one token or more) with and without the
    special tokens: positions whose sequence id is None are the framing's."""
    single = _template_items(tokenizer, pair=False)
    pair = _template_items(tokenizer, pair=True)
    return {"single": [[item, segment] for item, segment in single],
            "pair": [[item, segment] for item, segment in pair]}


def _probe(tokenizer: Tokenizer):
    for text in PROBE_TEXTS:
        encoding = tokenizer.encode(text, add_special_tokens=False)
        if encoding.ids:
            return encoding
    raise LabError("the tokenizer gives no token for any probe text: it cannot encode text")


def _template_items(tokenizer: Tokenizer, pair: bool) -> list[tuple[str, int]]:
    """The post-processor's template: the positions it added (special_tokens_mask 1) as tokens, each run of the
    probe's own tokens as TEXT_A, then TEXT_B. (The special tokens mask, not the sequence ids: tokenizers 0.23 gives
    the first text of a TemplateProcessing pair no sequence id.)"""
    first = _probe(tokenizer)
    length_a = len(first.ids)
    framed = tokenizer.post_process(first, _probe(tokenizer) if pair else None, add_special_tokens=True)
    items: list[tuple[str, int]] = []
    seen = 0  # the probe's own tokens so far: the first length_a are text A's, the rest text B's
    for token, added, segment in zip(framed.tokens, framed.special_tokens_mask, framed.type_ids):
        if added:
            items.append((token, int(segment)))
            continue
        if seen == 0 or seen == length_a:
            items.append((TEXT_A if seen == 0 else TEXT_B, int(segment)))
        seen += 1
    return items


def template_from_record(record: dict, tokenizer: Tokenizer) -> Template:
    """A recorded framing (`framing_record`) as ids of `tokenizer`; ValueError naming a token it lacks."""

    def items(rows) -> tuple[Item, ...]:
        out = []
        for row in rows:
            if not isinstance(row, (list, tuple)) or len(row) != 2:
                raise LabError("config.json {framing_key!r} holds {row!r}, not a [token, segment] pair",
                               framing_key=FRAMING_KEY, row=row)
            token, segment = row
            if token in (TEXT_A, TEXT_B):
                out.append((token, int(segment)))
                continue
            token_id = tokenizer.token_to_id(str(token))
            if token_id is None:
                raise LabError("config.json {framing_key!r} names the token {token!r}, which the run's tokenizer "
                               "does not have", framing_key=FRAMING_KEY, token=token)
            out.append((token_id, int(segment)))
        return tuple(out)

    single = items(record.get("single") or [[TEXT_A, 0]])
    pair = items(record.get("pair") or [[TEXT_A, 0], [TEXT_B, 1]])
    if sum(item == TEXT_A for item, _ in single) != 1:
        raise LabError("config.json {framing_key!r}: the single template must hold {text_a} once",
                       framing_key=FRAMING_KEY, text_a=TEXT_A)
    return Template(single=single, pair=pair)


def lab_downstream(family: str, vocab) -> Template:
    """The lab's own fine-tuning framing for `family` (see the module docstring)."""
    if family in RNN_FAMILIES:
        return Template(single=((TEXT_A, 0),), pair=((TEXT_A, 0), (vocab.eos_id, 0), (TEXT_B, 1)))
    if family in DOWNSTREAM_CAUSAL:
        start, middle, end = vocab.bos_id, vocab.sep_id, vocab.eos_id
    else:
        start, middle, end = vocab.cls_id, vocab.sep_id, vocab.sep_id
    return Template(single=((start, 0), (TEXT_A, 0), (end, 0)),
                    pair=((start, 0), (TEXT_A, 0), (middle, 0), (TEXT_B, 1), (end, 1)))


def lab_framing(family: str, vocab) -> Framing:
    """The lab's own framing: bare text for inference, [EOS] before a continuation, the papers' fine-tuning
    framing downstream."""
    return Framing(source="lab", reading=BARE, downstream=lab_downstream(family, vocab), continuation=(vocab.eos_id,))


def checkpoint_framing(template: Template) -> Framing:
    """A checkpoint's framing: its tokenizer's template everywhere, and what it puts before a text before a
    continuation."""
    return Framing(source="checkpoint", reading=template, downstream=template, continuation=template.before())


def run_framing(config: dict, tokenizer: Tokenizer, vocab, family: str) -> Framing:
    """The one decision: how the run whose config.json is `config` frames text (see the module docstring).

    A framing recorded in config.json (an imported checkpoint, or a run started from one) is the checkpoint's; a run
    imported before the record existed reads its tokenizer's post-processor; every other run has the lab's."""
    record = config.get(FRAMING_KEY)
    if isinstance(record, dict):
        return checkpoint_framing(template_from_record(record, tokenizer))
    if isinstance(config.get("imported_from"), dict):
        return checkpoint_framing(template_from_record(framing_record(tokenizer), tokenizer))
    return lab_framing(family, vocab)

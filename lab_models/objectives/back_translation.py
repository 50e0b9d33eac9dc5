"""Back-translation for the translation models (MASS, T5, CoVe): an add-on objective `back_translation` on the
synthetic corpus's English/Chinese sentences.

Papers: Sennrich, Haddow, Birch (2016). Improving Neural Machine Translation Models with Monolingual Data. ACL. A
target-side monolingual sentence z is translated back into the source language by a reverse model, x_hat = g(z), and
(x_hat, z) is trained as one more parallel pair, mixed 1:1 with the real pairs. Iterative back-translation (Hoang et
al. 2018; Lample et al. 2018, as XLM and MASS use it for unsupervised translation) does this in both directions with
the models being trained, on the fly. Here one model translates both ways (as XLM and MASS share one model for both
directions) and generates its own synthetic pairs at every step:

    zh -> en (greedy, no gradient):  x_hat = model(z)     for N monolingual Chinese sentences z
    en -> zh (greedy, no gradient):  z_hat = model(x)     for N monolingual English sentences x
    train en -> zh on (x_hat, z)  and  zh -> en on (z_hat, x)    the part `back_translation` (synthetic source,
                                                                  real target: Sennrich's recipe, both ways)
    train zh -> en on N real pairs (z, x)                         the part `translation_zh_en` (the reverse model
                                                                  that back-translation needs must learn somewhere)
    total = the family's loss + weight * (back_translation + translation_zh_en)

English -> Chinese on real pairs is the family's own: MASS's and T5's `translation` objective (which must be on:
`--objective translation=1`; objectives/translation.py), CoVe's `nmt`. Which data trains which direction:

    direction   real pairs (training stories)              synthetic pairs
    en -> zh    translation / nmt (the family's objective)  back_translation: (model(z), z) for monolingual Chinese z
    zh -> en    translation_zh_en (this add-on)             back_translation: (model(x), x) for monolingual English x

The monolingual sentences are the Chinese and the English sides of the synthetic corpus's *training* stories
(`translation.synthetic_pairs("train")`), drawn uniformly with replacement and independently of each other and of
the real pairs, with the step's generator after the family's own draws (so the family's batch is unchanged). The
held-out pairs (`synthetic_pairs("validation")`, the validation stories) are never trained on: they are what BLEU is
measured on (tests/objectives/test_addons.py checks the split).

The direction signal: T5 reads a task prefix, `translate English to Chinese: ` (translation.py) or `translate Chinese
to English: `. MASS and CoVe read the sentence alone: the input's language says which way to translate (every input
is either English or Chinese here), as MASS's language embeddings would (the lab has none; see translation.py).

Worked example (the golden test; ids of translation.py's word-level example: "the" 16 "cat" 17 "sees" 18 "a" 19
"ball" 20 "." 21, "猫" 22 "看见" 23 "一个" 24 "球" 25 "。" 26, [BOS] 4, [EOS] 5; MASS, so no prefix). The model
back-translated the monolingual Chinese z = 猫 看见 一个 球 。 into "the cat sees ball ." and translated the
monolingual English x = "the cat sees a ball ." into 猫 看见 球 。; one real pair is (猫 看见 一个 球 。, the cat sees a
ball .):

    row  encoder inputs            decoder inputs (positions 0..n)   targets                       part
    0    16 17 18 20 21  (x_hat)   4 22 23 24 25 26      ([BOS] z)   22 23 24 25 26 5     (z [EOS])  back_translation
    1    22 23 25 26     (z_hat)   4 16 17 18 19 20 21   ([BOS] x)   16 17 18 19 20 21 5  (x [EOS])  back_translation
    2    22 23 24 25 26  (real z)  4 16 17 18 19 20 21   ([BOS] x)   16 17 18 19 20 21 5  (x [EOS])  translation_zh_en

>>> from lab_models.objectives.common import StringVocab
>>> v = StringVocab("the cat sees a ball . 猫 看见 一个 球 。".split()).info
>>> synthetic = [([16, 17, 18, 20, 21], [22, 23, 24, 25, 26]), ([22, 23, 25, 26], [16, 17, 18, 19, 20, 21])]
>>> rows = training_examples(synthetic, [([22, 23, 24, 25, 26], [16, 17, 18, 19, 20, 21])], v, max_len=64)
>>> [(r.input_ids.tolist(), r.targets.tolist(), bool(r.extras[SYNTHETIC_FLAG])) for r in rows]
... # doctest: +NORMALIZE_WHITESPACE
[([16, 17, 18, 20, 21], [22, 23, 24, 25, 26, 5], True), ([22, 23, 25, 26], [16, 17, 18, 19, 20, 21, 5], True),
 ([22, 23, 24, 25, 26], [16, 17, 18, 19, 20, 21, 5], False)]

Each row is a `translation.build_example` (encoder positions 0..E-1 with full attention, decoder [BOS] + target at
positions 0..n with a causal mask, full cross-attention). An empty back-translation (the model wrote [EOS] first) is
dropped from the step. Decoding is greedy with a KV cache (MASS, T5) or the LSTM state (CoVe), in eval mode (no
dropout), at most `max_new_tokens` tokens, never a special token but [EOS]; the synthetic sentence is decoded to text
and re-encoded as a source, so it has exactly the form of a real source (T5's prefix included).

Evaluation: at every evaluation the run translates `eval_pairs` held-out pairs both ways (greedy) and the validation
row of metrics.jsonl gets `bleu_en_zh`, `bleu_zh_en` (sacrebleu's corpus BLEU; Chinese with its "zh" tokenizer, one
token per character, English with "13a") and `chrf_en_zh`, `chrf_zh_en` (sacrebleu's chrF, which still moves when
BLEU's 4-grams are all wrong). The Train tab draws them.

Deviations, stated:
- The monolingual text is the other side of the same training stories the real pairs come from (the only Chinese the
  corpus has), not additional text as in Sennrich et al.; the synthetic pairs then pair real sentences with noisier
  sources (which is what back-translation adds). Drawn independently, a step's monolingual sentences are mostly not
  that step's real pairs.
- Greedy decoding (Sennrich et al. use beam search with beam 12 for the back-translations; Edunov et al. 2018 found
  sampling better); online, every step, rather than once over the whole monolingual corpus.
- `back_translate=False` leaves only `translation_zh_en`: the control run that isolates what the synthetic pairs add
  (benchmarks/bench_addons.py).
- Sennrich et al. back-translate with a trained reverse model; a run that starts from scratch translates badly for
  its first hundreds of steps, and its synthetic pairs are then noise that costs the real ones (docs/addons.md).
  `start_step` holds the synthetic pairs back until the model translates (the real zh -> en pairs train from step 1,
  the monolingual sentences are drawn at every step either way, so the data order does not depend on it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from lab_models.messages import LabError
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives import translation

OBJECTIVE = "back_translation"
REVERSE_PART = "translation_zh_en"
FAMILIES = ("mass", "t5", "cove")
DIRECTIONS = ("en_zh", "zh_en")
T5_PREFIXES = {"en_zh": translation.T5_TASK_PREFIX, "zh_en": "translate Chinese to English: "}
SYNTHETIC_FLAG = "back_translated"  # extras of the back-translation batch: (B,) bool, True = a synthetic pair
KEYS = ("bt_zh_source", "bt_zh_target", "bt_en_source", "bt_en_target", "bt_real_source", "bt_real_target")
ACTIVE_KEY = "bt_active"  # Batch.addons: () bool, False before `start_step` (the synthetic pairs are skipped)


@dataclass(frozen=True)
class Settings:
    """The back-translation add-on's settings (`--set back_translation.NAME=VALUE`)."""

    sentences: int = 0  # monolingual sentences per direction per step, and real zh->en pairs (0 = batch size)
    back_translate: bool = True  # false: train only zh->en on real pairs (the control run without synthetic pairs)
    max_new_tokens: int = 48  # longest greedy back-translation, in tokens
    eval_pairs: int = 100  # held-out pairs translated both ways for BLEU and chrF at every evaluation
    start_step: int = 0  # back-translate from this step on (before it only zh->en on real pairs trains)

    def __post_init__(self):
        if not isinstance(self.back_translate, bool):
            raise LabError("back_translation.back_translate must be true or false, got {back_translate!r}",
                           back_translate=self.back_translate)
        for name, minimum in (("sentences", 0), ("max_new_tokens", 1), ("eval_pairs", 0), ("start_step", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise LabError("back_translation.{name} must be a whole number >= {minimum}, got {value!r}",
                               name=name, minimum=minimum, value=value)


# ------------------------------------------------------------------------------------------------ the batch layout


def training_examples(synthetic: Sequence[tuple[Sequence[int], Sequence[int]]],
                      real: Sequence[tuple[Sequence[int], Sequence[int]]], vocab, max_len: int) -> list[Example]:
    """The rows of one back-translation step: each (source ids, target ids) pair as a translation example, flagged
    in extras[SYNTHETIC_FLAG] (True for the back-translated pairs, then False for the real zh -> en pairs)."""
    rows = []
    for flag, pairs in ((True, synthetic), (False, real)):
        for source, target in pairs:
            example = translation.build_example(source, target, vocab, max_len)
            rows.append(dataclasses.replace(example, extras={SYNTHETIC_FLAG: torch.tensor(flag)}))
    return rows


class Codec:
    """A run's tokenizer as this objective uses it: a direction's source ids (T5's prefix + the sentence), target
    ids, and the text of decoded ids. Sources are cut to `max_len` tokens, targets to max_len - 1 (then [EOS])."""

    def __init__(self, family: str, tokenizer, vocab, max_len: int):
        if family not in FAMILIES:
            raise LabError("back-translation trains {families}, not {family!r}",
                           families=', '.join(FAMILIES), family=family)
        self.family, self.tokenizer, self.vocab, self.max_len = family, tokenizer, vocab, max_len

    def prefix(self, direction: str) -> str:
        return T5_PREFIXES[direction] if self.family == "t5" else ""

    def sources(self, direction: str, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.tokenizer.encode_batch([self.prefix(direction) + t for t in texts], add_special_tokens=False)
        return [e.ids[: self.max_len] for e in encoded]

    def targets(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids[: self.max_len - 1] for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def texts(self, rows: Sequence[Sequence[int]]) -> list[str]:
        return [self.tokenizer.decode(list(ids), skip_special_tokens=True) for ids in rows]


def _pad(rows: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    width = max(1, max((len(row) for row in rows), default=1))
    out = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(list(row), dtype=torch.long)
    return out


def _unpad(ids: torch.Tensor, pad_id: int) -> list[list[int]]:
    return [[t for t in row if t != pad_id] for row in ids.tolist()]


class MonolingualData:
    """The tokenized sentences a run draws from: monolingual Chinese and English and real zh -> en pairs from the
    training stories; the held-out pairs for validation and BLEU. `sample(generator, n)` and `validation(i, n)`
    return the tensors a batch carries in `Batch.addons` (KEYS, right-padded with [PAD])."""

    def __init__(self, codec: Codec, train_pairs=None, validation_pairs=None):
        self.codec = codec
        train_pairs = translation.synthetic_pairs("train") if train_pairs is None else tuple(train_pairs)
        validation_pairs = (translation.synthetic_pairs("validation") if validation_pairs is None
                            else tuple(validation_pairs))
        if not train_pairs:
            raise LabError("back-translation needs at least one training pair")
        self.train_pairs, self.validation_pairs = train_pairs, validation_pairs or train_pairs
        self.train = self._encode(self.train_pairs)
        self.held_out = self._encode(self.validation_pairs)

    def _encode(self, pairs) -> dict[str, list[list[int]]]:
        english, chinese = [en for en, _ in pairs], [zh for _, zh in pairs]
        return {"zh_source": self.codec.sources("zh_en", chinese), "zh_target": self.codec.targets(chinese),
                "en_source": self.codec.sources("en_zh", english), "en_target": self.codec.targets(english)}

    def _tensors(self, data, zh: list[int], en: list[int], real: list[int]) -> dict[str, torch.Tensor]:
        pad = self.codec.vocab.pad_id
        return {"bt_zh_source": _pad([data["zh_source"][i] for i in zh], pad),
                "bt_zh_target": _pad([data["zh_target"][i] for i in zh], pad),
                "bt_en_source": _pad([data["en_source"][i] for i in en], pad),
                "bt_en_target": _pad([data["en_target"][i] for i in en], pad),
                "bt_real_source": _pad([data["zh_source"][i] for i in real], pad),
                "bt_real_target": _pad([data["en_target"][i] for i in real], pad)}

    def sample(self, generator: torch.Generator, n: int) -> dict[str, torch.Tensor]:
        count = len(self.train_pairs)
        zh, en, real = (torch.randint(count, (n,), generator=generator).tolist() for _ in range(3))
        return self._tensors(self.train, zh, en, real)

    def validation(self, batch_index: int, n: int) -> dict[str, torch.Tensor]:
        count = len(self.validation_pairs)
        picks = [(batch_index * n + k) % count for k in range(n)]
        return self._tensors(self.held_out, picks, picks, picks)

    def facts(self) -> dict:
        return {"monolingual": "both sides of the synthetic corpus's training stories", "train_sentences":
                len(self.train_pairs), "held_out_pairs": len(self.validation_pairs),
                "prefixes": {d: self.codec.prefix(d) for d in DIRECTIONS} if self.codec.family == "t5" else {}}


# ------------------------------------------------------------------------------------------------ greedy decoding


def _banned(vocab, size: int, device) -> torch.Tensor:
    """(size,) bool: the ids greedy decoding never writes (every special but [EOS], and ids past the tokenizer's)."""
    banned = torch.zeros(size, dtype=torch.bool)
    for i in {vocab.pad_id, vocab.mask_id, vocab.cls_id, vocab.sep_id, vocab.bos_id, vocab.start_id, vocab.end_id,
              *vocab.sentinel_ids}:
        if 0 <= i < size:
            banned[i] = True
    banned[vocab.size:] = True
    return banned.to(device)


@torch.no_grad()
def translate(model, sources: torch.Tensor, max_new_tokens: int) -> list[list[int]]:
    """Greedy translations of the padded sources (B, T): one list of ids per row, up to its first [EOS]. The model
    is put in eval mode (no dropout) for the call and back in its mode after."""
    was_training = model.training
    model.eval()
    try:
        if model.family == "cove":
            return _translate_lstm(model, sources, max_new_tokens)
        return _translate_transformer(model, sources, max_new_tokens)
    finally:
        model.train(was_training)


def _greedy_loop(step, B: int, vocab, limit: int, device) -> list[list[int]]:
    """Feed [BOS], then each row's previous choice; `step(tokens (B, 1), k) -> logits (B, V)`."""
    token = torch.full((B, 1), vocab.bos_id, dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    chosen = []
    banned = None
    for k in range(limit):
        logits = step(token, k)  # (B, V)
        if banned is None:
            banned = _banned(vocab, logits.shape[-1], device)
        next_ids = logits.masked_fill(banned, float("-inf")).argmax(dim=-1)  # (B,)
        next_ids = torch.where(done, torch.full_like(next_ids, vocab.eos_id), next_ids)
        chosen.append(next_ids)
        done |= next_ids == vocab.eos_id
        if bool(done.all()):
            break
        token = next_ids.unsqueeze(1)
    rows = torch.stack(chosen, dim=1).tolist() if chosen else [[] for _ in range(B)]  # (B, steps)
    return [row[: row.index(vocab.eos_id)] if vocab.eos_id in row else row for row in rows]


def _translate_transformer(model, sources: torch.Tensor, max_new_tokens: int) -> list[list[int]]:
    backbone, vocab = model.backbone, model.vocab
    B, T = sources.shape
    device = sources.device
    real = sources != vocab.pad_id  # (B, T)
    encoder_mask = real[:, None, :].expand(B, T, T) | torch.eye(T, dtype=torch.bool, device=device)  # (B, T, T)
    memory = backbone.encode(sources, encoder_mask, torch.arange(T, device=device).expand(B, T))  # (B, T, H)
    cross = real[:, None, :]  # (B, 1, T): padded keys are never attended
    cache = backbone.new_cache(decoder=True)
    limit = min(max_new_tokens, backbone.config.max_positions)

    def step(token: torch.Tensor, k: int) -> torch.Tensor:
        mask = torch.ones(B, 1, k + 1, dtype=torch.bool, device=device)  # the new token sees every cached one
        position = torch.full((B, 1), k, dtype=torch.long, device=device)  # decoder input k sits at position k
        hidden = backbone.decode(token, mask, cross, position, memory, cache=cache)  # (B, 1, H)
        return backbone.lm_logits(hidden[:, -1])  # (B, V)

    return _greedy_loop(step, B, vocab, limit, device)


def _translate_lstm(model, sources: torch.Tensor, max_new_tokens: int) -> list[list[int]]:
    H, lengths, final = model.encode(sources)
    state = [model.bridge(final)]

    def step(token: torch.Tensor, k: int) -> torch.Tensor:
        logits, state[0] = model.decoder_logits(token, H, lengths, state[0])  # (B, 1, V)
        return logits[:, -1]

    return _greedy_loop(step, sources.shape[0], model.vocab, max_new_tokens, sources.device)


# ------------------------------------------------------------------------------------------------ the loss


def loss(model, batch: Batch, settings: Settings, codec: Codec) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The add-on's loss on the monolingual sentences and real pairs in `batch.addons`: (back_translation +
    translation_zh_en with its graph, the two parts)."""
    missing = [key for key in KEYS if key not in batch.addons]
    if missing:
        raise LabError("back-translation needs the batch's monolingual sentences {missing}: build the batches "
                       "with lab_models.objectives.addons (the trainer does)", missing=missing)
    pad = model.vocab.pad_id
    data = batch.addons
    synthetic: list[tuple[list[int], list[int]]] = []
    active = settings.back_translate and bool(data.get(ACTIVE_KEY, True))  # decided by the step alone (DDP)
    if active:
        for source_key, target_key, direction in (("bt_zh_source", "bt_zh_target", "en_zh"),
                                                  ("bt_en_source", "bt_en_target", "zh_en")):
            hypotheses = codec.texts(translate(model, data[source_key], settings.max_new_tokens))
            kept = [(text, target) for text, target in zip(hypotheses, _unpad(data[target_key], pad)) if text.strip()]
            sources = codec.sources(direction, [text for text, _ in kept])
            synthetic += [(source, target) for source, (_, target) in zip(sources, kept) if source and target]
    real = [(s, t) for s, t in zip(_unpad(data["bt_real_source"], pad), _unpad(data["bt_real_target"], pad)) if s]
    rows = training_examples(synthetic, real, model.vocab, codec.max_len)
    device = data["bt_real_source"].device
    if not rows:  # nothing to train on this step: exact zeros, still connected to the parameters
        zero = sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
        return zero, {**({OBJECTIVE: zero.detach()} if active else {}), REVERSE_PART: zero.detach()}
    pairs = collate(rows, pad_id=pad).to(device)
    where = pairs.targets != IGNORE_INDEX  # (B, S)
    logits = model.target_logits(pairs, where)  # (N, V)
    nll = F.cross_entropy(logits.float(), pairs.targets[where], reduction="none")  # (N,)
    is_synthetic = pairs.extras[SYNTHETIC_FLAG].bool()[:, None].expand_as(where)[where]  # (N,)
    back = nll[is_synthetic].sum() / max(int(is_synthetic.sum()), 1)
    reverse = nll[~is_synthetic].sum() / max(int((~is_synthetic).sum()), 1)
    if not active:  # before start_step, or the control run: no back_translation part at all
        return reverse, {REVERSE_PART: reverse}
    return back + reverse, {OBJECTIVE: back, REVERSE_PART: reverse}


# ------------------------------------------------------------------------------------------------ BLEU


def translation_scores(model, codec: Codec, pairs: Sequence[tuple[str, str]], batch_size: int = 32,
                       max_new_tokens: int = 48) -> dict[str, float]:
    """Greedy translations of `pairs` (english, chinese) both ways, scored against the other side with sacrebleu:
    {"bleu_en_zh", "bleu_zh_en", "chrf_en_zh", "chrf_zh_en"} (0 to 100)."""
    import sacrebleu

    if not pairs:
        return {}
    device = next(model.parameters()).device
    english, chinese = [en for en, _ in pairs], [zh for _, zh in pairs]
    outputs = {}
    for direction, sources, references, tokenize in (("en_zh", english, chinese, "zh"),
                                                    ("zh_en", chinese, english, "13a")):
        ids = codec.sources(direction, sources)
        hypotheses = []
        for start in range(0, len(ids), batch_size):
            rows = _pad([row or [codec.vocab.eos_id] for row in ids[start:start + batch_size]], codec.vocab.pad_id)
            hypotheses += codec.texts(translate(model, rows.to(device), max_new_tokens))
        outputs[f"bleu_{direction}"] = float(sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize,
                                                                 force=True).score)  # " ." is the corpus's own
        outputs[f"chrf_{direction}"] = float(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    return outputs

"""MASS: masked sequence-to-sequence pre-training.

Song, Tan, Qin, Lu, Liu (2019). MASS: Masked Sequence to Sequence Pre-training for Language Generation. ICML 2019.
arXiv:1905.02450. Reference code: microsoft/MASS (MASS/src/trainer.py and MASS-unsupNMT/src/trainer.py
`restricted_mask_sent` + `mass_step`; MASS-fairseq/fairseq/data/masked_language_pair_dataset.py).

One contiguous fragment x[u:v] of k = round(fragment_ratio * n) tokens (at least 1, at most n) is masked in the
encoder input, each token 80% [MASK], 10% random, 10% unchanged. The encoder attends bidirectionally; the decoder
predicts the fragment left to right, causally, attending the whole encoder output.

Decoder side, checked against the reference code:
- decoder input k is the original token before the one it predicts: x_{u-1}, x_u, .., x_{v-2}. The first input is
  the real token x_{u-1} (visible in the encoder anyway), or the start token ([BOS]) when the fragment begins the text
  (the reference always prepends a sentence-start token </s> at position 0; the lab adds no framing). The paper's
  figure feeds [M] as the first decoder input instead.
- decoder position ids are u, u+1, .., v-1: input k sits at the position of the token it *predicts*, in the
  encoder's numbering. This is the fairseq MASS code (`positions.append(i + pad + 1)`, i = the predicted index) and the
  paper's Figure 1 ("x3 x4 x5 as the decoder input for position 4-6"). MASS-unsupNMT writes `pos_i - 1` and so puts
  each input at its *own* encoder position, but its sentences start with </s> at position 0, so x_j sits at j + 1 and
  the decoder numbers are the same u .. v-1 as here; only the encoder's numbering is shifted by one. Counting from 0
  without a start token keeps every position id below n and gives the [BOS] of a fragment at u = 0 a position.

The two ends of fragment_ratio (paper §2.2): k = 1 is close to BERT's masked LM (one masked token predicted from the
encoder; the decoder input is a token the encoder already shows); k = n is GPT (every encoder token is masked, so the
encoder carries nothing and the decoder is a left-to-right language model over the whole text).

Worked example (the paper's 8 tokens, fragment x3..x6 = span (2, 6); seed 1 draws [MASK] for all four tokens;
`api.anatomy("mass", ["x1", .., "x8"], seed=1, span=(2, 6))`):

    encoder inputs      x1  x2  [MASK] [MASK] [MASK] [MASK] x7  x8
    encoder positions   0   1   2      3      4      5      6   7
    decoder inputs      x2  x3  x4  x5
    decoder positions   2   3   4   5
    targets             x3  x4  x5  x6

    encoder (8 x 8): all 1        decoder (4 x 4, causal)      cross (4 x 8): all 1
                                  1 0 0 0
                                  1 1 0 0
                                  1 1 1 0
                                  1 1 1 1

Settings beyond the paper: `cross_attends_masks=False` follows the reference code's `enc_mask` (the decoder's cross
attention skips encoder positions holding [MASK]; if every encoder token is [MASK] the row keeps all of them, so that
no row is empty). `fragment_at_start_prob` / `fragment_at_end_prob`: the reference code puts the fragment at the
start of the sentence 20% of the time and at its end 20% of the time (`mask_start` / `shuffle_segments`); the paper
only says the start u is random, so the defaults are 0 and u is uniform over 0 .. n-k.

Deviations, stated: learned absolute positions (arange on the encoder side); no language embeddings; no sentence-start
or end tokens around the text; one fragment per sentence (the reference's `restricted_mask_sent` can split the
fragment into several segments with --lambda_span; its default is one).

The loss (`loss(model, batch)`, objective "seq2seq"): the backbone's encoder-decoder mode. The encoder reads the
corrupted text under the "encoder" mask; the decoder reads the decoder inputs at their positions under the causal
"decoder" mask and the encoder output under the "cross" mask; cross-entropy of the decoder states against the fragment
(sparse tied head, rows with a target only). T5 uses the same `decoder_states`.

Translation (objective "translation", default weight 0; objectives/translation.py): MASS fine-tunes its encoder-
decoder on NMT with the English as the whole encoder input and the Chinese as the whole decoder side ([BOS] +
Chinese -> Chinese + [EOS], decoder positions 0..n). With it on, each step's batch holds the fragment rows and the
translation rows together (flagged in extras["translation"]), and `sequence_to_sequence_loss` adds
weight * translation loss; with "seq2seq" at 0 the model trains on translation alone.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import TARGET_ROWS, Batch, Example, collate
from lab_models.objectives import translation
from lab_models.objectives.common import BatchConfig, CorruptionRates
from lab_models.text.vocab import VocabInfo
from lab_models.objectives.losses import LossOutput, combine, empty_targets, sparse_token_loss

CHOICES: tuple[str, ...] = ("span",)
RULE = Message("encoder: bidirectional over the text with the fragment masked; decoder: causal over the fragment, "
               "input k = the token before target k; cross: every decoder row sees the encoder")


@dataclass(frozen=True)
class Settings:
    """MASS's objective settings; defaults are the paper's (k = 50% of the sentence, 80/10/10)."""

    fragment_ratio: float = 0.5  # k = round(ratio * n), at least 1: 1/n ~ BERT, 1.0 ~ GPT
    mask_prob: float = 0.8  # a fragment token in the encoder becomes [MASK] ...
    random_prob: float = 0.1  # ... or a random token (else stays unchanged)
    fragment_at_start_prob: float = 0.0  # reference code: 0.2
    fragment_at_end_prob: float = 0.0  # reference code: 0.2
    cross_attends_masks: bool = True  # False: the reference code's enc_mask (cross attention skips [MASK])

    def __post_init__(self):
        ratio = self.fragment_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 < ratio <= 1.0:
            raise LabError("fragment_ratio must be in (0, 1], got {ratio!r}", ratio=ratio)
        CorruptionRates(self.mask_prob, self.random_prob)  # raises ValueError on impossible rates
        start, end = self.fragment_at_start_prob, self.fragment_at_end_prob
        if not (0.0 <= start <= 1.0 and 0.0 <= end <= 1.0 and start + end <= 1.0 + 1e-9):
            raise LabError("fragment_at_start_prob and fragment_at_end_prob must be in [0, 1] and sum to at most "
                           "1, got {start} and {end}", start=start, end=end)
        if not isinstance(self.cross_attends_masks, bool):
            raise LabError("cross_attends_masks must be True or False, got {cross_attends_masks!r}",
                           cross_attends_masks=self.cross_attends_masks)


def decoder_start_id(settings: Settings, vocab: VocabInfo) -> int:
    """The id MASS's decoder starts from: [BOS] (its first input is the token before the fragment, or [BOS] for a
    fragment at u = 0; see `build_example`)."""
    return vocab.bos_id


def fragment_length(n: int, ratio: float) -> int:
    """round(ratio * n) (half to even), at least 1, at most n. n=8, 0.5: 4; n=5: 2."""
    return min(n, max(1, round(ratio * n)))


def corrupt_each(tokens: torch.Tensor, mask_prob: float, random_prob: float, vocab: VocabInfo,
                 generator: torch.Generator) -> torch.Tensor:
    """80/10/10 drawn independently for every token (the reference's `mask_word`), vectorised."""
    fate = torch.rand(tokens.shape, generator=generator)  # (k,)
    pool = torch.tensor(vocab.random_ids, dtype=torch.long)
    randoms = pool[torch.randint(len(pool), tokens.shape, generator=generator)]  # (k,)
    out = torch.where(fate < mask_prob + random_prob, randoms, tokens)
    return torch.where(fate < mask_prob, torch.full_like(tokens, vocab.mask_id), out)


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    settings: Settings = cfg.settings
    n = token_ids.numel()
    if n < 1:
        raise LabError("MASS needs at least 1 token.")
    k = fragment_length(n, settings.fragment_ratio)
    where = torch.rand((), generator=generator).item()
    if where < settings.fragment_at_start_prob:
        start = 0
    elif where < settings.fragment_at_start_prob + settings.fragment_at_end_prob:
        start = n - k
    else:
        start = int(torch.randint(n - k + 1, (), generator=generator))
    return {"span": (start, start + k)}


def _check_span(n: int, span) -> tuple[int, int]:
    if isinstance(span, torch.Tensor):
        span = span.tolist()
    if not isinstance(span, (list, tuple)) or len(span) != 2:
        raise LabError("span must be one (start, end) pair of token indices, got {span!r}", span=span)
    try:
        start, end = (operator.index(v) for v in span)
    except TypeError:
        raise LabError("span must hold two integers (start, end), got {span!r}", span=span) from None
    if not 0 <= start < end <= n:
        raise LabError("span {span} must be a non-empty half-open range inside the {n} tokens "
                       "(0 <= start < end <= {n}).", span=(start, end), n=n)
    return start, end


def validate_choices(n: int, choices: dict) -> dict:
    """Check `span`: one non-empty half-open (start, end) inside range(n)."""
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        raise LabError("MASS takes the choice span; got {unknown}", unknown=', '.join(unknown))
    return {"span": _check_span(n, choices["span"])} if "span" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    settings: Settings = cfg.settings
    n = token_ids.numel()
    u, v = _check_span(n, choices["span"])
    s = v - u  # decoder length
    encoder_ids = token_ids.clone()
    encoder_ids[u:v] = corrupt_each(token_ids[u:v], settings.mask_prob, settings.random_prob, cfg.vocab,
                                    generator)  # (n,)
    first = token_ids[u - 1:u] if u > 0 else torch.tensor([cfg.vocab.bos_id], dtype=torch.long)  # (1,)
    decoder_ids = torch.cat([first, token_ids[u:v - 1]])  # (s,): the token before each target
    cross = torch.ones(s, n, dtype=torch.bool)  # (s, n)
    if not settings.cross_attends_masks:
        visible = encoder_ids != cfg.vocab.mask_id  # (n,)
        if visible.any():
            cross = visible.unsqueeze(0).expand(s, n).clone()
    return Example(
        input_ids=encoder_ids,  # (n,)
        attention={"encoder": torch.ones(n, n, dtype=torch.bool),  # (n, n)
                   "decoder": torch.ones(s, s, dtype=torch.bool).tril(),  # (s, s) causal
                   "cross": cross},  # (s, n)
        position_ids=torch.arange(n),  # (n,)
        targets=token_ids[u:v].clone(),  # (s,): aligned with the decoder inputs
        decoder_input_ids=decoder_ids,
        decoder_position_ids=torch.arange(u, v),  # (s,): the position of the token each input predicts
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = list(token_ids)
    return collate([build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows],
                   pad_id=cfg.vocab.pad_id)


# ----------------------------------------------------------------------------------------------------------------------
# The encoder-decoder loss (T5 uses these too).

ENCODER_DECODER_STREAMS = ("encoder", "decoder", "cross")


def decoder_states(model, batch: Batch) -> torch.Tensor:
    """Encode `input_ids`, then decode `decoder_input_ids` against the encoder output: (B, S, H), aligned with
    `batch.targets`."""
    missing = [k for k in ENCODER_DECODER_STREAMS if k not in batch.attention]
    if missing or batch.decoder_input_ids is None or batch.decoder_position_ids is None:
        raise LabError("an encoder-decoder loss needs the streams encoder, decoder and cross and the decoder "
                       "inputs, but the batch has {attention}: was it built by another family's "
                       "batch builder?", attention=sorted(batch.attention))
    backbone = model.backbone
    memory = backbone.encode(batch.input_ids, batch.attention["encoder"], batch.position_ids,
                             batch.segment_ids)  # (B, T, H)
    return backbone.decode(batch.decoder_input_ids, batch.attention["decoder"], batch.attention["cross"],
                           batch.decoder_position_ids, memory)  # (B, S, H)


def prediction_states(model, batch: Batch) -> torch.Tensor:
    """The decoder states (B, S, H): row k predicts targets[:, k]."""
    return decoder_states(model, batch)


def sequence_to_sequence_loss(model, batch: Batch, objective: str) -> LossOutput:
    """Cross-entropy of the decoder states against `batch.targets`, as the objective `objective` (the family's
    denoising objective), plus the "translation" objective when it is on and the batch has translation rows
    (objectives/translation.py: rows flagged in extras["translation"]; each objective is a mean over its own rows'
    targets). Bits per byte read the denoising targets when that objective is on, else the translation targets."""
    weights = model.objective_weights
    denoising_targets, translation_targets = translation.split_targets(batch)
    wants_translation = weights.get(translation.OBJECTIVE, 0.0) > 0
    if weights[objective] == 0 and (translation_targets is None or not wants_translation):
        raise LabError("{family} trains only translation here ({objective} has weight 0), but the batch has "
                       "no translation rows: build it with lab_models.objectives.translation (extras"
                       "[{row_flag!r}])", family=model.family, objective=objective, row_flag=translation.ROW_FLAG)
    hidden = decoder_states(model, batch)  # (B, S, H)
    parts: dict[str, torch.Tensor] = {}
    target_ids, target_nll = empty_targets(hidden.device)
    if weights[objective] > 0:
        # without translation rows the denoising targets are batch.targets, whose rows the engine found on the host
        rows = batch.extras.get(TARGET_ROWS) if translation_targets is None else None
        parts[objective], target_ids, target_nll, _ = sparse_token_loss(model.backbone, hidden, denoising_targets,
                                                                        rows=rows)
    if wants_translation and translation_targets is not None:
        parts[translation.OBJECTIVE], ids, nll, _ = sparse_token_loss(model.backbone, hidden, translation_targets)
        if objective not in parts:
            target_ids, target_nll = ids, nll
    return combine(weights, parts, target_ids, target_nll)


def loss(model, batch: Batch) -> LossOutput:
    """seq2seq: -log p(x_u .. x_{v-1} | the text with x_u .. x_{v-1} masked), left to right in the decoder; plus,
    when on, translation: -log p(Chinese + [EOS] | English) on the batch's translation rows."""
    return sequence_to_sequence_loss(model, batch, "seq2seq")

"""MPNet: masked and permuted language modeling with position compensation.

Song, Tan, Qin, Lu, Liu (2020). MPNet: Masked and Permuted Pre-training for Language Understanding. NeurIPS 2020.
arXiv:2004.09297. Reference code: microsoft/MPNet, pretraining/fairseq/models/masked_permutation_net.py
(`make_query_and_content_mask`) and tasks/masked_permutation_lm.py (`MaskedDataset.collater`).

A factorization order z is drawn; the last b = num_predict positions of z are predicted, in that order (as XLNet),
but one [MASK] slot per predicted token is appended, carrying that token's *position*. So every prediction sees the
positions of all n tokens, also of the ones not predicted yet (position compensation: it knows how long the sentence
is, as BERT does), while it conditions on the earlier predicted tokens (as XLNet does, unlike BERT).

Layout: inputs = x_0 .. x_{n-1} + m_0 .. m_{b-1}; slot m_s stands for the s-th predicted position p_s and has
position id p_s. Its token is [MASK] 80%, a random token 10%, unchanged 10% (the reference's `mask_perm`).
Write t(p) for the index of predicted position p among the predicted ones (0..b-1).

- content stream ((n+b) x (n+b)):
  a non-predicted token sees all non-predicted tokens and all slots, no predicted content;
  predicted content p sees all non-predicted tokens, predicted content q with t(q) <= t(p), slots m_s with s > t(p);
  slot m_s sees all non-predicted tokens and all slots, no predicted content.
- query stream (b x (n+b)), row s (sits at slot m_s, predicts x_{p_s}):
  all non-predicted tokens, predicted content q with t(q) < s, slots m_u with u >= s.
  So query s sees position p_s only through its own slot (a [MASK]) and never the content of its own target.
- query_slots = [n, .., n+b-1]; targets align with inputs: IGNORE for the first n, the predicted tokens at the slots.
  The query stream starts from the slot's token and position (the reference feeds the same masked tokens twice:
  once as content slots, once as the query stream).

Checked against `make_query_and_content_mask(tensor, a, b)` of microsoft/MPNet (a = n, b = num_predict): its query
mask is [ones(b, n-b) | 1 - triu(ones(b, b)) | triu(ones(b, b))] and its content mask is
[ones(n+b, n-b) | (zeros(n-b, b); tril(ones(b, b)); zeros(b, b)) | 1 - that middle block], with 1 = may attend before
its final `.eq(0)`. The rules above are exactly those blocks; the only difference is the layout (see Deviations).

Worked example (the paper's Figure 1(c); order = [0, 2, 4, 3, 5, 1], num_predict = 3: predicted x3, x5, x1 in that
order; `api.anatomy("mpnet", tokens, seed=1, order=[0, 2, 4, 3, 5, 1], num_predict=3)`; seed 1 draws [MASK] for all
three slot tokens):

    index        0   1     2    3     4     5      6       7       8
    inputs       x0  x1    x2   x3    x4    x5     [MASK]  [MASK]  [MASK]
    positions    0   1     2    3     4     5      3       5       1
    targets      -   -     -    -     -     -      x3      x5      x1
    query_slots  6 7 8

    content         x0 x1 x2 x3 x4 x5 m0 m1 m2      query         x0 x1 x2 x3 x4 x5 m0 m1 m2
    x0 (context)    1  0  1  0  1  0  1  1  1       q0 (@m0, x3)  1  0  1  0  1  0  1  1  1
    x1 (t=2)        1  1  1  1  1  1  0  0  0       q1 (@m1, x5)  1  0  1  1  1  0  0  1  1
    x2 (context)    1  0  1  0  1  0  1  1  1       q2 (@m2, x1)  1  0  1  1  1  1  0  0  1
    x3 (t=0)        1  0  1  1  1  0  0  1  1
    x4 (context)    1  0  1  0  1  0  1  1  1
    x5 (t=1)        1  0  1  1  1  1  0  0  1
    m0              1  0  1  0  1  0  1  1  1
    m1              1  0  1  0  1  0  1  1  1
    m2              1  0  1  0  1  0  1  1  1

q1 predicts x5 (position 5) from x0 x2 x4 (context), x3 (predicted before it), and the slots m1 (position 5, its own
[MASK]) and m2 (position 1): all six positions, but not x5 itself.

Settings: `input_mode` follows the reference's --input-mode:
- "mpnet": the default, above.
- "xlnet" (the reference's "plm"): no slots, so no position compensation. Content stream n x n: the context sees the
  context; predicted content p sees the context and predicted q with t(q) <= t(p). Query stream b x n: row s sees the
  context and predicted q with t(q) < s. query_slots = the predicted positions; the query stream starts from [MASK] at
  the predicted position (the reference feeds mask tokens there), never from the token at the slot.
- "mlm": no permutation. The predicted positions are corrupted 80/10/10 in place and one bidirectional "self" stream
  sees everything: BERT's masked LM.

Deviations, stated:
- The reference physically permutes the tokens (non-predicted first, then predicted in order, then slots). The lab keeps
  x_0..x_{n-1} in text order and appends the slots. Attention is permutation-equivariant once every token carries its
  position id, so this is the same computation with rows and columns reordered, and it is easier to read.
- Token-level permutation; the reference can permute whole words / n-grams (`--mask-whole-words`, `span_perm`).
- num_predict is at least 1 (the reference, when round(0.15 n) == 0, predicts everything with loss weight 0).
- No <s> prepended (the lab adds no framing).
- "xlnet" mode: the query stream starts from the learned vector w at the predicted position (the model is built with
  `query_stream="learned"`), where the reference feeds the [MASK] embedding. In that mode no [MASK] appears in the
  content stream, so w plays exactly the part of a [MASK] embedding; the only difference is that w is not also the
  output row of [MASK] in the tied vocabulary matrix. (The backbone's "token" start would read the token at the slot,
  which in this mode is the target itself: the leakage test shows that leak.)

Positions: the model (lab_models/models/family.py) has learned absolute positions and, as `mpnet_rel_base` and the
released mpnet-base, a bucketed relative position bias shared by all layers. Both read the position ids above, so a slot
m_s is at relative distance p_s - p from a token at position p, exactly as the reference computes its bias from the
permuted positions (`encode_relative_emb(positions)`, the query rows reusing the slots' rows).

The loss (`loss(model, batch)`, objective "mplm"): cross-entropy of the query stream at its target rows ("mpnet" and
"xlnet" modes, through `xlnet.target_query_rows`), or of the one stream at the corrupted positions ("mlm"); the
vocabulary head is RoBERTa's (dense, GeLU, LayerNorm, tied matrix, bias), projected only at the target rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.common import BatchConfig, CorruptionRates, count_to_mask
from lab_models.text.vocab import VocabInfo
from lab_models.objectives.losses import LossOutput, combine, run_backbone, sparse_token_loss
from lab_models.objectives.xlnet import (check_length, check_num_predict, check_order, check_streams, run_query_stream,
                                         scatter_to_targets)

CHOICES: tuple[str, ...] = ("order", "num_predict")
RULE = Message("each query sees the context, the tokens predicted before it, and the [MASK] slots of itself and "
               "later predictions: every position, never its own token")
INPUT_MODES = ("mpnet", "xlnet", "mlm")

# Roles of the n + b input indices, used to build both streams with tensor ops.
_CONTEXT, _PREDICTED, _SLOT = 0, 1, 2


@dataclass(frozen=True)
class Settings:
    """MPNet's objective settings; defaults are the paper's (15% predicted, 80/10/10 slot tokens)."""

    predict_rate: float = 0.15  # num_predict = round(n * rate), at least 1, at most n - 1
    mask_prob: float = 0.8  # a slot token is [MASK] ...
    random_prob: float = 0.1  # ... or a random token (else the original token)
    input_mode: str = "mpnet"  # "mpnet" | "xlnet" (the reference's "plm") | "mlm"

    def __post_init__(self):
        if isinstance(self.predict_rate, bool) or not isinstance(self.predict_rate, (int, float)) \
                or not 0.0 < self.predict_rate < 1.0:
            raise LabError("predict_rate must be in (0, 1), got {predict_rate!r}", predict_rate=self.predict_rate)
        CorruptionRates(self.mask_prob, self.random_prob)  # raises ValueError on impossible rates
        if self.input_mode not in INPUT_MODES:
            raise LabError("input_mode must be one of {input_modes}, got {input_mode!r}",
                           input_modes=', '.join(INPUT_MODES), input_mode=self.input_mode)


def default_num_predict(n: int, rate: float) -> int:
    """round(n * rate) (half to even), at least 1, at most n - 1. n=6: 1; n=512: 77."""
    return min(n - 1, count_to_mask(n, rate))


def corrupt_each(tokens: torch.Tensor, mask_prob: float, random_prob: float, vocab: VocabInfo,
                 generator: torch.Generator) -> torch.Tensor:
    """80/10/10 drawn independently for every token (the reference's `mask_perm`), vectorised."""
    fate = torch.rand(tokens.shape, generator=generator)  # (b,)
    pool = torch.tensor(vocab.random_ids, dtype=torch.long)
    randoms = pool[torch.randint(len(pool), tokens.shape, generator=generator)]  # (b,)
    out = torch.where(fate < mask_prob + random_prob, randoms, tokens)
    return torch.where(fate < mask_prob, torch.full_like(tokens, vocab.mask_id), out)


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    n = token_ids.numel()
    check_length(n, "MPNet")
    order = torch.randperm(n, generator=generator)  # (n,)
    return {"order": order, "num_predict": default_num_predict(n, cfg.settings.predict_rate)}


def validate_choices(n: int, choices: dict) -> dict:
    """Check `order` (a permutation of range(n)) and `num_predict` (1..n-1); either may be left out."""
    check_length(n, "MPNet")
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        raise LabError("MPNet takes the choices {choices}; got {unknown}",
                       choices=', '.join(CHOICES), unknown=', '.join(unknown))
    out = {}
    if "order" in choices:
        out["order"] = check_order(n, choices["order"])
    if "num_predict" in choices:
        out["num_predict"] = check_num_predict(n, choices["num_predict"])
    return out


def two_stream_masks(role: torch.Tensor, step: torch.Tensor, num_predict: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(content, query) from each index's role (context / predicted content / slot) and step (t for predicted content,
    s for slot m_s). Shapes (L, L) and (b, L) where L = len(role)."""
    col_role, col_step = role.unsqueeze(0), step.unsqueeze(0)  # (1, L)
    row_role, row_step = role.unsqueeze(1), step.unsqueeze(1)  # (L, 1)
    content = ((col_role == _CONTEXT)
               | ((col_role == _PREDICTED) & (row_role == _PREDICTED) & (col_step <= row_step))
               | ((col_role == _SLOT) & ((row_role != _PREDICTED) | (col_step > row_step))))  # (L, L)
    s = torch.arange(num_predict).unsqueeze(1)  # (b, 1): query row s
    query = ((col_role == _CONTEXT)
             | ((col_role == _PREDICTED) & (col_step < s))
             | ((col_role == _SLOT) & (col_step >= s)))  # (b, L)
    return content, query


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    settings: Settings = cfg.settings
    n = token_ids.numel()
    check_length(n, "MPNet")
    order = check_order(n, choices["order"])  # (n,)
    b = check_num_predict(n, choices["num_predict"])
    predicted = order[n - b:]  # (b,): predicted positions in prediction order
    ignore = torch.full((n,), IGNORE_INDEX, dtype=torch.long)

    if settings.input_mode == "mlm":  # BERT: corrupt in place, one bidirectional stream
        inputs = token_ids.clone()
        inputs[predicted] = corrupt_each(token_ids[predicted], settings.mask_prob, settings.random_prob, cfg.vocab,
                                         generator)
        targets = ignore.clone()
        targets[predicted] = token_ids[predicted]
        return Example(input_ids=inputs, attention={"self": torch.ones(n, n, dtype=torch.bool)},
                       position_ids=torch.arange(n), targets=targets)

    if settings.input_mode == "xlnet":  # the reference's "plm": two streams over the n tokens, no slots
        role = torch.full((n,), _CONTEXT, dtype=torch.long)
        role[predicted] = _PREDICTED
        step = torch.full((n,), -1, dtype=torch.long)
        step[predicted] = torch.arange(b)
        content, query = two_stream_masks(role, step, b)  # (n, n), (b, n)
        targets = ignore.clone()
        targets[predicted] = token_ids[predicted]
        return Example(input_ids=token_ids.clone(), attention={"content": content, "query": query},
                       position_ids=torch.arange(n), targets=targets, query_slots=predicted.clone())

    slots = corrupt_each(token_ids[predicted], settings.mask_prob, settings.random_prob, cfg.vocab, generator)  # (b,)
    role = torch.cat([torch.full((n,), _CONTEXT, dtype=torch.long), torch.full((b,), _SLOT, dtype=torch.long)])
    role[predicted] = _PREDICTED  # (n + b,)
    step = torch.full((n + b,), -1, dtype=torch.long)
    step[predicted] = torch.arange(b)
    step[n:] = torch.arange(b)  # (n + b,)
    content, query = two_stream_masks(role, step, b)  # (n+b, n+b), (b, n+b)
    return Example(
        input_ids=torch.cat([token_ids, slots]),  # (n + b,)
        attention={"content": content, "query": query},
        position_ids=torch.cat([torch.arange(n), predicted]),  # (n + b,): slot s carries position p_s
        targets=torch.cat([ignore, token_ids[predicted]]),  # (n + b,)
        query_slots=torch.arange(n, n + b),  # (b,)
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = list(token_ids)
    return collate([build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows],
                   pad_id=cfg.vocab.pad_id)


def two_streams(settings: Settings) -> bool:
    """Whether `input_mode` builds two streams (mpnet, xlnet) or one (mlm)."""
    return settings.input_mode != "mlm"


def prediction_states(model, batch: Batch) -> torch.Tensor:
    """The hidden states that predict `batch.targets`, aligned with them: (B, L, H) (L = n + b in "mpnet" mode).
    Two streams: the query stream at the target positions (zeros elsewhere); "mlm": the one stream."""
    two = two_streams(model.settings)
    check_streams(batch, two, "mpnet")
    if not two:
        return run_backbone(model.backbone, batch)  # (B, T, H)
    g, slots, _, kept = run_query_stream(model, batch)
    return scatter_to_targets(batch, g, slots, kept)


def loss(model, batch: Batch) -> LossOutput:
    """mplm: -log p(x_{z_t} | x_{z_<t}, [MASK] slots of every predicted position) from the query stream ("mpnet"
    and "xlnet" modes), or BERT's masked LM from the one stream ("mlm"); target rows only."""
    two = two_streams(model.settings)
    check_streams(batch, two, "mpnet")
    if two:
        g, _, targets, _ = run_query_stream(model, batch)  # (B, K, H), (B, K)
        mplm, target_ids, target_nll, _ = sparse_token_loss(model.backbone, g, targets)
    else:
        hidden = run_backbone(model.backbone, batch)  # (B, T, H)
        mplm, target_ids, target_nll, _ = sparse_token_loss(model.backbone, hidden, batch.targets)
    return combine(model.objective_weights, {"mplm": mplm}, target_ids, target_nll)


def max_length(n: int, settings: Settings) -> int:
    """The longest input an n-token row becomes: n plus one [MASK] slot per predicted token in "mpnet" mode, n
    otherwise. n=64 (defaults): 74."""
    return n + (default_num_predict(n, settings.predict_rate) if settings.input_mode == "mpnet" else 0)

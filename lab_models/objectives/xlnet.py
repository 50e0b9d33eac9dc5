"""XLNet: the permutation language model with two-stream attention.

Yang, Dai, Yang, Carbonell, Salakhutdinov, Le (2019). XLNet: Generalized Autoregressive Pretraining for Language
Understanding. NeurIPS 2019. arXiv:1906.08237.

The text is not corrupted. A factorization order z (a permutation of range(n)) is drawn, and token z_t is predicted
from the tokens z_<t. With rank(j) = the index of j in z:

- content stream: i may attend j iff rank(j) <= rank(i) (it sees its own token; it is the "memory" the others read);
- query stream:   i may attend j iff rank(j) <  rank(i) (it knows its position, never its own token).

Partial prediction (paper §2.3): only the last `num_predict` positions of the order are targets, num_predict =
max(1, round(n / K)) with K = 6, so every target sees all the context and no context token sees a target.

Every row of both n x n matrices follows the rule literally, also the rows of non-target positions; the query row of
rank 0 is therefore empty. The model reads the query stream only at target rows (`targets != IGNORE_INDEX`): it must
not use an empty row (an all-False row makes SDPA return NaN, so compute the query stream only for target rows, or
unblock empty non-target rows before calling SDPA). The query stream starts from a learned vector w, never from the
token at `query_slots[r]` (that would be the target); it knows where it is through the position of its slot: with
XLNet's relative attention (the default) through the distances from that position to every key, with learned absolute
positions (`--model relative_attention=none`) through the slot's position embedding added to w.

Worked example (the paper's "New York is a city" idea; order = [3, 2, 5, 4, 0, 1], num_predict = 2, no randomness):

    inputs      New  York  is   a    big  city
    positions   0    1     2    3    4    5
    rank        4    5     1    0    3    2        (order 3, 2, 5, 4, 0, 1: "a" first, "York" last)
    targets     New  York  -    -    -    -       (the last 2 of the order)
    query_slots 0 1 2 3 4 5

    content (i sees j iff rank j <= rank i)     query (i sees j iff rank j < rank i)
    New   1 0 1 1 1 1                           New   0 0 1 1 1 1
    York  1 1 1 1 1 1                           York  1 0 1 1 1 1
    is    0 0 1 1 0 0                           is    0 0 0 1 0 0
    a     0 0 0 1 0 0                           a     0 0 0 0 0 0   <- rank 0: empty, carries no target
    big   0 0 1 1 1 1                           big   0 0 1 1 0 1
    city  0 0 1 1 0 1                           city  0 0 1 1 0 0

"York" is predicted from New, is, a, big, city (its query row) and never from itself; "New" sees the context but not
"York", which comes later in the order: log p(New | is a big city) + log p(York | New, is a big city).

Settings:
- `two_stream=False` is the "leak" demonstration: one stream "self" equal to the content mask, with the same targets.
  Every target then attends its own token, so the model can copy it and the loss collapses to ~0 while learning
  nothing. This is exactly why the paper introduces the query stream.
- `bidirectional_context=True` follows the official code (`_local_perm` in zihangdai/xlnet data_utils.py): all context
  (non-target) tokens share the lowest rank, so they see each other bidirectionally and still never see a target;
  targets keep their ranks. This is the official implementation's deviation from the paper's rule. Its query rows of
  context positions are then all empty (they carry no target; the official code fills them with the context).

Deviations from the paper, stated:
- Positions are the paper's: Transformer-XL's relative attention (nn/relative_attention.py), whose distances come from
  `position_ids = arange(n)`, the natural order of the sequence (the permutation lives in the masks only, as in the
  paper). Transformer-XL's segment recurrence (memory across segments) is not implemented.
- Targets are the last num_predict positions of a token-level order (the paper's §2.3). The official code instead picks
  targets by span-based masking (`_sample_mask`) inside permutation blocks; that is not implemented.
- No [SEP]/[CLS] framing and no two-segment input (the lab's objectives add no framing): every pair of tokens is in
  the same segment, so the relative segment term is the same for every key of a row and learns nothing in
  pretraining; its vectors first learn when fine-tuning on sentence pairs (segments 0 and 1).

The loss (`loss(model, batch)`, objective "plm"): cross-entropy of the query stream g at the target rows, projected
with the tied embedding matrix and a bias (XLNet's `lm_loss`). Only the query rows that carry a target go through the
model (`target_query_rows`): the others never reach a loss, and the content stream h, which every query row reads, is
computed in full anyway. With `two_stream=False` the batch has one "self" stream and the content stream itself
predicts: the leak. `model.target_logits(batch)` gives the logits of the same rows, aligned with `batch.targets`.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.losses import LossOutput, combine, run_backbone, sparse_token_loss

CHOICES: tuple[str, ...] = ("order", "num_predict")
RULE = Message("content: i sees j iff rank(j) ≤ rank(i); query: i sees j iff rank(j) < rank(i); only the last "
               "num_predict positions of the order are predicted, from the query stream")


@dataclass(frozen=True)
class Settings:
    """XLNet's objective settings; defaults are the paper's."""

    k: float = 6  # K: about 1/K of the tokens are predicted (§2.3; the pretraining hyperparameters use K = 6)
    two_stream: bool = True  # False: one "self" stream = content mask; each target sees itself (the leak demo)
    bidirectional_context: bool = False  # True: the official code's `_local_perm` (context shares the lowest rank)

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, (int, float)) or not self.k >= 1:
            raise LabError("k (predict about n/k tokens) must be a number >= 1, got {k!r}", k=self.k)
        for name in ("two_stream", "bidirectional_context"):
            if not isinstance(getattr(self, name), bool):
                raise LabError("{name} must be True or False, got {value!r}", name=name, value=getattr(self, name))


def default_num_predict(n: int, k: float) -> int:
    """max(1, round(n / k)) capped at n - 1 (at least one context token). For n=6, k=6: 1; n=512: 85."""
    return min(n - 1, max(1, round(n / k)))


def as_int_list(value, name: str) -> list[int]:
    """A list/tuple/1-D tensor of integers as a plain list of ints; ValueError otherwise."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 1 or value.is_floating_point() or value.dtype == torch.bool:
            raise LabError("{name} must be a flat list of integers, got a tensor of shape {value_shape}",
                           name=name, value_shape=tuple(value.shape))
        return value.tolist()
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):  # e.g. a NumPy array
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise LabError("{name} must be a list of integers, got {value!r}", name=name, value=value)
    try:
        return [operator.index(v) for v in value]
    except TypeError:
        raise LabError("{name} must be a list of integers, got {value!r}", name=name, value=list(value)) from None


def check_length(n: int, family: str = "XLNet") -> None:
    if n < 2:
        raise LabError("{family} needs at least 2 tokens (one to predict, one to predict it from), got {n}.",
                       family=family, n=n)


def check_order(n: int, order) -> torch.Tensor:
    values = as_int_list(order, "order")
    if len(values) != n:
        raise LabError("order must list each of the {n} token indices once; it has {n_values} entries.",
                       n=n, n_values=len(values))
    if sorted(values) != list(range(n)):
        raise LabError("order must be a permutation of range({n}) (each index 0..{last_index} exactly once), "
                       "got {values}", n=n, last_index=n - 1, values=list(values))
    return torch.tensor(values, dtype=torch.long)


def check_num_predict(n: int, num_predict) -> int:
    if isinstance(num_predict, torch.Tensor) and num_predict.numel() == 1 and not num_predict.is_floating_point():
        num_predict = int(num_predict)
    try:
        if isinstance(num_predict, bool):
            raise TypeError
        num_predict = operator.index(num_predict)
    except TypeError:
        raise LabError("num_predict must be an integer, got {num_predict!r}", num_predict=num_predict) from None
    if not 1 <= num_predict <= n - 1:
        raise LabError("num_predict must be between 1 and {last_index} for {n} tokens (at least one token must stay "
                       "as context), got {num_predict}", last_index=n - 1, n=n, num_predict=num_predict)
    return num_predict


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """A uniformly random factorization order and the default number of predicted positions."""
    n = token_ids.numel()
    check_length(n)
    order = torch.randperm(n, generator=generator)  # (n,)
    return {"order": order, "num_predict": default_num_predict(n, cfg.settings.k)}


def validate_choices(n: int, choices: dict) -> dict:
    """Check `order` (a permutation of range(n)) and `num_predict` (1..n-1); either may be left out."""
    check_length(n)
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        raise LabError("XLNet takes the choices {choices}; got {unknown}",
                       choices=', '.join(CHOICES), unknown=', '.join(unknown))
    out = {}
    if "order" in choices:
        out["order"] = check_order(n, choices["order"])
    if "num_predict" in choices:
        out["num_predict"] = check_num_predict(n, choices["num_predict"])
    return out


def permutation_streams(rank: torch.Tensor, is_target: torch.Tensor, bidirectional_context: bool
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(content, query), each (n, n) bool, from the ranks. With `bidirectional_context`, every context position gets
    rank -1 (below all targets), as in the official `_local_perm`."""
    if bidirectional_context:
        rank = torch.where(is_target, rank, torch.full_like(rank, -1))  # (n,)
    content = rank.unsqueeze(0) <= rank.unsqueeze(1)  # (n, n): [i, j] = rank j <= rank i
    query = rank.unsqueeze(0) < rank.unsqueeze(1)  # (n, n): [i, j] = rank j < rank i
    return content, query


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    settings: Settings = cfg.settings
    n = token_ids.numel()
    check_length(n)
    order = check_order(n, choices["order"])  # (n,)
    num_predict = check_num_predict(n, choices["num_predict"])
    rank = torch.empty(n, dtype=torch.long)
    rank[order] = torch.arange(n)  # (n,): rank[j] = step at which j is predicted
    is_target = rank >= n - num_predict  # (n,): the last num_predict of the order
    content, query = permutation_streams(rank, is_target, settings.bidirectional_context)
    targets = torch.where(is_target, token_ids, torch.full_like(token_ids, IGNORE_INDEX))  # (n,)
    if not settings.two_stream:
        return Example(input_ids=token_ids.clone(), attention={"self": content}, position_ids=torch.arange(n),
                       targets=targets)
    return Example(
        input_ids=token_ids.clone(),  # (n,): no corruption
        attention={"content": content, "query": query},  # (n, n) each
        position_ids=torch.arange(n),  # (n,)
        targets=targets,  # (n,)
        query_slots=torch.arange(n),  # (n,): query row i sits at position i
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = list(token_ids)
    return collate([build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows],
                   pad_id=cfg.vocab.pad_id)


# ----------------------------------------------------------------------------------------------------------------------
# The two-stream loss (MPNet uses these too).


def target_query_rows(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The query-stream rows that carry a target, compacted to the front of each example.

    Query row r of example b sits at input position `query_slots[b, r]` and predicts `targets[b, query_slots[b, r]]`.
    Rows without a target (XLNet's context positions, padding) are dropped, so the query stream runs on
    K = max(targets per example) rows instead of Q. `collate` points padded query rows at slot 0, and the slots of one
    example are distinct, so a repeated slot 0 is padding and is dropped too.

    Returns (slots (B, K) long, query mask (B, K, T) bool, targets (B, K) long, kept (B, K) bool). Filler rows
    (kept False) sit at slot 0 with an empty mask and target IGNORE_INDEX; the backbone zeroes their attention output.

    Example: the worked example above (targets at positions 0 and 1, query_slots 0..5) keeps query rows 0 and 1,
    slots [[0, 1]], targets [[New, York]].
    """
    if batch.query_slots is None or "query" not in batch.attention or "content" not in batch.attention:
        raise LabError("a two-stream loss needs the 'content' and 'query' streams and query_slots, but the batch "
                       "has {attention}: was it built by another family's batch builder?",
                       attention=sorted(batch.attention))
    slots = batch.query_slots  # (B, Q)
    query = batch.attention["query"]  # (B, Q, T)
    T = query.shape[2]
    targets = batch.targets.gather(1, slots)  # (B, Q): what each query row predicts
    at_zero = slots == 0
    repeated = at_zero & (torch.cumsum(at_zero.long(), dim=1) > 1)  # (B, Q): padding's repeats of slot 0
    keep = (targets != IGNORE_INDEX) & ~repeated  # (B, Q)
    K = max(1, int(keep.sum(dim=1).max()))  # at least one row, so the query stream is always in the graph
    order = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :K]  # (B, K): kept rows first, in order
    kept = keep.gather(1, order)  # (B, K)
    slots_k = torch.where(kept, slots.gather(1, order), torch.zeros_like(order))  # (B, K)
    mask_k = query.gather(1, order.unsqueeze(-1).expand(-1, -1, T)) & kept.unsqueeze(-1)  # (B, K, T)
    targets_k = torch.where(kept, targets.gather(1, order), torch.full_like(order, IGNORE_INDEX))  # (B, K)
    return slots_k, mask_k, targets_k, kept


def run_query_stream(model, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Both streams, the query stream on the target rows only: (g (B, K, H), slots, targets, kept), each (B, K)."""
    slots, query_mask, targets, kept = target_query_rows(batch)
    _, g = model.backbone.forward_two_stream(batch.input_ids, batch.attention["content"], query_mask,
                                             batch.position_ids, slots, batch.segment_ids)  # (B, T, H), (B, K, H)
    return g, slots, targets, kept


def scatter_to_targets(batch: Batch, g: torch.Tensor, slots: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """Query-stream rows (B, K, H) put at the input positions whose targets they predict: (B, T, H), 0 elsewhere."""
    B, T = batch.targets.shape
    out = g.new_zeros(B, T, g.shape[-1])  # (B, T, H)
    rows = torch.arange(B, device=g.device).unsqueeze(1).expand_as(slots)  # (B, K)
    out[rows[kept], slots[kept]] = g[kept]
    return out


def check_streams(batch: Batch, two_stream: bool, family: str) -> None:
    """ValueError when the batch's streams do not match what the model was built for."""
    has_query = "query" in batch.attention
    if has_query != two_stream:
        got = (Message("two streams (content, query)") if has_query
               else Message("the streams {streams}", streams=sorted(batch.attention)))
        if two_stream:
            raise LabError("this {family} model reads two streams but the batch has {got}: build the model and the "
                           "batches from the same settings", family=family, got=got)
        raise LabError("this {family} model reads one stream but the batch has {got}: build the model and the "
                       "batches from the same settings", family=family, got=got)


def prediction_states(model, batch: Batch) -> torch.Tensor:
    """The hidden states that predict `batch.targets`, aligned with them: (B, T, H). Two streams: the query stream at
    the target positions (zeros elsewhere); `two_stream=False`: the content stream."""
    check_streams(batch, model.settings.two_stream, "xlnet")
    if not model.settings.two_stream:
        return run_backbone(model.backbone, batch)  # (B, T, H)
    g, slots, _, kept = run_query_stream(model, batch)
    return scatter_to_targets(batch, g, slots, kept)


def loss(model, batch: Batch) -> LossOutput:
    """plm: -log p(x_{z_t} | x_{z_<t}) for the last num_predict positions of the order, read from the query stream
    (sparse tied head, target rows only). With `two_stream=False` it is read from the content stream instead: every
    target then sees its own token, and the loss collapses towards 0 while nothing is learned (the leak)."""
    check_streams(batch, model.settings.two_stream, "xlnet")
    if model.settings.two_stream:
        g, _, targets, _ = run_query_stream(model, batch)  # (B, K, H), (B, K)
        plm, target_ids, target_nll, _ = sparse_token_loss(model.backbone, g, targets)
    else:
        hidden = run_backbone(model.backbone, batch)  # (B, T, H): the content stream, which sees each target
        plm, target_ids, target_nll, _ = sparse_token_loss(model.backbone, hidden, batch.targets)
    return combine(model.objective_weights, {"plm": plm}, target_ids, target_nll)

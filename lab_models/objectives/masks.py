"""Attention-mask predicates and combinators, the vocabulary every batch builder speaks.

A *predicate* is a function `(q_idx, kv_idx) -> BoolTensor` over broadcastable index tensors, in the style of
FlexAttention's `mask_mod` and of Hugging Face's `causal_mask_function` / `and_masks` / `or_masks`. `materialize`
evaluates a predicate on a grid. **True means "may attend".**

Worked example (4 tokens, a prefix-LM whose source is the first 2 tokens):

>>> materialize(prefix(2), 4).int().tolist()
[[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
>>> materialize(permutation_query([2, 0, 3, 1]), 4).int().tolist()   # rank: x2=0, x0=1, x3=2, x1=3
[[0, 0, 1, 0], [1, 0, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]]

Deviation from the papers: none; these are the papers' rules written once. Papers: Radford et al. 2018 (causal),
Devlin et al. 2019 (bidirectional), Dong et al. 2019 (UniLM's prefix / right-to-left), Yang et al. 2019 (permutation
content/query streams).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from lab_models.messages import LabError

Predicate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def bidirectional(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """Every position may attend every position (BERT)."""
    return torch.ones_like(q_idx + kv_idx, dtype=torch.bool)


def causal(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """Left-to-right: i may attend j iff j <= i (GPT)."""
    return kv_idx <= q_idx


def anticausal(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """Right-to-left: i may attend j iff j >= i (UniLM's R2L, ELMo's backward direction)."""
    return kv_idx >= q_idx


def prefix(prefix_len: int) -> Predicate:
    """Prefix-LM / seq2seq: the first `prefix_len` positions are visible to all; the rest is causal (UniLM, T5 PrefixLM)."""
    if prefix_len < 0:
        raise LabError("prefix length must be >= 0, got {prefix_len}", prefix_len=prefix_len)

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return (kv_idx < prefix_len) | (kv_idx <= q_idx)

    return predicate


def ranks_of(order: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """rank[j] = the step at which position j comes in the factorization order.

    >>> ranks_of([2, 0, 3, 1]).tolist()
    [1, 3, 0, 2]
    """
    order_t = torch.as_tensor(order, dtype=torch.long)
    n = order_t.numel()
    if order_t.dim() != 1 or sorted(order_t.tolist()) != list(range(n)):
        raise LabError("order must be a permutation of range({n}), got {order}", n=n, order=order_t.tolist())
    rank = torch.empty(n, dtype=torch.long)
    rank[order_t] = torch.arange(n)
    return rank


def permutation_content(order: Sequence[int] | torch.Tensor) -> Predicate:
    """XLNet content stream: i may attend j iff rank(j) <= rank(i) (it sees itself)."""
    rank = ranks_of(order)

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return rank.to(kv_idx.device)[kv_idx] <= rank.to(q_idx.device)[q_idx]

    return predicate


def permutation_query(order: Sequence[int] | torch.Tensor) -> Predicate:
    """XLNet query stream: i may attend j iff rank(j) < rank(i) (it never sees its own content)."""
    rank = ranks_of(order)

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return rank.to(kv_idx.device)[kv_idx] < rank.to(q_idx.device)[q_idx]

    return predicate


def same_segment(segment_ids: Sequence[int] | torch.Tensor) -> Predicate:
    """i may attend j iff both lie in the same segment (packing several documents into one row)."""
    segments = torch.as_tensor(segment_ids, dtype=torch.long)

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        seg = segments.to(q_idx.device)
        return seg[q_idx] == seg[kv_idx]

    return predicate


def padding(key_is_real: Sequence[bool] | torch.Tensor) -> Predicate:
    """i may attend j iff j is a real (non-padding) token."""
    real = torch.as_tensor(key_is_real, dtype=torch.bool)

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return real.to(kv_idx.device)[kv_idx] & torch.ones_like(q_idx, dtype=torch.bool)

    return predicate


def and_masks(*predicates: Predicate) -> Predicate:
    """The intersection: allowed only where every predicate allows."""
    if not predicates:
        raise LabError("and_masks needs at least one predicate")

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        result = predicates[0](q_idx, kv_idx)
        for other in predicates[1:]:
            result = result & other(q_idx, kv_idx)
        return result

    return predicate


def or_masks(*predicates: Predicate) -> Predicate:
    """The union: allowed where any predicate allows."""
    if not predicates:
        raise LabError("or_masks needs at least one predicate")

    def predicate(q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        result = predicates[0](q_idx, kv_idx)
        for other in predicates[1:]:
            result = result | other(q_idx, kv_idx)
        return result

    return predicate


def materialize(predicate: Predicate, n_queries: int, n_keys: int | None = None,
                device: torch.device | str | None = None) -> torch.Tensor:
    """Evaluate `predicate` on the (n_queries, n_keys) grid: a BoolTensor, True where i may attend j."""
    n_keys = n_queries if n_keys is None else n_keys
    if n_queries < 0 or n_keys < 0:
        raise LabError("mask sizes must be non-negative")
    q_idx = torch.arange(n_queries, device=device).unsqueeze(1)  # (Tq, 1)
    kv_idx = torch.arange(n_keys, device=device).unsqueeze(0)  # (1, Tk)
    mask = predicate(q_idx, kv_idx)  # (Tq, Tk)
    return mask.expand(n_queries, n_keys).to(torch.bool).contiguous()

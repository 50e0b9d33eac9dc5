"""Multi-head attention under an arbitrary boolean mask, for every stream the lab has.

One module serves three uses, always with the same weights `qkv` (a fused (3H, H) projection):
- self-attention: q, k, v all from x, one fused matmul;
- cross-attention (decoder -> encoder memory): q from x, k and v from `context`;
- two-stream attention (XLNet, MPNet): the query stream g reads the content stream h, so q comes from g and k, v
  from h, with the very same projection the content stream uses. Slicing the fused weight gives those separate
  Q and KV projections without a second set of parameters.

The mask: a (B, Tq, Tk) bool tensor, **True = may attend**, built once per batch by the caller. `prepare_mask` turns
it once into an `AttentionMask` that every layer shares: (B, 1, Tq, Tk), broadcast over heads.

Two masks are common enough to get a fast path: "full" (every query may attend every key: BERT-style batches
without padding) and "causal" (a square mask that is exactly j <= i: GPT batches without padding). `prepare_mask`
recognises them once per batch (in the same device read-back as the empty-row check) and the SDPA path then passes
no mask at all (`attn_mask=None`, or `is_causal=True`) instead of the (B, 1, T, T) bool tensor. The same function:
on the CPU the outputs and gradients came out bit-identical and as fast; on CUDA only a mask-free call may use the
flash kernel (an H100, bf16, 32 x 12 heads x 512 x 64: forward + backward 0.40 ms with is_causal against 0.65 ms with
the bool mask). The eager path always reads `allowed`.

Position biases (T5 and MPNet's relative positions, nn/relative_position.py). `add_position_bias` folds a float bias
(B or 1, nh, Tq, Tk), computed once per batch, into the prepared mask: one additive float mask, the bias where a key
may be attended and -inf where it may not. Every layer of the stack shares it; SDPA reads it as its `attn_mask` and
the eager path adds it to the logits, so both paths compute softmax(q.k * scale + bias) under the same mask.

Empty rows. A query row with no allowed key makes softmax 0/0 = NaN. XLNet's query stream has one by rule (the
position with rank 0 in the order has nothing before it; it carries no target). `prepare_mask` finds such rows
once, lets them attend the first key so the arithmetic stays finite, and the attention output of those rows is
set to exactly zero after the output projection: "attends nothing, adds nothing" to the residual stream.

Incremental decoding (lab_models/inference/generation/generate.py). `forward(..., cache=KeyValueCache())` keeps the keys
and values it has computed, so that each decoding step computes them for the new rows only: for self-attention the new
keys and values are appended to the cached ones (x holds only the new rows, the mask is (B, T_new, T_cached + T_new));
for cross-attention (`KeyValueCache(static=True)`) the keys and values of the encoder memory are computed on the first
call and reused by every later one. Without a cache nothing changes.

Worked example (one sequence, 3 tokens, causal; the second query row of the cross mask is empty):

>>> import torch
>>> causal = torch.ones(3, 3).tril().bool().unsqueeze(0)          # (1, 3, 3)
>>> prepare_mask(causal).empty_rows is None, prepare_mask(causal).pattern
(True, 'causal')
>>> m = prepare_mask(torch.tensor([[[True, False], [False, False]]]))
>>> m.allowed[0, 0].int().tolist(), m.empty_rows[0].flatten().tolist()
([[1, 0], [1, 0]], [False, True])
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.nn.config import ModelConfig


@dataclass
class AttentionMask:
    """A boolean mask prepared once per batch and shared by every layer."""

    allowed: torch.Tensor  # (B, 1, Tq, Tk) bool, True = may attend; empty rows repaired to attend key 0
    empty_rows: torch.Tensor | None  # (B, Tq, 1) bool, True where the original row was empty; None if there are none
    # "full": allowed is all True; "causal": Tq == Tk and allowed is exactly the lower triangle (j <= i) in every row
    # of the batch; None: any other mask. Only a shortcut for SDPA: `allowed` always holds the mask itself.
    pattern: str | None = None
    # A float additive mask (B or 1, nh or 1, Tq, Tk) in the activation dtype: a position bias where `allowed`, -inf
    # elsewhere (`add_position_bias`). None: no bias, the attention reads `allowed` (or `pattern`).
    bias: torch.Tensor | None = None
    # FlexAttention's BlockMask of `allowed`, built once per batch when the backbone runs on the flex backend
    # (lab_models/training/performance.py); None = SDPA.
    block_mask: object | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, Tq, Tk) of the original mask."""
        B, _, Tq, Tk = self.allowed.shape
        return B, Tq, Tk

    def map_tensors(self, fn) -> "AttentionMask":
        """The same mask with `fn` applied to its tensors (`Batch.to` and `Batch.pin_memory` move a mask prepared on
        the host with them). A FlexAttention block mask is device-specific and is dropped: the backbone builds it
        again where it runs."""
        return dataclasses.replace(self, allowed=fn(self.allowed),
                                   empty_rows=None if self.empty_rows is None else fn(self.empty_rows),
                                   bias=None if self.bias is None else fn(self.bias), block_mask=None)


# the streams whose mask reaches `prepare_mask` unchanged (Backbone.forward, encode, decode), so the engine may prepare
# them on the host (`prepare_batch_masks`); the others (XLNet's content and query) are cut or joined first
HOST_PREPARED_STREAMS = ("self", "encoder", "decoder", "cross")


def prepare_batch_masks(attention: dict) -> dict:
    """`attention` (stream -> (B, Tq, Tk) bool) with the streams of HOST_PREPARED_STREAMS prepared by `prepare_mask`.

    The training engine calls it on the host, before the batch moves to its device: `prepare_mask` reads the mask back
    once (does some row attend nothing? is it the causal pattern?), which on a GPU is a wait for the device in every
    forward pass; on host tensors it waits for nothing, and in the prefetch thread it overlaps the device's step.

    >>> causal = torch.ones(1, 3, 3).tril().bool()
    >>> prepared = prepare_batch_masks({"self": causal, "query": causal})
    >>> prepared["self"].pattern, type(prepared["query"]).__name__
    ('causal', 'Tensor')
    """
    return {name: prepare_mask(mask) if name in HOST_PREPARED_STREAMS and isinstance(mask, torch.Tensor)
            and mask.dtype == torch.bool and mask.dim() == 3 and mask.shape[-1] > 0 else mask
            for name, mask in attention.items()}


def prepare_mask(mask: torch.Tensor | AttentionMask, n_queries: int | None = None,
                 n_keys: int | None = None, batch_size: int | None = None, flex: bool = False) -> AttentionMask:
    """Validate a (B, Tq, Tk) bool mask, repair its empty rows, add the head axis. Idempotent on an AttentionMask.

    flex: also build FlexAttention's block mask, for the masks that SDPA cannot skip (not "full", not "causal")."""
    if isinstance(mask, AttentionMask):
        _check_mask_shape(mask.shape, n_queries, n_keys, batch_size)
        if flex and mask.block_mask is None and mask.pattern is None and mask.bias is None:
            # prepared on the host (prepare_batch_masks): its block mask is built here, on the mask's device
            return dataclasses.replace(mask, block_mask=flex_block_mask(mask.allowed[:, 0]))
        return mask
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 3:
        got = (Message("a {dtype} tensor of shape {shape}", dtype=mask.dtype, shape=tuple(mask.shape))
               if isinstance(mask, torch.Tensor) else repr(mask))
        raise LabError("an attention mask must be a (batch, queries, keys) bool tensor (True = may attend), "
                       "got {got}", got=got)
    _check_mask_shape(tuple(mask.shape), n_queries, n_keys, batch_size)
    if mask.shape[2] == 0:
        raise LabError("an attention mask needs at least one key")
    empty = ~mask.any(dim=-1, keepdim=True)  # (B, Tq, 1)
    has_empty, pattern = _inspect(mask, empty)
    if not has_empty:  # the common case: nothing to repair
        return AttentionMask(allowed=mask.unsqueeze(1), empty_rows=None, pattern=pattern,  # (B, 1, Tq, Tk)
                             block_mask=flex_block_mask(mask) if flex and pattern is None else None)
    first_key = torch.zeros_like(mask)
    first_key[:, :, 0] = True
    repaired = mask | (empty & first_key)  # (B, Tq, Tk): empty rows now attend key 0 only
    return AttentionMask(allowed=repaired.unsqueeze(1), empty_rows=empty,
                         block_mask=flex_block_mask(repaired) if flex else None)


def flex_block_mask(allowed: torch.Tensor):
    """FlexAttention's BlockMask for a (B, Tq, Tk) bool mask: tiles with no allowed pair are skipped by the kernel,
    the others read `allowed` itself, so the result is exactly the boolean mask (tested against SDPA)."""
    from torch.nn.attention.flex_attention import create_block_mask

    B, Tq, Tk = allowed.shape

    def may_attend(b, h, q, kv):
        return allowed[b, q, kv]

    return create_block_mask(may_attend, B, None, Tq, Tk, device=allowed.device)


def add_position_bias(mask: AttentionMask, bias: torch.Tensor) -> AttentionMask:
    """`mask` with `bias` (B or 1, nh, Tq, Tk), already in the activation dtype, folded in as one additive mask (see
    the module docstring). Built once per batch; a full mask adds nothing to the bias, and a causal one is the same
    for every row, so those stay broadcast over the batch.

    >>> causal = prepare_mask(torch.ones(1, 2, 2).tril().bool())
    >>> add_position_bias(causal, torch.full((1, 1, 2, 2), 0.5)).bias[0, 0].tolist()
    [[0.5, -inf], [0.5, 0.5]]
    """
    B, Tq, Tk = mask.shape
    if bias.dim() != 4 or bias.shape[0] not in (1, B) or tuple(bias.shape[2:]) != (Tq, Tk):
        raise LabError("a position bias must be (batch or 1, heads, {Tq}, {Tk}), got {bias_shape}",
                       Tq=Tq, Tk=Tk, bias_shape=tuple(bias.shape))
    if mask.pattern == "full":
        additive = bias.contiguous()  # once here, not in every layer's SDPA call
    else:
        allowed = mask.allowed[:1] if mask.pattern == "causal" else mask.allowed  # (B or 1, 1, Tq, Tk)
        additive = bias.masked_fill(~allowed, float("-inf"))  # (B or 1, nh, Tq, Tk)
    return dataclasses.replace(mask, bias=additive)


def _inspect(mask: torch.Tensor, empty: torch.Tensor) -> tuple[bool, str | None]:
    """(whether some row is empty, the mask's pattern: "full", "causal" or None), read back in one device sync."""
    B, Tq, Tk = mask.shape
    flags = [empty.any(), mask.all()]  # empty rows; full
    if Tq == Tk:
        lower = torch.ones(Tq, Tk, dtype=torch.bool, device=mask.device).tril()  # (T, T): j <= i
        flags.append((mask == lower).all())  # lower broadcasts over the batch
    has_empty, full, *causal = torch.stack(flags).tolist()
    pattern = "full" if full else "causal" if causal and causal[0] else None
    return bool(has_empty), pattern


# built once, not per call: the shape check runs in every attention call
MASK_DIMENSIONS = (Message("batch size"), Message("query length"), Message("key length"))


def _check_mask_shape(shape, n_queries, n_keys, batch_size) -> None:
    for what, got, want in zip(MASK_DIMENSIONS, shape, (batch_size, n_queries, n_keys)):
        if want is not None and got != want:
            raise LabError("attention mask of shape {shape} does not fit the inputs: its {what} is {got}, "
                           "expected {want}", shape=tuple(shape), what=what, got=got, want=want)


def attention_output(proj: nn.Module, y: torch.Tensor, weights: torch.Tensor | None, mask: AttentionMask,
                     return_weights: bool):
    """The heads' outputs y (B, nh, Tq, hs) side by side again, through the output projection; a row that may attend
    nothing adds nothing (its output and its weights are zero). Shared by the absolute and relative attentions."""
    B, nh, Tq, hs = y.shape
    y = proj(y.transpose(1, 2).reshape(B, Tq, nh * hs))  # (B, Tq, nh*hs) -> (B, Tq, H)
    if mask.empty_rows is not None:
        y = y.masked_fill(mask.empty_rows, 0.0)
        if weights is not None:
            weights = weights.masked_fill(mask.empty_rows.unsqueeze(1), 0.0)  # (B, nh, Tq, Tk)
    return (y, weights) if return_weights else y


@dataclass
class KeyValueCache:
    """The keys and values one attention module has computed so far, kept between decoding steps.

    Self-attention (`static=False`): every call appends the keys and values of its new rows. Cross-attention
    (`static=True`): the first call computes them from the encoder memory (`context`), later calls reuse them.
    Tensors are (B, nh, T, hs), after the head split.

    >>> cache = KeyValueCache()
    >>> cache.length
    0
    """

    k: torch.Tensor | None = None  # (B, nh, T, hs)
    v: torch.Tensor | None = None  # (B, nh, T, hs)
    static: bool = False

    @property
    def length(self) -> int:
        """How many key positions are cached."""
        return 0 if self.k is None else self.k.shape[2]

    def truncate(self, length: int) -> None:
        """Keep the first `length` positions (drop a look-ahead row such as UniLM's trailing [MASK])."""
        if self.k is not None and not self.static:
            self.k, self.v = self.k[:, :, :length], self.v[:, :, :length]

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows `rows` (B_new,) in that order: beam search's parents."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, rows), self.v.index_select(0, rows)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention with n_heads heads and a fused QKV projection."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.d_model = config.d_model
        self.head_size = config.head_size
        self.inner = config.attention_width  # n_heads * head_size: d_model unless d_head says otherwise (T5's d_kv)
        # None: SDPA's own 1 / sqrt(head_size); T5 scales nothing (its init absorbs the factor)
        self.scale = None if config.attention_scale else 1.0
        self.impl = config.attention_impl
        self.attention_dropout = config.attention_dropout
        bias = config.linear_bias
        self.qkv = nn.Linear(config.d_model, 3 * self.inner, bias=bias)  # rows: [W_q; W_k; W_v]
        self.proj = nn.Linear(self.inner, config.d_model, bias=bias)  # the output projection W_o

    def forward(self, x: torch.Tensor, mask: torch.Tensor | AttentionMask, context: torch.Tensor | None = None,
                return_weights: bool = False, cache: KeyValueCache | None = None):
        """x (B, Tq, H) attends `context` (B, Tk, H), or itself when context is None, under mask (B, Tq, Tk).

        Returns y (B, Tq, H); with return_weights=True, (y, probabilities (B, nh, Tq, Tk)); asking for the weights
        always takes the eager path, whatever config.attention_impl says.

        cache: incremental decoding (see the module docstring). Self-attention: x holds the new rows only and the
        mask is (B, Tq, cached + Tq); cross-attention (a static cache): once filled, `context` may be None.
        """
        B, Tq, H = x.shape
        hs, A = self.head_size, self.inner  # A = n_heads * hs (= H unless d_head is set)
        if cache is not None and cache.static and cache.k is not None:  # the memory's keys and values, cached
            w_q, b_q = self.qkv.weight[:A], None if self.qkv.bias is None else self.qkv.bias[:A]
            q = F.linear(x, w_q, b_q)  # (B, Tq, A)
            k = v = None
        elif context is None:
            q, k, v = self.qkv(x).split(A, dim=2)  # 3 x (B, Tq, A)
        else:
            w_q, w_kv = self.qkv.weight.split([A, 2 * A], dim=0)  # (A, H), (2A, H)
            b_q = b_kv = None
            if self.qkv.bias is not None:
                b_q, b_kv = self.qkv.bias.split([A, 2 * A], dim=0)  # (A,), (2A,)
            q = F.linear(x, w_q, b_q)  # (B, Tq, A)
            k, v = F.linear(context, w_kv, b_kv).split(A, dim=2)  # 2 x (B, Tk, A)
        q = q.view(B, Tq, self.n_heads, hs).transpose(1, 2)  # (B, nh, Tq, hs)
        if k is not None:
            Tk = k.shape[1]
            k = k.view(B, Tk, self.n_heads, hs).transpose(1, 2)  # (B, nh, Tk, hs)
            v = v.view(B, Tk, self.n_heads, hs).transpose(1, 2)  # (B, nh, Tk, hs)
        if cache is not None:
            if k is None:  # static and filled
                k, v = cache.k, cache.v  # (B, nh, Tm, hs)
            elif not cache.static and cache.k is not None:  # append the new rows' keys and values
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)  # (B, nh, Tc + Tq, hs)
            cache.k, cache.v = k, v
        Tk = k.shape[2]
        mask = prepare_mask(mask, n_queries=Tq, n_keys=Tk, batch_size=B)
        dropout_p = self.attention_dropout if self.training else 0.0

        weights = None
        if mask.block_mask is not None and mask.bias is None and not return_weights and dropout_p == 0.0:
            from torch.nn.attention.flex_attention import flex_attention

            y = flex_attention(q, k, v, block_mask=mask.block_mask, scale=self.scale)  # (B, nh, Tq, hs)
        elif self.impl == "sdpa" and not return_weights:
            scale = self.scale
            if mask.bias is not None:  # a position bias, folded into one additive mask for every layer
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.bias.to(q.dtype), dropout_p=dropout_p,
                                                   scale=scale)  # (B, nh, Tq, hs)
            elif mask.pattern == "full":  # every key for every query: no mask to read
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale)  # (B, nh, Tq, hs)
            elif mask.pattern == "causal" and Tq == Tk:  # exactly j <= i: SDPA's own causal mask
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale)
            else:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.allowed, dropout_p=dropout_p, scale=scale)
        else:
            scores = q @ k.transpose(-2, -1)  # (B, nh, Tq, Tk)
            if self.scale is None:
                scores = scores * (1.0 / math.sqrt(hs))
            if mask.bias is not None:
                scores = scores + mask.bias  # the position bias, and -inf where a key may not be attended
            else:
                scores = scores.masked_fill(~mask.allowed, float("-inf"))  # no row is all -inf after prepare_mask
            weights = F.softmax(scores, dim=-1)  # (B, nh, Tq, Tk)
            y = F.dropout(weights, p=dropout_p, training=self.training) @ v  # (B, nh, Tq, hs)
        return attention_output(self.proj, y, weights, mask, return_weights)

"""Transformer-XL's relative attention with XLNet's relative segment encoding: `ModelConfig.relative_attention="xlnet"`.

Papers: Dai, Yang, Yang, Carbonell, Le, Salakhutdinov (2019). Transformer-XL: Attentive Language Models Beyond a
Fixed-Length Context. ACL 2019, §3.3. Yang, Dai, Yang, Carbonell, Salakhutdinov, Le (2019). XLNet: Generalized
Autoregressive Pretraining for Language Understanding. NeurIPS 2019, §2.4-2.5 ("Relative Segment Encodings"). The
parameters are those of the released code (zihangdai/xlnet modeling.py: `rel_attn_core`,
`relative_positional_encoding`) and of its port in transformers (`XLNetRelativeAttention`): q, k, v, o and r without
biases, r_w_bias, r_r_bias, r_s_bias and seg_embed, one set per layer (untie_r).

The score of query i for key j, per head (q_i = W_q x_i, k_j = W_k h_j):

    a_ij = ( (q_i + u) . k_j                      content            u = r_w_bias (content_bias)
           + (q_i + v) . W_r R(p_i - p_j)         position           v = r_r_bias (position_bias), W_r = r
           + (q_i + b) . s_ij                     segment            b = r_s_bias (segment_bias)
           ) / sqrt(d_head)

with p_i the position id of row i, s_ij = s+ when i and j lie in the same segment and s- otherwise (seg_embed), and
R(d) = [sin(d w_0) .. sin(d w_(H/2-1)), cos(d w_0) .. cos(d w_(H/2-1))], w_k = 1 / 10000^(2k / H): the sinusoid of the
distance over the model width H, sines first, projected by each layer's own W_r. Only distances between positions
enter the scores, so the model needs no position table (XLNet: `absolute_positions=False`).

Built once per batch by the backbone (`relative_positions`) and shared by every layer: the distinct (clamped) distances
and their sinusoid encodings (P, H), dropped out once as XLNet drops its pos_emb; the (B, Tq, Tk) index of each pair's
distance in that table; and the (B, Tq, Tk) "different segment" matrix. Computed in each layer, because its weights
enter: W_r R (P, H); the position scores (q + v) . W_r R of every query against every distinct distance
(B, nh, Tq, P), gathered to (B, nh, Tq, Tk) through the index; the segment scores (q + b) . s+ and (q + b) . s-
(B, nh, Tq, 2), picked per pair. Their sum is handed to SDPA as an additive float mask (-inf where the boolean mask
forbids) next to q + u and k, whose product SDPA computes itself; the eager path (`attention_impl="eager"`, or
`return_weights=True`) writes the same sum out by hand.

Worked example (3 tokens at positions 0, 1, 2; the table lists the distances 2, 1, 0, -1, -2 as XLNet lists
klen .. -qlen, so the pair (i, j) reads row 2 - (i - j)):

>>> import torch
>>> rel = relative_positions(torch.tensor([[0, 1, 2]]), torch.tensor([[0, 1, 2]]), None, None, width=4)
>>> rel.distances.tolist()
[2.0, 1.0, 0.0, -1.0, -2.0]
>>> rel.index[0].tolist()   # query 0 is at distances 0, -1, -2 from keys 0, 1, 2: rows 2, 3, 4
[[2, 3, 4], [1, 2, 3], [0, 1, 2]]
>>> rel.encodings[2].tolist()   # distance 0: sin 0 = 0, cos 0 = 1
[0.0, 0.0, 1.0, 1.0]
>>> rel = relative_positions(torch.tensor([[0, 1, 2]]), torch.tensor([[0, 1, 2]]), torch.tensor([[0, 0, 1]]),
...                          torch.tensor([[0, 0, 1]]), width=4)
>>> rel.other_segment[0].int().tolist()
[[0, 0, 1], [0, 0, 1], [1, 1, 0]]

Deviations, stated:
- No segment-level recurrence: no memory of the previous segment is kept (XLNet's mems, mem_len, reuse_len), and
  XLNet's `bi_data` (half of each batch read in reverse order) is not implemented. XLNet's `attn_type="uni"` is not a
  backbone mode: the lab's causal masks come with the batch.
- The distance is taken between the rows' position ids, p_i - p_j, where XLNet takes the index in the sequence, i - j.
  For XLNet's batches (positions 0..T-1 in the natural order of the permuted sequence) the numbers are the same; the
  ids let a query-stream row take the distance of its own slot, and a cached decoding step that of its position. The
  table is read through a gather, where XLNet uses its relative shift (`rel_shift`): the same values.
- Without segment ids every pair counts as the same segment (XLNet's pretraining always has segment ids; transformers
  leaves the term out when token_type_ids is None). The term is then the same for every key of a row, which softmax
  ignores: the outputs are those of transformers either way, and s+, b stay in the graph (DDP needs no unused
  parameters).
- u, v and b are stored as vectors of width H = n_heads * d_head (flat, so that AdamW leaves them undecayed like
  every other bias in the lab), where XLNet stores (n_head, d_head) matrices; s+ and s- as a (2, H) matrix.
- Dropout on the attention probabilities is `config.attention_dropout` (0 by default: SDPA's fast path), where XLNet
  applies its one dropout rate (0.1) there too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError
from lab_models.nn.attention import AttentionMask, KeyValueCache, attention_output, prepare_mask
from lab_models.nn.config import ModelConfig


@dataclass
class RelativePositions:
    """What every layer's relative attention reads, built once per batch by `relative_positions`."""

    distances: torch.Tensor  # (P,) float: the distinct (clamped) distances p_i - p_j, descending
    encodings: torch.Tensor  # (P, H): their sinusoid encodings R(d) (after dropout, in training)
    index: torch.Tensor  # (B, Tq, Tk) long: the row of `encodings` for query i and key j
    other_segment: torch.Tensor | None  # (B, Tq, Tk) bool: i and j in different segments; None = one segment


def sinusoid_encodings(distances: torch.Tensor, width: int) -> torch.Tensor:
    """R(d) for each distance (P,) -> (P, width): sines of d w_k, then cosines, w_k = 1 / 10000^(2k / width).
    The same operations as XLNet's `positional_embedding`, so the numbers are the same to the last bit."""
    freq = torch.arange(0, width, 2, dtype=torch.int64, device=distances.device).float()  # (width/2,): 0, 2, 4, ...
    inv_freq = 1 / torch.pow(10000, freq / width)  # (width/2,)
    angles = distances[:, None] * inv_freq  # (P, width/2)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # (P, width)


def relative_positions(query_positions: torch.Tensor, key_positions: torch.Tensor,
                       query_segments: torch.Tensor | None, key_segments: torch.Tensor | None, width: int,
                       clamp_len: int | None = None, dropout: nn.Module | None = None) -> RelativePositions:
    """The per-batch part of relative attention. query_positions (B, Tq), key_positions (B, Tk) long; segments alike
    or None (a missing side counts as segment 0); width: the model's H; clamp_len: distances beyond +-clamp_len use
    the encoding of +-clamp_len (XLNet's clamp_len); dropout: applied once to the encodings."""
    distance = query_positions.unsqueeze(2) - key_positions.unsqueeze(1)  # (B, Tq, Tk): p_i - p_j
    reach = int(distance.abs().amax())  # one read-back per batch: the table covers -reach .. reach
    if clamp_len is not None and reach > clamp_len:
        reach = clamp_len
        distance = distance.clamp(-reach, reach)
    distances = torch.arange(reach, -reach - 1, -1, dtype=torch.int64, device=distance.device).float()  # (P,)
    encodings = sinusoid_encodings(distances, width)  # (P, H)
    if dropout is not None:
        encodings = dropout(encodings)
    other_segment = None
    if query_segments is not None or key_segments is not None:
        if query_segments is None:
            query_segments = torch.zeros_like(query_positions)
        if key_segments is None:
            key_segments = torch.zeros_like(key_positions)
        other_segment = query_segments.unsqueeze(2) != key_segments.unsqueeze(1)  # (B, Tq, Tk)
    return RelativePositions(distances=distances, encodings=encodings, index=reach - distance,
                             other_segment=other_segment)


class RelativeMultiHeadAttention(nn.Module):
    """Multi-head attention with Transformer-XL's relative position terms and XLNet's relative segment term (see the
    module docstring). The interface of `MultiHeadAttention` plus `relative`: self-attention, or the two-stream
    layout (queries from [h; g], keys and values from h via `context`), and a self-attention `KeyValueCache`."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        H = config.d_model
        self.n_heads = config.n_heads
        self.d_model = H
        self.impl = config.attention_impl
        self.attention_dropout = config.attention_dropout
        self.qkv = nn.Linear(H, 3 * H, bias=False)  # rows [W_q; W_k; W_v]: XLNet's q, k, v (no biases)
        self.proj = nn.Linear(H, H, bias=False)  # W_o: XLNet's o
        self.position_key = nn.Linear(H, H, bias=False)  # W_r: a key for each sinusoid encoding (XLNet's r)
        self.content_bias = nn.Parameter(torch.empty(H))  # u: XLNet's r_w_bias, (n_head, d_head) flattened
        self.position_bias = nn.Parameter(torch.empty(H))  # v: r_r_bias
        self.segment_bias = nn.Parameter(torch.empty(H))  # b: r_s_bias
        self.segment_embed = nn.Parameter(torch.empty(2, H))  # rows s+ (same segment), s- (other): seg_embed
        for p in (self.content_bias, self.position_bias, self.segment_bias, self.segment_embed):
            nn.init.normal_(p, mean=0.0, std=0.02)  # XLNet's initializer_range, for all of them

    def forward(self, x: torch.Tensor, mask: torch.Tensor | AttentionMask, context: torch.Tensor | None = None,
                return_weights: bool = False, cache: KeyValueCache | None = None,
                relative: RelativePositions | None = None):
        """x (B, Tq, H) attends `context` (B, Tk, H), or itself, under mask (B, Tq, Tk), with the batch's `relative`
        (index (B, Tq, Tk) over the keys, cached ones included). Returns y (B, Tq, H), and with return_weights the
        probabilities (B, nh, Tq, Tk), computed on the eager path."""
        if not isinstance(relative, RelativePositions):
            raise LabError("relative attention needs the batch's RelativePositions (nn.relative_attention."
                           "relative_positions, built by the Backbone)")
        if cache is not None and cache.static:
            raise LabError("relative attention is self-attention only: it has no cross-attention cache")
        B, Tq, H = x.shape
        nh, hs = self.n_heads, H // self.n_heads
        if context is None:
            q, k, v = self.qkv(x).split(H, dim=2)  # 3 x (B, Tq, H)
        else:  # the query stream reads the content stream: the same projections, keys and values from h
            w_q, w_kv = self.qkv.weight.split([H, 2 * H], dim=0)  # (H, H), (2H, H)
            q = F.linear(x, w_q)  # (B, Tq, H)
            k, v = F.linear(context, w_kv).split(H, dim=2)  # 2 x (B, Tk, H)
        k = k.view(B, -1, nh, hs).transpose(1, 2)  # (B, nh, Tk, hs)
        v = v.view(B, -1, nh, hs).transpose(1, 2)  # (B, nh, Tk, hs)
        if cache is not None:
            if cache.k is not None:  # append the new rows' keys and values
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)  # (B, nh, Tc + Tq, hs)
            cache.k, cache.v = k, v
        Tk = k.shape[2]
        mask = prepare_mask(mask, n_queries=Tq, n_keys=Tk, batch_size=B)
        if tuple(relative.index.shape) != (B, Tq, Tk):
            raise LabError("the relative positions are for {index_shape} (batch, queries, keys) "
                           "but the attention has {expected_shape}: build them from these queries' and keys' "
                           "position ids", index_shape=tuple(relative.index.shape), expected_shape=(B, Tq, Tk))
        scale = 1.0 / math.sqrt(hs)
        q_content = (q + self.content_bias).view(B, Tq, nh, hs).transpose(1, 2)  # (B, nh, Tq, hs): q + u
        bias = self._position_and_segment_scores(q, relative, scale)  # (B, nh, Tq, Tk), already scaled
        dropout_p = self.attention_dropout if self.training else 0.0

        weights = None
        if self.impl == "sdpa" and not return_weights:
            if mask.pattern != "full":
                bias = bias.masked_fill(~mask.allowed, float("-inf"))  # no row is all -inf after prepare_mask
            y = F.scaled_dot_product_attention(q_content, k, v, attn_mask=bias, dropout_p=dropout_p)  # (B,nh,Tq,hs)
        else:
            scores = (q_content @ k.transpose(-2, -1)) * scale + bias  # (B, nh, Tq, Tk)
            scores = scores.masked_fill(~mask.allowed, float("-inf"))
            weights = F.softmax(scores, dim=-1)  # (B, nh, Tq, Tk)
            y = F.dropout(weights, p=dropout_p, training=self.training) @ v  # (B, nh, Tq, hs)
        return attention_output(self.proj, y, weights, mask, return_weights)

    def _position_and_segment_scores(self, q: torch.Tensor, relative: RelativePositions,
                                     scale: float) -> torch.Tensor:
        """((q + v) . W_r R(p_i - p_j) + (q + b) . s_ij) / sqrt(d_head): q (B, Tq, H) -> (B, nh, Tq, Tk)."""
        B, Tq, H = q.shape
        nh, hs = self.n_heads, H // self.n_heads
        Tk = relative.index.shape[2]
        keys = self.position_key(relative.encodings)  # (P, H): W_r R(d) for each distinct distance
        keys = keys.view(-1, nh, hs).permute(1, 2, 0)  # (nh, hs, P)
        q_position = ((q + self.position_bias) * scale).view(B, Tq, nh, hs).transpose(1, 2)  # (B, nh, Tq, hs)
        by_distance = q_position @ keys  # (B, nh, Tq, P)
        index = relative.index.unsqueeze(1).expand(B, nh, Tq, Tk)  # (B, nh, Tq, Tk)
        scores = by_distance.gather(3, index)  # (B, nh, Tq, Tk): each pair's distance
        segments = self.segment_embed.view(2, nh, hs).permute(1, 2, 0)  # (nh, hs, 2): s+, s-
        q_segment = ((q + self.segment_bias) * scale).view(B, Tq, nh, hs).transpose(1, 2)  # (B, nh, Tq, hs)
        by_segment = q_segment @ segments  # (B, nh, Tq, 2): (q + b) . s+, (q + b) . s-
        if relative.other_segment is None:  # one segment: the same term for every key of a row
            return scores + by_segment[..., :1]
        other = relative.other_segment.unsqueeze(1)  # (B, 1, Tq, Tk)
        return scores + torch.where(other, by_segment[..., 1:], by_segment[..., :1])  # (B, nh, Tq, Tk)

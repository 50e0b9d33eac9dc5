"""T5's bucketed relative position bias, also MPNet's: a learned scalar per head and distance bucket, added to the
attention logits.

Paper: Raffel et al. (2020), Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer, §2.1
("each 'embedding' is simply a scalar that is added to the corresponding logit used for computing the attention
weights ... we use 32 embeddings for all of our models with ranges that increase in size logarithmically up to an
offset of 128 beyond which we assign all relative positions to the same embedding"), after Shaw et al. (2018). MPNet
(Song et al. 2020) uses the same bias in its `mpnet_rel_base` models. Reference code: Mesh TensorFlow's
`_relative_position_bucket`, as Hugging Face's `T5Attention._relative_position_bucket` and
`MPNetEncoder.relative_position_bucket` copy it (the same function: MPNet's is T5's bidirectional case).

The relative position of key j seen from query i is `position_j - position_i` (negative: the key lies to the left).
Buckets, for `num_buckets` B and `max_distance` D:
- bidirectional (encoders): half the buckets for keys to the left or at the query, half (offset B/2) for keys to
  the right; within each half, distances below B/4 get their own bucket, larger ones share logarithmic bins up to
  D, and everything beyond D falls into the half's last bucket;
- unidirectional (T5's decoder): keys to the right count as distance 0 (a causal mask hides them anyway); distances
  below B/2 are exact, larger ones logarithmic up to D, in B buckets.

Worked example (T5's defaults, 32 buckets up to 128; keys 0..9 seen from query 4, and distances far away):

>>> import torch
>>> relative_position_bucket(torch.arange(10) - 4, bidirectional=True).tolist()
[4, 3, 2, 1, 0, 17, 18, 19, 20, 21]
>>> relative_position_bucket(torch.tensor([-8, -20, -127, -500, 500]), bidirectional=True).tolist()
[8, 10, 15, 15, 31]
>>> relative_position_bucket(torch.tensor([-3, 0, 2, -16, -40, -500]), bidirectional=False).tolist()
[3, 0, 0, 16, 23, 31]

The bias is computed once per forward pass of a stack, from the position ids the batch carries (not from the row
index): XLNet-style layouts (MPNet keeps its [MASK] slots at the end, carrying the positions of the tokens they stand
for) then get the distances of the text, as the reference's `encode_relative_emb(positions)` does. For a plain batch
the positions are 0, 1, 2, ... and this is exactly T5's and Hugging Face MPNet's `arange`. When every row of the
batch has the same positions (the common case) the bias is computed for one row and broadcast.

Deviation: none in the arithmetic. The reference T5 keeps the table in the first layer of each stack and passes the
bias on from layer to layer; here each stack owns its table (`Backbone.relative_bias`,
`Backbone.decoder_relative_bias`), which is the same computation with the parameter in a different place
(lab_models/interop/t5.py maps the names).
"""
from __future__ import annotations

import math

import torch
from torch import nn


def relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int = 32,
                             max_distance: int = 128) -> torch.Tensor:
    """The bucket (long, same shape) of each relative position `key - query` (see the module docstring)."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets  # keys to the right: the upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # keys to the right count as 0
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log(distance / max_exact) / log(max_distance / max_exact) of the remaining buckets; distance 0 gives -inf here
    # but is small, so torch.where never reads it
    scaled = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    if_large = (max_exact + scaled.to(torch.long)).clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, if_large)


class RelativePositionBias(nn.Module):
    """A (num_buckets, n_heads) table of scalars; `forward(query_positions, key_positions)` gives the bias each head
    adds to its attention logits."""

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool):
        super().__init__()
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.table = nn.Embedding(num_buckets, n_heads)  # T5's relative_attention_bias

    def forward(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        """query_positions (B, Tq), key_positions (B, Tk) long -> bias (B, nh, Tq, Tk) in the table's dtype; B may
        be 1 (positions shared by every row), and the bias then broadcasts over the batch."""
        relative = key_positions.unsqueeze(1) - query_positions.unsqueeze(2)  # (B, Tq, Tk): key - query
        buckets = relative_position_bucket(relative, self.bidirectional, self.num_buckets, self.max_distance)
        return self.table(buckets).permute(0, 3, 1, 2)  # (B, Tq, Tk, nh) -> (B, nh, Tq, Tk)

    def extra_repr(self) -> str:
        direction = "bidirectional" if self.bidirectional else "unidirectional"
        return f"{self.num_buckets} buckets up to {self.max_distance}, {direction}"


def shared_rows(positions: torch.Tensor) -> torch.Tensor:
    """positions (B, T) -> (1, T) when every row holds the same positions (the bias is then computed once and
    broadcast), else unchanged. One device read-back, which `torch.compile` would break the graph on: while it traces,
    the rows are kept as they are (the bias is then computed per row: the same values, B times the memory)."""
    if torch.compiler.is_compiling():
        return positions
    if positions.shape[0] > 1 and bool((positions == positions[:1]).all()):
        return positions[:1]  # (1, T)
    return positions

"""Small heads that sit on the backbone's hidden states. The vocabulary head is `Backbone.lm_logits` (tied); these
are the others:

- `SequenceClassificationHead`: one label per sequence (BERT's NSP, ALBERT's SOP, fine-tuning).
- `TokenClassificationHead`: one label (or score) per token (ELECTRA's replaced-token detection, tagging).
- `SpanBoundaryHead`: SpanBERT's span boundary objective; returns H-vectors for `Backbone.lm_logits`.

Heads take plain sizes (d_model, ...), not a ModelConfig, so they fit any backbone width.

Worked example (SpanBERT, a span x2..x4 of a 6-token row; its boundaries are x1 and x5, and x2, x3, x4 are its
1st, 2nd and 3rd tokens; x0, x1, x5 carry no SBO target, written -100 as in the batch builder's extras):

>>> import torch
>>> head = SpanBoundaryHead(d_model=8)
>>> hidden = torch.randn(1, 6, 8)
>>> y = head(hidden, left=torch.tensor([[-100, -100, 1, 1, 1, -100]]),
...          right=torch.tensor([[-100, -100, 5, 5, 5, -100]]),
...          relative_position=torch.tensor([[-100, -100, 1, 2, 3, -100]]))
>>> y.shape, y[0, 0].abs().sum().item()
(torch.Size([1, 6, 8]), 0.0)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError
from lab_models.batch import IGNORE_INDEX
from lab_models.nn.initialization import init_weights
from lab_models.nn.dropout import Dropout

POOLINGS = ("first", "last", "mean")


class SequenceClassificationHead(nn.Module):
    """pool -> dense -> tanh -> dropout -> linear (BERT's pooler plus classifier).

    pool: "first" (the [CLS] position, BERT), "last" (the last real token, GPT-1's classifier on the final token),
    or "mean" (the mean over real tokens).
    """

    def __init__(self, d_model: int, n_classes: int, pool: str = "first", dropout: float = 0.1):
        super().__init__()
        if pool not in POOLINGS:
            raise LabError("unknown pooling {pool!r}: choose one of {poolings}",
                           pool=pool, poolings=', '.join(POOLINGS))
        if n_classes < 1 or d_model < 1:
            raise LabError("d_model and n_classes must be >= 1, got {d_model} and {n_classes}",
                           d_model=d_model, n_classes=n_classes)
        self.pool = pool
        self.dense = nn.Linear(d_model, d_model)
        self.drop = Dropout(dropout)
        self.out = nn.Linear(d_model, n_classes)
        self.apply(init_weights)

    def forward(self, hidden: torch.Tensor, is_real: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (B, T, H), is_real (B, T) bool (False on padding; None = no padding) -> logits (B, n_classes)."""
        B, T, _ = hidden.shape
        if is_real is None:
            is_real = torch.ones(B, T, dtype=torch.bool, device=hidden.device)
        elif is_real.dtype != torch.bool or tuple(is_real.shape) != (B, T):
            raise LabError("is_real must be a bool tensor of shape {expected_shape} (False on padding)",
                           expected_shape=(B, T))
        if self.pool == "first":
            pooled = hidden[:, 0]  # (B, H)
        elif self.pool == "last":
            # the largest index whose token is real (left or right padding alike; 0 if no token is real)
            last = (is_real.long() * torch.arange(T, device=hidden.device)).argmax(dim=1)  # (B,)
            pooled = hidden[torch.arange(B, device=hidden.device), last]  # (B, H)
        else:
            weights = is_real.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)  # (B, H)
        return self.out(self.drop(torch.tanh(self.dense(pooled))))  # (B, n_classes)


class TokenClassificationHead(nn.Module):
    """dropout -> linear, at every position. n_labels=1 gives ELECTRA's per-token "was this token replaced?" logit."""

    def __init__(self, d_model: int, n_labels: int = 1, dropout: float = 0.0):
        super().__init__()
        if n_labels < 1 or d_model < 1:
            raise LabError("d_model and n_labels must be >= 1, got {d_model} and {n_labels}",
                           d_model=d_model, n_labels=n_labels)
        self.drop = Dropout(dropout)
        self.out = nn.Linear(d_model, n_labels)
        self.apply(init_weights)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (B, T, H) -> logits (B, T, n_labels)."""
        return self.out(self.drop(hidden))


class SpanBoundaryHead(nn.Module):
    """SpanBERT's SBO (Joshi et al. 2020, §3.2): a target x_i inside span x_s..x_e is represented from the boundary
    tokens x_(s-1), x_(e+1) and a learned relative position embedding p_(i-s+1):

        h0 = [h_left; h_right; p]        (3H)
        h1 = LayerNorm(GeLU(W1 h0))      (H)
        y  = LayerNorm(GeLU(W2 h1))      (H)   -> Backbone.lm_logits(y, positions) predicts x_i

    Inputs follow the SpanBERT batch builder's `extras` (lab_models/objectives/spanbert.py): `sbo_left`, `sbo_right`
    (boundary indices) and `sbo_relative_position` (i - s + 1, **1-based**), aligned with the input, IGNORE_INDEX
    (-100) where a token has no SBO target. A boundary of -1 means "outside the sequence" (a span touching a row
    edge) and reads a learned `outside` vector instead of a hidden state. Rows without a target come out as zeros;
    project only the others: `lm_logits(y, positions=relative != IGNORE_INDEX)`.
    """

    def __init__(self, d_model: int, max_relative_position: int = 15, layer_norm_eps: float = 1e-5):
        super().__init__()
        if max_relative_position < 1 or d_model < 1:
            raise LabError("d_model and max_relative_position must be >= 1, got {d_model} and "
                           "{max_relative_position}", d_model=d_model, max_relative_position=max_relative_position)
        # 15: the released training command's --max-pair-targets; only a span's first 15 tokens get SBO targets
        self.max_relative_position = max_relative_position
        self.relative_position = nn.Embedding(max_relative_position, d_model)  # row k-1 holds p_k
        self.outside = nn.Parameter(torch.empty(d_model))
        self.dense1 = nn.Linear(3 * d_model, d_model)
        self.ln1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dense2 = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.apply(init_weights)
        nn.init.normal_(self.outside, mean=0.0, std=0.02)

    def forward(self, hidden: torch.Tensor, left: torch.Tensor, right: torch.Tensor,
                relative_position: torch.Tensor) -> torch.Tensor:
        """hidden (B, T, H); left, right (B, N) in [-1, T); relative_position (B, N) in [1, max_relative_position],
        or IGNORE_INDEX in all three where there is no target -> (B, N, H)."""
        B, T, H = hidden.shape
        has_target = relative_position != IGNORE_INDEX  # (B, N)
        for name, idx, lo, hi in (("left", left, -1, T - 1), ("right", right, -1, T - 1),
                                  ("relative_position", relative_position, 1, self.max_relative_position)):
            if not isinstance(idx, torch.Tensor) or idx.dtype != torch.long or idx.dim() != 2 or idx.shape[0] != B \
                    or idx.shape != relative_position.shape:
                raise LabError("{name} must be a ({B}, N) long tensor, the same shape as relative_position",
                               name=name, B=B)
            if torch.compiler.is_compiling():
                continue  # the values are read back only eagerly: a read-back would cut the compiled graph
            used = idx[has_target]  # the rows that carry a target
            if used.numel() and (int(used.min()) < lo or int(used.max()) > hi):
                raise LabError("{name} must lie in [{lo}, {hi}] where there is a target, got values in "
                               "[{lowest}, {highest}]",
                               name=name, lo=lo, hi=hi, lowest=int(used.min()), highest=int(used.max()))
        h_left = self._boundary(hidden, left)  # (B, N, H)
        h_right = self._boundary(hidden, right)  # (B, N, H)
        p = self.relative_position((relative_position - 1).clamp(min=0))  # (B, N, H)
        x = torch.cat([h_left, h_right, p], dim=-1)  # (B, N, 3H)
        x = self.ln1(F.gelu(self.dense1(x)))  # (B, N, H)
        y = self.ln2(F.gelu(self.dense2(x)))  # (B, N, H)
        return y.masked_fill(~has_target.unsqueeze(-1), 0.0)

    def _boundary(self, hidden: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """hidden[b, index[b, n]], or the learned outside vector where index == -1 -> (B, N, H)."""
        H = hidden.shape[-1]
        safe = index.clamp(min=0, max=hidden.shape[1] - 1)  # -1 and IGNORE_INDEX rows read row 0, then are replaced
        gathered = hidden.gather(1, safe.unsqueeze(-1).expand(-1, -1, H))  # (B, N, H)
        return torch.where((index == -1).unsqueeze(-1), self.outside.to(hidden.dtype), gathered)

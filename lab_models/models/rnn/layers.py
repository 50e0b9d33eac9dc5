"""Pieces the RNN-era families share: AWD-LSTM's three dropouts, ELMo's scalar mix, ULMFiT's learning-rate rules
and concat pooling, and a padded-sequence LSTM call.

Papers:
- Merity, Keskar, Socher (2018). Regularizing and Optimizing LSTM Language Models (AWD-LSTM): DropConnect on the
  hidden-to-hidden matrices (`WeightDropLSTM`), embedding dropout (`embedding_dropout`), variational (locked)
  dropout (`LockedDropout`).
- Peters et al. (2018). Deep contextualized word representations (ELMo), eq. 1: `ScalarMix`.
- Howard & Ruder (2018). Universal Language Model Fine-tuning for Text Classification (ULMFiT), eq. 3 (slanted
  triangular learning rates, `slanted_triangular_lr`), §3.2 (discriminative fine-tuning, `discriminative_lrs`),
  §3.3 (concat pooling, `concat_pool`).

Worked examples (the golden tests):

>>> [round(slanted_triangular_lr(t, 1000, 0.01), 6) for t in (0, 50, 100, 550, 1000)]   # cut = 100
[0.000313, 0.005156, 0.01, 0.005156, 0.000313]
>>> [round(lr, 6) for lr in discriminative_lrs(0.01, 3)]   # bottom group first: lr / 2.6^2, lr / 2.6, lr
[0.001479, 0.003846, 0.01]

Deviations, stated:
- Weight drop is applied with `torch.func.functional_call`, which hands the dropped matrix to the same nn.LSTM for
  one call, so the LSTM still runs as one fused (cuDNN on a GPU) kernel over the whole sequence, not a Python loop
  over time steps. The price on a GPU: the weights are no longer one contiguous block, and PyTorch copies them into
  one per call (the same warning the original AWD-LSTM code gets).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lab_models.messages import LabError


# ------------------------------------------------------------------------------------------------ dropouts (AWD-LSTM)


def embedding_dropout(weight: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Whole rows of the embedding matrix dropped (a word is dropped everywhere it occurs in the batch), the kept rows
    scaled by 1 / (1 - p): Merity et al. §4.3 (after Gal & Ghahramani 2016). weight (V, E) -> (V, E)."""
    if not training or p == 0:
        return weight
    keep = torch.empty(weight.shape[0], 1, device=weight.device, dtype=weight.dtype).bernoulli_(1 - p)  # (V, 1)
    return weight * keep / (1 - p)


class LockedDropout(nn.Module):
    """Variational dropout: one mask per sequence, the same at every time step (Merity et al. §4.2). x (B, T, C)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        mask = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1 - self.p) / (1 - self.p)  # (B, 1, C)
        return x * mask


class WeightDropLSTM(nn.Module):
    """One nn.LSTM layer whose hidden-to-hidden matrix W_hh gets DropConnect (Wan et al. 2013) in training: a fresh
    mask per forward call, shared by every time step and every sequence of the batch (Merity et al. §2). In eval mode
    the matrix is used as it is (DropConnect's scaling by 1 / (1 - p) in training keeps the expectation).

    The parameter stays the LSTM's own `weight_hh_l0` (one name in the state dict); `dropped_weight_hh()` is the
    matrix a call uses."""

    def __init__(self, input_size: int, hidden_size: int, weight_drop: float = 0.0, bidirectional: bool = False):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, batch_first=True, bidirectional=bidirectional)
        self.weight_drop = float(weight_drop)
        self.names = ["weight_hh_l0"] + (["weight_hh_l0_reverse"] if bidirectional else [])

    def dropped_weight_hh(self, name: str = "weight_hh_l0") -> torch.Tensor:
        """(4H, H): the W_hh this call uses (a new DropConnect mask on every call in training)."""
        return F.dropout(getattr(self.lstm, name), self.weight_drop, self.training)

    def forward(self, x: torch.Tensor, state=None, lengths: torch.Tensor | None = None):
        """x (B, T, I) -> (outputs (B, T, H or 2H), (h, c)). `lengths` (B,): right-padded rows (packed for the call,
        so a backward direction starts at each row's last real token)."""
        if self.training and self.weight_drop > 0:
            weights = {name: self.dropped_weight_hh(name) for name in self.names}
            return run_lstm(lambda inp, st: functional_call(self.lstm, weights, (inp, st)), x, state, lengths)
        return run_lstm(self.lstm, x, state, lengths)


def run_lstm(lstm, x: torch.Tensor, state=None, lengths: torch.Tensor | None = None):
    """Call an LSTM on x (B, T, I), packing right-padded rows when `lengths` is given (outputs past a row's length
    are zeros). Returns (outputs (B, T, D), (h, c))."""
    if lengths is None:
        return lstm(x, state)
    packed = pack_padded_sequence(x, lengths.to("cpu"), batch_first=True, enforce_sorted=False)
    out, final = lstm(packed, state)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])  # (B, T, D)
    return out, final


# ------------------------------------------------------------------------------------------------ ELMo's scalar mix


class ScalarMix(nn.Module):
    """ELMo_k = gamma * sum_j s_j h_(k,j), with s = softmax(w) over the L + 1 layers (Peters et al. eq. 1).

    The weights w start at 0 (s uniform) and gamma at 1: the mix is task-specific and learned downstream; a freshly
    pretrained biLM's mix is the plain average of its layers."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(n_layers))  # w; s = softmax(w)
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, layers: list[torch.Tensor]) -> torch.Tensor:
        """L + 1 tensors (B, T, D) -> (B, T, D)."""
        if len(layers) != self.weights.numel():
            raise LabError("the scalar mix has {n_weights} weights but got {n_layers} layers",
                           n_weights=self.weights.numel(), n_layers=len(layers))
        s = torch.softmax(self.weights, dim=0)  # (L+1,)
        return self.gamma * torch.einsum("l,lbtd->btd", s, torch.stack(layers))  # (B, T, D)


# ------------------------------------------------------------------------------------------------ ULMFiT's rates


def slanted_triangular_lr(t: int, total: int, lr_max: float, cut_frac: float = 0.1, ratio: float = 32.0) -> float:
    """Howard & Ruder eq. 3: cut = floor(T * cut_frac); p = t / cut if t < cut else
    1 - (t - cut) / (cut * (1 / cut_frac - 1)); lr_t = lr_max * (1 + p * (ratio - 1)) / ratio.

    t is the 0-based iteration inside the schedule, T its number of iterations. At T = 1000: t = 0 gives
    lr_max / 32, t = 100 the peak lr_max, t = 1000 lr_max / 32 again. A schedule shorter than 1 / cut_frac steps has
    cut = 0: it starts at the peak and decays (the formula's second branch)."""
    if total < 1:
        raise LabError("a slanted triangular schedule needs at least 1 step, got {total}", total=total)
    cut = math.floor(total * cut_frac)
    if t < cut:
        p = t / cut
    else:
        p = 1 - (t - cut) / (cut * (1 / cut_frac - 1)) if cut > 0 else 1 - t / max(1, total)
    p = min(1.0, max(0.0, p))
    return lr_max * (1 + p * (ratio - 1)) / ratio


def discriminative_lrs(lr_top: float, n_groups: int, factor: float = 2.6) -> list[float]:
    """Per layer group, bottom first: lr^(l-1) = lr^l / factor (Howard & Ruder §3.2, factor 2.6)."""
    return [lr_top / factor ** (n_groups - 1 - g) for g in range(n_groups)]


# ------------------------------------------------------------------------------------------------ pooling


def lengths_of(input_ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B,) long: the number of tokens before the right padding of each row (at least 1)."""
    return (input_ids != pad_id).sum(dim=1).clamp(min=1)  # (B,)


def concat_pool(hidden: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """ULMFiT's h_c = [h_T; maxpool(H); meanpool(H)] over each row's real time steps. hidden (B, T, D) -> (B, 3D)."""
    B, T, D = hidden.shape
    real = torch.arange(T, device=hidden.device)[None, :] < lengths[:, None]  # (B, T)
    last = hidden[torch.arange(B, device=hidden.device), lengths - 1]  # (B, D): h_T
    masked = hidden.masked_fill(~real[..., None], float("-inf"))
    max_pool = masked.max(dim=1).values  # (B, D)
    mean_pool = (hidden * real[..., None]).sum(dim=1) / lengths[:, None].to(hidden.dtype)  # (B, D)
    return torch.cat([last, max_pool, mean_pool], dim=-1)  # (B, 3D)

"""The position-wise feed-forward layer of every Transformer block: dense, or the Switch Transformer's experts.

`FeedForward` is the paper's MLP, H -> d_ff -> H (Vaswani et al. 2017, §3.3), with the activation the config names
(GeLU for BERT and GPT-2, ReLU for T5 v1.0) and T5 v1.1's gated variant; `build_feed_forward` picks, per block, the
dense layer or a `SwitchFeedForward` (nn/moe.py) where the config puts Switch layers. No deviation from the papers'
layer; the fused `up` matrix of the gated variant is a layout choice (one matmul for both halves).
"""
from __future__ import annotations

import torch
from torch import nn

from lab_models.messages import LabError
from lab_models.nn.config import ModelConfig, is_switch_layer
from lab_models.nn.moe import SwitchFeedForward


def activation_module(name: str) -> nn.Module:
    """The module for a `ModelConfig.activation` name (no parameters, so the state dict is the same for all three).

    >>> activation_module("gelu_tanh")
    GELU(approximate='tanh')
    """
    if name == "gelu":
        return nn.GELU()  # the exact erf form (BERT, ELECTRA, XLNet)
    if name == "gelu_tanh":
        return nn.GELU(approximate="tanh")  # GPT, GPT-2, ALBERT v2: HF's gelu_new / gelu_pytorch_tanh
    if name == "relu":
        return nn.ReLU()
    raise LabError("unknown activation {name!r}: choose gelu, gelu_tanh or relu", name=name)


class FeedForward(nn.Module):
    """Position-wise MLP: H -> d_ff -> H with config.activation (GeLU: BERT, GPT-2; ReLU: T5 v1.0).

    ffn_gated (T5 v1.1's gated-GeLU): act(x W_0) * (x W_1) -> W_o. W_0 and W_1 are one fused (2 d_ff, H) matrix
    `up` (rows [W_0; W_1]), so the two products are one matmul."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gated = config.ffn_gated
        self.d_ff = config.d_ff
        width = 2 * config.d_ff if self.gated else config.d_ff
        self.up = nn.Linear(config.d_model, width, bias=config.linear_bias)
        # named like attention's output projection: residual init
        self.proj = nn.Linear(config.d_ff, config.d_model, bias=config.linear_bias)
        self.act = activation_module(config.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            activated, linear = self.up(x).split(self.d_ff, dim=-1)  # 2 x (B, T, d_ff)
            return self.proj(self.act(activated) * linear)  # (B, T, H)
        return self.proj(self.act(self.up(x)))  # (B, T, d_ff) -> (B, T, H)


def build_feed_forward(config: ModelConfig, layer_index: int) -> nn.Module:
    """Block `layer_index`'s feed-forward (0-based): a `SwitchFeedForward` where `is_switch_layer` puts one, else the
    backbone's dense `FeedForward`."""
    return SwitchFeedForward(config) if is_switch_layer(config, layer_index) else FeedForward(config)

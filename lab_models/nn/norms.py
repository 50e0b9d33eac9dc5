"""The normalisation layers the backbone can be built with: LayerNorm (BERT, GPT-2) or T5's RMS norm.

Paper: Zhang & Sennrich (2019), Root Mean Square Layer Normalization, NeurIPS; used by T5 (Raffel et al. 2020,
§2.1: "a simplified version of layer normalization where the activations are only rescaled and no additive bias is
applied"). Reference code: Hugging Face `T5LayerNorm` (transformers/models/t5/modeling_t5.py), which follows Mesh
TensorFlow.

    RMSNorm(x) = x / sqrt(mean(x^2) + eps) * weight        (no mean subtraction, no bias)

`make_norm(config, width)` picks the kind from `config.norm_type`, so every place the backbone normalises (each
block, the final norms, the embedding norm of post-LN models, the MLM transform) follows the one switch.

Worked example (one vector [3, 4]: its mean square is 12.5, so it is divided by sqrt(12.5) = 3.5355...):

>>> import torch
>>> norm = RMSNorm(2, eps=0.0)
>>> [round(v, 4) for v in norm(torch.tensor([[3.0, 4.0]]))[0].tolist()]
[0.8485, 1.1314]

Deviation from the reference: none in float32. Under bf16 or fp16 the reference multiplies by the weight after casting
back to the weight's half dtype; here the weight is applied in float32 (autocast keeps parameters in float32) and the
result is cast to the input's dtype, a difference in the last bit.
"""
from __future__ import annotations

import torch
from torch import nn

from lab_models.nn.config import ModelConfig


class RMSNorm(nn.RMSNorm):
    """torch's `nn.RMSNorm`, always computed in float32 (T5LayerNorm: the mean of squares of half-precision inputs
    is accumulated in float32), returned in the input's dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.float()).to(x.dtype)  # (..., width)


def make_norm(config: ModelConfig, width: int) -> nn.Module:
    """The norm `config.norm_type` asks for, over the last `width` features, with `config.layer_norm_eps`."""
    if config.norm_type == "rmsnorm":
        return RMSNorm(width, eps=config.layer_norm_eps)
    return nn.LayerNorm(width, eps=config.layer_norm_eps)

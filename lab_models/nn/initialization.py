"""Weight initialization: GPT-2 / BERT's N(0, 0.02) (`init_weights`), and T5's for a backbone built without the
attention scale (`attention_scale=False`, `t5_init_weights`).

Paper: Raffel et al. (2020), T5; the scheme is Mesh TensorFlow's, as Hugging Face's `T5PreTrainedModel._init_weights`
writes it (transformers/models/t5/modeling_t5.py). T5 computes attention logits as q.k without dividing by
sqrt(d_kv): "we fold the 1/sqrt(d) into the initialization of the query projection". Its init is what keeps those
unscaled logits, and its std-1 embeddings, in a trainable range:

    token embedding (and an untied output matrix)   N(0, 1)
    query projection W_q                            N(0, (d_model * d_kv)^-0.5)
    key and value projections W_k, W_v              N(0, d_model^-0.5)
    output projection W_o                           N(0, (n_heads * d_kv)^-0.5)
    feed-forward W_i (both halves when gated)       N(0, d_model^-0.5)
    feed-forward W_o                                N(0, d_ff^-0.5)
    (Switch layers: every expert's W_i and W_o likewise; the router keeps Switch's own small init)
    relative position bias tables                   N(0, d_model^-0.5)
    norms                                           weight 1 (and bias 0, if LayerNorm)

Worked example (the query rows of a tiny attention get the small std, the key rows the larger one):

>>> import torch
>>> from lab_models.nn.backbone import Backbone
>>> from lab_models.nn.config import ModelConfig
>>> _ = torch.manual_seed(0)
>>> b = Backbone(ModelConfig(vocab_size=100, d_model=64, n_heads=4, d_ff=128, attention_scale=False))
>>> q, k, _ = b.blocks[0].attn.qkv.weight.split(64)
>>> round(q.std().item() / (64 * 16) ** -0.5, 1), round(k.std().item() / 64 ** -0.5, 1)
(1.0, 1.0)

Deviations: parameters T5 does not have keep the lab's init (learned absolute positions, segment tables, an MLM
transform, XLNet's w: N(0, 0.02); biases: 0).
"""
from __future__ import annotations

import torch
from torch import nn

from lab_models.nn.attention import MultiHeadAttention
from lab_models.nn.feed_forward import FeedForward
from lab_models.nn.moe import SwitchFeedForward
from lab_models.nn.relative_position import RelativePositionBias


def normal_init_(tensor: torch.Tensor, std: float) -> None:
    """N(0, std) in place; nothing on the meta device. lab_models/interop builds a model's structure on `meta` (no
    memory, no init) before it assigns a checkpoint's tensors, and torch's normal_ has no meta kernel: its Python
    fallback imports torch._dynamo, seconds for nothing."""
    if not tensor.is_meta:
        nn.init.normal_(tensor, mean=0.0, std=std)


def embedding_table(rows: int, width: int) -> nn.Embedding:
    """nn.Embedding(rows, width), whose own N(0, 1) init (about to be replaced by `init_weights`) is skipped on the
    meta device (see `normal_init_`); on a real device it draws exactly what nn.Embedding draws."""
    if torch.get_default_device().type == "meta":
        return nn.Embedding(rows, width, _weight=torch.empty(rows, width))
    return nn.Embedding(rows, width)


def init_weights(module: nn.Module) -> None:
    """GPT-2 / BERT init: N(0, 0.02) weights, zero biases, LayerNorm weight 1 and bias 0. Use with `module.apply`."""
    if isinstance(module, nn.Linear):
        normal_init_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        normal_init_(module.weight, std=0.02)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)



def t5_init_weights(backbone: nn.Module) -> None:
    """Re-initialise `backbone` (a `Backbone`) in place with T5's scheme (see the module docstring)."""
    config = backbone.config
    d_model, d_kv, n_heads, d_ff = config.d_model, config.head_size, config.n_heads, config.d_ff
    nn.init.normal_(backbone.embeddings.token.weight, mean=0.0, std=1.0)
    if backbone.lm_out is not None:
        nn.init.normal_(backbone.lm_out.weight, mean=0.0, std=1.0)
    for module in backbone.modules():
        if isinstance(module, MultiHeadAttention):
            w_q, w_k, w_v = module.qkv.weight.split(module.inner, dim=0)  # 3 x (A, H), views of the fused weight
            nn.init.normal_(w_q, mean=0.0, std=(d_model * d_kv) ** -0.5)
            nn.init.normal_(w_k, mean=0.0, std=d_model ** -0.5)
            nn.init.normal_(w_v, mean=0.0, std=d_model ** -0.5)
            nn.init.normal_(module.proj.weight, mean=0.0, std=(n_heads * d_kv) ** -0.5)
        elif isinstance(module, FeedForward):
            nn.init.normal_(module.up.weight, mean=0.0, std=d_model ** -0.5)
            nn.init.normal_(module.proj.weight, mean=0.0, std=d_ff ** -0.5)
        elif isinstance(module, SwitchFeedForward):  # every expert as T5's feed-forward; the router keeps its own
            nn.init.normal_(module.up, mean=0.0, std=d_model ** -0.5)
            nn.init.normal_(module.proj, mean=0.0, std=d_ff ** -0.5)
        elif isinstance(module, RelativePositionBias):
            nn.init.normal_(module.table.weight, mean=0.0, std=d_model ** -0.5)

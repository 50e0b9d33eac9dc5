"""GPT-2 (Radford et al. 2019) checkpoints <-> the lab's `gpt2` family. Reference: transformers' `GPT2LMHeadModel`.

GPT-2 is the lab's pre-LN backbone as it is: token + learned position embeddings (no LayerNorm on them), blocks
x + attn(LN(x)), x + mlp(LN(x)), a final LayerNorm, and the tied embedding matrix as the output layer without a bias.

    transformers (GPT2LMHeadModel)                 the lab (FamilyModel "gpt2")
    transformer.wte.weight (V, H)                  backbone.embeddings.token.weight
    transformer.wpe.weight (P, H)                  backbone.embeddings.positions.0.weight
    transformer.h.{i}.ln_1 / ln_2                  backbone.blocks.{i}.ln_attn / ln_ff
    transformer.h.{i}.attn.c_attn (Conv1D H, 3H)   backbone.blocks.{i}.attn.qkv (Linear 3H, H): transposed
    transformer.h.{i}.attn.c_proj (Conv1D)         backbone.blocks.{i}.attn.proj: transposed
    transformer.h.{i}.mlp.c_fc / c_proj (Conv1D)   backbone.blocks.{i}.ff.up / ff.proj: transposed
    transformer.ln_f                               backbone.ln_f
    lm_head.weight (tied: not stored)              the token embedding (or backbone.lm_out when untied)

Conv1D stores y = x W + b with W (in, out); nn.Linear stores W (out, in): the converter transposes, nothing else.
The activation is the config's `activation_function` (gelu_new, the tanh GeLU, for the released models).

Deviations: none in the forward pass. Refused: `scale_attn_weights=false` and `scale_attn_by_inverse_layer_idx`
(the lab always scales by 1/sqrt(head size)), cross-attention layers, an activation the backbone lacks.

Worked example (the config a tiny GPT-2 becomes):

>>> config, settings, objectives = import_config({"model_type": "gpt2", "vocab_size": 50, "n_embd": 16,
...     "n_layer": 2, "n_head": 2, "n_positions": 32, "activation_function": "gelu_new"})
>>> config.norm, config.d_ff, config.activation, config.lm_bias, config.has_embedding_norm, objectives
('pre', 64, 'gelu_tanh', False, False, {'clm': 1.0})
"""
from __future__ import annotations

import torch

from lab_models.messages import Message
from lab_models.models.family import family_model_config
from lab_models.nn.config import ModelConfig
from lab_models.interop.convert import (LAB_TO_HF_ACTIVATION, StateReader, lab_activation, openai_blocks_from_lab,
                                        openai_blocks_to_lab, owned, require)

FAMILY = "gpt2"
MODEL_TYPES = ("gpt2",)
USES_MASK_TOKEN = False  # a causal LM never reads [MASK]: it stands in as the end-of-text token
HF_ARCHITECTURES = ("GPT2LMHeadModel",)


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    c = hf_config
    require(c.get("scale_attn_weights", True) is True,
            Message("config.json scale_attn_weights=false: the lab always scales attention by 1/sqrt(head size)"))
    require(not c.get("scale_attn_by_inverse_layer_idx", False),
            Message("config.json scale_attn_by_inverse_layer_idx=true: the lab's attention has no per-layer scale"))
    require(not c.get("add_cross_attention", False),
            Message("config.json add_cross_attention=true: a GPT-2 with cross-attention is not a language model the "
                    "lab has"))
    H = int(c["n_embd"])
    config = family_model_config(
        FAMILY, "base", int(c["vocab_size"]), d_model=H, n_layers=int(c["n_layer"]), n_heads=int(c["n_head"]),
        d_ff=int(c.get("n_inner") or 4 * H), max_positions=int(c["n_positions"]),
        dropout=float(c.get("resid_pdrop", 0.1)), layer_norm_eps=float(c.get("layer_norm_epsilon", 1e-5)),
        activation=lab_activation(c.get("activation_function", "gelu_new"), "activation_function"),
        tie_embeddings=bool(c.get("tie_word_embeddings", True)), lm_bias=False, embedding_norm=None)
    return config, {}, {"clm": 1.0}


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    cfg = model.model_config
    V, H, P = cfg.vocab_size, cfg.d_model, cfg.max_positions
    r = StateReader(hf_state, ("transformer.",))
    state = {"backbone.embeddings.token.weight": r.take("wte.weight", (V, H)),
             "backbone.embeddings.positions.0.weight": r.take("wpe.weight", (P, H))}
    state.update(openai_blocks_to_lab(r, model))
    state["backbone.ln_f.weight"] = r.take("ln_f.weight", (H,))
    state["backbone.ln_f.bias"] = r.take("ln_f.bias", (H,))
    if cfg.tie_embeddings:
        r.ignore("lm_head.weight")  # a tied copy of wte, if the file stores one
    else:
        state["backbone.lm_out.weight"] = r.take("lm_head.weight", (V, H))
    r.check_all_used()
    return state


def _check_exportable(model) -> ModelConfig:
    cfg = model.model_config
    why = Message("transformers' GPT2LMHeadModel has no such option")
    require(model.family == FAMILY, Message("this is a {family} run, not GPT-2", family=model.family))
    require(cfg.norm == "pre" and not cfg.has_embedding_norm,
            Message("the run is post-LN or has an embedding LayerNorm: {why}", why=why))
    require(not cfg.lm_bias, Message("the run's output layer has a bias (lm_bias=true), which GPT-2's has not: {why}. "
                                     "Train it again with the current defaults", why=why))
    require(cfg.lm_transform is False and cfg.embedding_size is None, Message("the run has an LM transform or "
                                                                              "factorised embeddings: {why}", why=why))
    require(cfg.n_segments == 0 and cfg.n_position_rows == 1 and not cfg.share_layers and cfg.decoder_layers == 0,
            Message("the run has segments, 2-D positions, shared layers or a decoder: {why}", why=why))
    return cfg


def export_config(model) -> dict:
    cfg = _check_exportable(model)
    v = model.vocab
    return {"architectures": list(HF_ARCHITECTURES), "model_type": "gpt2", "vocab_size": cfg.vocab_size,
            "n_embd": cfg.d_model, "n_layer": cfg.n_layers, "n_head": cfg.n_heads, "n_inner": cfg.d_ff,
            "n_positions": cfg.max_positions, "layer_norm_epsilon": cfg.layer_norm_eps,
            "activation_function": LAB_TO_HF_ACTIVATION[cfg.activation], "resid_pdrop": cfg.dropout,
            "embd_pdrop": cfg.dropout, "attn_pdrop": cfg.attention_dropout, "scale_attn_weights": True,
            "tie_word_embeddings": cfg.tie_embeddings, "bos_token_id": v.bos_id, "eos_token_id": v.eos_id,
            "pad_token_id": v.pad_id, "initializer_range": 0.02, "dtype": "float32"}


def export_state(model) -> dict[str, torch.Tensor]:
    cfg = _check_exportable(model)
    s = model.state_dict()
    out = {"transformer.wte.weight": s["backbone.embeddings.token.weight"],
           "transformer.wpe.weight": s["backbone.embeddings.positions.0.weight"],
           "transformer.ln_f.weight": s["backbone.ln_f.weight"], "transformer.ln_f.bias": s["backbone.ln_f.bias"]}
    out.update(openai_blocks_from_lab(s, cfg.n_layers))
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = s["backbone.lm_out.weight"]
    return owned(out)

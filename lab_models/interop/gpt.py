"""GPT (Radford et al. 2018) checkpoints <-> the lab's `gpt` family. Reference: transformers' `OpenAIGPTLMHeadModel`.

GPT-1 is post-LN without a LayerNorm on its summed embeddings: x = LN_1(x + attn(x)); x = LN_2(x + mlp(x)), no final
LayerNorm, a 4H feed-forward with the tanh GeLU (transformers calls it "gelu" in GPT's `afn`; it is `gelu_new`), and
the tied embedding matrix as the output layer without a bias: the lab's `gpt` family defaults.

    transformers (OpenAIGPTLMHeadModel)              the lab (FamilyModel "gpt")
    transformer.tokens_embed.weight (V, H)           backbone.embeddings.token.weight
    transformer.positions_embed.weight (P, H)        backbone.embeddings.positions.0.weight
    transformer.h.{i}.attn.c_attn / c_proj (Conv1D)  backbone.blocks.{i}.attn.qkv / proj: transposed
    transformer.h.{i}.ln_1 (after attention)         backbone.blocks.{i}.ln_attn
    transformer.h.{i}.mlp.c_fc / c_proj (Conv1D)     backbone.blocks.{i}.ff.up / ff.proj: transposed
    transformer.h.{i}.ln_2 (after the MLP)           backbone.blocks.{i}.ln_ff

The released GPT vocabulary has no end-of-text token; the importer appends "[EOS]" for the lab's document start
(lab_models/interop/hf_tokenizer.py), with the mean embedding row, and the run's note says so.

Deviations: transformers' GPT masks future positions with a score of -1e4 instead of -inf; after the softmax both are
exactly 0 in float32. Refused on import: an `afn` the backbone lacks (silu/swish). Refused on export: a run whose
feed-forward is not 4H wide, or built with the exact GeLU, an output bias or an embedding LayerNorm (a GPT run
trained with `--model activation=gelu lm_bias=true embedding_norm=true` has all three), since OpenAIGPT has none of
them.

Worked example:

>>> config, _, _ = import_config({"model_type": "openai-gpt", "vocab_size": 40, "n_embd": 16, "n_layer": 2,
...                               "n_head": 2, "n_positions": 32, "afn": "gelu"})
>>> config.norm, config.has_embedding_norm, config.activation, config.d_ff, config.lm_bias
('post', False, 'gelu_tanh', 64, False)
"""
from __future__ import annotations

import torch

from lab_models.messages import Message
from lab_models.models.family import family_model_config
from lab_models.nn.config import ModelConfig
from lab_models.interop.convert import StateReader, openai_blocks_from_lab, openai_blocks_to_lab, owned, require

FAMILY = "gpt"
MODEL_TYPES = ("openai-gpt",)
USES_MASK_TOKEN = False  # a causal LM never reads [MASK]: it stands in as the end-of-text token
HF_ARCHITECTURES = ("OpenAIGPTLMHeadModel",)
# OpenAIGPT's own activation table (modeling_openai.ACT_FNS): its "gelu" is the tanh approximation
AFN = {"gelu": "gelu_tanh", "relu": "relu"}
AFN_BACK = {"gelu_tanh": "gelu", "relu": "relu"}


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    c = hf_config
    afn = c.get("afn", "gelu")
    require(afn in AFN, Message("config.json afn={afn!r}: the lab's backbone has {choices} for GPT",
                                afn=afn, choices=', '.join(AFN)))
    H = int(c["n_embd"])
    config = family_model_config(
        FAMILY, "base", int(c["vocab_size"]), d_model=H, n_layers=int(c["n_layer"]), n_heads=int(c["n_head"]),
        d_ff=4 * H, max_positions=int(c["n_positions"]), dropout=float(c.get("resid_pdrop", 0.1)),
        layer_norm_eps=float(c.get("layer_norm_epsilon", 1e-5)), activation=AFN[afn],
        tie_embeddings=bool(c.get("tie_word_embeddings", True)), lm_bias=False, embedding_norm=False)
    return config, {}, {"clm": 1.0}


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    cfg = model.model_config
    V, H, P = cfg.vocab_size, cfg.d_model, cfg.max_positions
    r = StateReader(hf_state, ("transformer.",))
    state = {"backbone.embeddings.token.weight": r.take("tokens_embed.weight", (V, H)),
             "backbone.embeddings.positions.0.weight": r.take("positions_embed.weight", (P, H))}
    state.update(openai_blocks_to_lab(r, model))
    if cfg.tie_embeddings:
        r.ignore("lm_head.weight")
    else:
        state["backbone.lm_out.weight"] = r.take("lm_head.weight", (V, H))
    r.check_all_used()
    return state


def _check_exportable(model) -> ModelConfig:
    cfg = model.model_config
    why = Message("transformers' OpenAIGPTLMHeadModel has no such option; train it again with the current gpt defaults")
    require(model.family == FAMILY, Message("this is a {family} run, not GPT", family=model.family))
    require(cfg.norm == "post" and not cfg.has_embedding_norm,
            Message("the run is pre-LN or has a LayerNorm on its embeddings: {why}", why=why))
    require(not cfg.lm_bias, Message("the run's output layer has a bias: {why}", why=why))
    require(cfg.activation in AFN_BACK, Message("the run uses the exact GeLU, and OpenAIGPT's 'gelu' is the tanh "
                                                "form: {why}", why=why))
    require(cfg.d_ff == 4 * cfg.d_model, Message("the run's feed-forward is {d_ff} wide and OpenAIGPT's is always "
                                                 "4 x d_model = {expected_d_ff}",
                                                 d_ff=cfg.d_ff, expected_d_ff=4 * cfg.d_model))
    require(cfg.lm_transform is False and cfg.embedding_size is None and cfg.n_segments == 0
            and cfg.n_position_rows == 1 and not cfg.share_layers and cfg.decoder_layers == 0,
            Message("the run has an LM transform, factorised embeddings, segments, 2-D positions, shared layers or a "
                    "decoder: {why}", why=why))
    return cfg


def export_config(model) -> dict:
    cfg = _check_exportable(model)
    return {"architectures": list(HF_ARCHITECTURES), "model_type": "openai-gpt", "vocab_size": cfg.vocab_size,
            "n_embd": cfg.d_model, "n_layer": cfg.n_layers, "n_head": cfg.n_heads, "n_positions": cfg.max_positions,
            "afn": AFN_BACK[cfg.activation], "layer_norm_epsilon": cfg.layer_norm_eps, "resid_pdrop": cfg.dropout,
            "embd_pdrop": cfg.dropout, "attn_pdrop": cfg.attention_dropout,
            "tie_word_embeddings": cfg.tie_embeddings, "initializer_range": 0.02, "dtype": "float32"}


def export_state(model) -> dict[str, torch.Tensor]:
    cfg = _check_exportable(model)
    s = model.state_dict()
    out = {"transformer.tokens_embed.weight": s["backbone.embeddings.token.weight"],
           "transformer.positions_embed.weight": s["backbone.embeddings.positions.0.weight"]}
    out.update(openai_blocks_from_lab(s, cfg.n_layers))
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = s["backbone.lm_out.weight"]
    return owned(out)

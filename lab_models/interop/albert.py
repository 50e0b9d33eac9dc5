"""ALBERT (Lan et al. 2020) checkpoints <-> the lab's `albert` family. Reference: transformers' `AlbertForPreTraining`
(MLM + SOP) and `AlbertForMaskedLM` (MLM only).

ALBERT is the lab's post-LN backbone with factorised embeddings (V x E tables, an E -> H projection), one block that
every layer reuses, the MLM transform H -> E before the tied V x E matrix and its bias, and SOP through the pooler
and a 2-way classifier: the lab's `albert` family with `embedding_size=E`, `share_layers=True`.

    transformers                                               the lab (FamilyModel "albert")
    albert.embeddings.* (E wide)                               backbone.embeddings.token / positions.0 / segment / norm
    albert.encoder.embedding_hidden_mapping_in (E -> H)        backbone.embeddings.project
    albert.encoder.albert_layer_groups.{g}.albert_layers.0.    backbone.blocks.{g}.
        attention.query/key/value, attention.dense                 attn.qkv (concatenated), attn.proj
        attention.LayerNorm, ffn, ffn_output                       ln_attn, ff.up, ff.proj
        full_layer_layer_norm                                      ln_ff
    predictions.dense / LayerNorm / bias                       backbone.lm_transform.0 / .2, backbone.lm_bias
    albert.pooler, sop_classifier.classifier                   heads.sop.dense, heads.sop.out

Layer groups: one group (num_hidden_groups = 1, the released models) is the shared block; as many groups as layers
is ALBERT without sharing (`share_layers=False`); inner_group_num must be 1. Other splits are refused: the lab's
backbone shares all layers or none. The activation is the config's hidden_act (the v2 checkpoints' gelu_new is the
lab's `gelu_tanh`; the lab's own ALBERT keeps v1's exact GeLU). An ALBERT with E = H still has its E -> H
projection; the lab keeps it too (`embedding_size` = H). Deviations: none in the forward pass.

Worked example (albert-base-v2's shape, scaled down):

>>> config, settings, objectives = import_config({"model_type": "albert", "architectures": ["AlbertForMaskedLM"],
...     "vocab_size": 40, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 2,
...     "intermediate_size": 32, "max_position_embeddings": 24, "hidden_act": "gelu_new", "num_hidden_groups": 1})
>>> config.embedding_size, config.share_layers, config.activation, settings, objectives
(8, True, 'gelu_tanh', {'sop': False}, {'mlm': 1.0, 'sop': 0.0})
"""
from __future__ import annotations

import torch

from lab_models.messages import Message
from lab_models.models.family import family_model_config
from lab_models.nn.config import ModelConfig
from lab_models.interop.bert import check_encoder_exportable
from lab_models.interop.convert import (LAB_TO_HF_ACTIVATION, StateReader, bert_embeddings_from_lab,
                                        bert_embeddings_to_lab, fused_qkv, lab_activation, mlm_head_from_lab,
                                        mlm_head_to_lab, owned, require, require_absolute_positions,
                                        segments_from_type_vocab, split_qkv)

FAMILY = "albert"
MODEL_TYPES = ("albert",)
HF_ARCHITECTURES = ("AlbertForPreTraining", "AlbertForMaskedLM")
LAYER = "encoder.albert_layer_groups.{g}.albert_layers.0."
# the lab's block names -> ALBERT's, inside one layer
BLOCK_NAMES = {"attn.proj": "attention.dense", "ln_attn": "attention.LayerNorm", "ff.up": "ffn",
               "ff.proj": "ffn_output", "ln_ff": "full_layer_layer_norm"}


def _has_sop(hf_config: dict) -> bool:
    architectures = hf_config.get("architectures") or ["AlbertForMaskedLM"]
    known = [name for name in architectures if name in HF_ARCHITECTURES]
    require(bool(known), Message("config.json architectures {architectures}: the lab imports ALBERT with its "
                                 "pretraining head ({hf_architectures})",
                                 architectures=architectures, hf_architectures=' or '.join(HF_ARCHITECTURES)))
    return known[0] == "AlbertForPreTraining"


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    c = hf_config
    require_absolute_positions(c)
    layers, groups = int(c["num_hidden_layers"]), int(c.get("num_hidden_groups", 1))
    require(int(c.get("inner_group_num", 1)) == 1, Message("config.json inner_group_num={inner_group_num}: the "
                                                           "lab's ALBERT has one layer per group",
                                                           inner_group_num=c.get('inner_group_num')))
    require(groups in (1, layers), Message("config.json num_hidden_groups={groups} with {layers} layers: the lab's "
                                           "backbone shares every layer (1 group) or none (one group per layer)",
                                           groups=groups, layers=layers))
    sop = _has_sop(c)
    config = family_model_config(
        FAMILY, "base", int(c["vocab_size"]), d_model=int(c["hidden_size"]), n_layers=layers,
        n_heads=int(c["num_attention_heads"]), d_ff=int(c["intermediate_size"]),
        max_positions=int(c["max_position_embeddings"]), dropout=float(c.get("hidden_dropout_prob", 0.0)),
        layer_norm_eps=float(c.get("layer_norm_eps", 1e-12)), embedding_size=int(c.get("embedding_size", 128)),
        share_layers=groups == 1, activation=lab_activation(c.get("hidden_act", "gelu_new"), "hidden_act"),
        n_segments=segments_from_type_vocab(c, 2), tie_embeddings=bool(c.get("tie_word_embeddings", True)),
        lm_bias=True, embedding_norm=True)
    return config, {"sop": sop}, {"mlm": 1.0, "sop": 1.0 if sop else 0.0}


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    cfg = model.model_config
    V, H, E, F = cfg.vocab_size, cfg.d_model, cfg.embedding_width, cfg.d_ff
    r = StateReader(hf_state, ("albert.",))
    state = bert_embeddings_to_lab(r, "backbone.embeddings.", cfg)
    state["backbone.embeddings.project.weight"] = r.take("encoder.embedding_hidden_mapping_in.weight", (H, E))
    state["backbone.embeddings.project.bias"] = r.take("encoder.embedding_hidden_mapping_in.bias", (H,))
    shapes = {"attn.proj": ((H, H), (H,)), "ln_attn": ((H,), (H,)), "ff.up": ((F, H), (F,)),
              "ff.proj": ((H, F), (H,)), "ln_ff": ((H,), (H,))}
    for g in range(len(model.backbone.blocks)):
        hf, lab = LAYER.format(g=g), f"backbone.blocks.{g}."
        qkv = fused_qkv(r, f"{hf}attention.", H)
        state[f"{lab}attn.qkv.weight"], state[f"{lab}attn.qkv.bias"] = qkv["weight"], qkv["bias"]
        for lab_name, hf_name in BLOCK_NAMES.items():
            weight_shape, bias_shape = shapes[lab_name]
            state[f"{lab}{lab_name}.weight"] = r.take(f"{hf}{hf_name}.weight", weight_shape)
            state[f"{lab}{lab_name}.bias"] = r.take(f"{hf}{hf_name}.bias", bias_shape)
    state.update(mlm_head_to_lab(r, "predictions.dense", "predictions.LayerNorm",
                                 "predictions.bias" if r.has("predictions.bias") else "predictions.decoder.bias",
                                 width=E, hidden=H, vocab=V))
    r.ignore("predictions.decoder.bias")  # the same parameter as predictions.bias
    if cfg.tie_embeddings:
        r.ignore("predictions.decoder.weight")
    else:
        state["backbone.lm_out.weight"] = r.take("predictions.decoder.weight", (V, E))
    if "sop" in model.heads:
        state.update({"heads.sop.dense.weight": r.take("pooler.weight", (H, H)),
                      "heads.sop.dense.bias": r.take("pooler.bias", (H,)),
                      "heads.sop.out.weight": r.take("sop_classifier.classifier.weight", (2, H)),
                      "heads.sop.out.bias": r.take("sop_classifier.classifier.bias", (2,))})
    else:  # AlbertForMaskedLM has no pooler: transformers drops these too
        for name in ("pooler.weight", "pooler.bias", "sop_classifier.classifier.weight",
                     "sop_classifier.classifier.bias"):
            r.ignore(name)
    r.check_all_used()
    return state


def _check(model) -> ModelConfig:
    cfg = check_encoder_exportable(model, FAMILY, "AlbertForPreTraining")
    require(cfg.lm_bias, Message("the run's output layer has no bias; transformers' ALBERT always has one"))
    return cfg


def export_config(model) -> dict:
    cfg = _check(model)
    sop = "sop" in model.heads
    return {"architectures": [HF_ARCHITECTURES[0 if sop else 1]], "model_type": "albert",
            "vocab_size": cfg.vocab_size, "embedding_size": cfg.embedding_width, "hidden_size": cfg.d_model,
            "num_hidden_layers": cfg.n_layers, "num_hidden_groups": 1 if cfg.share_layers else cfg.n_layers,
            "inner_group_num": 1, "num_attention_heads": cfg.n_heads, "intermediate_size": cfg.d_ff,
            "max_position_embeddings": cfg.max_positions, "type_vocab_size": max(cfg.n_segments, 1),
            "hidden_act": LAB_TO_HF_ACTIVATION[cfg.activation], "hidden_dropout_prob": cfg.dropout,
            "attention_probs_dropout_prob": cfg.attention_dropout, "layer_norm_eps": cfg.layer_norm_eps,
            "position_embedding_type": "absolute", "tie_word_embeddings": cfg.tie_embeddings,
            "pad_token_id": model.vocab.pad_id, "bos_token_id": model.vocab.bos_id,
            "eos_token_id": model.vocab.eos_id, "initializer_range": 0.02, "dtype": "float32"}


def export_state(model) -> dict[str, torch.Tensor]:
    cfg = _check(model)
    s = model.state_dict()
    H = cfg.d_model
    out = bert_embeddings_from_lab(s, "backbone.embeddings.", "albert.", cfg)
    if cfg.embedding_size is None:  # E = H without a projection in the lab: ALBERT's is then the identity
        weight, bias = torch.eye(H), torch.zeros(H)
    else:
        weight, bias = s["backbone.embeddings.project.weight"], s["backbone.embeddings.project.bias"]
    out["albert.encoder.embedding_hidden_mapping_in.weight"] = weight
    out["albert.encoder.embedding_hidden_mapping_in.bias"] = bias
    for g in range(len(model.backbone.blocks)):
        hf, lab = "albert." + LAYER.format(g=g), f"backbone.blocks.{g}."
        for name, (w, b) in split_qkv(s[f"{lab}attn.qkv.weight"], s[f"{lab}attn.qkv.bias"]).items():
            out[f"{hf}attention.{name}.weight"], out[f"{hf}attention.{name}.bias"] = w, b
        for lab_name, hf_name in BLOCK_NAMES.items():
            out[f"{hf}{hf_name}.weight"] = s[f"{lab}{lab_name}.weight"]
            out[f"{hf}{hf_name}.bias"] = s[f"{lab}{lab_name}.bias"]
    out.update(mlm_head_from_lab(s, "predictions.dense", "predictions.LayerNorm", "predictions.bias"))
    if not cfg.tie_embeddings:
        out["predictions.decoder.weight"] = s["backbone.lm_out.weight"]
    if "sop" in model.heads:
        out.update({"albert.pooler.weight": s["heads.sop.dense.weight"],
                    "albert.pooler.bias": s["heads.sop.dense.bias"],
                    "sop_classifier.classifier.weight": s["heads.sop.out.weight"],
                    "sop_classifier.classifier.bias": s["heads.sop.out.bias"]})
    return owned(out)

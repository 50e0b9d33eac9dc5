"""BERT (Devlin et al. 2019) checkpoints <-> the lab's `bert` family. Reference: transformers' `BertForPreTraining`
(MLM + NSP) and `BertForMaskedLM` (MLM only).

BERT is the lab's post-LN backbone with an embedding LayerNorm, two token types, the MLM transform (dense, GeLU,
LayerNorm) before the tied output matrix and its bias, and NSP through the pooler (dense + tanh on [CLS]) and a 2-way
classifier: exactly the lab's `bert` family.

    transformers                                        the lab (FamilyModel "bert")
    bert.embeddings.word/position/token_type_embeddings backbone.embeddings.token / positions.0 / segment
    bert.embeddings.LayerNorm                           backbone.embeddings.norm
    bert.encoder.layer.{i}.attention.self.q/k/v         backbone.blocks.{i}.attn.qkv (concatenated)
    bert.encoder.layer.{i}.attention.output.dense/LN    backbone.blocks.{i}.attn.proj / ln_attn
    bert.encoder.layer.{i}.intermediate/output.dense    backbone.blocks.{i}.ff.up / ff.proj, output.LayerNorm: ln_ff
    cls.predictions.transform.dense / LayerNorm         backbone.lm_transform.0 / .2
    cls.predictions.bias                                backbone.lm_bias
    bert.pooler.dense, cls.seq_relationship             heads.nsp.dense, heads.nsp.out

Which head: config.json "architectures". BertForPreTraining brings NSP (objective weights mlm 1, nsp 1);
BertForMaskedLM does not, and its pooler and NSP weights, when the file still has them (bert-base-uncased's does),
are dropped as transformers drops them for that class. Deviations: none in the forward pass. Refused: relative
position embeddings, decoder variants, a BertModel without the MLM head.

Worked example:

>>> config, settings, objectives = import_config({"model_type": "bert", "architectures": ["BertForMaskedLM"],
...     "vocab_size": 30, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
...     "intermediate_size": 32, "max_position_embeddings": 24, "type_vocab_size": 2})
>>> config.n_segments, config.lm_transform, config.layer_norm_eps, settings, objectives
(2, True, 1e-12, {'nsp': False}, {'mlm': 1.0, 'nsp': 0.0})
"""
from __future__ import annotations

import torch

from lab_models.messages import Message
from lab_models.models.family import family_model_config
from lab_models.nn.config import ModelConfig
from lab_models.interop.convert import (LAB_TO_HF_ACTIVATION, StateReader, bert_embeddings_from_lab,
                                        bert_embeddings_to_lab, bert_layer_from_lab, bert_layer_to_lab, lab_activation,
                                        mlm_head_from_lab, mlm_head_to_lab, owned, require, require_absolute_positions,
                                        segments_from_type_vocab)

FAMILY = "bert"
MODEL_TYPES = ("bert",)
HF_ARCHITECTURES = ("BertForPreTraining", "BertForMaskedLM")


def _has_nsp(hf_config: dict) -> bool:
    architectures = hf_config.get("architectures") or ["BertForMaskedLM"]
    known = [name for name in architectures if name in HF_ARCHITECTURES]
    require(bool(known), Message("config.json architectures {architectures}: the lab imports BERT with its pretraining "
                                 "head ({hf_architectures}); a {first_architecture} has no MLM head to predict "
                                 "tokens with",
                                 architectures=architectures, hf_architectures=' or '.join(HF_ARCHITECTURES),
                                 first_architecture=architectures[0]))
    return known[0] == "BertForPreTraining"


def encoder_config(hf_config: dict, family: str, **extra) -> ModelConfig:
    """The ModelConfig of a BERT-style encoder config.json (BERT, RoBERTa, ELECTRA share these fields)."""
    c = hf_config
    require_absolute_positions(c)
    return family_model_config(
        family, "base", int(c["vocab_size"]), d_model=int(c["hidden_size"]), n_layers=int(c["num_hidden_layers"]),
        n_heads=int(c["num_attention_heads"]), d_ff=int(c["intermediate_size"]),
        max_positions=int(c["max_position_embeddings"]), dropout=float(c.get("hidden_dropout_prob", 0.1)),
        layer_norm_eps=float(c.get("layer_norm_eps", 1e-12)),
        activation=lab_activation(c.get("hidden_act", "gelu"), "hidden_act"),
        tie_embeddings=bool(c.get("tie_word_embeddings", True)), **extra)


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    nsp = _has_nsp(hf_config)
    config = encoder_config(hf_config, FAMILY, n_segments=segments_from_type_vocab(hf_config, 2),
                            lm_transform=True, lm_bias=True, embedding_norm=True)
    return config, {"nsp": nsp}, {"mlm": 1.0, "nsp": 1.0 if nsp else 0.0}


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    cfg = model.model_config
    V, H = cfg.vocab_size, cfg.d_model
    r = StateReader(hf_state, ("bert.",))
    state = bert_embeddings_to_lab(r, "backbone.embeddings.", cfg)
    for i in range(cfg.n_layers):
        state.update(bert_layer_to_lab(r, f"encoder.layer.{i}.", f"backbone.blocks.{i}.", H, cfg.d_ff))
    bias = "cls.predictions.bias" if r.has("cls.predictions.bias") else "cls.predictions.decoder.bias"
    state.update(mlm_head_to_lab(r, "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", bias,
                                 width=H, hidden=H, vocab=V))
    r.ignore("cls.predictions.decoder.bias")  # the same parameter as cls.predictions.bias
    if cfg.tie_embeddings:
        r.ignore("cls.predictions.decoder.weight")
    else:
        state["backbone.lm_out.weight"] = r.take("cls.predictions.decoder.weight", (V, H))
    if "nsp" in model.heads:
        state.update({"heads.nsp.dense.weight": r.take("pooler.dense.weight", (H, H)),
                      "heads.nsp.dense.bias": r.take("pooler.dense.bias", (H,)),
                      "heads.nsp.out.weight": r.take("cls.seq_relationship.weight", (2, H)),
                      "heads.nsp.out.bias": r.take("cls.seq_relationship.bias", (2,))})
    else:  # BertForMaskedLM: transformers drops these too
        for name in ("pooler.dense.weight", "pooler.dense.bias", "cls.seq_relationship.weight",
                     "cls.seq_relationship.bias"):
            r.ignore(name)
    r.check_all_used()
    return state


def check_encoder_exportable(model, family: str, reference: str, *, lm_transform: bool = True) -> ModelConfig:
    """The options a BERT-style transformers class fixes; ValueError naming the first one the run differs in."""
    cfg = model.model_config
    why = Message("transformers' {reference} has no such option", reference=reference)
    require(model.family == family, Message("this is a {model_family} run, not {family}",
                                            model_family=model.family, family=family))
    require(cfg.norm == "post" and cfg.has_embedding_norm, Message("the run is pre-LN or has no embedding LayerNorm: "
                                                                   "{why}", why=why))
    require(cfg.lm_transform == lm_transform or cfg.embedding_size is not None,
            Message("the run has no MLM transform: {why}", why=why) if lm_transform
            else Message("the run has an MLM transform: {why}", why=why))
    require(cfg.n_position_rows == 1 and cfg.decoder_layers == 0 and cfg.query_stream is None,
            Message("the run has 2-D positions, a decoder or a query stream: {why}", why=why))
    return cfg


def export_config(model) -> dict:
    cfg = check_encoder_exportable(model, FAMILY, "BertForPreTraining")
    require(cfg.embedding_size is None and not cfg.share_layers and cfg.lm_bias,
            Message("the run has factorised embeddings, shared layers or no output bias: transformers' BERT has none "
                    "of them"))
    nsp = "nsp" in model.heads
    return {**encoder_export_fields(model), "architectures": [HF_ARCHITECTURES[0 if nsp else 1]],
            "model_type": "bert", "type_vocab_size": max(cfg.n_segments, 1)}


def encoder_export_fields(model) -> dict:
    """The config.json fields BERT, RoBERTa and ELECTRA share."""
    cfg = model.model_config
    return {"vocab_size": cfg.vocab_size, "hidden_size": cfg.d_model, "num_hidden_layers": cfg.n_layers,
            "num_attention_heads": cfg.n_heads, "intermediate_size": cfg.d_ff,
            "max_position_embeddings": cfg.max_positions, "hidden_act": LAB_TO_HF_ACTIVATION[cfg.activation],
            "hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.attention_dropout,
            "layer_norm_eps": cfg.layer_norm_eps, "position_embedding_type": "absolute",
            "tie_word_embeddings": cfg.tie_embeddings, "pad_token_id": model.vocab.pad_id, "initializer_range": 0.02,
            "dtype": "float32"}


def export_state(model) -> dict[str, torch.Tensor]:
    cfg = check_encoder_exportable(model, FAMILY, "BertForPreTraining")
    s = model.state_dict()
    out = bert_embeddings_from_lab(s, "backbone.embeddings.", "bert.", cfg)
    for i in range(cfg.n_layers):
        out.update(bert_layer_from_lab(s, f"backbone.blocks.{i}.", f"bert.encoder.layer.{i}."))
    out.update(mlm_head_from_lab(s, "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                                 "cls.predictions.bias"))
    if not cfg.tie_embeddings:
        out["cls.predictions.decoder.weight"] = s["backbone.lm_out.weight"]
    if "nsp" in model.heads:
        out.update({"bert.pooler.dense.weight": s["heads.nsp.dense.weight"],
                    "bert.pooler.dense.bias": s["heads.nsp.dense.bias"],
                    "cls.seq_relationship.weight": s["heads.nsp.out.weight"],
                    "cls.seq_relationship.bias": s["heads.nsp.out.bias"]})
    return owned(out)

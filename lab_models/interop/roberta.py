"""RoBERTa (Liu et al. 2019) checkpoints <-> the lab's `roberta` family. Reference: transformers'
`RobertaForMaskedLM`.

RoBERTa is BERT's encoder without NSP, with its LM head `lm_head` (dense, GeLU, LayerNorm, tied decoder, bias): the
lab's `roberta` family. Two details of fairseq's embeddings are converted exactly rather than added as options:

- Positions start at padding_idx + 1 (fairseq numbers them past the pad index; padding_idx = pad_token_id = 1 in
  the released models), so the lab's position i is the checkpoint's row i + 2: the table is sliced, and
  max_positions is max_position_embeddings - 2 (roberta-base: 514 rows, 512 positions).
- The token-type table has one row (type_vocab_size = 1), added to every token: it is folded into the position
  table (row 0 added to every position row), which gives the same sums.

    transformers (RobertaForMaskedLM)               the lab (FamilyModel "roberta")
    roberta.embeddings.word_embeddings              backbone.embeddings.token
    roberta.embeddings.position_embeddings[2:]      backbone.embeddings.positions.0 (+ token_type row 0)
    roberta.embeddings.LayerNorm                    backbone.embeddings.norm
    roberta.encoder.layer.{i}.*                     backbone.blocks.{i}.* (as BERT's, lab_models/interop/bert.py)
    lm_head.dense / layer_norm / bias               backbone.lm_transform.0 / .2, backbone.lm_bias

Export writes the inverse: zero rows before the positions, pad_token_id = the run's [PAD] id, a zero one-row
token-type table. Deviations: positions follow the index in the lab; transformers gives a pad token inside the text
the pad position (the lab never feeds one there). Refused: a hidden_act other than gelu (transformers' RoBERTa LM
head applies the exact GeLU whatever hidden_act says, and the lab's backbone uses one activation throughout).

Worked example:

>>> config, settings, objectives = import_config({"model_type": "roberta", "vocab_size": 40, "hidden_size": 16,
...     "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 34,
...     "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5})
>>> config.max_positions, config.n_segments, config.lm_transform, objectives
(32, 0, True, {'mlm': 1.0})
"""
from __future__ import annotations

import torch

from lab_models.messages import Message
from lab_models.nn.config import ModelConfig
from lab_models.interop.bert import check_encoder_exportable, encoder_config, encoder_export_fields
from lab_models.interop.convert import (StateReader, bert_embeddings_from_lab, bert_embeddings_to_lab,
                                        bert_layer_from_lab, bert_layer_to_lab, mlm_head_from_lab, mlm_head_to_lab,
                                        owned, require, segments_from_type_vocab)

FAMILY = "roberta"
MODEL_TYPES = ("roberta",)
HF_ARCHITECTURES = ("RobertaForMaskedLM",)


def position_offset(hf_config: dict) -> int:
    """How many rows of the position table come before the lab's position 0: padding_idx + 1."""
    pad = hf_config.get("pad_token_id", 1)
    require(isinstance(pad, int) and pad >= 0, Message("config.json pad_token_id={pad!r}: RoBERTa needs it to number "
                                                       "its positions", pad=pad))
    return pad + 1


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    architectures = hf_config.get("architectures") or list(HF_ARCHITECTURES)
    require(any(name in HF_ARCHITECTURES for name in architectures),
            Message("config.json architectures {architectures}: the lab imports RoBERTa with its MLM head "
                    "(RobertaForMaskedLM)", architectures=architectures))
    require(hf_config.get("hidden_act", "gelu") == "gelu",
            Message("config.json hidden_act={hidden_act!r}: transformers' RoBERTa LM head uses the exact "
                    "GeLU whatever hidden_act says, and the lab's backbone uses one activation throughout",
                    hidden_act=hf_config.get('hidden_act')))
    offset = position_offset(hf_config)
    rows = int(hf_config["max_position_embeddings"])
    require(rows > offset, Message("config.json max_position_embeddings={rows} leaves no position after padding_idx",
                                   rows=rows))
    config = encoder_config({**hf_config, "max_position_embeddings": rows - offset}, FAMILY,
                            n_segments=segments_from_type_vocab(hf_config, 0), lm_transform=True, lm_bias=True,
                            embedding_norm=True)
    return config, {}, {"mlm": 1.0}


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    cfg = model.model_config
    V, H = cfg.vocab_size, cfg.d_model
    r = StateReader(hf_state, ("roberta.",))
    state = bert_embeddings_to_lab(r, "backbone.embeddings.", cfg, position_offset=position_offset(hf_config))
    for i in range(cfg.n_layers):
        state.update(bert_layer_to_lab(r, f"encoder.layer.{i}.", f"backbone.blocks.{i}.", H, cfg.d_ff))
    state.update(mlm_head_to_lab(r, "lm_head.dense", "lm_head.layer_norm",
                                 "lm_head.bias" if r.has("lm_head.bias") else "lm_head.decoder.bias",
                                 width=H, hidden=H, vocab=V))
    r.ignore("lm_head.decoder.bias")  # the same parameter as lm_head.bias
    if cfg.tie_embeddings:
        r.ignore("lm_head.decoder.weight")
    else:
        state["backbone.lm_out.weight"] = r.take("lm_head.decoder.weight", (V, H))
    for name in ("pooler.dense.weight", "pooler.dense.bias"):  # RobertaModel's pooler: RobertaForMaskedLM drops it
        r.ignore(name)
    r.check_all_used()
    return state


def _check(model) -> ModelConfig:
    cfg = check_encoder_exportable(model, FAMILY, "RobertaForMaskedLM")
    require(cfg.embedding_size is None and not cfg.share_layers and cfg.lm_bias,
            Message("the run has factorised embeddings, shared layers or no output bias: transformers' RoBERTa has "
                    "none"))
    require(cfg.activation == "gelu", Message("the run uses another activation than the exact GeLU, which "
                                              "transformers' RoBERTa LM head always applies"))
    return cfg


def export_config(model) -> dict:
    cfg = _check(model)
    pad = model.vocab.pad_id
    return {**encoder_export_fields(model), "architectures": list(HF_ARCHITECTURES), "model_type": "roberta",
            "max_position_embeddings": cfg.max_positions + pad + 1, "type_vocab_size": max(cfg.n_segments, 1),
            "pad_token_id": pad, "bos_token_id": model.vocab.bos_id, "eos_token_id": model.vocab.eos_id}


def export_state(model) -> dict[str, torch.Tensor]:
    cfg = _check(model)
    s = model.state_dict()
    out = bert_embeddings_from_lab(s, "backbone.embeddings.", "roberta.", cfg,
                                   position_offset=model.vocab.pad_id + 1)
    for i in range(cfg.n_layers):
        out.update(bert_layer_from_lab(s, f"backbone.blocks.{i}.", f"roberta.encoder.layer.{i}."))
    out.update(mlm_head_from_lab(s, "lm_head.dense", "lm_head.layer_norm", "lm_head.bias"))
    if not cfg.tie_embeddings:
        out["lm_head.decoder.weight"] = s["backbone.lm_out.weight"]
    return owned(out)

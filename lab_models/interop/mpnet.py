"""MPNet checkpoints of Hugging Face transformers (`MPNetForMaskedLM`, e.g. microsoft/mpnet-base) in and out of the
lab's MPNet family.

Paper: Song, Tan, Qin, Lu, Liu (2020), MPNet: Masked and Permuted Pre-training for Language Understanding, NeurIPS.
Reference code: microsoft/MPNet (`mpnet_rel_base`: fairseq's RoBERTa plus a relative position bias) and
transformers/models/mpnet/modeling_mpnet.py.

MPNet is RoBERTa's post-LN encoder with one addition: a bucketed relative position bias (T5's bidirectional buckets,
32 of them up to distance 128), one table shared by all layers, computed once per forward pass, beside RoBERTa's
learned absolute positions. The lab's MPNet family has exactly that structure (lab_models/models/family.py), so:

    MPNet                                         the lab (ModelConfig)
    word + position embeddings, LayerNorm         embeddings.token, embeddings.positions[0] (rows 2.. of the
                                                    checkpoint's table: RoBERTa's padding offset), embeddings.norm
    q, k, v, o (with bias), post-LN               blocks.i.attn.qkv (stacked), attn.proj, ln_attn; norm="post"
    intermediate.dense, output.dense, LayerNorm   blocks.i.ff.up, ff.proj, ln_ff; activation="gelu"
    encoder.relative_attention_bias               relative_bias.table; relative_attention="buckets"
    lm_head.dense, layer_norm, decoder (tied),    lm_transform (dense, GeLU, LayerNorm), the tied matrix, lm_bias
      bias

Positions. Hugging Face's MPNet numbers the tokens of a row padding_idx + 1 + i = 2 + i (fairseq's `make_positions`),
so the lab's position i reads row 2 + i of the checkpoint's table: import drops rows 0 and 1 (row 1 is the padding
row), export puts two zero rows back. The relative bias uses 0, 1, 2, ... on both sides, as the lab's position ids.

Worked example (mpnet-base's config.json, abridged):

>>> cfg, settings, weights = import_config({"model_type": "mpnet", "vocab_size": 30527, "hidden_size": 768,
...     "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
...     "max_position_embeddings": 514, "layer_norm_eps": 1e-05, "relative_attention_num_buckets": 32})
>>> cfg.max_positions, cfg.norm, cfg.relative_attention, cfg.absolute_positions, cfg.query_stream
(512, 'post', 'buckets', True, 'token')

Deviations and limits:
- The lab keeps attention dropout at 0 (its CPU-friendly default; the checkpoint's attention_probs_dropout_prob is
  not used): training only.
- transformers' MPNet treats token id 1 as padding when it numbers positions (padding_idx is hard-coded to 1, the
  `<pad>` of MPNet's vocabulary). A lab vocabulary has another token there (word-piece: [UNK]), so the export
  renumbers: the lab's [PAD] and the token at id 1 trade ids, in the tokenizer.json (`export_tokenizer`), the
  config's special ids and the rows of the embedding, the LM head and its bias (`export_state`). The exported model
  then computes exactly what the lab's does, for every text; only those two tokens' ids differ from the run's (an
  import of the export is the same model under its own, renumbered tokenizer).
- `MPNetForMaskedLM` is one stream; the lab trains MPNet with its two streams. An imported checkpoint runs with the
  default input mode ("mpnet"): for fill-mask every query row sees everything, which is the masked LM's computation.
  A lab run in "xlnet" input mode has a learned query start w that MPNet has no place for: it does not export.
- Hugging Face's MPNet always uses 32 buckets (its `compute_position_bias` ignores the config's count): other counts
  are refused.
"""
from __future__ import annotations

import torch

from lab_models.messages import LabError, Message
from lab_models.nn.config import ModelConfig
from lab_models.interop.hf_tokenizer import renumber_tokenizer
from lab_models.interop.state_mapping import Rule, fit_state, gather, require, scatter, strip_prefix, warn_unused

FAMILY = "mpnet"
MODEL_TYPES = ("mpnet",)
HF_ARCHITECTURES = ("MPNetForMaskedLM",)

PADDING_IDX = 1  # transformers' MPNetEmbeddings.padding_idx, hard-coded (not config.pad_token_id)
POSITION_OFFSET = PADDING_IDX + 1  # the first real token's row in the checkpoint's position table
BUCKETS, MAX_DISTANCE = 32, 128  # what transformers' MPNetEncoder.compute_position_bias uses, whatever the config says
_ROOTS = ("lm_head.",)
# read elsewhere (the position table, sliced), saved twice (the tied decoder and its bias), or not used by a masked LM
# (MPNetModel's pooler, the position-id buffer)
_KNOWN_COPIES = ("embeddings.position_embeddings.", "lm_head.decoder.", "pooler.", "embeddings.position_ids")


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    """(the lab ModelConfig, MPNet Settings overrides, objective weights) for an MPNet config.json; ValueError for
    what the lab cannot represent."""
    require(isinstance(hf_config, dict), Message("hf_config must be the parsed config.json (a dict)"))
    require(hf_config.get("model_type", "mpnet") in MODEL_TYPES,
            Message("model_type {model_type!r} is not MPNet's ('mpnet')", model_type=hf_config.get('model_type')))
    act = hf_config.get("hidden_act", "gelu")
    require(act == "gelu", Message("hidden_act {act!r}: MPNet's LM head always uses the exact GeLU, and the lab's "
                                   "transform shares the feed-forward's activation, so only 'gelu' imports with "
                                   "parity", act=act))
    buckets = hf_config.get("relative_attention_num_buckets", BUCKETS)
    require(buckets == BUCKETS, Message("relative_attention_num_buckets={buckets}: transformers' MPNet always "
                                        "computes {expected_buckets} buckets, so a checkpoint with another count has "
                                        "no defined behaviour", buckets=buckets, expected_buckets=BUCKETS))
    n_positions = hf_config.get("max_position_embeddings", 514)
    require(isinstance(n_positions, int) and n_positions > POSITION_OFFSET,
            Message("max_position_embeddings must be more than {position_offset} (the padding offset), got "
                    "{n_positions!r}", position_offset=POSITION_OFFSET, n_positions=n_positions))
    try:
        config = ModelConfig(
            vocab_size=hf_config.get("vocab_size", 30527), d_model=hf_config.get("hidden_size", 768),
            n_layers=hf_config.get("num_hidden_layers", 12), n_heads=hf_config.get("num_attention_heads", 12),
            d_ff=hf_config.get("intermediate_size", 3072), max_positions=n_positions - POSITION_OFFSET,
            dropout=float(hf_config.get("hidden_dropout_prob", 0.1)), norm="post",
            layer_norm_eps=float(hf_config.get("layer_norm_eps", 1e-12)), lm_transform=True,
            tie_embeddings=hf_config.get("tie_word_embeddings", True) is not False, query_stream="token",
            relative_attention="buckets", relative_attention_buckets=BUCKETS,
            relative_attention_max_distance=MAX_DISTANCE)
    except ValueError as error:
        raise LabError("this MPNet config cannot be represented: {error}", error=error) from None
    return config, {}, {}


def _rules(config: ModelConfig) -> list[Rule]:
    """(lab name, Hugging Face names stacked along dim 0) for every tensor but the position table."""
    rules: list[Rule] = [("backbone.embeddings.token.weight", ("embeddings.word_embeddings.weight",))]
    for p in ("weight", "bias"):
        rules.append((f"backbone.embeddings.norm.{p}", (f"embeddings.LayerNorm.{p}",)))
        for i in range(config.n_layers):
            lab, hf = f"backbone.blocks.{i}.", f"encoder.layer.{i}."
            rules += [(f"{lab}attn.qkv.{p}", tuple(f"{hf}attention.attn.{x}.{p}" for x in "qkv")),
                      (f"{lab}attn.proj.{p}", (f"{hf}attention.attn.o.{p}",)),
                      (f"{lab}ln_attn.{p}", (f"{hf}attention.LayerNorm.{p}",)),
                      (f"{lab}ff.up.{p}", (f"{hf}intermediate.dense.{p}",)),
                      (f"{lab}ff.proj.{p}", (f"{hf}output.dense.{p}",)),
                      (f"{lab}ln_ff.{p}", (f"{hf}output.LayerNorm.{p}",))]
        rules += [(f"backbone.lm_transform.0.{p}", (f"lm_head.dense.{p}",)),
                  (f"backbone.lm_transform.2.{p}", (f"lm_head.layer_norm.{p}",))]
    rules += [("backbone.relative_bias.table.weight", ("encoder.relative_attention_bias.weight",)),
              ("backbone.lm_bias", ("lm_head.bias",))]
    if not config.tie_embeddings:
        rules.append(("backbone.lm_out.weight", ("lm_head.decoder.weight",)))
    return rules


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under the lab's names, for `model.load_state_dict(..., strict=True)`. Names with or
    without the "mpnet." prefix are read alike; the pooler (MPNetModel's) is not used."""
    hf = strip_prefix(hf_state, "mpnet.", _ROOTS)
    if "lm_head.bias" not in hf and "lm_head.decoder.bias" in hf:
        hf["lm_head.bias"] = hf["lm_head.decoder.bias"]  # the same tensor, saved under either name
    rules = _rules(model.model_config)
    warn_unused(hf, rules, _KNOWN_COPIES)
    values = gather(hf, rules)
    if "embeddings.position_embeddings.weight" not in hf:
        raise LabError("the checkpoint has no tensor 'embeddings.position_embeddings.weight': is it a complete "
                       "MPNet checkpoint?")
    values["backbone.embeddings.positions.0.weight"] = hf["embeddings.position_embeddings.weight"][POSITION_OFFSET:]
    return fit_state(model, values)


def _check_exportable(model) -> ModelConfig:
    c = model.model_config
    family = getattr(model, "family", FAMILY)
    require(family == FAMILY, Message("a {family} run is not an MPNet: export it with its own architecture module",
                                      family=family))
    for option, ok, why in (
            ("norm", c.norm == "post", Message("MPNet normalises after each residual add")),
            ("norm_type", c.norm_type == "layernorm", Message("MPNet uses LayerNorm")),
            ("linear_bias", c.linear_bias, Message("MPNet's linear layers have biases")),
            ("activation", c.activation == "gelu", Message("MPNet's LM head uses the exact GeLU")),
            ("ffn_gated", not c.ffn_gated, Message("MPNet's feed-forward is not gated")),
            ("absolute_positions", c.absolute_positions, Message("MPNet has a learned position table")),
            ("relative_attention", c.relative_attention == "buckets", Message("MPNet has a relative position bias")),
            ("relative_attention_buckets", c.relative_attention_buckets == BUCKETS,
             Message("transformers' MPNet always uses {buckets} buckets", buckets=BUCKETS)),
            ("relative_attention_max_distance", c.relative_attention_max_distance == MAX_DISTANCE,
             Message("transformers' MPNet always bins up to {max_distance}", max_distance=MAX_DISTANCE)),
            ("attention_scale", c.attention_scale, Message("MPNet divides by sqrt(d_head)")),
            ("d_head", c.d_head is None or c.d_head * c.n_heads == c.d_model, Message("MPNet's heads split d_model")),
            ("output_scale", not c.output_scale, Message("MPNet does not rescale before its LM head")),
            ("lm_bias", c.lm_bias, Message("MPNet's LM head has a bias")),
            ("lm_transform", c.lm_transform and c.embedding_size is None, Message("MPNet's LM head has its "
                                                                                  "dense+LayerNorm")),
            ("share_layers", not c.share_layers, Message("MPNet does not share layers")),
            ("n_segments", c.n_segments == 0, Message("MPNet has no token types")),
            ("n_position_rows", c.n_position_rows == 1, Message("MPNet has one position axis")),
            ("decoder_layers", c.decoder_layers == 0, Message("MPNet is an encoder")),
            ("query_stream", c.query_stream != "learned", Message("MPNetForMaskedLM has no learned query start w"))):
        require(ok, Message("{option}={value!r} has no transformers MPNet equivalent: {why}",
                            option=option, value=getattr(c, option), why=why))
    return c


def _swap(model) -> dict[int, int]:
    """The export's renumbering of token ids: the lab's [PAD] and whatever token has id 1 trade places, so that
    transformers' hard-coded padding id 1 is the pad token ({} when it already is: an imported MPNet). A lab
    word-piece vocabulary has [UNK] at 1, which transformers would otherwise take for padding when it numbers the
    positions of a text that contains it."""
    pad = model.vocab.pad_id
    return {} if pad == PADDING_IDX else {pad: PADDING_IDX, PADDING_IDX: pad}


def _hf_id(model):
    swap = _swap(model)
    return lambda token_id: swap.get(token_id, token_id)


def export_tokenizer(model, tokenizer):
    """The run's tokenizer with the export's ids (exporter hook, `_swap`)."""
    swap = _swap(model)
    return renumber_tokenizer(tokenizer, swap) if swap else tokenizer


def export_config(model) -> dict:
    """The config.json of an `MPNetForMaskedLM` with this lab model's structure and special tokens."""
    c = _check_exportable(model)
    vocab = model.vocab
    hf_id = _hf_id(model)
    return {
        "model_type": "mpnet", "architectures": list(HF_ARCHITECTURES), "vocab_size": c.vocab_size,
        "hidden_size": c.d_model, "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads,
        "intermediate_size": c.d_ff, "hidden_act": "gelu", "hidden_dropout_prob": c.dropout,
        "attention_probs_dropout_prob": c.attention_dropout,
        "max_position_embeddings": c.max_positions + POSITION_OFFSET, "layer_norm_eps": c.layer_norm_eps,
        "relative_attention_num_buckets": c.relative_attention_buckets, "initializer_range": 0.02,
        "tie_word_embeddings": c.tie_embeddings, "pad_token_id": hf_id(vocab.pad_id), "bos_token_id":
        hf_id(vocab.bos_id), "eos_token_id": hf_id(vocab.eos_id),
    }


def export_state(model) -> dict[str, torch.Tensor]:
    """The lab model's tensors under `MPNetForMaskedLM`'s names (contiguous copies, no shared storage)."""
    c = _check_exportable(model)
    state = model.state_dict()
    out = {f"mpnet.{name}" if not name.startswith(_ROOTS) else name: tensor
           for name, tensor in scatter(state, _rules(c)).items()}
    table = state["backbone.embeddings.positions.0.weight"].detach()  # (max_positions, H)
    out["mpnet.embeddings.position_embeddings.weight"] = torch.cat(
        [table.new_zeros(POSITION_OFFSET, table.shape[1]), table]).contiguous()  # rows 0, 1: unused, padding
    out["lm_head.decoder.bias"] = out["lm_head.bias"].clone()  # the reference saves the shared bias under both names
    if c.tie_embeddings:  # untied, the rules already wrote lm_head.decoder.weight
        out["lm_head.decoder.weight"] = out["mpnet.embeddings.word_embeddings.weight"].clone()
    swap = _swap(model)
    if swap:  # the rows of every per-token tensor follow the tokenizer's renumbering
        order = torch.arange(c.vocab_size)
        for old, new in swap.items():
            order[new] = old  # HF row new = lab row old
        for name in ("mpnet.embeddings.word_embeddings.weight", "lm_head.bias", "lm_head.decoder.bias",
                     "lm_head.decoder.weight"):
            out[name] = out[name][order].contiguous()
    return out

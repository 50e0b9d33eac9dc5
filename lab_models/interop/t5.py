"""T5 checkpoints of Hugging Face transformers (`T5ForConditionalGeneration`) in and out of the lab's T5 family.

Paper: Raffel et al. (2020), Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer, JMLR
21(140); T5 v1.1 (google-research/text-to-text-transfer-transformer, released_checkpoints.md): gated-GeLU feed-forward,
no weight tying, no output rescaling. Reference code: transformers/models/t5/modeling_t5.py.

The lab's backbone has every piece a T5 checkpoint needs as an option (lab_models/nn/config.py), so a checkpoint becomes
an ordinary lab T5 with the same numbers (max abs logit difference ~1e-6 in float32, tests/interop/test_t5.py):

    T5                                        the lab (ModelConfig)
    T5LayerNorm (RMS, no bias), pre-norm      norm="pre", norm_type="rmsnorm", layer_norm_eps=layer_norm_epsilon
    q, k, v, o without bias, d_kv per head    linear_bias=False, d_head=d_kv (None when n_heads * d_kv == d_model)
    no 1/sqrt(d_kv) in the attention          attention_scale=False
    relative_attention_bias in block 0        relative_attention="buckets" (one table per stack), *_buckets,
      of each stack, no absolute positions      *_max_distance; absolute_positions=False
    DenseReluDense wi/wo (v1.0, relu)         activation="relu"
    wi_0/wi_1/wo (v1.1, gated-gelu)           ffn_gated=True, activation="gelu_tanh" (transformers' gelu_new)
    shared embedding, lm_head                 tie_embeddings; untied (v1.1): lm_out = lm_head
    decoder output * d_model^-0.5 (v1.0)      output_scale=True; no LM bias (lm_bias=False)
    decoder_start_token_id = pad_token_id     the T5 setting decoder_start="pad"

Names: `shared.weight` -> `backbone.embeddings.token.weight`; `{encoder,decoder}.block.i.layer.0.SelfAttention.{q,k,v}`
-> `backbone.{blocks,decoder_blocks}.i.attn.qkv` (stacked along dim 0), `.o` -> `.attn.proj`; the decoder's
`layer.1.EncDecAttention` -> `.cross_attn`; `layer.{1|2}.DenseReluDense.wi` (or `wi_0` and `wi_1`, stacked) -> `.ff.up`,
`.wo` -> `.ff.proj`; the layer norms -> `ln_attn`, `ln_cross`, `ln_ff`; `{encoder,decoder}.final_layer_norm` -> `ln_f`,
`ln_dec`; `{encoder,decoder}.block.0.layer.0.SelfAttention.relative_attention_bias` -> `relative_bias.table`,
`decoder_relative_bias.table`.

Worked example (t5-small's config.json, abridged):

>>> cfg, settings, weights = import_config({"model_type": "t5", "vocab_size": 32128, "d_model": 512, "d_kv": 64,
...     "d_ff": 2048, "num_layers": 6, "num_heads": 8, "feed_forward_proj": "relu", "n_positions": 512})
>>> cfg.decoder_layers, cfg.activation, cfg.norm_type, cfg.relative_attention, cfg.output_scale, settings
(6, 'relu', 'rmsnorm', 'buckets', True, {'decoder_start': 'pad', 'final_token': 'eos'})

Deviations: the lab's dropout sits on the embeddings and after each residual branch (T5 also drops inside the
feed-forward, on the attention probabilities and after the final norm): training only, the logits are the same.
Imported runs get T5's reference-code targets (`final_token="eos"`), so that further span-corruption training ends
targets as the checkpoint was trained. transformers 5 ties T5's lm_head to its embedding in memory and reads a
v1.1 checkpoint's separate lm_head only through `from_pretrained` (both tensors present and different); a v1.1 built
from a config and saved by transformers 5 is therefore tied and unscaled (scale_decoder_outputs=false, no
lm_head.weight in the file), and imports so (`_tied`). Export writes lm_head.weight always (a copy when tied) and
tie_word_embeddings = the scaling, which transformers 4 and 5 both read right; a scaled output with an untied head
(which transformers 4 cannot express) is refused.
"""
from __future__ import annotations

import torch

from lab_models.messages import LabError, Message
from lab_models.nn.config import ModelConfig
from lab_models.interop.checkpoint import TENSOR_NAMES_KEY
from lab_models.interop.state_mapping import Rule, fit_state, gather, require, scatter, strip_prefix, warn_unused
from lab_models.objectives.t5 import decoder_start_id

FAMILY = "t5"
MODEL_TYPES = ("t5",)
HF_ARCHITECTURES = ("T5ForConditionalGeneration",)
# T5 has no mask token and the lab's T5 never feeds one (its blanks are sentinels): [MASK] stands in as </s>, so an
# import adds no token the checkpoint never saw (lab_models/interop/hf_tokenizer.py)
USES_MASK_TOKEN = False

# tensors a checkpoint may hold that the lab reads elsewhere or that transformers itself ignores: the stacks' copies of
# the shared embedding, a tied lm_head, and a cross-attention bias table older versions saved
_KNOWN_COPIES = ("encoder.embed_tokens.", "decoder.embed_tokens.", "lm_head.",
                 "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.")
# transformers' activation names (ACT2FN) -> the lab's config.activation
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
_HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new"}


def _feed_forward(projection: str) -> tuple[str, bool]:
    """T5Config.feed_forward_proj -> (the lab activation, gated), as T5Config reads it ("gated-gelu" is gelu_new)."""
    parts = str(projection).split("-")
    gated = parts[0] == "gated" and len(parts) == 2
    if len(parts) > 2 or (len(parts) == 2 and not gated):
        raise LabError("feed_forward_proj {projection!r} is not 'ACT' or 'gated-ACT'", projection=projection)
    act = "gelu_new" if projection == "gated-gelu" else parts[-1]
    if act not in _ACTIVATIONS:
        raise LabError("feed_forward_proj {projection!r}: the lab has no activation {act!r} (it has relu, gelu "
                       "and gelu_new / gelu_pytorch_tanh)", projection=projection, act=act)
    return _ACTIVATIONS[act], gated


def _scaled(hf_config: dict) -> bool:
    """Whether the decoder output is multiplied by d_model^-0.5 before the LM head (T5 v1.0; v1.1 does not).
    transformers 4 reads it from tie_word_embeddings (v1.1 checkpoints say false); transformers 5 writes
    scale_decoder_outputs (and always tie_word_embeddings=true)."""
    if "scale_decoder_outputs" in hf_config:
        return bool(hf_config["scale_decoder_outputs"])
    return hf_config.get("tie_word_embeddings", True) is not False


def _tied(hf_config: dict, scaled: bool) -> bool:
    """Whether the LM head is the shared embedding. transformers 4: exactly when the output is scaled (one flag for
    both). transformers 5 ties them in memory unless the checkpoint holds an lm_head.weight of its own (a v1.1 built
    from a config and saved by transformers 5 is tied and unscaled), so with the tensor names the importer passes
    (TENSOR_NAMES_KEY) a transformers 5 config is tied exactly when the file has no lm_head.weight."""
    names = hf_config.get(TENSOR_NAMES_KEY)
    if "scale_decoder_outputs" in hf_config and names is not None:
        return not any(name in names for name in ("lm_head.weight", "transformer.lm_head.weight"))
    return scaled


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    """(the lab ModelConfig, T5 Settings overrides, objective weights) for a T5 config.json; ValueError for what the
    lab cannot represent."""
    require(isinstance(hf_config, dict), Message("hf_config must be the parsed config.json (a dict)"))
    require(hf_config.get("model_type", "t5") in MODEL_TYPES,
            Message("model_type {model_type!r} is not T5's ('t5')", model_type=hf_config.get('model_type')))
    require(hf_config.get("is_encoder_decoder", True) is not False,
            Message("is_encoder_decoder is false: the lab imports T5's encoder-decoder (T5ForConditionalGeneration) "
                    "only"))
    activation, gated = _feed_forward(hf_config.get("feed_forward_proj", "relu"))
    d_model, n_heads = hf_config.get("d_model", 512), hf_config.get("num_heads", 8)
    d_kv = hf_config.get("d_kv", 64)
    n_layers = hf_config.get("num_layers", 6)
    decoder_layers = hf_config.get("num_decoder_layers") or n_layers
    pad = hf_config.get("pad_token_id", 0)
    start = hf_config.get("decoder_start_token_id", pad)
    require(start == pad, Message("decoder_start_token_id ({start}) is not the pad token ({pad}): the lab's T5 "
                                  "starts its decoder with the pad token or [BOS] only", start=start, pad=pad))
    scaled = _scaled(hf_config)
    try:
        config = ModelConfig(
            vocab_size=hf_config.get("vocab_size", 32128), d_model=d_model, n_layers=n_layers, n_heads=n_heads,
            d_ff=hf_config.get("d_ff", 2048), max_positions=hf_config.get("n_positions", 512),
            dropout=float(hf_config.get("dropout_rate", 0.1)), norm="pre",
            layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-6)), decoder_layers=decoder_layers,
            tie_embeddings=_tied(hf_config, scaled), activation=activation, norm_type="rmsnorm", linear_bias=False,
            ffn_gated=gated,
            absolute_positions=False, relative_attention="buckets",
            relative_attention_buckets=hf_config.get("relative_attention_num_buckets", 32),
            relative_attention_max_distance=hf_config.get("relative_attention_max_distance", 128),
            attention_scale=False, d_head=None if n_heads * d_kv == d_model else d_kv, output_scale=scaled,
            lm_bias=False)
    except ValueError as error:
        raise LabError("this T5 config cannot be represented: {error}", error=error) from None
    return config, {"decoder_start": "pad", "final_token": "eos"}, {}


def _rules(config: ModelConfig) -> list[Rule]:
    """(lab name, Hugging Face names stacked along dim 0) for every tensor of a lab T5 (see the module docstring)."""
    def feed_forward(lab: str, hf: str) -> list[Rule]:
        up = (f"{hf}wi_0.weight", f"{hf}wi_1.weight") if config.ffn_gated else (f"{hf}wi.weight",)
        return [(f"{lab}ff.up.weight", up), (f"{lab}ff.proj.weight", (f"{hf}wo.weight",))]

    def attention(lab: str, hf: str) -> list[Rule]:
        return [(f"{lab}qkv.weight", tuple(f"{hf}{p}.weight" for p in "qkv")), (f"{lab}proj.weight", (f"{hf}o.weight",))]

    rules: list[Rule] = [("backbone.embeddings.token.weight", ("shared.weight",))]
    for i in range(config.n_layers):
        lab, hf = f"backbone.blocks.{i}.", f"encoder.block.{i}.layer."
        rules += [(f"{lab}ln_attn.weight", (f"{hf}0.layer_norm.weight",)),
                  *attention(f"{lab}attn.", f"{hf}0.SelfAttention."),
                  (f"{lab}ln_ff.weight", (f"{hf}1.layer_norm.weight",)), *feed_forward(lab, f"{hf}1.DenseReluDense.")]
    for i in range(config.decoder_layers):
        lab, hf = f"backbone.decoder_blocks.{i}.", f"decoder.block.{i}.layer."
        rules += [(f"{lab}ln_attn.weight", (f"{hf}0.layer_norm.weight",)),
                  *attention(f"{lab}attn.", f"{hf}0.SelfAttention."),
                  (f"{lab}ln_cross.weight", (f"{hf}1.layer_norm.weight",)),
                  *attention(f"{lab}cross_attn.", f"{hf}1.EncDecAttention."),
                  (f"{lab}ln_ff.weight", (f"{hf}2.layer_norm.weight",)), *feed_forward(lab, f"{hf}2.DenseReluDense.")]
    rules += [("backbone.ln_f.weight", ("encoder.final_layer_norm.weight",)),
              ("backbone.ln_dec.weight", ("decoder.final_layer_norm.weight",)),
              ("backbone.relative_bias.table.weight",
               ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",)),
              ("backbone.decoder_relative_bias.table.weight",
               ("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",))]
    if not config.tie_embeddings:
        rules.append(("backbone.lm_out.weight", ("lm_head.weight",)))
    return rules


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under the lab's names, for `model.load_state_dict(..., strict=True)`."""
    hf = strip_prefix(hf_state, "transformer.", ("shared.", "encoder.", "decoder.", "lm_head."))
    if "shared.weight" not in hf:  # some savers keep only the stacks' (tied) copies
        for copy in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            if copy in hf:
                hf["shared.weight"] = hf[copy]
                break
    config = model.model_config
    if config.tie_embeddings and "lm_head.weight" in hf and "shared.weight" in hf:
        require(torch.equal(hf["lm_head.weight"], hf["shared.weight"]),
                Message("the config ties lm_head to the shared embedding (T5 v1.0), but the checkpoint's lm_head "
                        "differs: set tie_word_embeddings to false (T5 v1.1) in its config.json"))
    rules = _rules(config)
    warn_unused(hf, rules, _KNOWN_COPIES)
    return fit_state(model, gather(hf, rules))


def _check_exportable(model) -> ModelConfig:
    c = model.model_config
    family = getattr(model, "family", FAMILY)
    require(family == FAMILY, Message("a {family} run is not a T5: export it with its own architecture module",
                                      family=family))
    for option, ok, why in (
            ("norm", c.norm == "pre", Message("T5 normalises before each sublayer")),
            ("norm_type", c.norm_type == "rmsnorm", Message("T5LayerNorm is an RMS norm")),
            ("linear_bias", not c.linear_bias, Message("T5's linear layers have no bias")),
            ("absolute_positions", not c.absolute_positions, Message("T5 has no absolute position table")),
            ("relative_attention", c.relative_attention == "buckets", Message("T5 reads positions only through its "
                                                                              "buckets")),
            ("attention_scale", not c.attention_scale, Message("T5 does not divide by sqrt(d_kv)")),
            ("lm_bias", not c.lm_bias, Message("T5's lm_head has no bias")),
            ("lm_transform", not c.lm_transform and c.embedding_size is None, Message("T5 has no MLM transform")),
            ("share_layers", not c.share_layers, Message("T5 does not share layers")),
            ("n_segments", c.n_segments == 0, Message("T5 has no segment embeddings")),
            ("n_position_rows", c.n_position_rows == 1, Message("T5 has one position axis")),
            ("query_stream", c.query_stream is None, Message("T5 has one stream")),
            ("output_scale", c.tie_embeddings or not c.output_scale,
             Message("transformers 4 scales the decoder output exactly when the embeddings are tied, so a scaled "
                     "output with an untied head has no config both versions read alike")),
            ("activation", not (c.ffn_gated and c.activation == "gelu"),
             Message("transformers' gated-gelu uses the tanh GeLU (gelu_tanh); gated exact GeLU has no name"))):
        require(ok, Message("{option}={value!r} has no transformers T5 equivalent: {why}",
                            option=option, value=getattr(c, option), why=why))
    require(c.decoder_layers > 0, Message("the model has no decoder: T5 is an encoder-decoder"))
    return c


def export_config(model) -> dict:
    """The config.json of a `T5ForConditionalGeneration` with this lab model's structure and special tokens."""

    c = _check_exportable(model)
    act = _HF_ACTIVATIONS[c.activation]
    projection = ("gated-gelu" if act == "gelu_new" else f"gated-{act}") if c.ffn_gated else act
    vocab = model.vocab
    return {
        "model_type": "t5", "architectures": list(HF_ARCHITECTURES), "is_encoder_decoder": True,
        "vocab_size": c.vocab_size, "d_model": c.d_model, "d_kv": c.head_size, "d_ff": c.d_ff,
        "num_layers": c.n_layers, "num_decoder_layers": c.decoder_layers, "num_heads": c.n_heads,
        "relative_attention_num_buckets": c.relative_attention_buckets,
        "relative_attention_max_distance": c.relative_attention_max_distance, "dropout_rate": c.dropout,
        "layer_norm_epsilon": c.layer_norm_eps, "initializer_factor": 1.0, "feed_forward_proj": projection,
        # transformers 4 reads both the scaling and the tying from tie_word_embeddings, transformers 5 the scaling from
        # scale_decoder_outputs and the tying from the weights: lm_head.weight is always written (a copy when tied),
        # so a tied unscaled model (transformers 5's v1.1) loads untied-but-equal in 4 and tied in 5
        "tie_word_embeddings": c.output_scale, "scale_decoder_outputs": c.output_scale, "n_positions": c.max_positions,
        "pad_token_id": vocab.pad_id, "eos_token_id": vocab.eos_id,
        "decoder_start_token_id": decoder_start_id(model.settings, vocab),
    }


def tokenizer_config_extras(model, tokenizer) -> dict:
    """tokenizer_config.json fields beyond the roles (exporter hook): the sentinels <extra_id_0>, <extra_id_1>, ... as
    additional special tokens, in order, as T5's own tokenizer lists them (transformers 4 and 5 read the name)."""
    return {"additional_special_tokens": [tokenizer.id_to_token(i) for i in model.vocab.sentinel_ids]}


def export_state(model) -> dict[str, torch.Tensor]:
    """The lab model's tensors under `T5ForConditionalGeneration`'s names (contiguous copies, no shared storage)."""
    c = _check_exportable(model)
    out = scatter(model.state_dict(), _rules(c))
    if c.tie_embeddings:  # the reference saves the tied matrix under both names; the copy keeps storages apart
        out["lm_head.weight"] = out["shared.weight"].clone()
    return out

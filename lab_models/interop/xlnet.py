"""XLNet checkpoints of Hugging Face `transformers` (`XLNetLMHeadModel`) in and out of the lab, with numerical parity.

Paper: Yang et al. (2019). XLNet: Generalized Autoregressive Pretraining for Language Understanding. NeurIPS 2019;
the layout is that of the released code (zihangdai/xlnet) as transformers ports it (modeling_xlnet.py).

The lab's XLNet is the family's default structure (lab_models/models/family.py): post-LN blocks, no embedding LayerNorm,
no position table, Transformer-XL relative attention with XLNet's relative segment encoding
(`relative_attention="xlnet"`, nn/relative_attention.py), the query stream starting at w (`query_stream="learned"`)
and the tied LM head with a bias. Names, per layer i (transformers' `transformer.` prefix is optional on import):

    transformers                                      lab (FamilyModel state dict)
    transformer.word_embedding.weight (V, H)          backbone.embeddings.token.weight
    transformer.mask_emb (1, 1, H)                    backbone.query_start (H,)                       w
    transformer.layer.i.rel_attn.q, k, v (H, nh, dh)  backbone.blocks.i.attn.qkv.weight (3H, H)      [W_q; W_k; W_v]
    transformer.layer.i.rel_attn.o (H, nh, dh)        backbone.blocks.i.attn.proj.weight (H, H)
    transformer.layer.i.rel_attn.r (H, nh, dh)        backbone.blocks.i.attn.position_key.weight (H, H)
    ....rel_attn.r_w_bias, r_r_bias, r_s_bias (nh, dh) ....attn.content_bias, position_bias, segment_bias (H,)
    ....rel_attn.seg_embed (2, nh, dh)                ....attn.segment_embed (2, H)
    ....rel_attn.layer_norm                           ....ln_attn            (after the attention's residual add)
    ....ff.layer_1, ff.layer_2, ff.layer_norm         ....ff.up, ff.proj, ln_ff
    lm_loss.weight (tied), lm_loss.bias (V,)          the token embedding, backbone.lm_bias

An einsum weight "ibh,hnd->ibnd" (H, nh, dh) is the Linear weight (nh*dh, H) transposed; o, "ibnd,hnd->ibh", is the
Linear weight (H, nh*dh) as it is.

Worked example (the config of xlnet-base-cased, shortened):

>>> config, settings, weights = import_config({"model_type": "xlnet", "vocab_size": 32000, "d_model": 768,
...     "n_layer": 12, "n_head": 12, "d_inner": 3072, "ff_activation": "gelu", "attn_type": "bi", "bi_data": False,
...     "clamp_len": -1, "mem_len": None, "reuse_len": None, "layer_norm_eps": 1e-12, "dropout": 0.1})
>>> config.relative_attention, config.absolute_positions, config.embedding_norm, config.relative_attention_clamp_len
('xlnet', False, False, None)
>>> settings, weights
({'bidirectional_context': True}, {'plm': 1.0})

Deviations, stated:
- What XLNet's config can ask for and the lab cannot represent is refused with a ValueError naming the field:
  `attn_type="uni"` (a causal mask inside the model; the lab's masks come with the batch), `bi_data=True`, a `d_head`
  other than d_model / n_head, and activations other than exact GeLU, its tanh approximations and ReLU.
- `mem_len` and `reuse_len` (segment recurrence: which hidden states one call hands to the next as `mems`) are
  dropped with a logged note, not refused: no forward pass's logits depend on them, and transformers' own default
  config has mem_len=512. The lab keeps no memory across calls; export writes both as null.
- `max_positions` of an imported model is 512 (XLNet's pretraining length): XLNet itself has no limit, and the lab's
  only use of it with relative attention is a length check (`--model max_positions=N` raises it; no weights depend
  on it).
- The lab's attention dropout stays `attention_dropout=0` (SDPA's fast path); transformers also drops the attention
  probabilities with its one `dropout`. Only training after the import sees the difference, never the logits.
- `mask_emb` of a lab run trained with `two_stream=False` (which has no w) is exported as zeros: transformers reads it
  only with a target_mapping, which such a run never learned to use.
- `lm_loss.weight` is not written (it is the token embedding, tied: transformers' own files leave it out too) and is
  ignored on import.
- Imported runs get `bidirectional_context=True`, the official code's `_local_perm` (context tokens share the lowest
  rank and see each other), which the released checkpoints were trained with, rather than the paper's rule (the lab's
  default). The lab's continuation then reads the prompt bidirectionally, as `XLNetLMHeadModel.generate` does (its
  prepare_inputs_for_generation hides only the appended slot), and further training samples orders as that code did.
"""
from __future__ import annotations

import logging

import torch

from lab_models.messages import LabError
from lab_models.nn.config import ModelConfig

logger = logging.getLogger(__name__)

FAMILY = "xlnet"
MODEL_TYPES = ("xlnet",)
HF_ARCHITECTURES = ("XLNetLMHeadModel",)

# XLNet is trained on 512-token sequences; the lab's max_positions is only a length check for it
IMPORTED_MAX_POSITIONS = 512
# transformers' ff_activation -> the lab's activation ("gelu_new" and "gelu_pytorch_tanh" are the tanh approximation)
ACTIVATIONS_IN = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
ACTIVATIONS_OUT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def import_config(hf_config: dict) -> tuple[ModelConfig, dict, dict]:
    """(the lab ModelConfig, XLNet Settings overrides, objective weights) for a transformers XLNet config.json;
    ValueError for what the lab cannot represent (see the module docstring)."""
    if not isinstance(hf_config, dict):
        raise LabError("an XLNet config must be the dict of config.json, got {hf_config_type}",
                       hf_config_type=type(hf_config).__name__)
    if hf_config.get("model_type", "xlnet") not in MODEL_TYPES:
        raise LabError("model_type {model_type!r} is not an XLNet config (expected 'xlnet')",
                       model_type=hf_config.get('model_type'))
    for name in ("vocab_size", "d_model", "n_layer", "n_head", "d_inner"):
        if name not in hf_config:
            raise LabError("the XLNet config.json has no {name!r}: the lab needs it to build the model", name=name)
    if hf_config.get("attn_type", "bi") != "bi":
        raise LabError("attn_type={attn_type!r}: only XLNet's bidirectional 'bi' attention can be "
                       "imported ('uni' puts a causal mask inside the model; the lab's masks come with the batch)",
                       attn_type=hf_config['attn_type'])
    if hf_config.get("bi_data", False):
        raise LabError("bi_data=True (half of each batch read backwards, with its own relative encodings) has no "
                       "lab equivalent: only bi_data=False checkpoints can be imported")
    for name in ("mem_len", "reuse_len"):
        if hf_config.get(name) not in (None, 0):  # transformers' own default is mem_len=512
            logger.info("xlnet import: %s=%r is dropped: it only says which hidden states a forward pass hands to the "
                        "next call (Transformer-XL recurrence); the lab keeps no memory, and no forward pass's "
                        "logits depend on it", name, hf_config[name])
    d_model, n_head = hf_config["d_model"], hf_config["n_head"]
    d_head = hf_config.get("d_head")
    if d_head is not None and isinstance(n_head, int) and n_head > 0 and d_head * n_head != d_model:
        raise LabError("d_head={d_head!r} differs from d_model / n_head; the lab's heads are "
                       "d_model / n_heads wide", d_head=hf_config['d_head'])
    activation = hf_config.get("ff_activation", "gelu")
    if activation not in ACTIVATIONS_IN:
        raise LabError("ff_activation={activation!r} has no lab equivalent: choose one of "
                       "{activations_in}", activation=activation, activations_in=', '.join(ACTIVATIONS_IN))
    clamp_len = hf_config.get("clamp_len", -1)
    if isinstance(clamp_len, bool) or not isinstance(clamp_len, int):
        raise LabError("clamp_len must be an integer (-1 = no clamping), got {clamp_len!r}", clamp_len=clamp_len)
    config = ModelConfig(
        vocab_size=hf_config["vocab_size"], d_model=d_model, n_layers=hf_config["n_layer"], n_heads=n_head,
        d_ff=hf_config["d_inner"], max_positions=IMPORTED_MAX_POSITIONS, dropout=hf_config.get("dropout", 0.1),
        norm="post", layer_norm_eps=hf_config.get("layer_norm_eps", 1e-12), n_segments=0, tie_embeddings=True,
        lm_transform=False, query_stream="learned", absolute_positions=False, embedding_norm=False,
        relative_attention="xlnet", relative_attention_clamp_len=clamp_len if clamp_len > 0 else None,
        activation=ACTIVATIONS_IN[activation])
    # the released checkpoints were trained by the official code, whose `_local_perm` lets the context tokens see each
    # other (the lab's bidirectional_context); continuing text then reads the prompt as transformers' generate does
    return config, {"bidirectional_context": True}, {"plm": 1.0}


def _einsum_to_linear(weight: torch.Tensor) -> torch.Tensor:
    """(H, nh, dh) of "ibh,hnd->ibnd" -> the Linear weight (nh*dh, H)."""
    return weight.reshape(weight.shape[0], -1).t()


def import_state(hf_config: dict, hf_state: dict[str, torch.Tensor], model) -> dict[str, torch.Tensor]:
    """transformers' tensors (with or without the `transformer.` prefix) -> a state dict that
    `model.load_state_dict(..., strict=True)` accepts; ValueError naming a missing tensor or a shape mismatch."""
    state = {name.removeprefix("transformer."): tensor for name, tensor in hf_state.items()}
    config: ModelConfig = model.model_config
    expected = model.state_dict()
    H = config.d_model
    heads = (H, config.n_heads, H // config.n_heads)

    def take(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        if name not in state:
            raise LabError("the checkpoint has no tensor {name!r} (an XLNetLMHeadModel checkpoint has it)", name=name)
        tensor = state[name]
        if tuple(tensor.shape) != tuple(shape):
            raise LabError("tensor {name!r} has shape {tensor_shape} but the model built from config.json "
                           "needs {shape}", name=name, tensor_shape=tuple(tensor.shape), shape=tuple(shape))
        return tensor

    out = {"backbone.embeddings.token.weight": take("word_embedding.weight", (config.vocab_size, H)),
           "backbone.lm_bias": take("lm_loss.bias", (config.vocab_size,))}
    if "backbone.query_start" in expected:
        out["backbone.query_start"] = take("mask_emb", (1, 1, H)).reshape(H)
    for i in range(config.n_layers):
        hf, lab = f"layer.{i}.", f"backbone.blocks.{i}."
        q, k, v, r = (_einsum_to_linear(take(f"{hf}rel_attn.{name}", heads)) for name in ("q", "k", "v", "r"))
        out[f"{lab}attn.qkv.weight"] = torch.cat([q, k, v], dim=0)  # (3H, H)
        out[f"{lab}attn.position_key.weight"] = r
        out[f"{lab}attn.proj.weight"] = take(f"{hf}rel_attn.o", heads).reshape(H, H)
        for ours, theirs in (("content_bias", "r_w_bias"), ("position_bias", "r_r_bias"),
                             ("segment_bias", "r_s_bias")):
            out[f"{lab}attn.{ours}"] = take(f"{hf}rel_attn.{theirs}", heads[1:]).reshape(H)
        out[f"{lab}attn.segment_embed"] = take(f"{hf}rel_attn.seg_embed", (2, *heads[1:])).reshape(2, H)
        for ours, theirs, shape in (("ln_attn", "rel_attn.layer_norm", (H,)), ("ln_ff", "ff.layer_norm", (H,)),
                                    ("ff.up", "ff.layer_1", (config.d_ff, H)), ("ff.proj", "ff.layer_2",
                                                                                (H, config.d_ff))):
            out[f"{lab}{ours}.weight"] = take(f"{hf}{theirs}.weight", shape)
            out[f"{lab}{ours}.bias"] = take(f"{hf}{theirs}.bias", shape[:1])
    tied = state.get("lm_loss.weight")
    if tied is not None and not torch.equal(tied, out["backbone.embeddings.token.weight"]):
        logger.info("xlnet import: lm_loss.weight differs from word_embedding.weight; XLNet ties them, so the word "
                    "embedding is used for both (as transformers does)")
    missing, unexpected = sorted(set(expected) - set(out)), sorted(set(out) - set(expected))
    if missing or unexpected:
        raise LabError("the model built from config.json does not have XLNet's structure (missing "
                       "{missing}, unexpected {unexpected}): build it with import_config's ModelConfig",
                       missing=missing[:5], unexpected=unexpected[:5])
    return {name: tensor.to(expected[name].dtype).contiguous() for name, tensor in out.items()}


def _check_exportable(config: ModelConfig) -> None:
    with_norm = config.norm == "post" if config.embedding_norm is None else config.embedding_norm
    problems = [
        (config.relative_attention != "xlnet", f"relative_attention={config.relative_attention!r} (XLNet's attention "
                                               f"is relative_attention='xlnet')"),
        (config.absolute_positions, "learned absolute positions (absolute_positions=True)"),
        (with_norm, "an embedding LayerNorm"),
        (config.norm != "post", f"norm={config.norm!r} (XLNet's blocks are post-LN)"),
        (config.embedding_size is not None, "factorized embeddings (embedding_size)"),
        (config.share_layers, "shared layers (share_layers=True)"),
        (config.n_segments != 0, f"a segment embedding table (n_segments={config.n_segments})"),
        (config.decoder_layers != 0, "decoder layers"),
        (not config.tie_embeddings, "an untied output matrix (tie_embeddings=False)"),
        (config.lm_transform, "an MLM transform before the output matrix (lm_transform=True)"),
    ]
    found = [text for bad, text in problems if bad]
    if found:
        raise LabError("this model has {found}, which transformers' XLNetLMHeadModel cannot hold: "
                       "export an XLNet run trained with the family's defaults", found='; '.join(found))


def export_config(model) -> dict:
    """The transformers config.json (an XLNetLMHeadModel) for this lab model; ValueError saying which option has no
    transformers equivalent."""
    config: ModelConfig = model.model_config
    _check_exportable(config)
    vocab = model.vocab
    return {
        "architectures": [HF_ARCHITECTURES[0]], "model_type": MODEL_TYPES[0],
        "vocab_size": config.vocab_size, "d_model": config.d_model, "n_layer": config.n_layers,
        "n_head": config.n_heads, "d_head": config.d_model // config.n_heads, "d_inner": config.d_ff,
        "ff_activation": ACTIVATIONS_OUT[config.activation], "untie_r": True, "attn_type": "bi",
        "initializer_range": 0.02, "layer_norm_eps": config.layer_norm_eps, "dropout": config.dropout,
        "mem_len": None, "reuse_len": None, "bi_data": False, "same_length": False,
        "clamp_len": config.relative_attention_clamp_len or -1,
        "summary_type": "last", "summary_use_proj": True, "summary_activation": "tanh", "summary_last_dropout": 0.1,
        "start_n_top": 5, "end_n_top": 5, "tie_word_embeddings": True,
        "pad_token_id": vocab.pad_id, "bos_token_id": vocab.bos_id, "eos_token_id": vocab.eos_id,
    }


def export_state(model) -> dict[str, torch.Tensor]:
    """transformers' parameter names -> contiguous tensors, none sharing storage (safetensors refuses shared ones)."""
    config: ModelConfig = model.model_config
    _check_exportable(config)
    state = model.state_dict()
    H = config.d_model
    heads = (H, config.n_heads, H // config.n_heads)

    def linear_to_einsum(weight: torch.Tensor) -> torch.Tensor:  # (nh*dh, H) -> (H, nh, dh)
        return weight.t().reshape(heads)

    w = state.get("backbone.query_start")
    out = {"transformer.word_embedding.weight": state["backbone.embeddings.token.weight"],
           "transformer.mask_emb": (torch.zeros(H) if w is None else w).reshape(1, 1, H),
           "lm_loss.bias": state["backbone.lm_bias"]}
    for i in range(config.n_layers):
        lab, hf = f"backbone.blocks.{i}.", f"transformer.layer.{i}."
        q, k, v = state[f"{lab}attn.qkv.weight"].split(H, dim=0)  # 3 x (H, H)
        for name, weight in (("q", q), ("k", k), ("v", v), ("r", state[f"{lab}attn.position_key.weight"])):
            out[f"{hf}rel_attn.{name}"] = linear_to_einsum(weight)
        out[f"{hf}rel_attn.o"] = state[f"{lab}attn.proj.weight"].reshape(heads)
        for ours, theirs in (("content_bias", "r_w_bias"), ("position_bias", "r_r_bias"),
                             ("segment_bias", "r_s_bias")):
            out[f"{hf}rel_attn.{theirs}"] = state[f"{lab}attn.{ours}"].reshape(heads[1:])
        out[f"{hf}rel_attn.seg_embed"] = state[f"{lab}attn.segment_embed"].reshape(2, *heads[1:])
        for ours, theirs in (("ln_attn", "rel_attn.layer_norm"), ("ln_ff", "ff.layer_norm"), ("ff.up", "ff.layer_1"),
                             ("ff.proj", "ff.layer_2")):
            out[f"{hf}{theirs}.weight"] = state[f"{lab}{ours}.weight"]
            out[f"{hf}{theirs}.bias"] = state[f"{lab}{ours}.bias"]
    return {name: tensor.detach().clone().contiguous() for name, tensor in out.items()}

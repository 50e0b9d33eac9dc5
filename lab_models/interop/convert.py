"""Shared pieces of the weight converters (lab_models/interop/<arch>.py): reading a checkpoint's tensors by name,
the BERT-style layer that BERT, RoBERTa and ELECTRA share, and activation names.

The lab's backbone stores attention as one fused projection `qkv` (rows [W_q; W_k; W_v], nn.Linear layout: out x in)
and its feed-forward as `ff.up` / `ff.proj`; Hugging Face's BERT keeps `query`, `key` and `value` apart, and GPT-2's
`Conv1D` stores weights transposed (in x out). The converters only rename, transpose, concatenate or slice: every
number is copied exactly, so the lab's logits equal the reference's up to float summation order.

Worked example (a GPT-2 style fused Conv1D weight becomes the lab's nn.Linear layout):

>>> import torch
>>> reader = StateReader({"transformer.h.0.attn.c_attn.weight": torch.arange(6.).reshape(2, 3)},
...                      prefixes=("transformer.",))
>>> reader.take("h.0.attn.c_attn.weight", (2, 3)).t().tolist()
[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
>>> reader.unused()
[]
>>> lab_activation("gelu_new", "activation_function")
'gelu_tanh'
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from lab_models.messages import LabError, Message

# checkpoint names that are buffers, not weights: old checkpoints stored them (causal masks, position id ranges)
IGNORABLE_SUFFIXES = ("position_ids", "token_type_ids", "attn.bias", "attn.masked_bias", ".masked_bias")

# Hugging Face activation names -> the lab's ModelConfig.activation
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
                  "relu": "relu"}
# and back: the names transformers' ACT2FN knows (BERT, RoBERTa, ALBERT, ELECTRA, GPT-2)
LAB_TO_HF_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def lab_activation(name, field: str) -> str:
    """The lab's activation for a config.json activation name; ValueError for one the backbone does not have."""
    if name not in HF_ACTIVATIONS:
        raise LabError("config.json {field}={name!r} is an activation the lab's backbone does not have (it has "
                       "{hf_activations})", field=field, name=name, hf_activations=', '.join(sorted(HF_ACTIVATIONS)))
    return HF_ACTIVATIONS[name]


def _normalised(name: str) -> str:
    """Old TF-converted checkpoints call LayerNorm weights gamma and beta (transformers renames them on load too)."""
    if name.endswith(".gamma"):
        return name[: -len(".gamma")] + ".weight"
    if name.endswith(".beta"):
        return name[: -len(".beta")] + ".bias"
    return name


class StateReader:
    """A checkpoint's tensors by name, with the base model's prefix (`transformer.`, `bert.`, ...) optional, as
    transformers accepts both. `take` reads one tensor (as float32) and remembers which were used, so that
    `check_all_used` can refuse a checkpoint with weights the lab would silently drop (a different variant of the
    architecture). `state` may be a plain dict or a lazy mapping that reads each tensor when it is taken."""

    def __init__(self, state: Mapping[str, torch.Tensor], prefixes: tuple[str, ...] = ()):
        self.source = state  # read a tensor only when it is taken (lab_models/interop/checkpoint.py: LazyState)
        self.names = {_normalised(name): name for name in state.keys()}  # gamma/beta -> weight/bias
        self.prefixes = tuple(prefixes)
        self.used: set[str] = set()

    def _find(self, name: str) -> str | None:
        for candidate in (*(p + name for p in self.prefixes), name):
            if candidate in self.names:
                return candidate
        for p in self.prefixes:  # asked with the prefix, stored without it
            if name.startswith(p) and name[len(p):] in self.names:
                return name[len(p):]
        return None

    def has(self, name: str) -> bool:
        return self._find(name) is not None

    def take(self, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
        """The tensor `name` (with or without the prefix) as float32; ValueError naming it when it is missing or its
        shape is not `shape`."""
        key = self._find(name)
        if key is None:
            shown = f"{self.prefixes[0]}{name} (or {name})" if self.prefixes else name
            raise LabError("the checkpoint has no tensor {shown}: it is not a complete {what} checkpoint "
                           "(a base model without its pretraining head, or another variant of the architecture)",
                           shown=shown, what=self._what())
        tensor = self.source[self.names[key]]
        if shape is not None and tuple(tensor.shape) != tuple(shape):
            raise LabError("shape mismatch: the checkpoint's {key} is {tensor_shape} but its config.json "
                           "says {shape}", key=key, tensor_shape=tuple(tensor.shape), shape=tuple(shape))
        self.used.add(key)
        return tensor.to(torch.float32) if tensor.is_floating_point() else tensor

    def ignore(self, name: str) -> None:
        """Mark a tensor as read on purpose without using it (a tied copy of the embedding matrix)."""
        key = self._find(name)
        if key is not None:
            self.used.add(key)

    def unused(self) -> list[str]:
        return sorted(name for name in self.names if name not in self.used
                      and not name.endswith(IGNORABLE_SUFFIXES))

    def check_all_used(self) -> None:
        left = self.unused()
        if left:
            more = f" and {len(left) - 5} more" if len(left) > 5 else ""
            raise LabError("the checkpoint has weights the lab's {what} has no place for: "
                           "{left}{more}; it is another variant of the architecture, which the lab "
                           "cannot represent exactly", what=self._what(), left=', '.join(left[:5]), more=more)

    def _what(self) -> str:
        return self.prefixes[0].rstrip(".") if self.prefixes else "model"


class Subset(Mapping):
    """The names of `state` that start with `prefix` (without it), minus those starting with `exclude`: a view that
    reads a tensor only when asked (ELECTRA's discriminator and generator arrive in one mapping).

    >>> sorted(Subset({"a.x": 1, "g.a.x": 2}, "g."))
    ['a.x']
    """

    def __init__(self, state: Mapping, prefix: str, exclude: str | None = None):
        self.state = state
        self.prefix = prefix
        self.names = {name[len(prefix):]: None for name in state.keys()
                      if name.startswith(prefix) and not (exclude and name.startswith(exclude))}

    def __getitem__(self, name: str):
        if name not in self.names:
            raise KeyError(name)
        return self.state[self.prefix + name]

    def __contains__(self, name) -> bool:
        return name in self.names

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def fused_qkv(reader: StateReader, prefix: str, H: int) -> dict[str, torch.Tensor]:
    """BERT-style separate query/key/value (nn.Linear layout) -> the lab's fused `qkv` weight and bias."""
    weights = [reader.take(f"{prefix}{name}.weight", (H, H)) for name in ("query", "key", "value")]
    biases = [reader.take(f"{prefix}{name}.bias", (H,)) for name in ("query", "key", "value")]
    return {"weight": torch.cat(weights, dim=0), "bias": torch.cat(biases, dim=0)}  # (3H, H), (3H,)


def split_qkv(weight: torch.Tensor, bias: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The lab's fused (3H, H) projection -> {"query": (W, b), "key": ..., "value": ...}."""
    ws, bs = weight.chunk(3, dim=0), bias.chunk(3, dim=0)
    return {name: (w, b) for name, w, b in zip(("query", "key", "value"), ws, bs)}


def bert_layer_to_lab(reader: StateReader, hf: str, lab: str, H: int, d_ff: int) -> dict[str, torch.Tensor]:
    """One BERT encoder layer (`encoder.layer.{i}.` of BERT, RoBERTa, ELECTRA) -> the lab's post-LN Block.

    BERT: x = LN_attn(x + W_o attn(x)); x = LN_out(x + W_2 act(W_1 x)), the lab's Block with norm="post"."""
    qkv = fused_qkv(reader, f"{hf}attention.self.", H)
    return {
        f"{lab}attn.qkv.weight": qkv["weight"], f"{lab}attn.qkv.bias": qkv["bias"],
        f"{lab}attn.proj.weight": reader.take(f"{hf}attention.output.dense.weight", (H, H)),
        f"{lab}attn.proj.bias": reader.take(f"{hf}attention.output.dense.bias", (H,)),
        f"{lab}ln_attn.weight": reader.take(f"{hf}attention.output.LayerNorm.weight", (H,)),
        f"{lab}ln_attn.bias": reader.take(f"{hf}attention.output.LayerNorm.bias", (H,)),
        f"{lab}ff.up.weight": reader.take(f"{hf}intermediate.dense.weight", (d_ff, H)),
        f"{lab}ff.up.bias": reader.take(f"{hf}intermediate.dense.bias", (d_ff,)),
        f"{lab}ff.proj.weight": reader.take(f"{hf}output.dense.weight", (H, d_ff)),
        f"{lab}ff.proj.bias": reader.take(f"{hf}output.dense.bias", (H,)),
        f"{lab}ln_ff.weight": reader.take(f"{hf}output.LayerNorm.weight", (H,)),
        f"{lab}ln_ff.bias": reader.take(f"{hf}output.LayerNorm.bias", (H,)),
    }


def mlm_head_to_lab(reader: StateReader, dense: str, norm: str, bias: str, *, width: int, hidden: int, vocab: int,
                    lab: str = "backbone.") -> dict[str, torch.Tensor]:
    """BERT's MLM head (dense (width, hidden) -> GeLU -> LayerNorm, then the output bias) under transformers' names
    `dense`, `norm` (prefixes of .weight/.bias) and `bias`, as the lab's `lm_transform` and `lm_bias`."""
    return {f"{lab}lm_transform.0.weight": reader.take(f"{dense}.weight", (width, hidden)),
            f"{lab}lm_transform.0.bias": reader.take(f"{dense}.bias", (width,)),
            f"{lab}lm_transform.2.weight": reader.take(f"{norm}.weight", (width,)),
            f"{lab}lm_transform.2.bias": reader.take(f"{norm}.bias", (width,)),
            f"{lab}lm_bias": reader.take(bias, (vocab,))}


def mlm_head_from_lab(state: dict[str, torch.Tensor], dense: str, norm: str, bias: str,
                      lab: str = "backbone.") -> dict[str, torch.Tensor]:
    """The inverse of `mlm_head_to_lab`: the lab's `lm_transform` and `lm_bias` under transformers' names."""
    return {f"{dense}.weight": state[f"{lab}lm_transform.0.weight"],
            f"{dense}.bias": state[f"{lab}lm_transform.0.bias"],
            f"{norm}.weight": state[f"{lab}lm_transform.2.weight"],
            f"{norm}.bias": state[f"{lab}lm_transform.2.bias"],
            bias: state[f"{lab}lm_bias"]}


def bert_layer_from_lab(state: dict[str, torch.Tensor], lab: str, hf: str) -> dict[str, torch.Tensor]:
    """The inverse of `bert_layer_to_lab`: a lab Block -> BERT's `encoder.layer.{i}.` names."""
    out = {}
    for name, (w, b) in split_qkv(state[f"{lab}attn.qkv.weight"], state[f"{lab}attn.qkv.bias"]).items():
        out[f"{hf}attention.self.{name}.weight"], out[f"{hf}attention.self.{name}.bias"] = w, b
    pairs = {"attn.proj": "attention.output.dense", "ln_attn": "attention.output.LayerNorm",
             "ff.up": "intermediate.dense", "ff.proj": "output.dense", "ln_ff": "output.LayerNorm"}
    for lab_name, hf_name in pairs.items():
        for part in ("weight", "bias"):
            out[f"{hf}{hf_name}.{part}"] = state[f"{lab}{lab_name}.{part}"]
    return out


def owned(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous float32 copies that share no storage (safetensors refuses tensors that share memory, and a view
    into a fused matrix would save the whole matrix)."""
    return {name: tensor.detach().to(torch.float32).contiguous().clone() for name, tensor in state.items()}


def require(condition: bool, message: Message) -> None:
    """LabError(message) unless `condition`: the export checks read as a list of facts."""
    if not condition:
        raise LabError.of(message)


def bert_embeddings_to_lab(reader: StateReader, lab: str, cfg, position_offset: int = 0) -> dict[str, torch.Tensor]:
    """BERT-style `embeddings.{word,position,token_type}_embeddings` + `embeddings.LayerNorm` -> the lab's
    Embeddings under `lab` ("backbone.embeddings.").

    position_offset: RoBERTa numbers positions from padding_idx + 1, so the lab's position i is the checkpoint's row
    i + offset (the rows before it are never read). A token-type table of one row (RoBERTa) is added to every token,
    so it is folded into the position table exactly; with n_segments > 0 the table is the lab's segment table."""
    V, E, P = cfg.vocab_size, cfg.embedding_width, cfg.max_positions
    positions = reader.take("embeddings.position_embeddings.weight", (P + position_offset, E))[position_offset:]
    out = {f"{lab}token.weight": reader.take("embeddings.word_embeddings.weight", (V, E))}
    if reader.has("embeddings.token_type_embeddings.weight"):
        types = reader.take("embeddings.token_type_embeddings.weight", (max(cfg.n_segments, 1), E))
        if cfg.n_segments:
            out[f"{lab}segment.weight"] = types
        else:
            positions = positions + types[0]  # (P, E): every token adds type row 0
    out[f"{lab}positions.0.weight"] = positions
    if cfg.has_embedding_norm:
        out[f"{lab}norm.weight"] = reader.take("embeddings.LayerNorm.weight", (E,))
        out[f"{lab}norm.bias"] = reader.take("embeddings.LayerNorm.bias", (E,))
    return out


def bert_embeddings_from_lab(state: dict[str, torch.Tensor], lab: str, hf: str, cfg,
                             position_offset: int = 0) -> dict[str, torch.Tensor]:
    """The inverse of `bert_embeddings_to_lab`: zero rows before the offset, a zero one-row token-type table for a
    model without segments (then every token adds zero, as in the lab)."""
    E = cfg.embedding_width
    positions = state[f"{lab}positions.0.weight"]
    if position_offset:
        positions = torch.cat([positions.new_zeros(position_offset, E), positions])  # (offset + P, E)
    types = state[f"{lab}segment.weight"] if cfg.n_segments else positions.new_zeros(1, E)
    return {f"{hf}embeddings.word_embeddings.weight": state[f"{lab}token.weight"],
            f"{hf}embeddings.position_embeddings.weight": positions,
            f"{hf}embeddings.token_type_embeddings.weight": types,
            f"{hf}embeddings.LayerNorm.weight": state[f"{lab}norm.weight"],
            f"{hf}embeddings.LayerNorm.bias": state[f"{lab}norm.bias"]}


def segments_from_type_vocab(hf_config: dict, needed: int) -> int:
    """The lab's n_segments for a config.json type_vocab_size: 0 when it is 1 (folded into the positions), else the
    table's rows; ValueError when the family's batches need more segments than the checkpoint has."""
    rows = int(hf_config.get("type_vocab_size", 2))
    require(rows >= 1, Message("config.json type_vocab_size={rows}: expected at least 1", rows=rows))
    segments = 0 if rows == 1 else rows
    require(segments >= needed, Message("config.json type_vocab_size={rows}, but the lab's family feeds segment ids "
                                        "0..{needed_rows}", rows=rows, needed_rows=needed - 1))
    return segments


def require_absolute_positions(hf_config: dict) -> None:
    kind = hf_config.get("position_embedding_type", "absolute")
    require(kind in (None, "absolute"), Message("config.json position_embedding_type={kind!r}: the lab imports "
                                                "BERT-style models with absolute positions only", kind=kind))
    require(not hf_config.get("is_decoder", False) and not hf_config.get("add_cross_attention", False),
            Message("config.json is_decoder/add_cross_attention: a decoder variant, not the masked LM the lab imports"))


# OpenAI GPT and GPT-2 name a block's pieces alike: lab name -> transformers name (under transformer.h.{i}.)
OPENAI_BLOCK = {"ln_attn": "ln_1", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj", "ln_ff": "ln_2",
                "ff.up": "mlp.c_fc", "ff.proj": "mlp.c_proj"}
CONV1D = ("attn.qkv", "attn.proj", "ff.up", "ff.proj")  # Conv1D weights: stored (in, out), the transpose of Linear's


def openai_blocks_to_lab(reader: StateReader, model) -> dict[str, torch.Tensor]:
    """Every `h.{i}.` block of OpenAI GPT / GPT-2 -> `backbone.blocks.{i}.`, shapes checked against the lab model's
    (Conv1D weights against the transpose). ln_1 is the LayerNorm around attention in both: after it in GPT-1
    (post-LN), before it in GPT-2 (pre-LN), as the lab's ln_attn is for norm="post" and norm="pre"."""
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    state = {}
    for i in range(model.model_config.n_layers):
        for lab_name, hf_name in OPENAI_BLOCK.items():
            for part in ("weight", "bias"):
                key = f"backbone.blocks.{i}.{lab_name}.{part}"
                transposed = part == "weight" and lab_name in CONV1D
                tensor = reader.take(f"h.{i}.{hf_name}.{part}", shapes[key][::-1] if transposed else shapes[key])
                state[key] = tensor.t() if transposed else tensor
    return state


def openai_blocks_from_lab(state: dict[str, torch.Tensor], n_layers: int) -> dict[str, torch.Tensor]:
    """The inverse of `openai_blocks_to_lab`, with transformers' `transformer.` prefix."""
    out = {}
    for i in range(n_layers):
        for lab_name, hf_name in OPENAI_BLOCK.items():
            for part in ("weight", "bias"):
                tensor = state[f"backbone.blocks.{i}.{lab_name}.{part}"]
                transposed = part == "weight" and lab_name in CONV1D
                out[f"transformer.h.{i}.{hf_name}.{part}"] = tensor.t() if transposed else tensor
    return out

"""`ModelConfig`: every number and switch the backbone is built from, and the four size presets.

The config describes *structure* (how wide, how deep, which embeddings exist), never a family: ALBERT is
`embedding_size=128, share_layers=True`, GLM is `n_position_rows=2`, T5 is `decoder_layers=...`, and the backbone
builds from those facts without knowing the family's name. `ffn="switch"` (with n_experts, capacity_factor,
expert_every, ...) gives any of them Switch Transformer feed-forwards (nn/moe.py).

Worked example:

>>> cfg = preset_config("tiny", vocab_size=1000, norm="post")
>>> cfg.d_model, cfg.n_layers, cfg.head_size, cfg.norm
(64, 2, 32, 'post')
>>> ModelConfig.from_dict(cfg.to_dict()) == cfg
True
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from lab_models.messages import LabError, Message

NORMS = ("pre", "post")
# "gelu": the exact (erf) GeLU of BERT; "gelu_tanh": its tanh approximation, which GPT, GPT-2 and ALBERT v2 use (HF's
# "gelu_new" / "gelu_pytorch_tanh"; up to float rounding the same numbers); "relu": the Transformer's and T5 v1.0's.
ACTIVATIONS = ("gelu", "gelu_tanh", "relu")
NORM_TYPES = ("layernorm", "rmsnorm")
ATTENTION_IMPLS = ("sdpa", "eager")
FEED_FORWARDS = ("dense", "switch")
QUERY_STREAMS = (None, "learned", "token")
# None: no relative terms in the attention scores; "buckets": T5's and MPNet's bucketed bias (nn/relative_position.py);
# "xlnet": Transformer-XL's relative attention with XLNet's relative segment encoding (nn/relative_attention.py)
RELATIVE_ATTENTIONS = (None, "buckets", "xlnet")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 1024
    max_positions: int = 256
    dropout: float = 0.1  # on embeddings and on each residual branch (after the attention and feed-forward outputs)
    # On the attention probabilities. 0 by default: on CPU, dropout_p > 0 inside F.scaled_dot_product_attention sends
    # it down its slow math path, so regularisation comes from `dropout`, applied after attention instead.
    attention_dropout: float = 0.0
    norm: str = "pre"  # "post": LayerNorm after each residual add (GPT-1, BERT); "pre": before each sublayer (GPT-2)
    layer_norm_eps: float = 1e-5  # BERT uses 1e-12 and GPT-2 1e-5; the difference does not matter at these sizes
    # ALBERT's factorized embeddings: tokens (and positions, segments) live in E dims and are projected to d_model,
    # so the V x H embedding matrix becomes V x E + E x H. None = no factorization (E = d_model, no projection).
    embedding_size: int | None = None
    share_layers: bool = False  # ALBERT: one block reused n_layers times (and one decoder block, decoder_layers times)
    n_position_rows: int = 1  # 2 = GLM's 2-D positions: position_ids is (B, 2, T), a second learned table is added
    n_segments: int = 0  # segment (token type) embeddings: 2 for BERT's sentence A/B; 0 = none
    decoder_layers: int = 0  # > 0: an encoder-decoder (MASS, T5): causal self-attention + cross-attention blocks
    # Switch Transformer (Fedus, Zoph, Shazeer 2022; lab_models/nn/moe.py). ffn="switch": every expert_every-th
    # feed-forward (layers expert_every, 2 * expert_every, ... counted from 1, in the encoder and the decoder) becomes
    # n_experts experts of d_ff each with a top-1 router, so a token costs the FLOPs of one dense feed-forward.
    ffn: str = "dense"
    n_experts: int = 8
    capacity_factor: float = 1.25  # each expert takes at most ceil(capacity_factor * tokens / n_experts) tokens
    expert_every: int = 2  # the paper replaces every other feed-forward
    load_balance_weight: float = 0.01  # alpha of the auxiliary loss alpha * n_experts * sum_i f_i * P_i (paper: 0.01)
    router_z_weight: float = 0.0  # ST-MoE's router z-loss coefficient (their 1e-3); 0 = off
    router_jitter: float = 0.0  # multiplicative noise U(1 - eps, 1 + eps) on the router input in training; 0 = off
    attention_impl: str = "sdpa"  # "eager" computes softmax(QK^T / sqrt(hs)) by hand; the same numbers, slower
    tie_embeddings: bool = True  # the output projection reuses the token embedding matrix (Press & Wolf 2017)
    # BERT's MLM transform (dense + GeLU + LayerNorm) before the vocabulary projection. Always built when
    # embedding_size is set, because that transform is also the way back from d_model to E (ALBERT).
    lm_transform: bool = False
    # Where a second (query) stream starts, for forward_two_stream: "learned" = XLNet's trainable vector w plus the
    # slot's position; "token" = the embedding of the token at the slot plus its position (MPNet's [MASK] slots).
    # None = one-stream model (no w parameter exists, so DDP sees no unused parameter).
    query_stream: str | None = None
    # ---- options the papers' own code has, so that a Hugging Face checkpoint loads with parity ----
    # The non-linearity everywhere the backbone has one: the feed-forward, the MLM transform, ELECTRA's discriminator
    # head. One of ACTIVATIONS.
    activation: str = "gelu"
    # A LayerNorm on the summed embeddings. None = the rule: post-LN models have one (BERT), pre-LN models do not
    # (GPT-2: its first block normalises its input anyway). False for GPT-1 and XLNet, which are post-LN without one.
    embedding_norm: bool | None = None
    # The vocabulary projection's output bias (BERT's cls/predictions/bias). GPT, GPT-2, GLM and T5 have none.
    lm_bias: bool = True
    # "layernorm" (mean and variance, weight and bias) or "rmsnorm": T5's scale-only norm (no mean subtraction, no
    # bias), computed in float32 whatever the activation dtype, as the reference does.
    norm_type: str = "layernorm"
    linear_bias: bool = True  # False: the attention and feed-forward linears have no bias (T5)
    # T5 v1.1's gated feed-forward: act(x W_0) * (x W_1), then the output projection (Shazeer 2020, "GLU variants").
    ffn_gated: bool = False
    # The learned absolute position table(s) added to the token vectors. False: none (T5, whose positions enter only
    # through the bucketed bias; XLNet, only through its relative attention).
    absolute_positions: bool = True
    # Relative positions in the attention scores. "buckets": the bucketed relative position bias of T5 and MPNet, a
    # learned scalar per head and bucket added to the attention logits; one table per stack (the encoder's, and the
    # decoder's), computed once per forward and shared by every layer of the stack; bidirectional buckets in
    # encoders, unidirectional in a decoder. "xlnet": every self-attention adds Transformer-XL's relative position
    # terms (sinusoid encodings of the distance between the two positions' ids, projected per layer, with the content
    # and position biases) and XLNet's relative segment term ("same segment or not"); see nn/relative_attention.py.
    # None: plain dot-product attention.
    relative_attention: str | None = None
    relative_attention_buckets: int = 32  # "buckets": T5 and MPNet use 32
    relative_attention_max_distance: int = 128  # "buckets": distances beyond this share the last bucket (128)
    # relative_attention="xlnet": distances beyond +-clamp_len share the encoding of +-clamp_len (XLNet's clamp_len;
    # None = no clamping, XLNet's default -1).
    relative_attention_clamp_len: int | None = None
    # True: attention logits are q.k / sqrt(d_head). False: no scaling (T5, which folds it into its initialization:
    # a model built without the scale gets T5's init, nn/initialization.py).
    attention_scale: bool = True
    # Each head's width. None: d_model / n_heads. T5 sets it independently (its d_kv), and n_heads * d_head may
    # differ from d_model: the attention then projects d_model -> n_heads * d_head -> d_model.
    d_head: int | None = None
    # T5 with tied embeddings scales the decoder output by d_model^-0.5 before the tied projection (its embeddings
    # start at std 1, so the logits would otherwise be d_model^0.5 times too large).
    output_scale: bool = False

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_positions"):
            require_int(name, getattr(self, name), minimum=1)
        if self.d_head is not None:
            require_int("d_head", self.d_head, minimum=1)
        elif self.d_model % self.n_heads:
            raise LabError("d_model ({d_model}) must be divisible by n_heads ({n_heads}): "
                           "each head gets d_model / n_heads dimensions (or set d_head)",
                           d_model=self.d_model, n_heads=self.n_heads)
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise LabError("{name} must be a probability in [0, 1), got {value!r}", name=name, value=value)
        if isinstance(self.layer_norm_eps, bool) or not isinstance(self.layer_norm_eps, (int, float)) \
                or not self.layer_norm_eps > 0:
            raise LabError("layer_norm_eps must be a positive number, got {layer_norm_eps!r}",
                           layer_norm_eps=self.layer_norm_eps)
        if self.norm not in NORMS:
            raise LabError("unknown norm {norm!r}: choose 'pre' (GPT-2) or 'post' (BERT, GPT-1)", norm=self.norm)
        if self.embedding_size is not None:
            require_int("embedding_size", self.embedding_size, minimum=1)
        if self.n_position_rows not in (1, 2) or isinstance(self.n_position_rows, bool):
            raise LabError("n_position_rows must be 1 or 2 (GLM's 2-D positions), got {n_position_rows!r}",
                           n_position_rows=self.n_position_rows)
        require_int("n_segments", self.n_segments, minimum=0)
        require_int("decoder_layers", self.decoder_layers, minimum=0)
        _check_switch(self)
        if self.attention_impl not in ATTENTION_IMPLS:
            raise LabError("unknown attention_impl {attention_impl!r}: choose 'sdpa' or 'eager'",
                           attention_impl=self.attention_impl)
        if self.embedding_norm is not None and not isinstance(self.embedding_norm, bool):
            raise LabError("embedding_norm must be True, False or None (post-LN models only), got "
                           "{embedding_norm!r}", embedding_norm=self.embedding_norm)
        for name in ("share_layers", "tie_embeddings", "lm_transform", "linear_bias", "ffn_gated",
                     "absolute_positions", "attention_scale", "output_scale", "lm_bias"):
            if not isinstance(getattr(self, name), bool):
                raise LabError("{name} must be True or False, got {value!r}", name=name, value=getattr(self, name))
        if self.activation not in ACTIVATIONS:
            raise LabError("unknown activation {activation!r}: choose 'gelu' (exact), 'gelu_tanh' or 'relu'",
                           activation=self.activation)
        if self.norm_type not in NORM_TYPES:
            raise LabError("unknown norm_type {norm_type!r}: choose 'layernorm' or 'rmsnorm' (T5)",
                           norm_type=self.norm_type)
        # at least 4: each direction gets half the buckets, half of those exact distances and half logarithmic bins
        require_int("relative_attention_buckets", self.relative_attention_buckets, minimum=4)
        require_int("relative_attention_max_distance", self.relative_attention_max_distance, minimum=1)
        if self.relative_attention_max_distance <= self.relative_attention_buckets // 2:
            raise LabError("relative_attention_max_distance ({relative_attention_max_distance}) must exceed "
                           "half the buckets ({half_buckets}): the distances beyond the "
                           "exact buckets are binned logarithmically up to it",
                           relative_attention_max_distance=self.relative_attention_max_distance,
                           half_buckets=self.relative_attention_buckets // 2)
        if self.query_stream not in QUERY_STREAMS:
            raise LabError("unknown query_stream {query_stream!r}: choose None, 'learned' (XLNet) "
                           "or 'token' (MPNet)", query_stream=self.query_stream)
        self._check_relative_attention()

    def _check_relative_attention(self) -> None:
        if self.relative_attention not in RELATIVE_ATTENTIONS:
            raise LabError("unknown relative_attention {relative_attention!r}: choose None, 'buckets' (T5, "
                           "MPNet) or 'xlnet' (Transformer-XL's relative positions with XLNet's relative segments)",
                           relative_attention=self.relative_attention)
        if self.relative_attention_clamp_len is not None:
            require_int("relative_attention_clamp_len", self.relative_attention_clamp_len, minimum=1)
        if self.relative_attention != "xlnet":
            return
        if self.n_position_rows != 1:
            raise LabError("relative_attention='xlnet' measures distances along one row of position ids; GLM's "
                           "2-D positions (n_position_rows=2) need the learned absolute tables")
        if self.d_head is not None and self.d_head * self.n_heads != self.d_model:
            raise LabError("relative_attention='xlnet' needs heads of d_model / n_heads dimensions: leave d_head "
                           "unset (got d_head={d_head} with {n_heads} heads and d_model={d_model})",
                           d_head=self.d_head, n_heads=self.n_heads, d_model=self.d_model)
        if self.d_model % 2:
            raise LabError("relative_attention='xlnet' needs an even d_model (its sinusoid encodings pair a sine "
                           "and a cosine per frequency), got {d_model}", d_model=self.d_model)

    @property
    def head_size(self) -> int:
        """Each head's width: d_head, or d_model / n_heads."""
        return self.d_model // self.n_heads if self.d_head is None else self.d_head

    @property
    def attention_width(self) -> int:
        """n_heads * head_size: the width of the queries, keys and values (d_model unless d_head says otherwise)."""
        return self.n_heads * self.head_size

    @property
    def has_embedding_norm(self) -> bool:
        """Whether the summed embeddings go through a LayerNorm (`embedding_norm`, or the rule: post-LN only)."""
        return self.norm == "post" if self.embedding_norm is None else self.embedding_norm

    @property
    def embedding_width(self) -> int:
        """E: the width of the token/position/segment tables (d_model unless factorized)."""
        return self.d_model if self.embedding_size is None else self.embedding_size

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (plain ints, floats, strings, bools, None)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "ModelConfig":
        """The inverse of `to_dict`. Unknown keys raise ValueError (a typo should not be silently dropped)."""
        if not isinstance(values, dict):
            raise LabError("a model config must be a dict, got {values_type}", values_type=type(values).__name__)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise LabError("unknown model config keys: {unknown}", unknown=', '.join(unknown))
        if "vocab_size" not in values:
            raise LabError("a model config needs vocab_size")
        return cls(**values)


def is_switch_layer(config: ModelConfig, layer_index: int) -> bool:
    """Whether block `layer_index` (0-based, in the encoder or in the decoder) has a Switch feed-forward.

    >>> cfg = preset_config("small", 100, ffn="switch")   # 4 layers, expert_every=2: layers 2 and 4
    >>> [is_switch_layer(cfg, i) for i in range(4)]
    [False, True, False, True]
    """
    return config.ffn == "switch" and (layer_index + 1) % config.expert_every == 0


def _check_switch(config: ModelConfig) -> None:
    if config.ffn not in FEED_FORWARDS:
        raise LabError("unknown ffn {ffn!r}: choose 'dense' or 'switch' (the Switch Transformer's experts)",
                       ffn=config.ffn)
    require_int("n_experts", config.n_experts, minimum=1)
    require_int("expert_every", config.expert_every, minimum=1)
    checks = (("capacity_factor", config.capacity_factor, 0.0, None), ("load_balance_weight",
              config.load_balance_weight, None, None), ("router_z_weight", config.router_z_weight, None, None),
              ("router_jitter", config.router_jitter, None, 1.0))
    for name, value, above, below in checks:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
                or (above is not None and value <= above) or (below is not None and value >= below):
            bound = "> 0" if above is not None else ">= 0" if below is None else Message("in [0, 1)")
            raise LabError("{name} must be a number {bound}, got {value!r}", name=name, bound=bound, value=value)
    if config.ffn != "switch":
        return
    if config.share_layers and config.expert_every != 1:
        raise LabError("this model shares one block across all its layers (ALBERT): a Switch feed-forward there "
                       "needs expert_every=1")
    if max(config.n_layers, config.decoder_layers) < config.expert_every:
        raise LabError("expert_every={expert_every} but the model has {n_layers} layers: no "
                       "feed-forward would become a Switch layer; lower expert_every",
                       expert_every=config.expert_every, n_layers=config.n_layers)


def require_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LabError("{name} must be an integer >= {minimum}, got {value!r}", name=name, minimum=minimum, value=value)


# name -> the sizes. The other fields keep their defaults unless overridden.
PRESETS: dict[str, dict[str, int]] = {
    # Trains 50 steps on a CPU in seconds: for tests and smoke runs.
    "tiny": dict(d_model=64, n_layers=2, n_heads=2, d_ff=256, max_positions=128),
    # The CPU demo size: learns something visible in minutes.
    "small": dict(d_model=256, n_layers=4, n_heads=4, d_ff=1024, max_positions=256),
    # GPU sizes.
    "medium": dict(d_model=512, n_layers=8, n_heads=8, d_ff=2048, max_positions=512),
    "base": dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, max_positions=512),  # BERT-base / GPT-2 small
}


def preset_config(name: str, vocab_size: int, **overrides) -> ModelConfig:
    """The preset's sizes with `overrides` applied, e.g. `preset_config("small", 8000, norm="post", n_segments=2)`."""
    if name not in PRESETS:
        raise LabError("unknown preset {name!r}: choose one of {presets}", name=name, presets=', '.join(PRESETS))
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise LabError("unknown model config keys: {unknown}", unknown=', '.join(unknown))
    return ModelConfig(vocab_size=vocab_size, **{**PRESETS[name], **overrides})

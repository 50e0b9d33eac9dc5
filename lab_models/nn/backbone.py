"""The one Transformer backbone every family runs on.

Families differ in the attention mask they pass and in what they predict; the backbone never asks which family it
is. It reads a `Batch`'s tensors (see lab_models/batch.py) through four entry points:

    forward(input_ids, attention_mask, position_ids, segment_ids)             one stream: GPT, BERT, UniLM, GLM, ...
    forward_two_stream(input_ids, content_mask, query_mask, position_ids,
                       query_slots, segment_ids)                               content + query streams: XLNet, MPNet
    encode(...) / decode(decoder_input_ids, decoder_mask, cross_mask,
                         decoder_position_ids, memory)                         encoder-decoder: MASS, T5
    lm_logits(hidden, positions)                                               hidden -> vocabulary, tied, sparse

Incremental decoding (lab_models/inference/generation/generate.py): `forward(..., cache=backbone.new_cache())` and
`decode(..., cache=backbone.new_cache(decoder=True))` keep every layer's keys and values (`DecodingCache`), so that a
decoding step runs only the new tokens: their ids and positions, and a mask (B, T_new, T_cached + T_new) over the cached
keys and themselves. The decoder's cross-attention keys and values of the encoder memory are computed once. New tokens
take the positions the caller gives (the next token's index); with relative positions (XLNet's attention, T5's and
MPNet's buckets) the cache also keeps the cached keys' position and segment ids, so that a new row's distances to
them are those of the full pass.

Layout, top to bottom:

    token ids --Embedding(V, E)--+ [positions (+ 2nd position row)] (+ segments) --[LN]--dropout--[Linear(E, H)]--> x
    x --Block x n_layers (or one Block applied n_layers times)--> [final LN] --> hidden (B, T, H)
    hidden --[dense, act, LN: H -> E]--> tied Embedding(V, E)^T [+ bias] --> logits

Pieces in [brackets] exist only for some configs: the position tables unless `absolute_positions=False`, the
embedding LayerNorm (`embedding_norm`; by default for post-LN models: BERT has one, GPT-1 is built with
embedding_norm=False, XLNet too), the E -> H projection for factorized embeddings (ALBERT), the final LayerNorm for
pre-LN (GPT-2), the LM transform when `lm_transform` or `embedding_size` is set, the output bias unless
`lm_bias=False` (GPT, GPT-2). `activation` picks the non-linearity of the feed-forward and the LM transform: the exact
GeLU (BERT), its tanh approximation (GPT, GPT-2; Hugging Face's `gelu_new`) or ReLU.

Relative attention (`relative_attention="xlnet"`, XLNet's default): every Block's self-attention is
`RelativeMultiHeadAttention` (nn/relative_attention.py), and each entry point builds the batch's relative positions
once (the sinusoid encodings of the distances between the rows' position ids, and "same segment or not" from the
segment ids, which then reach the attention even without a segment table) and hands them to every layer. In
`forward_two_stream` the query rows take their slots' position and segment ids, in the same stacked call as h.
Cross-attention stays plain.

Options the papers' own code needs (T5, MPNet; nn/config.py), each a fact about structure, none a family name:
- `norm_type="rmsnorm"`: every norm above is T5's RMS norm (nn/norms.py) instead of LayerNorm.
- `linear_bias=False`, `activation` ("gelu", "gelu_tanh", "relu"), `ffn_gated` (act(x W_0) * x W_1), `d_head`
  (n_heads * d_head may differ from d_model), `attention_scale=False` (no 1/sqrt(d_head); the backbone then takes
  T5's initialization, nn/initialization.py), `output_scale` (hidden * d_model^-0.5 before the projection), `lm_bias`.
- `absolute_positions=False`: no position tables; position ids still arrive and feed the relative bias.
- `relative_attention="buckets"`: T5's bucketed relative position bias (nn/relative_position.py). Each stack owns one
  table (`relative_bias` for the encoder / one stream / two streams, bidirectional; `decoder_relative_bias`,
  unidirectional); each forward pass computes the bias once from the position ids (row 0), in the activation dtype,
  and folds it with the boolean mask into one additive float mask that every layer's SDPA (or eager softmax) reads.
  Cross-attention gets no bias, as in T5.

Deviations, stated where they happen:
- Positions are learned absolute embeddings unless the config says otherwise (T5: relative buckets only; MPNet:
  both; XLNet: its relative attention only).
- The embedding LayerNorm exists by default exactly for post-LN models. BERT has one; GPT-1 (also post-LN) is built
  without (models.family_model_config sets embedding_norm=False), as is XLNet; GPT-2 (pre-LN) has none. Any other
  post-LN family keeps it, so that its first block sees normalised inputs.
- Pre-LN models scale the residual output projections' init by 1/sqrt(2 * n_layers) (GPT-2 §2.3); post-LN models
  use plain N(0, 0.02) (BERT).
- Dropout (on the embeddings and after each residual branch) is `nn/dropout.py`'s: the same function as
  `nn.Dropout`, with its CPU mask drawn from uniform numbers (cheaper than `bernoulli_`), so for a given seed the CPU
  drops other elements than `nn.Dropout` would.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.nn.attention import AttentionMask, KeyValueCache, MultiHeadAttention, add_position_bias, prepare_mask
from lab_models.nn.config import ModelConfig
from lab_models.nn.dropout import Dropout
from lab_models.nn.feed_forward import activation_module, build_feed_forward
from lab_models.nn.moe import SwitchFeedForward
from lab_models.nn.initialization import embedding_table, init_weights, normal_init_, t5_init_weights
from lab_models.nn.norms import make_norm
from lab_models.nn.relative_attention import RelativeMultiHeadAttention, RelativePositions, relative_positions
from lab_models.nn.relative_position import RelativePositionBias, shared_rows


def _value_range(t: torch.Tensor) -> tuple[int, int]:
    """(min, max) of an integer tensor, read back in one device sync. While `torch.compile` traces, (0, -1): an empty
    range that passes every check, as a read-back would break the graph (the engine's batches come from the lab's own
    builders, and the engine's first eager pass, which counts the FLOPs, has checked them)."""
    if torch.compiler.is_compiling():
        return 0, -1
    lo, hi = torch.stack(torch.aminmax(t)).tolist()
    return lo, hi


def _activation_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype the attention computes in: autocast's (bf16 on a GPU) when it is on, else x's."""
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


class LayerCache:
    """One layer's cached keys and values: its self-attention's and (decoder blocks) its cross-attention's."""

    def __init__(self, cross: bool = False):
        self.self_attn = KeyValueCache()
        self.cross_attn = KeyValueCache(static=True) if cross else None


class DecodingCache:
    """Every layer's `LayerCache`, for `Backbone.forward(..., cache=)` or `Backbone.decode(..., cache=)`. Indexed by
    layer, not by block: ALBERT's one shared block gets one cache entry per application.

    >>> cache = DecodingCache(n_layers=2)
    >>> cache.length, len(cache.layers)
    (0, 2)
    """

    def __init__(self, n_layers: int, cross: bool = False):
        self.layers = [LayerCache(cross) for _ in range(n_layers)]
        # relative positions: the position and segment ids of the cached keys, (B, T_cached) each (None: not yet)
        self.key_positions: torch.Tensor | None = None
        self.key_segments: torch.Tensor | None = None

    def extend_keys(self, positions: torch.Tensor, segments: torch.Tensor | None
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Append the new rows' position ids (B, T) and segment ids (or None = segment 0); returns all of them."""
        if segments is None and self.key_segments is not None:
            segments = torch.zeros_like(positions)
        if segments is not None and self.key_segments is None and self.key_positions is not None:
            self.key_segments = torch.zeros_like(self.key_positions)
        if self.key_positions is not None:  # either side may be one row shared by every batch row
            B = max(self.key_positions.shape[0], positions.shape[0])
            positions = torch.cat([self.key_positions.expand(B, -1), positions.expand(B, -1)], dim=1)
            if segments is not None:
                segments = torch.cat([self.key_segments.expand(B, -1), segments.expand(B, -1)], dim=1)
        self.key_positions = positions
        if segments is not None:
            self.key_segments = segments
        return self.key_positions, self.key_segments

    @property
    def length(self) -> int:
        """How many positions the self-attention keys hold."""
        return self.layers[0].self_attn.length if self.layers else 0

    def truncate(self, length: int) -> None:
        """Keep the first `length` cached positions of every layer (the cross-attention memory stays)."""
        for layer in self.layers:
            layer.self_attn.truncate(length)
        if self.key_positions is not None:
            self.key_positions = self.key_positions[:, :length]
            self.key_segments = None if self.key_segments is None else self.key_segments[:, :length]

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows `rows` (B_new,) in that order, in every layer (beam search: each beam's parent)."""
        for layer in self.layers:
            layer.self_attn.reorder(rows)
            if layer.cross_attn is not None:
                layer.cross_attn.reorder(rows)
        if self.key_positions is not None:
            self.key_positions = self.key_positions.index_select(0, rows)
            self.key_segments = None if self.key_segments is None else self.key_segments.index_select(0, rows)


class Block(nn.Module):
    """One Transformer layer: self-attention, optional cross-attention (decoder), feed-forward; each a residual
    branch with dropout. norm="pre": x + f(LN(x)) (GPT-2). norm="post": LN(x + f(x)) (BERT, GPT-1)."""

    def __init__(self, config: ModelConfig, cross_attention: bool = False, layer_index: int = 0):
        super().__init__()
        self.pre_norm = config.norm == "pre"
        self.ln_attn = make_norm(config, config.d_model)  # LayerNorm, or T5's RMS norm (config.norm_type)
        relative = config.relative_attention == "xlnet"  # Transformer-XL / XLNet terms in the self-attention scores
        self.attn = RelativeMultiHeadAttention(config) if relative else MultiHeadAttention(config)
        self.ln_cross = make_norm(config, config.d_model) if cross_attention else None
        self.cross_attn = MultiHeadAttention(config) if cross_attention else None
        self.ln_ff = make_norm(config, config.d_model)
        self.ff = build_feed_forward(config, layer_index)  # dense, or the Switch experts
        self.drop = Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: AttentionMask, n_context: int | None = None,
                token_mask: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, cross_mask: AttentionMask | None = None,
                return_weights: bool = False, cache: LayerCache | None = None,
                relative: RelativePositions | None = None):
        """x (B, Tq, H) -> (B, Tq, H) [and the self-attention probabilities (B, nh, Tq, Tk) with return_weights].

        n_context: self-attention keys and values come from the first n_context rows of x only (None = all rows).
        That is the two-stream layout: x = [content stream h; query stream g], and both streams read h.
        token_mask (B, Tq) bool: the real (not padding) rows, for a Switch feed-forward's capacity and statistics.
        memory, cross_mask: the encoder output (B, Tm, H) and the (B, Tq, Tm) mask, for decoder blocks.
        cache: this layer's keys and values of earlier decoding steps (x then holds the new rows only).
        relative: the batch's relative positions, for relative self-attention (config.relative_attention).
        """
        # 1. self-attention
        a = self.ln_attn(x) if self.pre_norm else x  # (B, Tq, H)
        context = None if n_context is None else a[:, :n_context]  # (B, Tk, H)
        extra = {} if relative is None else {"relative": relative}
        if cache is None:
            out = self.attn(a, mask, context=context, return_weights=return_weights, **extra)
        else:
            out = self.attn(a, mask, context=context, return_weights=return_weights, cache=cache.self_attn, **extra)
        out, weights = out if return_weights else (out, None)
        x = self._add(x, out, self.ln_attn)
        # 2. cross-attention: queries from the decoder, keys and values from the encoder's memory
        if self.cross_attn is not None:
            if memory is None or cross_mask is None:
                raise LabError("a decoder block needs the encoder memory and a cross-attention mask")
            a = self.ln_cross(x) if self.pre_norm else x
            if cache is None:
                out = self.cross_attn(a, cross_mask, context=memory)
            else:
                out = self.cross_attn(a, cross_mask, context=memory, cache=cache.cross_attn)
            x = self._add(x, out, self.ln_cross)
        # 3. feed-forward
        a = self.ln_ff(x) if self.pre_norm else x
        routed = isinstance(self.ff, SwitchFeedForward)  # a Switch layer gives padding no expert capacity
        x = self._add(x, self.ff(a, token_mask) if routed else self.ff(a), self.ln_ff)
        return (x, weights) if return_weights else x

    def _add(self, x: torch.Tensor, out: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        x = x + self.drop(out)  # the residual connection
        return x if self.pre_norm else norm(x)


class Embeddings(nn.Module):
    """Token vectors [+ learned absolute positions (+ a second position row)] (+ segments), in E dims, then
    [LayerNorm] -> dropout -> [projection E -> H]. Without absolute positions (T5, XLNet) there are no position
    tables."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        E = config.embedding_width
        self.token = embedding_table(config.vocab_size, E)
        # row 0: the position in the sequence; row 1 (GLM): the position inside a blank-infilling span.
        # None at all with absolute_positions=False (T5, XLNet: positions enter through relative terms only).
        n_tables = config.n_position_rows if config.absolute_positions else 0
        self.positions = nn.ModuleList(embedding_table(config.max_positions, E) for _ in range(n_tables))
        self.segment = embedding_table(config.n_segments, E) if config.n_segments else None
        self.norm = make_norm(config, E) if config.has_embedding_norm else nn.Identity()
        self.drop = Dropout(config.dropout)
        self.project = nn.Identity() if config.embedding_size is None else nn.Linear(E, config.d_model)  # ALBERT

    def forward(self, token_vectors: torch.Tensor, position_ids: torch.Tensor,
                segment_ids: torch.Tensor | None) -> torch.Tensor:
        """token_vectors (B, T, E), position_ids (B, rows, T), segment_ids (B, T) or None -> (B, T, H)."""
        x = token_vectors  # (B, T, E)
        for row, table in enumerate(self.positions):
            x = x + table(position_ids[:, row])  # (B, T, E)
        if self.segment is not None:
            if segment_ids is None:
                segment_ids = torch.zeros_like(position_ids[:, 0])  # like BERT's default token_type_ids = 0
            x = x + self.segment(segment_ids)  # (B, T, E)
        return self.project(self.drop(self.norm(x)))  # (B, T, H)


class Backbone(nn.Module):
    """Embeddings, a stack of blocks, and the tied LM projection. See the module docstring."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise LabError("Backbone needs a ModelConfig, got {config_type}", config_type=type(config).__name__)
        self.config = config
        # FlexAttention block masks instead of SDPA's dense boolean masks (a CUDA fast path set by
        # lab_models/training/performance.py; not part of the config: it changes no number the model computes)
        self.flex_attention = False
        # the value ranges of ids and positions are checked in every call (one read-back each, which on a GPU waits for
        # the device) until the training engine has seen its batch builder's first batch pass them; it then sets this
        self.trust_input_values = False
        # the vocabulary projection and its loss in chunks of rows (nn/vocab_loss.py; performance setting vocab_loss)
        self.chunked_vocab_loss = False
        H, E = config.d_model, config.embedding_width
        self.pad_id: int | None = None  # [PAD] (FamilyModel sets it): Switch layers give padding no capacity
        self.embeddings = Embeddings(config)
        # relative attention: dropout on the sinusoid encodings, once per batch (XLNet's dropout on pos_emb)
        self.relative_drop = Dropout(config.dropout) if config.relative_attention == "xlnet" else None
        # XLNet's w: where every query-stream row starts (before its position is added)
        self.query_start = nn.Parameter(torch.empty(E)) if config.query_stream == "learned" else None
        # share_layers (ALBERT): one Block whose weights every layer reuses
        self.blocks = nn.ModuleList(Block(config, layer_index=i)
                                    for i in range(1 if config.share_layers else config.n_layers))
        self.ln_f = make_norm(config, H) if config.norm == "pre" else nn.Identity()
        # T5 / MPNet: the relative position bias of the (encoder) stack, computed once per forward, shared by its layers
        self.relative_bias = self._relative_bias(config, bidirectional=True)
        self.decoder_blocks = self.ln_dec = self.decoder_relative_bias = None
        if config.decoder_layers:
            n_decoder_blocks = 1 if config.share_layers else config.decoder_layers
            self.decoder_blocks = nn.ModuleList(Block(config, cross_attention=True, layer_index=i)
                                                for i in range(n_decoder_blocks))
            self.ln_dec = make_norm(config, H) if config.norm == "pre" else nn.Identity()
            self.decoder_relative_bias = self._relative_bias(config, bidirectional=False)  # T5's decoder: causal
        # The LM head: [dense + activation + LayerNorm, H -> E] then the (tied) V x E matrix [and a bias].
        self.lm_transform = None
        if config.lm_transform or config.embedding_size is not None:
            self.lm_transform = nn.Sequential(nn.Linear(H, E), activation_module(config.activation),
                                              make_norm(config, E))
        # Tied: lm_logits reads embeddings.token.weight directly, so the state dict holds the matrix once.
        self.lm_out = None if config.tie_embeddings else nn.Linear(E, config.vocab_size, bias=False)
        self.lm_bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.lm_bias else None
        # T5 (tied): hidden * d_model^-0.5 before the projection
        self.output_scale = config.d_model ** -0.5 if config.output_scale else None

        self.apply(init_weights)
        if self.query_start is not None:
            normal_init_(self.query_start, std=0.02)
        if config.norm == "pre":  # GPT-2: scale the init of the projections that write into the residual stream
            for name, p in self.named_parameters():
                if name.endswith("proj.weight"):
                    normal_init_(p, std=0.02 / math.sqrt(2 * config.n_layers))
        if not config.attention_scale:  # T5 folds 1/sqrt(d) into its init (nn/initialization.py)
            t5_init_weights(self)

    @staticmethod
    def _relative_bias(config: ModelConfig, bidirectional: bool) -> RelativePositionBias | None:
        if config.relative_attention != "buckets":
            return None
        return RelativePositionBias(config.n_heads, config.relative_attention_buckets,
                                    config.relative_attention_max_distance, bidirectional)

    @staticmethod
    def _with_position_bias(table: RelativePositionBias | None, mask: AttentionMask, query_positions: torch.Tensor,
                            key_positions: torch.Tensor, x: torch.Tensor) -> AttentionMask:
        """`mask` with the stack's relative position bias folded in (once per batch, for every layer), or `mask`
        itself when the model has none. Positions are row 0 of the position ids: (B, Tq) and (B, Tk)."""
        if table is None:
            return mask
        queries = shared_rows(query_positions)  # (B or 1, Tq)
        keys = queries if key_positions is query_positions else shared_rows(key_positions)  # (B or 1, Tk)
        bias = table(queries, keys)  # (B or 1, nh, Tq, Tk)
        return add_position_bias(mask, bias.to(_activation_dtype(x)))

    # ---- one stream -------------------------------------------------------------------------------------------

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                segment_ids: torch.Tensor | None = None, return_attention: bool = False,
                cache: DecodingCache | None = None):
        """input_ids (B, T), attention_mask (B, T, T) bool (True = may attend), position_ids (B, T) or (B, 2, T)
        -> hidden (B, T, H). With return_attention=True: (hidden, [probabilities (B, nh, T, T) per layer]), computed
        on the eager path.

        cache (`new_cache()`): incremental decoding. input_ids are the T new tokens only, attention_mask is
        (B, T, cached + T) over the cached positions and the new ones, and the new keys and values are appended."""
        B, T = self._check_ids("input_ids", input_ids)
        x = self._embed(self.embeddings.token(input_ids), position_ids, segment_ids, B, T)  # (B, T, H)
        past = self._check_cache(cache, self.config.n_layers, B, T)
        mask = prepare_mask(self._check_mask("attention_mask", attention_mask, B, T, past + T),
                            flex=self.flex_attention)  # once for all layers
        positions, key_positions, segments, key_segments = self._key_ids(position_ids, segment_ids, B, T, cache)
        mask = self._with_position_bias(self.relative_bias, mask, positions, key_positions, x)  # buckets (or mask)
        relative = self._relative(positions, key_positions, segments, key_segments)  # XLNet's terms (or None)
        maps = []
        tokens = self._token_mask(input_ids)  # (B, T) or None
        for i, block in enumerate(self._stack(self.blocks, self.config.n_layers)):
            layer_cache = None if cache is None else cache.layers[i]
            if return_attention:
                x, weights = block(x, mask, return_weights=True, cache=layer_cache, relative=relative,
                                   token_mask=tokens)
                maps.append(weights)
            else:
                x = block(x, mask, cache=layer_cache, relative=relative, token_mask=tokens)  # (B, T, H)
        x = self.ln_f(x)
        return (x, maps) if return_attention else x

    # ---- two streams (XLNet, MPNet) ---------------------------------------------------------------------------

    def forward_two_stream(self, input_ids: torch.Tensor, content_mask: torch.Tensor, query_mask: torch.Tensor,
                           position_ids: torch.Tensor, query_slots: torch.Tensor,
                           segment_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The content stream h (B, T, H) and the query stream g (B, Q, H).

        content_mask (B, T, T): what h at i may read (XLNet: rank(j) <= rank(i), itself included).
        query_mask (B, Q, T): what query row r may read of h (XLNet: rank(j) < rank(slot r), never its own token).
        query_slots (B, Q): the input position each query row sits at; it takes that position's position id (and
        segment). It starts from the learned vector w (config.query_stream="learned", XLNet) or from the embedding of
        the token at the slot (query_stream="token", MPNet, whose slots hold [MASK] tokens).

        Every layer runs the SAME block on both streams: h' = Block(h reads h), g' = Block(g reads h). The two travel as
        one tensor [h; g] (B, T+Q, H) under one stacked mask (B, T+Q, T), so each layer makes one attention call and one
        feed-forward call, and the keys/values of h are computed once for both streams. With relative attention the
        query rows take the distances (and segments) of their slots to every key of h, in the same call.
        """
        if self.config.query_stream is None:
            raise LabError("this model has no query stream: build it with query_stream='learned' (XLNet) or "
                           "'token' (MPNet)")
        B, T = self._check_ids("input_ids", input_ids)
        slots = self._check_slots(query_slots, B, T)  # (B, Q)
        Q = slots.shape[1]
        self._check_mask("content_mask", content_mask, B, T, T)
        self._check_mask("query_mask", query_mask, B, Q, T)
        position_ids = self._check_positions(position_ids, B, T)  # (B, rows, T)
        segment_ids = self._check_segments(segment_ids, B, T)

        h = self._embed(self.embeddings.token(input_ids), position_ids, segment_ids, B, T)  # (B, T, H)
        rows = position_ids.shape[1]
        slot_positions = position_ids.gather(2, slots.unsqueeze(1).expand(-1, rows, -1))  # (B, rows, Q)
        slot_segments = None if segment_ids is None else segment_ids.gather(1, slots)  # (B, Q)
        if self.query_start is not None:
            start = self.query_start.expand(B, Q, -1)  # (B, Q, E): w, the same for every row
        else:
            start = self.embeddings.token(input_ids.gather(1, slots))  # (B, Q, E): the slot's own token
        g = self._embed(start, slot_positions, slot_segments, B, Q)  # (B, Q, H)

        x = torch.cat([h, g], dim=1)  # (B, T+Q, H): rows [0, T) content, [T, T+Q) query
        # (B, T+Q, T), keys are h only
        mask = prepare_mask(torch.cat([content_mask, query_mask], dim=1), flex=self.flex_attention)
        # the query rows sit at their slots' positions: distances to the content keys as in the text
        query_positions = torch.cat([position_ids[:, 0], slot_positions[:, 0]], dim=1)  # (B, T+Q)
        mask = self._with_position_bias(self.relative_bias, mask, query_positions, position_ids[:, 0], x)
        row_segments = None if segment_ids is None else torch.cat([segment_ids, slot_segments], dim=1)  # (B, T+Q)
        relative = self._relative(query_positions, position_ids[:, 0], row_segments, segment_ids)
        tokens = self._token_mask(input_ids)  # (B, T) or None; query rows are tokens for a Switch layer
        tokens = None if tokens is None else torch.cat([tokens, tokens.new_ones(B, Q)], dim=1)  # (B, T+Q)
        for block in self._stack(self.blocks, self.config.n_layers):
            x = block(x, mask, n_context=T, relative=relative, token_mask=tokens)  # (B, T+Q, H)
        x = self.ln_f(x)
        return x[:, :T], x[:, T:]  # (B, T, H), (B, Q, H)

    # ---- encoder-decoder (MASS, T5) ---------------------------------------------------------------------------

    def encode(self, input_ids: torch.Tensor, encoder_mask: torch.Tensor, position_ids: torch.Tensor,
               segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder side: the same as `forward`. Returns memory (B, T, H)."""
        return self.forward(input_ids, encoder_mask, position_ids, segment_ids)

    def decode(self, decoder_input_ids: torch.Tensor, decoder_mask: torch.Tensor, cross_mask: torch.Tensor,
               decoder_position_ids: torch.Tensor, memory: torch.Tensor,
               cache: DecodingCache | None = None) -> torch.Tensor:
        """decoder_input_ids (B, S), decoder_mask (B, S, S) (causal, from the batch), cross_mask (B, S, T),
        decoder_position_ids (B, S), memory (B, T, H) from `encode` -> (B, S, H). The decoder shares the encoder's
        embeddings (and the tied output matrix).

        cache (`new_cache(decoder=True)`): incremental decoding. decoder_input_ids are the S new tokens only,
        decoder_mask is (B, S, cached + S); the cross-attention keys and values of `memory` are computed on the first
        call and reused."""
        if self.decoder_blocks is None:
            raise LabError("this model has no decoder: build it with decoder_layers > 0")
        B, S = self._check_ids("decoder_input_ids", decoder_input_ids)
        if not isinstance(memory, torch.Tensor) or memory.dim() != 3 or memory.shape[0] != B \
                or memory.shape[2] != self.config.d_model:
            got = tuple(memory.shape) if isinstance(memory, torch.Tensor) else repr(memory)
            raise LabError("memory must be the encoder output of shape ({B}, T, {d_model}), got {got}",
                           B=B, d_model=self.config.d_model, got=got)
        T = memory.shape[1]
        y = self._embed(self.embeddings.token(decoder_input_ids), decoder_position_ids, None, B, S)  # (B, S, H)
        past = self._check_cache(cache, self.config.decoder_layers, B, S, cross=True)
        self_mask = prepare_mask(self._check_mask("decoder_mask", decoder_mask, B, S, past + S),
                                 flex=self.flex_attention)
        positions, key_positions, _, _ = self._key_ids(decoder_position_ids, None, B, S, cache)
        self_mask = self._with_position_bias(self.decoder_relative_bias, self_mask, positions, key_positions, y)
        relative = self._relative(positions, key_positions, None, None)  # decoder self-attention only
        cross = prepare_mask(self._check_mask("cross_mask", cross_mask, B, S, T),
                             flex=self.flex_attention)  # no relative terms (as T5)
        tokens = self._token_mask(decoder_input_ids)  # (B, S) or None
        for i, block in enumerate(self._stack(self.decoder_blocks, self.config.decoder_layers)):
            layer_cache = None if cache is None else cache.layers[i]
            y = block(y, self_mask, memory=memory, cross_mask=cross, cache=layer_cache, relative=relative,
                      token_mask=tokens)  # (B, S, H)
        return self.ln_dec(y)

    # ---- incremental decoding ----------------------------------------------------------------------------------

    def new_cache(self, decoder: bool = False) -> DecodingCache:
        """An empty `DecodingCache` for `forward` (decoder=False) or for `decode` (decoder=True: the decoder stack,
        with the cross-attention memory)."""
        if decoder:
            if self.decoder_blocks is None:
                raise LabError("this model has no decoder: build it with decoder_layers > 0")
            return DecodingCache(self.config.decoder_layers, cross=True)
        return DecodingCache(self.config.n_layers)

    def _check_cache(self, cache: DecodingCache | None, n_layers: int, B: int, T: int, cross: bool = False) -> int:
        """The number of cached positions (0 without a cache); ValueError for a cache that does not fit."""
        if cache is None:
            return 0
        if not isinstance(cache, DecodingCache) or len(cache.layers) != n_layers \
                or any((layer.cross_attn is not None) != cross for layer in cache.layers):
            raise LabError("cache must be this backbone's new_cache({decoder_flag}), with "
                           "{n_layers} layers", decoder_flag='decoder=True' if cross else '', n_layers=n_layers)
        past = cache.length
        k = cache.layers[0].self_attn.k
        if k is not None and k.shape[0] != B:
            raise LabError("the cache holds {n_rows} rows but the input has {B}: reorder the cache first",
                           n_rows=k.shape[0], B=B)
        if past + T > self.config.max_positions:
            raise LabError("the cache holds {past} positions and {T} more would exceed the model's "
                           "{max_positions} positions", past=past, T=T, max_positions=self.config.max_positions)
        return past

    # ---- the vocabulary projection ----------------------------------------------------------------------------

    def lm_logits(self, hidden: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """hidden (..., H) -> logits (..., V), through the output matrix (the token embedding when tied).

        positions: project only some rows (the vocabulary projection is the expensive part). Either a bool mask of
        shape hidden.shape[:-1] (e.g. targets != IGNORE_INDEX) or a 1-D tensor of indices into the flattened rows
        hidden.reshape(-1, H). The result is then (N, V), in row-major order of the selected rows.
        """
        return F.linear(self.lm_inputs(hidden, positions), self.output_weight, self.lm_bias)  # (..., V)

    def lm_inputs(self, hidden: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """What the vocabulary projection multiplies: the rows at `positions` (as `lm_logits`), through the LM
        transform (BERT's dense + GELU + LayerNorm, ALBERT's H -> E) and T5's output scale. (..., E) or (N, E)."""
        if positions is not None:
            hidden = self._gather_rows(hidden, positions)  # (N, H)
        x = hidden if self.lm_transform is None else self.lm_transform(hidden)  # (..., E)
        if self.output_scale is not None:
            x = x * self.output_scale  # T5: d_model^-0.5 before the tied projection
        return x

    @property
    def output_weight(self) -> torch.Tensor:
        """The (V, E) output matrix: the token embedding when tied (the default), else its own."""
        return self.embeddings.token.weight if self.lm_out is None else self.lm_out.weight

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """The number of distinct parameters (a shared block or a tied matrix counts once). With exclude_embeddings,
        the token, position and segment tables are left out (nanoGPT's "non-embedding" count)."""
        total = sum(p.numel() for p in self.parameters())
        if exclude_embeddings:
            tables = [self.embeddings.token, *self.embeddings.positions]
            if self.embeddings.segment is not None:
                tables.append(self.embeddings.segment)
            total -= sum(t.weight.numel() for t in tables)
        return total

    # ---- helpers ----------------------------------------------------------------------------------------------

    def _key_ids(self, position_ids: torch.Tensor, segment_ids: torch.Tensor | None, B: int, T: int,
                 cache: DecodingCache | None):
        """Self-attention's rows and keys for relative positions: (row positions (B, T), key positions (B, past+T),
        row segments, key segments); the cache, if any, is extended by the new rows once. The ids were checked by
        `_embed` already."""
        positions = position_ids.reshape(B, -1, T)[:, 0]  # (B, T): row 0 of (B, T) and (B, rows, T) alike
        if cache is None or self.config.relative_attention is None:
            return positions, positions, segment_ids, segment_ids
        key_positions, key_segments = cache.extend_keys(positions, segment_ids)  # (B, past + T) each
        return positions, key_positions, segment_ids, key_segments

    def _relative(self, query_positions: torch.Tensor, key_positions: torch.Tensor,
                  query_segments: torch.Tensor | None, key_segments: torch.Tensor | None) -> RelativePositions | None:
        """XLNet's relative positions for every layer (None unless relative_attention="xlnet")."""
        if self.config.relative_attention != "xlnet":
            return None
        return relative_positions(query_positions, key_positions, query_segments, key_segments, self.config.d_model,
                                  self.config.relative_attention_clamp_len, self.relative_drop)

    @staticmethod
    def _stack(blocks: nn.ModuleList, n_layers: int) -> list[nn.Module]:
        """The blocks in application order: n_layers distinct blocks, or one shared block n_layers times."""
        return list(blocks) if len(blocks) == n_layers else [blocks[0]] * n_layers

    def _embed(self, token_vectors: torch.Tensor, position_ids: torch.Tensor, segment_ids: torch.Tensor | None,
               B: int, T: int) -> torch.Tensor:
        position_ids = self._check_positions(position_ids, B, T)  # (B, rows, T)
        segment_ids = self._check_segments(segment_ids, B, T)
        return self.embeddings(token_vectors, position_ids, segment_ids)  # (B, T, H)

    def _input_range(self, values: torch.Tensor) -> tuple[int, int]:
        """(min, max) of ids or positions to check, or an empty range that passes every check once the engine trusts
        its batches (trust_input_values)."""
        return (0, -1) if self.trust_input_values else _value_range(values)

    def _check_ids(self, name: str, ids: torch.Tensor) -> tuple[int, int]:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
            got = (Message("{dtype} of shape {shape}", dtype=ids.dtype, shape=tuple(ids.shape))
                   if isinstance(ids, torch.Tensor) else repr(ids))
            raise LabError("{name} must be a (batch, length) long tensor, got {got}", name=name, got=got)
        B, T = ids.shape
        if B == 0 or T == 0:
            raise LabError("{name} is empty (shape {expected_shape})", name=name, expected_shape=(B, T))
        if T > self.config.max_positions:
            raise LabError("{name} has length {T} but the model has {max_positions} positions",
                           name=name, T=T, max_positions=self.config.max_positions)
        lo, hi = self._input_range(ids)
        if lo < 0 or hi >= self.config.vocab_size:
            raise LabError("{name} holds ids in [{lo}, {hi}] but the vocabulary has {vocab_size} ids",
                           name=name, lo=lo, hi=hi, vocab_size=self.config.vocab_size)
        return B, T

    def _check_positions(self, position_ids: torch.Tensor, B: int, T: int) -> torch.Tensor:
        """(B, T) or (B, 2, T) as the config says -> (B, rows, T)."""
        rows = self.config.n_position_rows
        want = (B, T) if rows == 1 else (B, rows, T)
        if not isinstance(position_ids, torch.Tensor) or position_ids.dtype != torch.long:
            raise LabError("position_ids must be a long tensor of shape {want}", want=want)
        if position_ids.dim() == 3 and tuple(position_ids.shape) == (B, rows, T):
            pass
        elif rows == 1 and tuple(position_ids.shape) == (B, T):
            position_ids = position_ids.unsqueeze(1)  # (B, 1, T)
        else:
            raise LabError("position_ids must have shape {want} (n_position_rows={rows}), "
                           "got {position_ids_shape}",
                           want=want, rows=rows, position_ids_shape=tuple(position_ids.shape))
        lo, hi = self._input_range(position_ids)
        if lo < 0 or hi >= self.config.max_positions:
            raise LabError("position ids lie in [{lo}, {hi}] but the model has {max_positions} "
                           "positions (0..{last_position})",
                           lo=lo, hi=hi, max_positions=self.config.max_positions,
                           last_position=self.config.max_positions - 1)
        return position_ids

    def _check_segments(self, segment_ids: torch.Tensor | None, B: int, T: int) -> torch.Tensor | None:
        """A model without segment embeddings ignores segment_ids (as GPT-2 has no token types), unless its relative
        attention reads them (XLNet: only whether two ids are equal counts, so any ids >= 0 are fine)."""
        relative = self.config.relative_attention == "xlnet"
        if segment_ids is None or (self.config.n_segments == 0 and not relative):
            return None
        if not isinstance(segment_ids, torch.Tensor) or segment_ids.dtype != torch.long \
                or tuple(segment_ids.shape) != (B, T):
            raise LabError("segment_ids must be a long tensor of shape {expected_shape}", expected_shape=(B, T))
        lo, hi = self._input_range(segment_ids)
        if lo < 0 or (self.config.n_segments and hi >= self.config.n_segments):
            limit = (Message("the model has {n_segments} segments", n_segments=self.config.n_segments)
                     if self.config.n_segments else Message("must be >= 0"))
            raise LabError("segment ids lie in [{lo}, {hi}] but {limit}", lo=lo, hi=hi, limit=limit)
        return segment_ids

    @staticmethod
    def _check_mask(name: str, mask: torch.Tensor | AttentionMask, B: int, Tq: int,
                    Tk: int) -> torch.Tensor | AttentionMask:
        if isinstance(mask, AttentionMask) and tuple(mask.shape) == (B, Tq, Tk):
            return mask  # prepared on the host by the engine (prepare_batch_masks)
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (B, Tq, Tk):
            got = (repr(mask) if not isinstance(mask, torch.Tensor)
                   else Message("{dtype} of shape {shape}", dtype=mask.dtype, shape=tuple(mask.shape)))
            raise LabError("{name} must be a bool tensor of shape {expected_shape} (True = may attend), got {got}",
                           name=name, expected_shape=(B, Tq, Tk), got=got)
        return mask

    @staticmethod
    def _check_slots(query_slots: torch.Tensor, B: int, T: int) -> torch.Tensor:
        if not isinstance(query_slots, torch.Tensor) or query_slots.dtype != torch.long or query_slots.dim() != 2 \
                or query_slots.shape[0] != B or query_slots.shape[1] == 0:
            raise LabError("query_slots must be a long tensor of shape ({B}, Q) with Q >= 1", B=B)
        lo, hi = _value_range(query_slots)
        if lo < 0 or hi >= T:
            raise LabError("query_slots lie in [{lo}, {hi}] but the input has positions 0..{last_position}",
                           lo=lo, hi=hi, last_position=T - 1)
        return query_slots

    def _gather_rows(self, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The rows of hidden (..., H) picked by a bool mask (...) or flat indices (N,) -> (N, H)."""
        if not isinstance(positions, torch.Tensor):
            raise LabError("positions must be a bool mask or a 1-D long tensor of row indices")
        if positions.dtype == torch.bool:
            if positions.shape != hidden.shape[:-1]:
                raise LabError("a positions mask must have shape {hidden_shape}, "
                               "got {positions_shape}",
                               hidden_shape=tuple(hidden.shape[:-1]), positions_shape=tuple(positions.shape))
            return hidden[positions]  # (N, H)
        flat = hidden.reshape(-1, hidden.shape[-1])  # (B*T, H)
        if positions.dtype != torch.long or positions.dim() != 1:
            raise LabError("positions must be a bool mask or a 1-D long tensor, got {positions_dtype} "
                           "of shape {positions_shape}",
                           positions_dtype=positions.dtype, positions_shape=tuple(positions.shape))
        lo, hi = self._input_range(positions) if positions.numel() else (0, -1)
        if lo < 0 or hi >= flat.shape[0]:
            raise LabError("position indices must lie in [0, {n_rows}) (rows of the flattened hidden states)",
                           n_rows=flat.shape[0])
        return flat[positions]  # (N, H)

    def _token_mask(self, ids: torch.Tensor) -> torch.Tensor | None:
        """(B, T) bool, False at [PAD]: which rows a Switch layer counts. None for dense models or no pad id."""
        if self.config.ffn != "switch" or self.pad_id is None:
            return None
        return ids != self.pad_id

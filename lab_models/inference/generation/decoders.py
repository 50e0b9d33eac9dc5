"""The decoders: what a left-to-right search asks of each family (the logits of the first token, the logits after each
beam's newest token, which special tokens may come next, whether a history has ended).

    OneStreamDecoder        GPT, GPT-2, UniLM (appended-[MASK] decoding), GLM's Part B; KV cache
    EncoderDecoderDecoder   MASS, T5 (and T5InfillDecoder: the sentinels in order); KV cache
    GLMInfillDecoder        GLM's blanks, each [S] ... [E], with 2-D positions
    XLNetContinueDecoder    XLNet's query stream at the next position (no cache: the whole sequence each step)
    LSTMContinueDecoder     ELMo's forward LM and ULMFiT's AWD-LSTM (the prefix re-read each step)
    CoVeTranslateDecoder    CoVe's MT-LSTM encoder and attentional decoder

How each family's prompt becomes one of these (the paper each follows, and deviations) is in
`lab_models/inference/generation/plans.py`.
"""
from __future__ import annotations

from typing import Callable

import torch

from lab_models.inference.generation.context import DecodingContext


# --------------------------------------------------------------------------------------------------- decoders


class Decoder:
    """What a left-to-right search asks of a family: the logits of the first token, the logits after each beam's
    newest token, which special tokens may come next, and whether a history has ended."""

    limit: int  # the most tokens this decoder can produce within the model's positions
    cached: bool
    end_ids: tuple[int, ...] = ()

    def first(self) -> torch.Tensor:  # (1, V)
        raise NotImplementedError

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:  # (B, V)
        raise NotImplementedError

    def allowed_specials(self, history: list[int]) -> list[int]:
        return list(self.end_ids)

    def ends(self, history: list[int]) -> bool:
        return bool(history) and history[-1] in self.end_ids


class _Rereading(Decoder):
    """A decoder with no cache (XLNet, the LSTMs, CoVe): every step reads prefix + each history again, through
    `_logits(histories)` -> (B, V)."""

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        raise NotImplementedError

    def first(self) -> torch.Tensor:
        return self._logits([[]])

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        return self._logits(histories)


Item = tuple[int, tuple[int, ...], int]  # (token id, position ids (one per position row), segment id)


class OneStreamDecoder(Decoder):
    """One stream (GPT, GPT-2, UniLM, GLM): a prefix read under its own mask, then the produced tokens, each seeing
    the prefix, the tokens before it and itself. `feed(history, i)` is the input that stands for history[i];
    `query(history)`, if given, is an extra last input whose output predicts the next token (UniLM's [MASK])."""

    def __init__(self, ctx: DecodingContext, backbone, prefix: list[Item], prefix_mask: torch.Tensor,
                 feed: Callable[[list[int], int], Item], query: Callable[[list[int]], Item] | None,
                 use_cache: bool, end_ids: tuple[int, ...]):
        self.ctx, self.backbone = ctx, backbone
        self.prefix, self.prefix_mask = prefix, prefix_mask.to(ctx.device)  # (L, L)
        self.feed, self.query = feed, query
        self.cached = use_cache
        self.end_ids = end_ids
        self.rows = backbone.config.n_position_rows
        self.segments = backbone.config.n_segments > 0
        first_length = len(prefix) + (1 if query else 0)
        self.limit = ctx.max_positions - first_length + 1
        self.cache = None

    def _tensors(self, rows: list[list[Item]]):
        ctx = self.ctx
        ids = ctx.tensor([[item[0] for item in row] for row in rows])  # (B, T)
        positions = ctx.tensor([[list(p) for p in zip(*[item[1] for item in row])] for row in rows])  # (B, rows, T)
        if self.rows == 1:
            positions = positions[:, 0]  # (B, T)
        segments = ctx.tensor([[item[2] for item in row] for row in rows]) if self.segments else None
        return ids, positions, segments

    def _mask(self, past: int, n_prefix: int, n_new: int) -> torch.Tensor:
        """(past + n_prefix + n_new) keys for the n_prefix + n_new new rows: the prefix under its mask, the rest
        seeing everything before them and themselves."""
        L = n_prefix
        T = past + L + n_new
        mask = torch.zeros(L + n_new, T, dtype=torch.bool, device=self.ctx.device)
        if L:
            mask[:L, past:past + L] = self.prefix_mask
        mask[L:, :past + L] = True
        mask[L:, past + L:] = torch.ones(n_new, n_new, dtype=torch.bool, device=self.ctx.device).tril()
        return mask

    def _items(self, history: list[int], start: int) -> list[Item]:
        items = [self.feed(history, i) for i in range(start, len(history))]
        if self.query is not None:
            items.append(self.query(history))
        return items

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.backbone.lm_logits(hidden[:, -1])  # (B, V)

    def _full(self, histories: list[list[int]]) -> torch.Tensor:
        rows = [self.prefix + self._items(h, 0) for h in histories]
        ids, positions, segments = self._tensors(rows)
        B, T = ids.shape
        mask = self._mask(0, len(self.prefix), T - len(self.prefix)).expand(B, T, T)
        return self._logits(self.backbone(ids, mask, positions, segments))

    def first(self) -> torch.Tensor:
        if not self.cached:
            return self._full([[]])
        self.cache = self.backbone.new_cache()
        rows = [self.prefix + self._items([], 0)]
        ids, positions, segments = self._tensors(rows)
        T = ids.shape[1]
        mask = self._mask(0, len(self.prefix), T - len(self.prefix)).unsqueeze(0)
        hidden = self.backbone(ids, mask, positions, segments, cache=self.cache)
        if self.query is not None:
            self.cache.truncate(len(self.prefix))  # the query [MASK] is replaced by the chosen token
        return self._logits(hidden)

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        if not self.cached:
            return self._full(histories)
        if parents != list(range(len(parents))) or len(parents) != self.cache.layers[0].self_attn.k.shape[0]:
            self.cache.reorder(self.ctx.tensor(parents))
        rows = [self._items(h, len(h) - 1) for h in histories]
        ids, positions, segments = self._tensors(rows)
        B, n_new = ids.shape
        past = self.cache.length
        mask = self._mask(past, 0, n_new).expand(B, n_new, past + n_new)
        hidden = self.backbone(ids, mask, positions, segments, cache=self.cache)
        if self.query is not None:
            self.cache.truncate(past + n_new - 1)
        return self._logits(hidden)


class EncoderDecoderDecoder(Decoder):
    """MASS and T5: the encoder reads its input once; the decoder starts from `prefix` (forced tokens) at positions
    start, start + 1, ... and each produced token is fed at the next position, under a causal mask, attending the
    encoder under `cross` (T,) bool. The cross-attention keys and values are computed once (cached)."""

    def __init__(self, ctx: DecodingContext, encoder_ids: list[int], cross: torch.Tensor, prefix: list[int], start: int,
                 use_cache: bool, end_ids: tuple[int, ...]):
        self.ctx, self.backbone = ctx, ctx.backbone
        self.prefix, self.start = prefix, start
        self.cached = use_cache
        self.end_ids = end_ids
        T = len(encoder_ids)
        ids = ctx.tensor([encoder_ids])  # (1, T)
        full = torch.ones(1, T, T, dtype=torch.bool, device=ctx.device)
        self.memory = self.backbone.encode(ids, full, ctx.tensor([list(range(T))]))  # (1, T, H)
        self.cross = cross.to(ctx.device).view(1, 1, T)
        self.limit = min(ctx.max_positions - start - len(prefix) + 1, ctx.max_positions - len(prefix) + 1)
        self.cache = None

    def _decode(self, histories: list[list[int]], cache=None, start_index: int = 0) -> torch.Tensor:
        ctx = self.ctx
        rows = [(self.prefix + h)[start_index:] for h in histories]
        B, S = len(rows), len(rows[0])
        ids = ctx.tensor(rows)  # (B, S)
        positions = ctx.tensor([list(range(self.start + start_index, self.start + start_index + S))]).expand(B, S)
        past = 0 if cache is None else cache.length
        mask = torch.ones(S, past + S, dtype=torch.bool, device=ctx.device).tril(diagonal=past).expand(B, S, past + S)
        T = self.memory.shape[1]
        hidden = self.backbone.decode(ids, mask, self.cross.expand(B, S, T), positions,
                                      self.memory.expand(B, T, -1), cache=cache)
        return self.backbone.lm_logits(hidden[:, -1])  # (B, V)

    def first(self) -> torch.Tensor:
        if self.cached:
            self.cache = self.backbone.new_cache(decoder=True)
        return self._decode([[]], self.cache)

    def next(self, histories: list[list[int]], parents: list[int]) -> torch.Tensor:
        if not self.cached:
            return self._decode(histories)
        if parents != list(range(len(parents))) or len(parents) != self.cache.layers[0].self_attn.k.shape[0]:
            self.cache.reorder(self.ctx.tensor(parents))
        return self._decode(histories, self.cache, start_index=len(self.prefix) + len(histories[0]) - 1)


class T5InfillDecoder(EncoderDecoderDecoder):
    """T5's decoder constraints: after span i only <extra_id_(i+1)> or [EOS] may come as special tokens, never before
    the span's first token; the sentinel after the last blank (or [EOS]) ends the output."""

    def __init__(self, *args, sentinels: tuple[int, ...], n_blanks: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.sentinels, self.n_blanks = sentinels, n_blanks

    def _spans_done(self, history: list[int]) -> int:
        return sum(1 for t in history if t in self.sentinels)

    def allowed_specials(self, history: list[int]) -> list[int]:
        if not history or history[-1] in self.sentinels:
            return []  # a span has at least one token: T5's span corruption never makes an empty one
        return [self.ctx.vocab.eos_id, self.sentinels[self._spans_done(history) + 1]]

    def ends(self, history: list[int]) -> bool:
        if not history:
            return False
        last = history[-1]
        return last == self.ctx.vocab.eos_id or (last in self.sentinels and self._spans_done(history) >= self.n_blanks)


class GLMInfillDecoder(OneStreamDecoder):
    """GLM's Part B: [E] ends a span (never before its first token); after the last blank's [E] the output ends."""

    def __init__(self, *args, n_blanks: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_blanks = n_blanks

    def allowed_specials(self, history: list[int]) -> list[int]:
        if not history or history[-1] == self.ctx.vocab.end_id:
            return []  # a span has at least one token before its [E]: GLM's blanks are never empty in training
        return [self.ctx.vocab.end_id]

    def ends(self, history: list[int]) -> bool:
        return bool(history) and history[-1] == self.ctx.vocab.end_id \
            and history.count(self.ctx.vocab.end_id) >= self.n_blanks


class XLNetContinueDecoder(_Rereading):
    """XLNet in the left-to-right factorization order, recomputed each step (see the module docstring)."""

    def __init__(self, ctx: DecodingContext, prefix: list[int]):
        self.ctx, self.prefix = ctx, prefix
        self.cached = False
        self.end_ids = (ctx.vocab.eos_id,)
        self.limit = ctx.max_positions - len(prefix)  # the query slot needs a position of its own
        self.bidirectional = bool(ctx.run.settings.bidirectional_context)

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        ctx = self.ctx
        known = [self.prefix + h for h in histories]
        B, n = len(known), len(known[0])
        ids = ctx.tensor([row + [ctx.vocab.mask_id] for row in known])  # (B, n+1): the slot's token is never read
        if self.bidirectional:
            content = torch.ones(n + 1, n + 1, dtype=torch.bool, device=ctx.device)
            content[:n, n] = False
        else:
            content = torch.ones(n + 1, n + 1, dtype=torch.bool, device=ctx.device).tril()  # rank = position
        query = torch.ones(1, n + 1, dtype=torch.bool, device=ctx.device)
        query[0, n] = False  # the query never reads its own slot
        positions = ctx.tensor([list(range(n + 1))]).expand(B, n + 1)
        slots = ctx.tensor([[n]]).expand(B, 1)
        _, g = ctx.backbone.forward_two_stream(ids, content.expand(B, n + 1, n + 1), query.expand(B, 1, n + 1),
                                               positions, slots)
        return ctx.backbone.lm_logits(g[:, 0])  # (B, V)


class LSTMContinueDecoder(_Rereading):
    """ELMo's forward LM and ULMFiT's AWD-LSTM: the next-token logits after prefix + history, re-read each step."""

    def __init__(self, ctx: DecodingContext, prefix: list[int]):
        self.ctx, self.prefix = ctx, prefix
        self.cached = False
        self.end_ids = (ctx.vocab.eos_id,)
        self.limit = ctx.max_positions - len(prefix)
        model = ctx.model
        self.logits_of = model.forward_logits if ctx.family == "elmo" else model.next_token_logits

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        ids = self.ctx.tensor([self.prefix + h for h in histories])  # (B, n): the histories have one length
        return self.logits_of(ids)[:, -1]  # (B, V)


class CoVeTranslateDecoder(_Rereading):
    """CoVe's attentional decoder over the encoded English; each step re-reads [BOS] + the history."""

    def __init__(self, ctx: DecodingContext, encoder: list[int]):
        self.ctx = ctx
        self.cached = False
        self.end_ids = (ctx.vocab.eos_id,)
        self.limit = ctx.max_positions
        model = ctx.model
        self.H, self.lengths, final = model.encode(ctx.tensor([encoder]))  # (1, n, 2h)
        self.state = model.bridge(final)  # (L_dec, 1, h) each

    def _logits(self, histories: list[list[int]]) -> torch.Tensor:
        B = len(histories)
        ids = self.ctx.tensor([[self.ctx.vocab.bos_id] + h for h in histories])  # (B, S)
        state = tuple(s.expand(-1, B, -1).contiguous() for s in self.state)
        logits, _ = self.ctx.model.decoder_logits(ids, self.H.expand(B, -1, -1), self.lengths.expand(B), state)
        return logits[:, -1]  # (B, V)

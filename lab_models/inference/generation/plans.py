"""The modes, planned per family: a prompt and its blanks become a decoder (lab_models/inference/generation/decoders.py)
with its token limit, and mask-predict / the slot logits of the masked-LM families. `generate`
(generate.py) plans every request here.

The paper each follows, and where this deviates:

- continue, GPT / GPT-2 (Radford et al. 2018, 2019): left to right with a KV cache; the prompt is read as the start of
  a document, so [EOS] (the lab's document separator, data.py) is put before it at position 0; stops at [EOS]. An
  imported checkpoint reads the prompt as its own tokenizer does instead (`ctx.continuation`: nothing before it for
  GPT, GPT-2 and XLNet, as `model.generate(tokenizer(prompt))` in transformers), and so does every mode below: the
  text an encoder reads is framed by `ctx.read` (T5's `</s>`, BERT's `[CLS] ... [SEP]`, ...; bare for the lab's
  runs).
- continue, UniLM (Dong et al. 2019, §2 and its decoding for generation): the left-to-right mask; the next token is
  predicted at a [MASK] appended at the next position, as the cloze objective trains it; the [MASK] is then replaced
  by the chosen token. KV cache: each step feeds the chosen token and a new [MASK] and keeps only the token's keys.
  Segment ids as in training (0, or 2 with `lm_segment_ids`). [EOS] before the prompt as for GPT.
- continue, XLNet (Yang et al. 2019): the left-to-right factorization order. The content stream of the known tokens
  is causal (bidirectional among them with `bidirectional_context`, as the run trained); the query stream at the next
  position (XLNet's w plus that position) reads the content of all earlier positions, never its own. The whole
  sequence is recomputed each step (no cache: the two-stream backbone has none). A run trained with
  `two_stream=False` (the leak demonstration) cannot generate: it learned to copy its input.
- continue, GLM (Du et al. 2022): a blank put at the end of the prompt: Part A = prompt + [MASK], Part B = [S] ...
  generated until [E].
- continue, ELMo (Peters et al. 2018) and ULMFiT (Howard & Ruder 2018): the forward LSTM language model (ELMo's
  forward direction; ULMFiT's AWD-LSTM, whatever stage the run ended in), left to right after [EOS] as for GPT; the
  whole prefix is re-read by the LSTM every step (no cache). ELMo's backward direction is not used for generation.
- translate, CoVe (McCann et al. 2017): the MT-LSTM encoder reads the English, the attentional LSTM decoder writes
  from [BOS] until [EOS]; each step re-reads the decoder's history (no cache), so beam search works as for T5.
- infill, T5 (Raffel et al. 2020): the encoder reads the text with sentinel <extra_id_i> at blank i, as
  objectives/t5.py builds it. The decoder starts with the run's start token (T5's pad token; [BOS] for runs saved
  before `decoder_start` existed) and, as its targets always begin, <extra_id_0> (forced,
  not sampled: prefix-constrained decoding), then writes span 0, <extra_id_1>, span 1, ... and stops at the sentinel
  after the last blank or at [EOS] (the "eos" final token). Only the next sentinel and [EOS] are allowed as special
  tokens. Several blanks are allowed.
- infill, GLM: Part A = the text with one [MASK] per blank (bidirectional), Part B = for each blank in text order,
  [S] + the span generated autoregressively until [E], with GLM's 2-D positions (row 1: the blank's index in Part A,
  row 2: 1 for [S], 2, 3, ... inside the span), under the Part A/B mask of objectives/glm.py. Training shuffles the
  spans; text order is one of the orders it sees. KV cache. Several blanks are allowed.
- infill, MASS (Song et al. 2019): the encoder reads the text with `blank_length` [MASK] slots at the blank (MASS masks
  a fragment with a known length; default 3); the decoder writes the fragment at its positions u .. u+k-1, its first
  input the token before the blank (or [BOS] at the start), as objectives/mass.py builds it; `cross_attends_masks`
  is honoured. Stops after k tokens or at [EOS]. One blank.
- infill, UniLM: the seq2seq mask. The source is the text before the blank (segment 0, bidirectional within itself);
  the fill is the target (segment 1), written left to right with the appended-[MASK] decoding above, `blank_length`
  tokens (default 3) or until [EOS]. The text after the blank is kept in `text` but not read: in training the target
  always ends the row, so the model never saw text after it. One blank, with some text before it.
- mask_predict (Ghazvininejad et al. 2019, "Mask-Predict"): predict every slot at once; then for t = 1 .. T-1
  re-mask the n = N (T - t) / T least confident slots and predict those again (T = `iterations`, stopping when n
  reaches 0). A slot's confidence is the model's own probability of its token (a softmax over the whole vocabulary,
  as fill_mask reports it); special tokens are never chosen. BERT, RoBERTa, ALBERT, SpanBERT read the text with [MASK] at the slots, bidirectionally, segment 0;
  ELECTRA uses its generator (`model.lm_backbone`, the MLM; the discriminator cannot predict tokens); UniLM its
  bidirectional mode; MPNet its query stream at the slots (each slot's [MASK] in the content stream carries the
  slot's position, as MPNet's position compensation; every query sees all tokens and slots: all slots are predicted
  in the same step; a run trained with input_mode "xlnet" has no slots, its query reads only the other tokens,
  and "mlm" is read like BERT); XLNet its query stream at the slots, reading the other tokens (bidirectionally among
  themselves, as XLNet is fine-tuned), never a slot.
- translate (MASS, T5; objectives/translation.py): the encoder reads `translation.encoder_ids` (T5: after the task
  prefix), the decoder starts with its start token (MASS: [BOS]; T5: as in infill) at position 0 and writes the
  Chinese until [EOS]. A run that did not train
  the translation objective still decodes (badly); `explanation` says which.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message, clauses
from lab_models.inference.generation.context import DEFAULT_BLANK_LENGTH, BLANK, ONE_STREAM_MLM, DecodingContext
from lab_models.inference.generation.decoders import (Decoder, Item, OneStreamDecoder, EncoderDecoderDecoder,
                                                      T5InfillDecoder, GLMInfillDecoder, XLNetContinueDecoder,
                                                      LSTMContinueDecoder, CoVeTranslateDecoder)
from lab_models.inference.generation.search import pick_token
from lab_models.objectives import translation


# ------------------------------------------------------------------------------------------------ the modes


@dataclass
class DecodingPlan:
    """A prepared left-to-right decode: the decoder, its token limit, and how to turn the tokens into text."""

    decoder: Decoder
    limit: int
    limit_reason: Message  # what reaching `limit` means, e.g. "stopped after 50 tokens (max_new_tokens)"
    how: Message  # the decoding, for `explanation` (one clause, or several: `clauses`)
    separators: tuple[int, ...] = ()  # ids that separate blanks (T5's sentinels, GLM's [E]); dropped from the output


def _max_new_reason(n: int) -> Message:
    return Message("stopped after {n} tokens (max_new_tokens)", n=n)


def _cap(ctx: DecodingContext, dec: Decoder, max_new: int, fixed: int | None = None) -> tuple[int, Message]:
    """(the token limit, what reaching it means): max_new_tokens, a blank's fixed length, or the positions left."""
    options = [(max_new, _max_new_reason(max_new))]
    if fixed is not None:
        options.append((fixed, Message("wrote the blank's {fixed} tokens (blank_length)", fixed=fixed)))
    options.append((dec.limit, Message("stopped at the model's limit of {positions} positions",
                                       positions=ctx.max_positions)))
    return min(options, key=lambda option: option[0])  # on a tie the earlier (the asked-for) reason


def _continued(ctx: DecodingContext, how: Message, after_eos: Message) -> Message:
    """How a continuation was decoded and started, for the explanation: `after_eos` (the plan's own words, which say
    where the lab's [EOS] stands) for the lab's framing, else `how` and the clause that says how the checkpoint's
    tokenizer starts a text."""
    return after_eos if ctx.framing.source == "lab" else clauses(how, ctx.framing_clause(continuing=True))


def _cache_text(use_cache: bool) -> Message:
    return Message("with a KV cache") if use_cache else Message("recomputing every step (no cache)")


def plan_continue(ctx: DecodingContext, prompt: str, max_new: int, use_cache: bool) -> tuple[DecodingPlan, list[int]]:
    """continue: GPT, GPT-2, UniLM (left to right), XLNet, GLM (a blank at the end)."""
    if BLANK.search(prompt):
        raise LabError("continue writes after the prompt, but the prompt has a blank ([MASK] or ___): remove it, "
                       "or choose infill to fill it")
    family, v = ctx.family, ctx.vocab
    ids = ctx.encode(prompt)
    if not ids:
        raise LabError("the prompt encodes to no tokens: type some words")
    if family in ("elmo", "ulmfit"):
        prefix_ids = ctx.continuation + ids
        if len(prefix_ids) >= ctx.max_positions:
            raise ctx.too_long(len(ids), ctx.max_positions - 2)
        dec = LSTMContinueDecoder(ctx, prefix_ids)
        direction = (Message("ELMo's forward LSTM language model") if family == "elmo"
                     else Message("the AWD-LSTM language model"))
        return DecodingPlan(dec, *_cap(ctx, dec, max_new),
                            Message("{direction}, left to right after [EOS] (a document start), re-reading the prefix "
                                    "every step (no cache)", direction=direction)), ids
    if family in ("gpt", "gpt2", "unilm"):
        prefix_ids = ctx.continuation + ids  # the start of a document (the lab: [EOS]), or the checkpoint's
        L = len(prefix_ids)
        is_unilm = family == "unilm"
        room = ctx.max_positions - (1 if is_unilm else 0)
        if L > room:
            raise ctx.too_long(len(ids), room - len(ctx.continuation))
        segment = 2 if is_unilm and ctx.run.settings.lm_segment_ids else 0
        prefix = [(t, (i,), segment) for i, t in enumerate(prefix_ids)]
        feed = lambda h, i: (h[i], (L + i,), segment)  # noqa: E731
        query = (lambda h: (v.mask_id, (L + len(h),), segment)) if is_unilm else None  # noqa: E731
        causal = torch.ones(L, L, dtype=torch.bool).tril()
        dec = OneStreamDecoder(ctx, ctx.backbone, prefix, causal, feed, query, use_cache, (v.eos_id,))
        cache = _cache_text(use_cache)
        if is_unilm:
            how = _continued(ctx, Message("UniLM's left-to-right mask, each next token predicted at an appended [MASK] "
                                          "(its cloze objective), {cache}", cache=cache),
                             Message("UniLM's left-to-right mask, each next token predicted at an appended [MASK] "
                                     "(its cloze objective), {cache}, after [EOS] (a document start)", cache=cache))
        else:
            how = _continued(ctx, Message("left to right {cache}", cache=cache),
                             Message("left to right {cache}, after [EOS] (a document start)", cache=cache))
        return DecodingPlan(dec, *_cap(ctx, dec, max_new), how), ids
    if family == "xlnet":
        if not ctx.run.settings.two_stream:
            raise UnsupportedMode(Message("this XLNet run was trained without the query stream (two_stream=False, the "
                                          "leak demonstration): it learned to copy its input and cannot predict a "
                                          "next token."))
        prefix_ids = ctx.continuation + ids
        if len(prefix_ids) + 1 > ctx.max_positions:
            raise ctx.too_long(len(ids), ctx.max_positions - 1 - len(ctx.continuation))
        dec = XLNetContinueDecoder(ctx, prefix_ids)
        order = Message("the left-to-right factorization order: the query stream at the next position reads the "
                        "content of every earlier token")
        if ctx.framing.source == "lab":
            how = clauses(order, Message("recomputed every step (no cache for two streams), after [EOS]"))
        else:
            how = clauses(order, Message("recomputed every step (no cache for two streams)"),
                          ctx.framing_clause(continuing=True))
        return DecodingPlan(dec, *_cap(ctx, dec, max_new), how), ids
    # glm: a blank at the end of the prompt
    return _glm_plan(ctx, [ids, []], max_new, use_cache, at_the_end=True), ids


def _glm_plan(ctx: DecodingContext, pieces: list[list[int]], max_new: int, use_cache: bool,
              at_the_end: bool = False) -> DecodingPlan:
    """GLM's Part A (the text with one [MASK] per blank) and Part B ([S] + span, ... until [E] per blank)."""
    v = ctx.vocab
    part_a: list[int] = []
    mask_index: list[int] = []
    for i, piece in enumerate(pieces):
        part_a += piece
        if i < len(pieces) - 1:
            mask_index.append(len(part_a))
            part_a.append(v.mask_id)
    framed = ctx.read(part_a)  # Part A as the run reads a text (bare for the lab's runs)
    part_a, mask_index = framed.ids, [index + framed.start for index in mask_index]
    LA = len(part_a)
    added = ctx.framing.reading.added()
    if LA + 1 > ctx.max_positions:
        raise ctx.too_long(LA - len(mask_index) - added, ctx.max_positions - 1 - len(mask_index) - added)
    prefix = [(t, (i, 0), 0) for i, t in enumerate(part_a)] + [(v.start_id, (mask_index[0], 1), 0)]
    L = LA + 1
    prefix_mask = torch.zeros(L, L, dtype=torch.bool)
    prefix_mask[:, :LA] = True  # Part A sees Part A; [S] sees Part A and itself
    prefix_mask[LA, LA] = True

    def feed(h: list[int], i: int) -> Item:
        blanks_before = h[:i].count(v.end_id)
        if h[i] == v.end_id:  # the next blank starts with its [S]
            return v.start_id, (mask_index[min(blanks_before + 1, len(mask_index) - 1)], 1), 0
        last_end = max((j for j in range(i) if h[j] == v.end_id), default=-1)
        return h[i], (mask_index[blanks_before], i - last_end + 1), 0

    dec = GLMInfillDecoder(ctx, ctx.backbone, prefix, prefix_mask, feed, None, use_cache, (v.end_id,),
                     n_blanks=len(mask_index))
    how = Message("GLM's Part A (the text with [MASK]) read bidirectionally, Part B ([S] + span of at least one token "
                  "until [E]) written left to right with 2-D positions, {cache}", cache=_cache_text(use_cache))
    if at_the_end:
        how = Message("a blank at the end of the prompt: {how}", how=how)
    return DecodingPlan(dec, *_cap(ctx, dec, max_new), clauses(how, ctx.framing_clause()), separators=(v.end_id,))


class UnsupportedMode(Exception):
    """This run cannot decode in this mode; the message (its argument, a `Message`) is the explanation."""


def plan_infill(ctx: DecodingContext, segments: list[str], pieces: list[list[int]], max_new: int, use_cache: bool,
                 blank_length: int | None) -> DecodingPlan:
    family, v = ctx.family, ctx.vocab
    n_blanks = len(segments) - 1
    if n_blanks == 0:
        raise LabError("infill needs a blank: mark where the model should write with ___ (or [MASK])")
    if family == "glm":
        return _glm_plan(ctx, pieces, max_new, use_cache)
    if family == "t5":
        if n_blanks >= len(v.sentinel_ids):
            raise LabError("T5 can fill at most {last_sentinel} blanks at once; the prompt has "
                           "{n_blanks}", last_sentinel=len(v.sentinel_ids) - 1, n_blanks=n_blanks)
        encoder: list[int] = []
        for i, piece in enumerate(pieces):
            encoder += piece
            if i < n_blanks:
                encoder.append(v.sentinel_ids[i])
        encoder = ctx.read(encoder).ids  # an imported T5: its tokenizer's </s> at the end
        added = ctx.framing.reading.added()
        if len(encoder) > ctx.max_positions:
            raise ctx.too_long(len(encoder) - n_blanks - added, ctx.max_positions - n_blanks - added)
        cross = torch.ones(len(encoder), dtype=torch.bool)
        dec = T5InfillDecoder(ctx, encoder, cross, [ctx.decoder_start, v.sentinel_ids[0]], 0, use_cache, (v.eos_id,),
                        sentinels=tuple(v.sentinel_ids), n_blanks=n_blanks)
        how = clauses(Message("the encoder reads the text with a sentinel at each blank"),
                      Message("the decoder starts {start} <extra_id_0> (forced) and writes each span (at least one "
                              "token, as in training) until the next sentinel or [EOS], {cache}",
                              start=ctx.token_name(ctx.decoder_start), cache=_cache_text(use_cache)),
                      ctx.framing_clause())
        return DecodingPlan(dec, *_cap(ctx, dec, max_new), how, separators=tuple(v.sentinel_ids))
    if n_blanks > 1:
        raise LabError("{title} fills one blank at a time, but the prompt has {n_blanks}: keep one ___",
                       title=ctx.title, n_blanks=n_blanks)
    k = blank_length if blank_length is not None else DEFAULT_BLANK_LENGTH
    left, right = pieces
    if family == "mass":
        framed = ctx.read(left + [v.mask_id] * k + right)
        encoder = framed.ids
        added = ctx.framing.reading.added()
        if len(encoder) > ctx.max_positions:
            raise ctx.too_long(len(left) + len(right), ctx.max_positions - k - added)
        u = framed.start + len(left)
        cross = torch.ones(len(encoder), dtype=torch.bool)
        if not ctx.run.settings.cross_attends_masks:
            cross[u:u + k] = False  # the released code's enc_mask: the decoder does not attend the [MASK]s
        first = left[-1] if left else v.bos_id
        dec = EncoderDecoderDecoder(ctx, encoder, cross, [first], u, use_cache, (v.eos_id,))
        how = clauses(Message("the encoder reads the text with {k} [MASK] slots at the blank", k=k),
                      Message("the decoder writes the fragment at its positions, {cache}",
                              cache=_cache_text(use_cache)),
                      ctx.framing_clause())
        return DecodingPlan(dec, *_cap(ctx, dec, max_new, k), how)
    # unilm: seq2seq
    if not left:
        raise LabError("UniLM's seq2seq mode needs some text before the blank (the source it reads)")
    left = ctx.read(left).ids  # the source, as the run reads a text
    L = len(left)
    if L + 1 > ctx.max_positions:
        added = ctx.framing.reading.added()
        raise ctx.too_long(L - added, ctx.max_positions - 1 - added, Message("the text before the blank"))
    source_segment, target_segment = (4, 5) if ctx.run.settings.lm_segment_ids else (0, 1)
    prefix = [(t, (i,), source_segment) for i, t in enumerate(left)]
    feed = lambda h, i: (h[i], (L + i,), target_segment)  # noqa: E731
    query = lambda h: (v.mask_id, (L + len(h),), target_segment)  # noqa: E731
    source_mask = torch.ones(L, L, dtype=torch.bool)  # the source sees all of itself
    dec = OneStreamDecoder(ctx, ctx.backbone, prefix, source_mask, feed, query, use_cache, (v.eos_id,))
    how = clauses(Message("UniLM's seq2seq mask: the text before the blank is the source, the fill the target, each "
                          "token predicted at an appended [MASK]"),
                  Message("the text after the blank is not read, {cache}", cache=_cache_text(use_cache)),
                  ctx.framing_clause())
    return DecodingPlan(dec, *_cap(ctx, dec, max_new, k), how)


def plan_translate(ctx: DecodingContext, prompt: str, max_new: int, use_cache: bool) -> DecodingPlan:
    v = ctx.vocab
    if ctx.family == "cove":
        encoder = ctx.encode(prompt)
        if not encoder:
            raise LabError("the English encodes to no tokens: type some words")
        if len(encoder) > ctx.max_positions:
            raise ctx.too_long(len(encoder), ctx.max_positions, Message("the English"))
        dec = CoVeTranslateDecoder(ctx, encoder)
        how = Message("English -> Chinese: CoVe's biLSTM encoder (the MT-LSTM) reads the English, its attentional LSTM "
                      "decoder writes from [BOS] until [EOS], re-reading its history every step (no cache)")
        return DecodingPlan(dec, *_cap(ctx, dec, max_new), how)
    encoder = ctx.read(translation.encoder_ids(ctx.family, ctx.tokenizer, v, prompt)).ids  # T5: + </s>
    if len(encoder) > ctx.max_positions:
        raise ctx.too_long(len(encoder), ctx.max_positions, Message("the English (with the task prefix)")
                           if ctx.family == "t5" else Message("the English"))
    cross = torch.ones(len(encoder), dtype=torch.bool)
    dec = EncoderDecoderDecoder(ctx, encoder, cross, [ctx.decoder_start], 0, use_cache, (v.eos_id,))
    weight = float((ctx.run.config.get("objectives") or {}).get(translation.OBJECTIVE, 0.0) or 0.0)
    trained = (Message("this run trained translation (weight {weight:g})", weight=weight) if weight > 0 else
               Message("this run did not train translation (no 'translation' objective), so expect a poor "
                       "translation"))
    prefix = (Message(" after the task prefix {prefix!r}", prefix=translation.task_prefix(ctx.family))
              if ctx.family == "t5" else "")
    how = clauses(Message("English -> Chinese: the encoder reads the English{prefix}, the decoder writes from {start} "
                          "until [EOS], {cache}", prefix=prefix, start=ctx.token_name(ctx.decoder_start),
                          cache=_cache_text(use_cache)),
                  trained, ctx.framing_clause())
    return DecodingPlan(dec, *_cap(ctx, dec, max_new), how)


# ------------------------------------------------------------------------------------------ mask slots (MLMs)


def slot_logits(ctx: DecodingContext, ids: list[int], slots: list[int], segments: list[int] | None = None
                ) -> torch.Tensor:
    """The vocabulary logits (N, V) at `slots` of `ids` (the slots hold [MASK]), every other token visible: the
    family's masked-token prediction (see the module docstring). `segments`: one segment (token type) id per
    position, as the run's framing gives them (None: all 0)."""
    family, model = ctx.family, ctx.model
    n = len(ids)
    x = ctx.tensor([ids])  # (1, n)
    positions = ctx.tensor([list(range(n))])
    segment_ids = ctx.tensor([list(segments)]) if segments is not None else torch.zeros_like(x)  # (1, n)
    slot_t = ctx.tensor(slots)
    if family in ONE_STREAM_MLM or (family == "mpnet" and model.settings.input_mode == "mlm"):
        if family == "electra" and model.objective_weights.get("mlm", 0.0) <= 0:
            raise UnsupportedMode(Message("this ELECTRA run's generator was never trained (its mlm weight is 0: a "
                                          "discriminator imported without --generator, or a run trained with mlm=0), "
                                          "and ELECTRA predicts tokens only with its generator; the discriminator "
                                          "only tells replaced tokens apart."))
        backbone = model.lm_backbone  # ELECTRA: the generator
        full = torch.ones(1, n, n, dtype=torch.bool, device=ctx.device)
        hidden = backbone(x, full, positions, segment_ids)  # (1, n, H); a model without segments ignores them
        return backbone.lm_logits(hidden[0, slot_t])  # (N, V)
    backbone = ctx.backbone
    is_slot = torch.zeros(n, dtype=torch.bool, device=ctx.device)
    is_slot[slot_t] = True
    if family == "mpnet" and model.settings.input_mode == "mpnet":
        # every token and every [MASK] slot is visible to everyone; a slot is a [MASK] at its position
        content = torch.ones(n, n, dtype=torch.bool, device=ctx.device)
        query = torch.ones(len(slots), n, dtype=torch.bool, device=ctx.device)
    else:  # xlnet, mpnet "xlnet" mode: no slots in the content; the query stream at a slot reads the other tokens
        if family == "xlnet" and not model.settings.two_stream:
            raise UnsupportedMode(Message("this XLNet run was trained without the query stream (two_stream=False, the "
                                          "leak demonstration): it learned to copy its input and cannot predict a "
                                          "masked token."))
        visible = ~is_slot
        content = visible.unsqueeze(0).expand(n, n) | torch.eye(n, dtype=torch.bool, device=ctx.device)
        query = visible.unsqueeze(0).expand(len(slots), n)
    _, g = backbone.forward_two_stream(x, content.unsqueeze(0), query.unsqueeze(0), positions, slot_t.unsqueeze(0),
                                       segment_ids)  # XLNet's relative segments read them (its <cls>: 2)
    return backbone.lm_logits(g[0])  # (N, V)


def mask_predict(ctx: DecodingContext, ids: list[int], slots: list[int], iterations: int, strategy: str,
                  temperature: float, top_k: int, top_p: float, generator: torch.Generator,
                  segments: list[int] | None = None) -> tuple[list[int], list[float], int]:
    """Mask-predict (Ghazvininejad et al. 2019): (the slot tokens, their probabilities, the rounds run). `ids`
    framed as the run reads a text, `segments` their segment ids."""
    ids = list(ids)
    N = len(slots)
    probs = [0.0] * N
    tokens = [0] * N
    rounds = 0
    masked = list(range(N))
    for t in range(iterations):
        if t > 0:
            n = N * (iterations - t) // iterations
            if n == 0:
                break
            masked = sorted(sorted(range(N), key=lambda i: probs[i])[:n])  # the least confident
            for i in masked:
                ids[slots[i]] = ctx.vocab.mask_id
        logits = slot_logits(ctx, ids, [slots[i] for i in masked], segments).float()
        own = torch.softmax(logits, dim=-1)  # the model's own probabilities, as fill_mask reports them
        logits = logits.masked_fill(ctx.banned, float("-inf"))
        for row, i in enumerate(masked):
            token, _ = pick_token(logits[row], strategy, temperature, top_k, top_p, generator)
            tokens[i], probs[i] = token, float(own[row, token])
            ids[slots[i]] = token
        rounds += 1
    return tokens, probs, rounds

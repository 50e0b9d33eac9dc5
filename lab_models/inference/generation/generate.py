"""Generation and fill-mask from trained runs: every trainable family, decoded the way it was trained.

    generate(run_dir, "the girl eats", mode="continue", max_new_tokens=20)      -> Generation
    generate(run_dir, "the girl ___ a red apple .", mode="infill")              -> Generation (the blank filled)
    generate(run_dir, "the girl [MASK] a [MASK] apple .", mode="mask_predict")  -> Generation (each slot filled)
    generate(run_dir, "the cat sees a ball .", mode="translate")                -> Generation (the Chinese)
    generate(run_dir, "the girl eats", mode="auto")                             -> what this family can do with
                                                                                   the prompt (see auto_task)
    fill_mask(run_dir, "the girl [MASK] a red apple .", top_k=5)                -> [[(" eats", 0.41), ...]]

The run is rebuilt with `inference.load_run` (cached and shared: nothing here changes the model) and decoded under
`torch.inference_mode()` on the run's device. `generation_modes(family)` lists what a family can do, its default
first; any other mode returns a `Generation` with `supported=False` and a plain `explanation`, never an exception.

Blanks. `[MASK]` or `___` (three or more underscores) mark a blank. In mask_predict and fill_mask a `[MASK]` is exactly
one token slot; in mask_predict a `___` is `blank_length` slots (default 3), in fill_mask one slot. In infill a blank
is a span whose length the model decides (T5, GLM: until its end token) or `blank_length` tokens (MASS, UniLM: default
3; they have no end-of-span token). The text around a blank is encoded piece by piece (the text before a blank loses
its trailing spaces, so that a byte-level BPE word "Ġsat" is what fills " ___"), so the encoding can differ slightly
from encoding the whole sentence at once.

Modes per family (the paper each follows, and where this deviates):

    family                         modes (default first)
    gpt, gpt2                      continue
    bert, roberta, albert,         mask_predict
    spanbert, electra, mpnet
    unilm                          continue, infill, mask_predict
    xlnet                          continue, mask_predict
    glm                            infill, continue
    mass, t5                       infill, translate
    elmo, ulmfit                   continue
    cove                           translate
    cvt                            (none: a tagger, it writes no text)

`translate`: `text` is the translation itself (the English is `prompt`).

fill_mask: one forward pass; every slot is predicted from all the other tokens, never from another slot's guess
(BERT-style families, ELECTRA's generator, UniLM bidirectional, MPNet and XLNet through the query stream as in
mask_predict), except GLM (each slot its own blank: Part A with every slot a [MASK], then [S] of that blank alone,
predicting the blank's first token) and T5 (each slot a one-token span: <extra_id_i> in the encoder; the decoder reads
its start token, <extra_id_0> g_0 <extra_id_1> ..., with g_i the best token of slot i, so slot i is predicted after the
best guesses of the slots before it). GPT, GPT-2 and MASS refuse with a ValueError saying what to use instead.

Deviations, stated (beyond the objectives' own):
- The [EOS] before a continue prompt (GPT, GPT-2, UniLM, XLNet): the lab's rows start anywhere in the packed stream,
  so the models never learned a "start of text" position; [EOS] marks a document start as the stream does. An
  imported checkpoint is read as its own tokenizer frames a text instead (lab_models/text/framing.py): a GPT-2
  continues from the prompt alone, as transformers' `generate` does, a T5 reads its `</s>` after the text, a BERT
  fills masks inside `[CLS] ... [SEP]`. Sampling draws from the lab's own torch.Generator (the `seed`), so a sampled
  continuation is the lab's own, not transformers' for the same seed; greedy and beam search are deterministic.
- T5's <extra_id_0> is forced rather than generated (its targets always begin with it).
- GLM fills several blanks in text order; training draws a random order.
- UniLM's infill does not read the text after the blank (see above); MASS and UniLM need the blank's length.
- XLNet and MPNet in mask-predict and fill_mask predict every slot in one step from the other tokens (no order among
  the slots); XLNet's context tokens see each other bidirectionally, as in fine-tuning, not in a sampled order.
- Mask-predict reports each slot's probability from the round that last chose it, as the paper's confidence.

`use_cache=False` (an extension of the contract, for tests and benchmarks) recomputes the whole sequence each step;
the tokens are the same as with the cache.

The parts, in lab_models/inference/generation/: context.py (limits, `Generation`, modes, checks, the run's context),
decoders.py (the per-family decoders), search.py (greedy, sampling, beam: the decoding paragraph), plans.py (each
mode per family, with the papers and deviations, and mask-predict). This module holds `generate`, `fill_mask` and
their assembly.
"""
from __future__ import annotations

import dataclasses
import time

import torch


from lab_models.messages import LabError, Message, clauses, message_of
from lab_models.inference.generation.context import (MAX_TOP_K, DEFAULT_BLANK_LENGTH, FAMILY_MODES, FILL_MASK_FAMILIES,
                                                     AUTO, Generation, auto_task, family_title, unsupported_reason, is_integer_value,
                                                     as_whole_number, check_prompt_text, check_decoding,
                                                     load_decodable_run, DecodingContext, split_blanks,
                                                     encode_segments, display_pieces, join_text, fill_blanks)
from lab_models.inference.generation.decoders import EncoderDecoderDecoder
from lab_models.inference.generation.search import search_tokens, describe_strategy, describe_stop
from lab_models.inference.generation.plans import (plan_continue, UnsupportedMode, plan_infill, plan_translate,
                                                   slot_logits, mask_predict)


# ---------------------------------------------------------------------------------------------------- generate


def generate(run_dir, prompt: str, *, mode: str | None = None, max_new_tokens: int = 50, strategy: str = "greedy",
             temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, beam_size: int = 1, seed: int = 0,
             iterations: int = 10, blank_length: int | None = None, use_cache: bool = True) -> Generation:
    """Decode from the run in `run_dir` (see the module docstring for the modes and strategies).

    mode None is the family's default (`generation_modes(family)[0]`); mode "auto" is a task the family can do from
    this prompt (`auto_task`: a family that only fills blanks gets a blank added at the end of a prompt without one,
    a family that only continues continues the text before a blank), said in the Generation's `note`; a mode the
    family cannot do returns a Generation with supported=False and an explanation. ValueError for bad arguments: an
    empty prompt, one longer than the model reads, infill without a blank, several blanks where one is supported, an unknown mode or strategy,
    max_new_tokens outside 1..1024, temperature <= 0 when sampling, top_p outside (0, 1], beam_size < 1, beam search
    with mask-predict, a run folder without weights.
    """
    return _generate(run_dir, prompt, mode=mode, max_new_tokens=as_whole_number(max_new_tokens), strategy=strategy,
                     temperature=temperature, top_k=as_whole_number(top_k), top_p=top_p,
                     beam_size=as_whole_number(beam_size), seed=as_whole_number(seed),
                     iterations=as_whole_number(iterations), blank_length=as_whole_number(blank_length),
                     use_cache=use_cache)[0]


def _generate(run_dir, prompt: str, *, mode: str | None, max_new_tokens: int, strategy: str, temperature: float,
              top_k: int, top_p: float, beam_size: int, seed: int, iterations: int, blank_length: int | None,
              use_cache: bool) -> tuple[Generation, list[int]]:
    """`generate`, and the ids it chose in order (end tokens and separators included; mask-predict: the slot
    tokens), for tests."""
    check_prompt_text(prompt, Message("the prompt"))
    check_decoding(mode, max_new_tokens, strategy, temperature, top_k, top_p, beam_size, seed, iterations,
                    blank_length)
    run = load_decodable_run(run_dir)
    ctx = DecodingContext(run)
    family = run.family
    note = ""
    if mode == AUTO:
        task = auto_task(family, prompt)
        mode, prompt, note = task.mode, task.prompt, task.note
    mode = mode if mode is not None else (FAMILY_MODES[family] or ("continue",))[0]

    def unsupported(reason: Message) -> tuple[Generation, list[int]]:
        return Generation(run_id=run.run_id, family=family, mode=mode, supported=False, explanation=reason,
                          prompt=prompt, text="", new_text="", tokens=[], probs=[], seconds=0.0, ms_per_token=0.0,
                          step=run.step, note=note), []

    if mode not in FAMILY_MODES[family]:
        return unsupported(unsupported_reason(family, mode))
    strategy_text = describe_strategy(strategy, float(temperature), top_k, float(top_p), beam_size, seed)
    if mode == "mask_predict" and strategy == "beam":  # one strategy control may serve several runs (Compare tab)
        strategy = "greedy"
        strategy_text = Message("greedy (beam search does not apply: mask-predict fills every slot at once)")
    generator = torch.Generator(device=ctx.device).manual_seed(int(seed))
    try:
        with torch.inference_mode():
            if mode == "mask_predict":
                generation, chosen = _generate_mask_predict(ctx, prompt, strategy, float(temperature), top_k,
                                                            float(top_p), iterations, blank_length, generator,
                                                            strategy_text)
                return dataclasses.replace(generation, note=note), chosen
            segments, _ = split_blanks(prompt)
            started = time.perf_counter()
            context: list[int] = []
            if mode == "continue":
                plan, context = plan_continue(ctx, prompt, max_new_tokens, use_cache)
            elif mode == "infill":
                pieces = encode_segments(ctx, segments)
                plan = plan_infill(ctx, segments, pieces, max_new_tokens, use_cache, blank_length)
            else:
                plan = plan_translate(ctx, prompt, max_new_tokens, use_cache)
            result = search_tokens(ctx, plan.decoder, plan.limit, strategy, float(temperature), top_k, float(top_p),
                             beam_size, generator)
            seconds = time.perf_counter() - started
    except UnsupportedMode as reason:
        return unsupported(message_of(reason))

    produced = list(result.tokens)
    probs = list(result.probs)
    if result.stop == "end":
        produced, probs = produced[:-1], probs[:-1]
    explanation = clauses(plan.how, strategy_text, describe_stop(ctx, result, plan.limit_reason))
    ms = 1000.0 * seconds / max(1, len(result.tokens))
    common = dict(run_id=run.run_id, family=family, mode=mode, supported=True, explanation=explanation,
                  prompt=prompt, seconds=seconds, ms_per_token=ms, step=run.step, note=note)
    if mode == "continue":
        pieces_text, new_text = display_pieces(ctx, context, produced)
        if not new_text.strip():  # say why there is nothing to read
            common["explanation"] = clauses(explanation,
                                            empty_output_explained(ctx, produced, Message("continuation")))
        return Generation(text=join_text(prompt, new_text) if new_text else prompt, new_text=new_text,
                          tokens=pieces_text, probs=probs, **common), result.tokens
    if mode == "translate":
        pieces_text, new_text = display_pieces(ctx, [], produced)
        if not new_text.strip():
            common["explanation"] = clauses(explanation,
                                            empty_output_explained(ctx, produced, Message("translation")))
        generation = Generation(text=new_text, new_text=new_text, tokens=pieces_text, probs=probs, **common)
        return generation, result.tokens
    # infill: split the output into one fill per blank
    fills_ids: list[list[int]] = [[]]
    fills_probs: list[list[float]] = [[]]
    for token, p in zip(produced, probs):
        if token in plan.separators:
            fills_ids.append([])
            fills_probs.append([])
        else:
            fills_ids[-1].append(token)
            fills_probs[-1].append(p)
    left_ids = encode_segments(ctx, segments)
    tokens_out: list[str] = []
    probs_out: list[float] = []
    fills: list[str] = []
    context_ids: list[int] = []
    for i, (ids, ps) in enumerate(zip(fills_ids, fills_probs)):
        context_ids = context_ids + left_ids[i]
        pieces_text, fill = display_pieces(ctx, context_ids, ids)
        context_ids = context_ids + ids
        tokens_out += pieces_text
        probs_out += ps
        fills.append(fill)
    new_text = " | ".join(f.strip() for f in fills) if len(fills) > 1 else fills[0]
    empty = empty_fills_explained(ctx, fills, fills_ids, result, len(segments) - 1)
    if empty:
        common["explanation"] = clauses(explanation, empty)
    return Generation(text=fill_blanks(segments, fills), new_text=new_text, tokens=tokens_out, probs=probs_out,
                      **common), result.tokens


def empty_output_explained(ctx: DecodingContext, produced: list[int], what: Message) -> Message:
    """Why a continuation (or translation) reads empty: only whitespace, or an end token at once."""
    if produced:
        pieces = " ".join(repr(ctx.token_name(token)) for token in produced[:8]) + (" ..." if len(produced) > 8 else "")
        return Message("the {what} is empty: the model wrote only whitespace ({pieces})", what=what, pieces=pieces)
    return Message("the {what} is empty: the model ended at once (its most likely first token was the end)", what=what)


def empty_fills_explained(ctx: DecodingContext, fills: list[str], fills_ids: list[list[int]], result,
                          n_blanks: int) -> Message | str:
    """Why a blank came out empty, one clause per empty blank ("" when every blank has text). T5 and GLM never end a
    span before its first token (a training span is never empty); a blank can still be empty when the model wrote
    only whitespace, ended at once (MASS, UniLM: [EOS] first), or the token limit ran out before it."""
    reasons = []
    for index in range(1, n_blanks + 1):
        fill = fills[index - 1] if index <= len(fills) else ""
        ids = fills_ids[index - 1] if index <= len(fills_ids) else []
        if fill.strip():
            continue
        if ids:
            pieces = " ".join(repr(ctx.token_name(token)) for token in ids[:8]) + (" ..." if len(ids) > 8 else "")
            reasons.append(Message("blank {index} is empty: the model wrote only whitespace ({pieces})", index=index,
                                   pieces=pieces))
        elif result.stop == "limit" and index >= len(fills):
            reasons.append(Message("blank {index} is empty: the token limit ran out before the model reached it",
                                   index=index))
        else:
            reasons.append(Message("blank {index} is empty: the model ended it at once (its most likely first token "
                                   "was the end of the blank)", index=index))
    return clauses(*reasons) if reasons else ""


def _generate_mask_predict(ctx: DecodingContext, prompt: str, strategy: str, temperature: float, top_k: int,
                           top_p: float, iterations: int, blank_length: int | None, generator: torch.Generator,
                           strategy_text: Message) -> tuple[Generation, list[int]]:
    segments, markers = split_blanks(prompt)
    if not markers:
        raise LabError("mask-predict needs a blank: write [MASK] (one token) or ___ (blank_length tokens, default "
                       "{default_blank_length}) where the model should fill in",
                       default_blank_length=DEFAULT_BLANK_LENGTH)
    k = blank_length if blank_length is not None else DEFAULT_BLANK_LENGTH
    pieces = encode_segments(ctx, segments)
    ids: list[int] = []
    slots: list[int] = []
    blank_slots: list[list[int]] = []  # slot indices of each blank
    for i, piece in enumerate(pieces):
        ids += piece
        if i < len(markers):
            width = 1 if markers[i] == "[MASK]" else k
            blank_slots.append(list(range(len(slots), len(slots) + width)))
            slots += list(range(len(ids), len(ids) + width))
            ids += [ctx.vocab.mask_id] * width
    framed = ctx.read(ids)  # as the run reads a text: [CLS] ... [SEP] for an imported BERT, bare for the lab's
    slots = [slot + framed.start for slot in slots]
    if len(framed.ids) > ctx.max_positions:
        raise ctx.too_long(len(framed.ids), ctx.max_positions, Message("the prompt with its slots"))
    started = time.perf_counter()
    tokens, probs, rounds = mask_predict(ctx, framed.ids, slots, iterations, strategy, temperature, top_k, top_p,
                                          generator, framed.segments)
    seconds = time.perf_counter() - started
    tokens_out: list[str] = []
    fills: list[str] = []
    context_ids: list[int] = []
    for i, members in enumerate(blank_slots):
        fill_ids = [tokens[j] for j in members]
        context_ids = context_ids + pieces[i]
        pieces_text, fill = display_pieces(ctx, context_ids, fill_ids)
        context_ids = context_ids + fill_ids
        tokens_out += pieces_text
        fills.append(fill)
    reader = {"electra": Message("ELECTRA's generator (its MLM)"), "unilm": Message("UniLM's bidirectional mode"),
              "mpnet": Message("MPNet's query stream at the "
                               "slots"), "xlnet": Message("XLNet's query stream at the slots")}
    who = reader.get(ctx.family) or Message("{title}'s masked LM", title=ctx.title)
    if ctx.family == "mpnet" and ctx.model.settings.input_mode == "mlm":
        who = Message("MPNet's masked LM (one stream)")
    n_slots = (Message("{count} slot", count=len(slots)) if len(slots) == 1
               else Message("{count} slots", count=len(slots)))
    n_rounds = Message("{count} round", count=rounds) if rounds == 1 else Message("{count} rounds", count=rounds)
    explanation = clauses(Message("mask-predict (Ghazvininejad et al. 2019) with {who}: {slots}, {rounds} (predict "
                                  "every slot, then re-mask the least confident and predict them again)", who=who,
                                  slots=n_slots, rounds=n_rounds),
                          strategy_text, ctx.framing_clause())
    new_text = " | ".join(f.strip() for f in fills) if len(fills) > 1 else fills[0]
    return Generation(run_id=ctx.run.run_id, family=ctx.family, mode="mask_predict", supported=True,
                      explanation=explanation, prompt=prompt, text=fill_blanks(segments, fills), new_text=new_text,
                      tokens=tokens_out, probs=probs, seconds=seconds,
                      ms_per_token=1000.0 * seconds / max(1, len(slots)), step=ctx.run.step), tokens


# --------------------------------------------------------------------------------------------------- fill_mask


def fill_mask_refusal(family: str) -> Message:
    title = family_title(family)
    if family in ("gpt", "gpt2"):
        return Message("{title} reads left to right only and cannot fill a [MASK]; use a BERT-style run (or generate "
                       "with mode='continue')", title=title)
    if family == "mass":
        return Message("MASS predicts a masked fragment left to right with its decoder, not single [MASK] slots; use "
                       "generate(mode='infill') with a blank (___), or a BERT-style run")
    return Message("{title} cannot fill a [MASK]; use a BERT-style run", title=title)


def fill_mask(run_dir, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """The top_k (token display string, probability) pairs for each [MASK] (or ___) slot in `text`, best first.

    One list per slot, in order. Each slot is one token; the other tokens are all visible (BERT-style; XLNet and MPNet
    through their query stream; GLM: the first token of the blank, written at [S] after Part A; T5: each [MASK] a
    one-token span, <extra_id_i> in the encoder, the decoder fed the best token of each earlier slot). The
    probabilities are the model's own (a softmax over the whole vocabulary, as transformers' fill-mask pipeline gives
    them); special tokens are never proposed, so each list sums to at most 1. The text is framed as the run reads a
    text (`run.framing`: an imported BERT reads [CLS] ... [SEP], as `pipeline("fill-mask")`). ValueError: no
    [MASK], empty text, text longer than the model reads, a family that cannot fill a mask (GPT, GPT-2, MASS).
    """
    check_prompt_text(text, Message("the text"))
    top_k = as_whole_number(top_k)
    if not is_integer_value(top_k) or not 1 <= top_k <= MAX_TOP_K:
        raise LabError("top_k must be a whole number from 1 to {max_top_k}, got {top_k!r}",
                       max_top_k=MAX_TOP_K, top_k=top_k)
    run = load_decodable_run(run_dir)
    if run.family not in FILL_MASK_FAMILIES:
        raise LabError.of(fill_mask_refusal(run.family))
    ctx = DecodingContext(run)
    segments, markers = split_blanks(text)
    if not markers:
        raise LabError("the text has no [MASK]: put [MASK] where the model should predict a token")
    pieces = encode_segments(ctx, segments)
    ids: list[int] = []
    slots: list[int] = []
    for i, piece in enumerate(pieces):
        ids += piece
        if i < len(markers):
            slots.append(len(ids))
            ids.append(ctx.vocab.mask_id)
    framed = ctx.read(ids)  # as the run reads a text: [CLS] ... [SEP] for an imported BERT, bare for the lab's
    ids, slots = framed.ids, [slot + framed.start for slot in slots]
    with torch.inference_mode():
        try:
            logits = fill_mask_logits(ctx, ids, slots, framed.segments)  # (N, V)
        except UnsupportedMode as reason:
            raise LabError("{reason} Use another run.", reason=reason) from reason  # the cause says "refused"
        probs = torch.softmax(logits.float(), dim=-1)  # (N, V): the model's own distribution, as the papers report
        ranked = probs.masked_fill(ctx.banned, -1.0)  # special tokens are never proposed
        top = torch.topk(ranked, min(top_k, int((~ctx.banned).sum())), dim=-1)
    out = []
    for i, (values, indices) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        left = [t for t in ids[:slots[i]] if t != ctx.vocab.mask_id]
        out.append([(display_pieces(ctx, left, [token])[0][0], float(p)) for token, p in zip(indices, values)])
    return out


def fill_mask_logits(ctx: DecodingContext, ids: list[int], slots: list[int], segments: list[int] | None = None
                     ) -> torch.Tensor:
    """(N, V) logits, one row per slot (see `fill_mask`), for `ids` already framed as the run reads a text
    (`ctx.read`) and their `segments`."""
    v, family = ctx.vocab, ctx.family
    n = len(ids)
    if family == "glm":
        if n + 1 > ctx.max_positions:
            raise ctx.too_long(n, ctx.max_positions - 1, Message("the text with its slots"))
        N = len(slots)
        rows = torch.tensor([ids + [v.start_id]] * N, dtype=torch.long, device=ctx.device)  # (N, n+1)
        positions = torch.zeros(N, 2, n + 1, dtype=torch.long, device=ctx.device)
        positions[:, 0, :n] = torch.arange(n)
        positions[:, 0, n] = ctx.tensor(slots)  # each row's [S] belongs to one blank
        positions[:, 1, n] = 1
        mask = torch.zeros(n + 1, n + 1, dtype=torch.bool, device=ctx.device)
        mask[:, :n] = True
        mask[n, n] = True
        hidden = ctx.backbone(rows, mask.expand(N, n + 1, n + 1), positions)
        return ctx.backbone.lm_logits(hidden[:, -1])
    if family == "t5":
        if len(slots) >= len(v.sentinel_ids):
            raise LabError("T5 can fill at most {last_sentinel} [MASK] slots at once",
                           last_sentinel=len(v.sentinel_ids) - 1)
        encoder = list(ids)
        for i, slot in enumerate(slots):
            encoder[slot] = v.sentinel_ids[i]
        if len(encoder) > ctx.max_positions or 2 * len(slots) > ctx.max_positions:
            raise ctx.too_long(n, ctx.max_positions, Message("the text with its slots"))
        dec = EncoderDecoderDecoder(ctx, encoder, torch.ones(n, dtype=torch.bool), [ctx.decoder_start], 0, False, ())
        rows = []
        history: list[int] = []
        for i in range(len(slots)):
            history = history + [v.sentinel_ids[i]]
            logits = dec.next([history], [0])[0]
            rows.append(logits)
            history = history + [int(torch.argmax(logits.float().masked_fill(ctx.banned, float("-inf"))))]
        return torch.stack(rows)
    if n > ctx.max_positions:
        raise ctx.too_long(n, ctx.max_positions, Message("the text with its slots"))
    return slot_logits(ctx, ids, slots, segments)

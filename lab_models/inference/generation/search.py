"""The searches over a decoder (lab_models/inference/generation/decoders.py): greedy, sampled and beam.

Decoding. strategy "greedy" (argmax, deterministic), "sample" (temperature, then top-k, then top-p (nucleus), drawn with
a torch.Generator seeded from `seed`: the same seed gives the same sample) or "beam" (`beam_size` beams, run as
transformers' `generate(num_beams=...)` runs them: scored by the sum of log-probabilities divided by the length, with
its early-stop heuristic; one beam is greedy). `beam_size` is read only by "beam"; mask-predict is greedy or sampled (asked for a beam search, it decodes greedily and says so). Special tokens
([PAD], [MASK], [CLS], [UNK], sentinels, ...) are never generated (their logits are masked) except the mode's end
tokens. `probs` are the model's own probabilities of the chosen tokens (temperature 1, over the tokens allowed at that
step), whatever the strategy. Decoding stops at the end token, at `max_new_tokens`, or where the model's `max_positions`
run out (`explanation` says which). `tokens`, `probs` and `new_text` hold what the model wrote; end tokens and the
separators between blanks (T5's sentinels, GLM's [E]) are left out. With several blanks, `new_text` joins the fills with
" | ".

`generate` (generate.py) runs these searches.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import Message
from lab_models.inference.generation.context import DecodingContext
from lab_models.inference.generation.decoders import Decoder


# ----------------------------------------------------------------------------------------------------- search


@dataclass
class SearchResult:
    tokens: list[int]
    probs: list[float]
    stop: str  # "end" (an end token) | "limit" (the plan's token limit)


def _masked(ctx: DecodingContext, dec: Decoder, logits: torch.Tensor, histories: list[list[int]]) -> torch.Tensor:
    """The logits with every special token masked except the ones `dec` allows next."""
    banned = ctx.banned.unsqueeze(0).repeat(len(histories), 1)  # (B, V)
    for b, history in enumerate(histories):
        allowed = [i for i in dec.allowed_specials(history) if 0 <= i < ctx.V]
        if allowed:
            banned[b, allowed] = False
    return logits.float().masked_fill(banned, float("-inf"))


def _filtered(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Sampling scores (V,): divided by the temperature, then top-k, then top-p (the smallest set of tokens whose
    probability reaches top_p; at least one)."""
    scores = logits / temperature
    if top_k > 0 and top_k < scores.numel():
        kth = torch.topk(scores, top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True)
        cumulative = torch.softmax(sorted_scores, dim=-1).cumsum(dim=-1)
        drop = cumulative - torch.softmax(sorted_scores, dim=-1) >= top_p  # the mass before a token already reached p
        drop[0] = False
        scores = scores.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    return scores


def pick_token(logits: torch.Tensor, strategy: str, temperature: float, top_k: int, top_p: float,
          generator: torch.Generator) -> tuple[int, float]:
    """One token from masked logits (V,): (id, the model's probability of it)."""
    probs = torch.softmax(logits, dim=-1)
    if strategy == "sample":
        scores = _filtered(logits, temperature, top_k, top_p)
        token = int(torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator))
    else:
        token = int(torch.argmax(logits))
    return token, float(probs[token])


def search_tokens(ctx: DecodingContext, dec: Decoder, limit: int, strategy: str, temperature: float, top_k: int,
                  top_p: float, beam_size: int, generator: torch.Generator) -> SearchResult:
    """Greedy, sampled or beam-searched tokens, at most `limit` (already capped at the decoder's limit)."""
    if strategy == "beam":
        return _beam_search(ctx, dec, limit, beam_size)
    tokens: list[int] = []
    probs: list[float] = []
    logits = dec.first()  # (1, V)
    while True:
        token, p = pick_token(_masked(ctx, dec, logits, [tokens])[0], strategy, temperature, top_k, top_p, generator)
        tokens.append(token)
        probs.append(p)
        if dec.ends(tokens):
            return SearchResult(tokens, probs, "end")
        if len(tokens) >= limit:
            return SearchResult(tokens, probs, "limit")
        logits = dec.next([tokens], [0])


def _beam_search(ctx: DecodingContext, dec: Decoder, limit: int, beam_size: int) -> SearchResult:
    """Beam search as transformers' `generate(num_beams=beam_size)` runs it (its defaults: length_penalty 1.0,
    early_stopping False), so that an imported checkpoint gives the same tokens here as in its authors' library:

    - each step scores every continuation of every open beam by its summed log-probability (a log-softmax over the
      whole vocabulary; the special tokens the lab never writes are then set to -inf, as a logits processor would)
      and keeps the 2 * beam_size best;
    - of those, the ones among the first beam_size that end (an end token, or the token limit) join the finished
      hypotheses, scored by summed log-probability / their length, and the beam_size best finished are kept;
    - the beam_size best that did not end stay open;
    - it stops when every candidate ended, or when beam_size hypotheses have finished and the best open beam's
      score divided by its length cannot beat the worst finished one (transformers' early-stop heuristic).
    One beam is greedy decoding, as in transformers. `probs` are the model's probabilities of the chosen tokens over
    the tokens allowed at that step, as for greedy decoding."""
    if beam_size == 1:
        return search_tokens(ctx, dec, limit, "greedy", 1.0, 0, 1.0, 1, torch.Generator())
    open_beams: list[tuple[list[int], list[float], float]] = [([], [], 0.0)]  # (tokens, probs, sum of log p)
    finished: list[tuple[float, list[int], list[float], str]] = []  # (normalised score, tokens, probs, stop)
    improvable = True
    keep = 2 * beam_size
    logits = dec.first()
    V = ctx.V
    while True:
        histories = [b[0] for b in open_beams]
        masked = _masked(ctx, dec, logits, histories)  # (B, V): -inf where a token may not come next
        logp = torch.log_softmax(logits.float(), dim=-1).masked_fill(masked == float("-inf"), float("-inf"))
        shown = torch.softmax(masked, dim=-1)  # the probabilities reported, as greedy reports them
        total = logp + torch.tensor([b[2] for b in open_beams], device=logp.device).unsqueeze(1)  # (B, V)
        top = torch.topk(total.view(-1), min(keep, total.numel()))
        length = len(histories[0]) + 1
        candidates = []
        for rank, (score, index) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
            parent, token = divmod(index, V)
            tokens = histories[parent] + [token]
            ended = "end" if dec.ends(tokens) else "limit" if length >= limit else None
            candidates.append((rank, score, parent, tokens, open_beams[parent][1] + [float(shown[parent, token])],
                               ended))
        if improvable:
            finished += [(score / length, tokens, probs, ended) for rank, score, _, tokens, probs, ended in candidates
                         if ended and rank < beam_size and score != float("-inf")]
            finished = sorted(finished, key=lambda f: -f[0])[:beam_size]
        alive = [c for c in candidates if not c[5] and c[1] != float("-inf")][:beam_size]
        if alive and len(finished) == beam_size:
            improvable = alive[0][1] / length > finished[-1][0]
        if not alive or not improvable:
            best = finished[0] if finished else max(((c[1] / length, c[3], c[4], "limit") for c in candidates),
                                                    key=lambda f: f[0])
            return SearchResult(best[1], best[2], best[3])
        open_beams = [(c[3], c[4], c[1]) for c in alive]
        logits = dec.next([c[3] for c in alive], [c[2] for c in alive])


def describe_strategy(strategy: str, temperature: float, top_k: int, top_p: float, beam_size: int,
                      seed: int) -> Message:
    if strategy == "greedy":
        return Message("greedy")
    if strategy == "beam":
        return (Message("beam search with {beam_size} beams", beam_size=beam_size) if beam_size > 1
                else Message("beam search with {beam_size} beam", beam_size=beam_size))
    if top_k and top_p < 1:
        return Message("sampled (temperature {temperature:g}, top-k {top_k}, top-p {top_p:g}, seed {seed})",
                       temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    if top_k:
        return Message("sampled (temperature {temperature:g}, top-k {top_k}, seed {seed})", temperature=temperature,
                       top_k=top_k, seed=seed)
    if top_p < 1:
        return Message("sampled (temperature {temperature:g}, top-p {top_p:g}, seed {seed})", temperature=temperature,
                       top_p=top_p, seed=seed)
    return Message("sampled (temperature {temperature:g}, seed {seed})", temperature=temperature, seed=seed)


def describe_stop(ctx: DecodingContext, result: SearchResult, limit_reason: Message) -> Message:
    if result.stop == "end":
        return Message("stopped at {token}", token=ctx.token_name(result.tokens[-1]))
    return limit_reason

"""The one token a family predicts for a text, and the family's own forward pass that predicts it: the common ground of
the logit lens (lab_models/inference/logit_lens.py) and the attributions (lab_models/inference/attributions.py).

    site = prediction_site(run, "the girl [MASK] a red apple .")
    site.forward()          -> (V,) logits: the family's own prediction there (a fresh forward pass each call)
    site.where              -> "the first [MASK] (token 3 of 7)", in words

Which position, per family (docs/contract.md §7: the first [MASK] for the MLM families, the next token for the causal):

    family                                  the text has a blank ([MASK] or ___)     it has none
    bert roberta albert spanbert            the first [MASK], every other token      ValueError: put a [MASK]
    electra (its generator) mpnet           visible (generation's fill_mask)
    unilm xlnet glm                         the first [MASK], as fill_mask           the next token, as generate's
                                                                                     continue mode
    t5                                      the first token of the span at the       the first token of a span at
                                            first [MASK] (after <extra_id_0>)        the end of the text
    mass                                    the first token of a one-token fragment  the same, at the end of the text
                                            at the blank (one blank only)
    gpt gpt2 elmo ulmfit                    the next token after the text before     the next token after the text
                                            the first blank (left to right, the
                                            blank's first token)
    cove                                    ValueError                               the first token of the Chinese
                                                                                     translation
    cvt                                     ValueError: a tagger predicts no tokens

Every forward pass is generation's own (lab_models/inference/generation/: `fill_mask_logits`, `plan_continue`,
`plan_infill`, `plan_translate`, each decoder's first step), so what the lens reads at the top layer and what the
attributions explain is exactly what Compare and fill-mask answer. Deviations are theirs (generate.py's docstring):
e.g. the [EOS] before a continue prompt, T5's forced <extra_id_0>.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from lab_models.messages import LabError, Message
from lab_models.inference.generation.context import (DecodingContext, FILL_MASK_FAMILIES, check_prompt_text,
                                                     display_pieces, encode_segments, split_blanks)
from lab_models.inference.generation.generate import fill_mask_logits
from lab_models.inference.generation.plans import UnsupportedMode, plan_continue, plan_infill, plan_translate
from lab_models.inference.loading import TrainedRun

MASK_ONLY = ("bert", "roberta", "albert", "spanbert", "electra", "mpnet")  # they predict a [MASK] and nothing else
NEXT_ONLY = ("gpt", "gpt2", "elmo", "ulmfit")  # they read left to right
BLANK_FAMILIES = ("mass",)  # a blank is a fragment their decoder writes
PREDICTING_FAMILIES = MASK_ONLY + NEXT_ONLY + ("unilm", "xlnet", "glm", "t5", "mass", "cove")


@dataclass(frozen=True)
class PredictionSite:
    """Where `run` predicts for one text: `forward()` runs the family's own forward pass and returns the (V,)
    logits there; `where` says which position in words; `kind` is "mask", "next", "blank" or "translation"."""

    ctx: DecodingContext
    text: str
    kind: str
    where: Message
    forward: Callable[[], torch.Tensor]


def prediction_site(run: TrainedRun, text: str) -> PredictionSite:
    """The position `run` predicts for `text` (see the module docstring) and the forward pass there. ValueError: an
    empty or too long text, a family that predicts no token (CVT), a text without the blank a masked LM needs, a
    blank for a family that reads left to right."""
    text = check_prompt_text(text, Message("the text"))
    ctx = DecodingContext(run)
    family, title = run.family, ctx.title
    if family not in PREDICTING_FAMILIES:
        raise LabError("{title} is a tagger: it predicts a tag per word, never a token, so it has no token "
                       "prediction to look into. Pick a run of another family.", title=title)
    segments, markers = split_blanks(text)
    if family == "cove":
        if markers:
            raise LabError("CoVe translates the whole text; it cannot fill a blank: remove the [MASK] (or ___).")
        return PredictionSite(ctx, text, "translation", Message("the first token of the Chinese translation"),
                              lambda: plan_translate(ctx, text, 1, False).decoder.first()[0])
    if family in NEXT_ONLY:
        if markers:  # a left-to-right family writes the blank's first token after the text before it
            prompt = segments[0].rstrip()
            if not prompt.strip():
                raise LabError("{title} reads left to right: put some words before the [MASK] (it predicts the "
                               "token after them), or remove the [MASK].", title=title)
            plan, _ = plan_continue(ctx, prompt, 1, False)
            where = Message("the next token after the text before the first [MASK]")
            return PredictionSite(ctx, prompt, "next", where, lambda: plan.decoder.first()[0])
        plan, _ = plan_continue(ctx, text, 1, False)
        where = Message("the next token after the text")
        return PredictionSite(ctx, text, "next", where, lambda: plan.decoder.first()[0])
    if not markers:
        if family in MASK_ONLY:
            raise LabError("{title} predicts masked tokens: put [MASK] where it should predict, e.g. "
                           "'the girl [MASK] a red apple .'.", title=title)
        if family in ("t5", "mass"):
            where = Message("the first token of a blank at the end of the text")
            return _blank_site(ctx, text, [text.rstrip(), ""], where)
        plan, _ = _continue_plan(ctx, text)
        where = Message("the next token after the text")
        return PredictionSite(ctx, text, "next", where, lambda: plan.decoder.first()[0])
    if family == "mass":
        if len(markers) > 1:
            raise LabError("MASS fills one blank at a time: keep one [MASK] (or ___).")
        return _blank_site(ctx, text, segments, Message("the first token of the blank (a one-token fragment)"))
    return _mask_site(ctx, text, segments, len(markers))


def _continue_plan(ctx: DecodingContext, text: str):
    try:
        return plan_continue(ctx, text, 1, False)
    except UnsupportedMode as reason:
        raise LabError("{reason} Use another run.", reason=reason) from None


def _blank_site(ctx: DecodingContext, text: str, segments: list[str], where: Message) -> PredictionSite:
    """T5 and MASS: the first token their decoder writes into the (first) blank, as generate's infill."""
    pieces = encode_segments(ctx, segments)
    if not any(pieces):
        raise LabError("the text encodes to no tokens: type some words")
    plan_infill(ctx, segments, pieces, 1, False, 1)  # the checks (length, blanks) before anything runs
    return PredictionSite(ctx, text, "blank", where,
                          lambda: plan_infill(ctx, segments, pieces, 1, False, 1).decoder.first()[0])


def _mask_site(ctx: DecodingContext, text: str, segments: list[str], n_blanks: int) -> PredictionSite:
    """The first [MASK] as generation's fill_mask predicts it (every slot a [MASK], the other tokens visible)."""
    if ctx.family not in FILL_MASK_FAMILIES:
        raise LabError("{title} cannot fill a [MASK]: remove it.", title=ctx.title)
    pieces = encode_segments(ctx, segments)
    ids: list[int] = []
    slots: list[int] = []
    for i, piece in enumerate(pieces):
        ids += piece
        if i < n_blanks:
            slots.append(len(ids))
            ids.append(ctx.vocab.mask_id)

    def forward() -> torch.Tensor:
        try:
            return fill_mask_logits(ctx, ids, slots)[0]
        except UnsupportedMode as reason:
            raise LabError("{reason} Use another run.", reason=reason) from None

    where = Message("the first [MASK] (token {position} of {n_tokens})", position=slots[0] + 1, n_tokens=len(ids))
    with torch.no_grad():
        forward()  # the checks (length, a run that cannot fill a mask) before anything else runs
    return PredictionSite(ctx, text, "mask", where, forward)


def token_label(ctx: DecodingContext, token_id: int) -> str:
    """A token as the lens and the attributions show it: the text it decodes to, or its token string when that is
    blank (SentencePiece's lone "▁", a newline)."""
    shown = display_pieces(ctx, [], [token_id])[0][0]
    return shown if shown.strip() else ctx.token_name(token_id)

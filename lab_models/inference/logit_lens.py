"""The logit lens: what every layer of a run already predicts at the position the family predicts.

    logit_lens(run_dir, "the girl [MASK] a red apple .", top_k=5)
        -> pandas.DataFrame, one row per (layer, rank): layer (0 = embeddings), rank (1 = best), token, probability,
           layer_name

It follows nostalgebraist's "interpreting GPT: the logit lens" (2020): the hidden state after every layer is decoded
through the model's own output head, with the final norm applied first, as if the network stopped there. The
position is lab_models/inference/predicting.py's (the first [MASK] for the masked LMs, the next token for the causal
ones, the first token of a T5 or MASS span, ...), and the top layer is by construction the model's own prediction
there (`attrs["check_error"]`: the largest difference between the top layer's probabilities and those of the
family's own forward pass, ~1e-7). Probabilities are the softmax over the whole vocabulary, as fill-mask's
(special tokens are never listed).

What is read, per family, and where the head makes this an approximation (`attrs["note"]`):

    family                   stream read (layers)                    head applied to every layer
    gpt                      self (embeddings, blocks 1..L)          the tied matrix: post-LN blocks end in a LayerNorm,
                                                                     so every layer is read as the top one is
    gpt2, glm                self                                    the final LayerNorm, then the tied matrix (the
                                                                     logit lens as published)
    bert roberta spanbert    self                                    the MLM head's transform (dense, GeLU, LayerNorm),
    albert unilm                                                     trained on the top layer only: an approximation
                                                                     below it (Tuned-lens-style translators would fix it)
    electra                  the generator's layers                  the generator's MLM head (the discriminator
                                                                     predicts no tokens)
    xlnet, mpnet             query stream (its start vector, then    the tied matrix + bias (MPNet: its transform)
                             each block's query rows)
    t5, mass                 decoder (embeddings, decoder blocks)    the final norm (T5's RMS norm, scaled by
                                                                     d_model^-0.5), the tied matrix; the encoder
                                                                     predicts nothing and is not read
    elmo                     the forward LSTM (token layer, LSTM     the shared softmax
                             1..L)
    ulmfit                   embedding, LSTM 1..L                    the tied decoder: only layers as wide as the
                                                                     embedding can be read (the inner AWD-LSTM layers
                                                                     are wider: `attrs["skipped"]`)
    cove                     the decoder's LSTM layers               the attention over the encoder and W_out; the
                                                                     decoder's input embedding is narrower than W_out
                                                                     reads and is skipped
    cvt                      (a tagger: no token prediction, ValueError)

Transformer layers are captured with forward hooks on the predicting stack's blocks during the family's own forward
pass (the input of the first block is layer 0); the row that predicts is found by decoding every row of the top layer
and matching the family's own logits, so the lens never re-implements a family's layout. RNN layers are read from the
models' own per-layer methods.
"""
from __future__ import annotations

from contextlib import contextmanager

import pandas as pd
import torch

from lab_models.messages import LabError, Message
from lab_models.inference.generation.context import MAX_TOP_K, as_whole_number, is_integer_value
from lab_models.inference.generation.context import load_decodable_run
from lab_models.inference.predicting import PredictionSite, prediction_site, token_label

LENS_COLUMNS = ["layer", "rank", "token", "probability", "layer_name"]
MATCH_TOLERANCE = 1e-3  # the top layer, decoded, must give the family's own logits (float rounding aside)

NOTES = {
    "gpt": Message("GPT's post-LN blocks end in a LayerNorm: every layer is decoded through the tied matrix as the "
                   "top one is"),
    "gpt2": Message("the final LayerNorm, then the tied matrix, applied to every layer (the logit lens as published)"),
    "glm": Message("the final LayerNorm, then the tied matrix, applied to every layer (the logit lens as published)"),
    "mlm": Message("the MLM head's transform (dense, GeLU, LayerNorm) was trained on the top layer only: below it "
                   "the lens is an approximation"),
    "electra": Message("the generator's layers through its MLM head (the discriminator predicts no tokens); the "
                       "head's transform was trained on the top layer only: below it the lens is an approximation"),
    "xlnet": Message("the query stream's layers (the stream that predicts without seeing its token) through the tied "
                     "matrix"),
    "mpnet": Message("the query stream's layers through MPNet's LM head, whose transform was trained on the top "
                     "layer only: below it the lens is an approximation"),
    "t5": Message("the decoder's layers through its final RMS norm, the d_model^-0.5 scale and the tied matrix; the "
                  "encoder predicts nothing and is not read"),
    "mass": Message("the decoder's layers through the tied matrix; the encoder predicts nothing and is not read"),
    "elmo": Message("the forward LSTM's layers through the shared softmax (the backward LSTM predicts the previous "
                    "token)"),
    "ulmfit": Message("the tied decoder reads only layers as wide as the embedding; the wider inner LSTM layers are "
                      "skipped"),
    "cove": Message("the decoder's LSTM layers through the attention over the encoder and W_out; its input embedding "
                    "is narrower than W_out reads and is skipped"),
}


def lens_note(family: str) -> Message:
    return NOTES.get(family, NOTES["mlm"])


@contextmanager
def _block_calls(blocks):
    """Hooks every block of a stack; yields the list of (input, output) per block call, in call order (a shared
    block, ALBERT's, records one call per application)."""
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def hook(module, args, output):
        calls.append((args[0].detach(), (output[0] if isinstance(output, tuple) else output).detach()))

    handles = [block.register_forward_hook(hook) for block in dict.fromkeys(blocks)]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


Layer = tuple[int, str, torch.Tensor]  # (layer index, 0 = embeddings; its name; its (V,) logits)


def _transformer_layers(site: PredictionSite) -> tuple[list[Layer], torch.Tensor, float, str]:
    """(every layer decoded, the family's own (V,) logits, the match error, the stream read)."""
    ctx = site.ctx
    decoder = ctx.family in ("t5", "mass")
    backbone = ctx.backbone if decoder else ctx.model.lm_backbone  # ELECTRA: the generator
    blocks = backbone.decoder_blocks if decoder else backbone.blocks
    norm = backbone.ln_dec if decoder else backbone.ln_f
    n_layers = backbone.config.decoder_layers if decoder else backbone.config.n_layers
    with _block_calls(blocks) as calls:
        own = site.forward().float()  # (V,)
    calls = calls[:n_layers]  # the first pass (T5's later slots run the decoder again)
    top = calls[-1][1]  # (B, T, H)
    errors = (backbone.lm_logits(norm(top)).float() - own).abs().amax(dim=-1)  # (B, T)
    index = int(errors.argmin())
    b, row = divmod(index, top.shape[1])
    error = float(errors.reshape(-1)[index])
    if error > MATCH_TOLERANCE * max(1.0, float(own.abs().max())):
        raise RuntimeError(f"the logit lens found no row that gives {ctx.family}'s own prediction (error {error:.3g})")
    prefix = "decoder " if decoder else ""
    vectors = [(0, f"{prefix}embeddings", calls[0][0][b, row])]
    vectors += [(k, f"{prefix}block {k}", output[b, row]) for k, (_, output) in enumerate(calls, 1)]
    layers = [(k, name, backbone.lm_logits(norm(vector)).float()) for k, name, vector in vectors]
    stream = "decoder" if decoder else ("query" if backbone.config.query_stream is not None else "self")
    return layers, own, error, stream


def _rnn_layers(site: PredictionSite) -> tuple[list[Layer], torch.Tensor, list[str], str]:
    """The LSTM families' layers decoded: (layers, own logits, skipped layer names, stream)."""
    ctx = site.ctx
    model, family, v = ctx.model, ctx.family, ctx.vocab
    own = site.forward().float()
    if family == "cove":
        H, lengths, final = model.encode(ctx.tensor([ctx.encode(site.text)]))  # (1, n, 2h)
        states = model.decoder_layers(ctx.tensor([[v.bos_id]]), model.bridge(final))  # L x (1, 1, h)
        layers = [(j, f"decoder LSTM {j}", model.output(model.attend(h, H, lengths))[0, -1].float())
                  for j, h in enumerate(states, 1)]
        return layers, own, ["decoder embedding"], "decoder LSTM"
    ids = ctx.tensor([[v.eos_id] + ctx.encode(site.text)])  # (1, n + 1): the continue plan's input
    if family == "elmo":
        forward, _ = model.directional_states(ids)  # L x (1, T, E)
        vectors = [("token layer", model.token_vectors(ids))] + [(f"forward LSTM {j}", h)
                                                                 for j, h in enumerate(forward, 1)]
        return ([(k, name, model.softmax(h[0, -1]).float()) for k, (name, h) in enumerate(vectors)], own, [],
                "forward LSTM")
    width = model.embedding.weight.shape[1]  # ulmfit: the tied decoder reads E-wide vectors
    vectors = [("embedding", model.embedding(ids))] + [(f"LSTM {j}", h) for j, h in enumerate(model.encode(ids), 1)]
    readable = [(k, name, model.lm_logits(h[0, -1]).float()) for k, (name, h) in enumerate(vectors)
                if h.shape[-1] == width]
    return readable, own, [name for name, h in vectors if h.shape[-1] != width], "LSTM"


@torch.no_grad()
def logit_lens(run_dir, text: str, top_k: int = 5) -> pd.DataFrame:
    """The top_k tokens every layer predicts at the position the family predicts (module docstring). One row per
    (layer, rank), columns LENS_COLUMNS; `attrs`: run_id, family, step, where (the position, in words), stream,
    note (how the head is applied and where that approximates), check_error, skipped (layers that cannot be read),
    n_layers. ValueError: a bad top_k, an empty or too long text, a family without token predictions (CVT), a text
    without the [MASK] a masked LM needs or with one a left-to-right family cannot fill."""
    top_k = as_whole_number(top_k)
    if not is_integer_value(top_k) or not 1 <= top_k <= MAX_TOP_K:
        raise LabError("top_k must be a whole number from 1 to {max_top_k}, got {top_k!r}",
                       max_top_k=MAX_TOP_K, top_k=top_k)
    run = load_decodable_run(run_dir)
    site = prediction_site(run, text)
    ctx = site.ctx
    skipped: list[str] = []
    if getattr(ctx.model, "kind", None) == "rnn":
        layers, own, skipped, stream = _rnn_layers(site)
        error = float((layers[-1][2] - own).abs().max())
    else:
        layers, own, error, stream = _transformer_layers(site)
    banned = ctx.banned.cpu()
    rows = []
    for layer, name, logits in layers:
        probs = torch.softmax(logits.cpu().float(), dim=-1)  # (V,): the whole vocabulary, as fill_mask reports
        top = torch.topk(probs.masked_fill(banned, -1.0), min(top_k, int((~banned).sum())))  # specials never listed
        for rank, (p, token) in enumerate(zip(top.values.tolist(), top.indices.tolist()), 1):
            rows.append([layer, rank, token_label(ctx, token), float(p), name])
    frame = pd.DataFrame(rows, columns=LENS_COLUMNS)
    frame.attrs.update(run_id=run.run_id, family=run.family, step=run.step, where=site.where, stream=stream,
                       note=lens_note(run.family), check_error=error, skipped=skipped,
                       n_layers=len(layers))
    return frame

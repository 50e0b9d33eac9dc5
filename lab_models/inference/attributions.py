"""Attributions: how much each input token moved a prediction, by gradient x input and by integrated gradients.

    attributions(run_dir, "the girl [MASK] a red apple .", method="integrated_gradients", steps=32)
        -> [("the", 0.012), ("girl", 0.031), ("[MASK]", -0.004), ...]: one pair per token the model read
    explain_prediction(run_dir, text, ...) -> Attribution (the same, with the answer, f(x), f(baseline), the
                                              completeness check)

What is explained: the probability (over ordinary tokens, special tokens excluded, as fill-mask's) of the model's own
top answer at the position lab_models/inference/predicting.py picks (a fill-mask answer at the first [MASK]; the next
token a causal family would generate; T5's and MASS's first span token; CoVe's first translated token), or, for a
fine-tuning folder with saved weights (lab_models/inference/finetuning/saved.py), the probability of the label the
fine-tuned classifier gives the sentence. `target` picks another token (or label) to explain.

The input is the **token vectors**: the rows of the token embedding the model looks up, before positions and
segments are added (Transformers: the vectors the `Embeddings` module receives; ELMo, CoVe: their embedding's
output; ULMFiT: its first LSTM's input). A token's score sums its vector's elementwise scores.

- **gradient x input** (Shrikumar et al. 2016; Denil et al. 2014): x . df/dx at the input, one backward pass.
- **integrated gradients** (Sundararajan, Taly and Yan 2017, "Axiomatic Attribution for Deep Networks"):
  (x - x') . integral_0^1 df/dx(x' + a (x - x')) da, the integral by `steps`-point Gauss-Legendre quadrature on
  [0, 1] (Captum's default rule), one forward and backward pass per point. The baseline x' is every token's vector
  replaced by the [PAD] token's vector (`baseline="pad"`, the lab's neutral token; positions and segments stay) or by
  zeros (`baseline="zero"`). Completeness (their axiom): the scores sum to f(x) - f(x'); `completeness_error` is
  |sum - (f(x) - f(x'))|, reported with every result; at the default 32 steps the tests hold it under 1% of
  |f(x) - f(x')| or 2e-5 (float32 rounding: more steps do not go below ~1e-5 on T5, whose embeddings are N(0, 1)).
  The zero baseline can break it: a model without a position table (T5) then feeds exact zeros to its first norm,
  whose x / rms(x) jumps within ~1e-3 of the baseline, a step no quadrature of a few dozen points follows (a tiny T5:
  a completeness error of 0.04 on a difference of 0.03). The error is reported with the result (the page warns);
  the [PAD] baseline, the default, has no such point.

Captum (the well-kept library for both) was considered: its 0.9 release installs matplotlib and five more packages
for plots the lab does not use, and its layer attributions would still need the lab's per-family forward passes
wrapped; the two methods are a few lines here, tested against completeness and a hand-computed example.

Deviations: the scores are per token vector, not per embedding dimension or per word (sub-word pieces each get their
own); the framing tokens the family reads ([EOS] before a continue prompt, GLM's [S], a fine-tuning's [CLS]/[SEP])
are inputs like any other and are listed; nothing is normalised (the signs and sizes are in probability units).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from lab_models.messages import LabError, Message
from lab_models.inference.finetuning.saved import is_finetune_folder, load_finetuned
from lab_models.inference.generation.context import check_prompt_text, load_decodable_run
from lab_models.inference.predicting import prediction_site, token_label

METHODS = ("integrated_gradients", "gradient_x_input")
BASELINES = ("pad", "zero")
DEFAULT_STEPS = 32
MAX_STEPS = 256


# ------------------------------------------------------------------------------------------------ the two methods
def gradient_x_input(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Per-row scores (T,) of a scalar function f of x (T, D): sum over D of x * df/dx.

    >>> f = lambda x: x[0, 0] * x[1, 0] + 2 * x[1, 1]     # two tokens of two dimensions
    >>> gradient_x_input(f, torch.tensor([[3.0, 0.0], [5.0, 1.0]])).tolist()   # [3 * 5, 5 * 3 + 1 * 2]
    [15.0, 17.0]
    """
    point = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (gradient,) = torch.autograd.grad(f(point), point)
    return (x.detach() * gradient).sum(dim=-1)


def integrated_gradients(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, baseline: torch.Tensor,
                         steps: int = DEFAULT_STEPS) -> torch.Tensor:
    """Per-row scores (T,): sum over D of (x - x') * the path integral of df/dx from x' to x, by `steps`-point
    Gauss-Legendre quadrature. They sum to f(x) - f(x') up to the quadrature error.

    >>> f = lambda x: (x ** 2).sum()
    >>> integrated_gradients(f, torch.tensor([[1.0], [2.0]]), torch.zeros(2, 1), steps=4).tolist()
    [1.0, 4.0]
    """
    nodes, weights = np.polynomial.legendre.leggauss(int(steps))  # on [-1, 1]
    x, baseline = x.detach(), baseline.detach()
    difference = x - baseline
    total = torch.zeros_like(x)
    with torch.enable_grad():
        for node, weight in zip(nodes, weights):
            alpha = float(node + 1) / 2  # on [0, 1]
            point = (baseline + alpha * difference).requires_grad_(True)
            (gradient,) = torch.autograd.grad(f(point), point)
            total += float(weight) / 2 * gradient
    return (difference * total).sum(dim=-1)


# ------------------------------------------------------------------------------------------------ the token vectors
@contextmanager
def _token_vectors(module: torch.nn.Module, before: bool, replace: dict, every_call: bool = False):
    """Reads (and, when replace["vectors"] is set, replaces) the token vectors of the first call of `module` (of
    every call with `every_call`: an LSTM classifier that embeds its sentence twice, ELMo's [x; x] layer and its
    LSTMs' input): its input (before=True: a forward pre-hook) or its output. replace["seen"] gets the vectors the
    model computed."""
    state = {"calls": 0}

    def swap(original: torch.Tensor) -> torch.Tensor | None:
        state["calls"] += 1
        if state["calls"] != 1 and not every_call:
            return None
        replace["seen"] = original.detach()[0]  # (T, D): the first row (GLM repeats its row once per blank)
        vectors = replace.get("vectors")
        return None if vectors is None else vectors.unsqueeze(0).expand_as(original).to(original.dtype)

    if before:
        def pre_hook(mod, args):
            new = swap(args[0])
            return None if new is None else (new, *args[1:])
        handle = module.register_forward_pre_hook(pre_hook)
    else:
        def hook(mod, args, output):
            return swap(output)
        handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _ids_of_first_call(module: torch.nn.Module, forward: Callable[[], object]) -> list[int]:
    """The token ids the first call of an embedding table looked up."""
    seen: list[list[int]] = []

    def hook(mod, args, output):
        if not seen:
            seen.append(args[0][0].tolist())

    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            forward()
    finally:
        handle.remove()
    return seen[0] if seen else []


# ------------------------------------------------------------------------------------------------ a prediction
@dataclass(frozen=True)
class Attribution:
    """One explained prediction: the tokens the model read and their scores, what was explained and how."""

    run_id: str
    family: str
    step: int
    method: str
    steps: int  # quadrature points (integrated gradients); 1 for gradient x input
    baseline: str  # "pad" or "zero" (integrated gradients); "" for gradient x input
    tokens: list[str]
    scores: list[float]
    target: str  # the token (or label) whose probability is explained
    where: Message  # the position, in words ("the first [MASK] (token 3 of 7)", "the label of a topic classifier")
    probability: float  # f(x)
    baseline_probability: float  # f(x'); for gradient x input f(0)
    completeness_error: float  # |sum(scores) - (f(x) - f(x'))| (integrated gradients; NaN for gradient x input)

    @property
    def pairs(self) -> list[tuple[str, float]]:
        return list(zip(self.tokens, self.scores))


def check_method(method, steps, baseline) -> tuple[str, int, str]:
    if method not in METHODS:
        raise LabError("Unknown attribution method {method!r}: choose one of {methods}.",
                       method=method, methods=', '.join(METHODS))
    if isinstance(steps, float) and steps.is_integer():
        steps = int(steps)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 2 <= steps <= MAX_STEPS:
        raise LabError("steps must be a whole number from 2 to {max_steps}, got {steps!r}.",
                       max_steps=MAX_STEPS, steps=steps)
    if baseline not in BASELINES:
        raise LabError("Unknown baseline {baseline!r}: choose 'pad' (the [PAD] token's vector) or 'zero'.",
                       baseline=baseline)
    return method, steps, baseline


def _explain(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, baseline: torch.Tensor, method: str,
             steps: int) -> tuple[list[float], float, float, float]:
    """(scores, f(x), f(baseline), completeness error)."""
    with torch.no_grad():
        value = float(f(x))
        reference = float(f(baseline))
    if method == "gradient_x_input":
        return gradient_x_input(f, x).tolist(), value, reference, float("nan")
    scores = integrated_gradients(f, x, baseline, steps)
    return scores.tolist(), value, reference, abs(float(scores.sum()) - (value - reference))


def explain_prediction(run_dir, text: str, method: str = "integrated_gradients", steps: int = DEFAULT_STEPS, *,
                       baseline: str = "pad", target: str | None = None) -> Attribution:
    """Attributions of one prediction of a run (or of a fine-tuned classifier's label, for a fine-tuning folder).
    See the module docstring. ValueError: an unknown method or baseline, steps out of range, an empty or too long
    text, a family or text with nothing to predict (predicting.py's rules), a target the vocabulary (or the
    classifier's labels) does not have."""
    method, steps, baseline = check_method(method, steps, baseline)
    text = check_prompt_text(text, Message("the text"))
    if run_dir is not None and is_finetune_folder(run_dir):
        return _explain_classifier(run_dir, text, method, steps, baseline, target)
    run = load_decodable_run(run_dir)
    site = prediction_site(run, text)
    ctx = site.ctx
    model = ctx.model
    if getattr(model, "kind", None) == "rnn":
        table = model.embedding
        vectors_at, before = (model.layers[0], True) if run.family == "ulmfit" else (model.embedding, False)
    else:
        backbone = ctx.backbone if run.family in ("t5", "mass") else model.lm_backbone
        table, vectors_at, before = backbone.embeddings.token, backbone.embeddings, True
    replace: dict = {}
    with _token_vectors(vectors_at, before, replace), torch.no_grad():
        logits = site.forward().float()
    x = replace["seen"].float()  # (T, D)
    if run.family == "ulmfit":
        ids = [ctx.vocab.eos_id] + ctx.encode(site.text)  # its embedding is read with F.embedding, not the module
    else:
        ids = _ids_of_first_call(table, site.forward)
    banned = ctx.banned
    target_id = _target_token(ctx, logits, target)

    def f(vectors: torch.Tensor) -> torch.Tensor:
        replace["vectors"] = vectors
        with _token_vectors(vectors_at, before, replace):
            out = site.forward().float()
        return torch.softmax(out.masked_fill(banned, float("-inf")), dim=-1)[target_id]

    reference = _baseline(table, ctx.vocab.pad_id, baseline, x)
    scores, value, base_value, error = _explain(f, x, reference, method, steps)
    tokens = [token_label(ctx, token) for token in ids][: len(scores)]
    return Attribution(run.run_id, run.family, run.step, method, steps if method == "integrated_gradients" else 1,
                       baseline if method == "integrated_gradients" else "", tokens, scores,
                       token_label(ctx, target_id), site.where, value, base_value, error)


def _baseline(table: torch.nn.Embedding, pad_id: int, baseline: str, x: torch.Tensor) -> torch.Tensor:
    """x' (T, D): every row the [PAD] token's vector ("pad") or zeros ("zero")."""
    if baseline == "zero":
        return torch.zeros_like(x)
    return table.weight[pad_id].detach().float().to(x.device).expand_as(x).clone()


def _target_token(ctx, logits: torch.Tensor, target: str | None) -> int:
    """The model's own top ordinary token, or the token `target` names (its text, or its token string)."""
    if target is None or not str(target).strip():
        return int(torch.argmax(logits.masked_fill(ctx.banned, float("-inf"))))
    wanted = str(target).strip()
    token_id = ctx.tokenizer.token_to_id(wanted)
    if token_id is None:
        encoded = ctx.encode(wanted)
        token_id = encoded[0] if len(encoded) == 1 else None
    if token_id is None or token_id >= ctx.V:
        raise LabError("The target {wanted!r} is not one token of this run's vocabulary: leave it empty to explain "
                       "the model's own answer.", wanted=wanted)
    return int(token_id)


def _explain_classifier(folder, text: str, method: str, steps: int, baseline: str, target) -> Attribution:
    saved = load_finetuned(folder)
    classifier, run = saved.classifier, saved.run
    batch = saved.encode(text)
    rnn = classifier.rnn
    if rnn:
        table = classifier.base.embedding
        vectors_at, before = (classifier.base.layers[0], True) if run.family == "ulmfit" else (table, False)
    else:
        table, vectors_at, before = classifier.backbone.embeddings.token, classifier.backbone.embeddings, True
    replace: dict = {}
    with _token_vectors(vectors_at, before, replace, rnn), torch.no_grad():
        logits, _ = classifier(batch)
    x = replace["seen"].float()
    labels = list(saved.label_names)
    if target is None or not str(target).strip():
        label = int(torch.argmax(logits[0]))
    elif str(target).strip() in labels:
        label = labels.index(str(target).strip())
    else:
        raise LabError("The target {target!r} is not a label of this classifier: choose one of "
                       "{labels}, or leave it empty to explain its own answer.",
                       target=str(target).strip(), labels=', '.join(labels))

    def f(vectors: torch.Tensor) -> torch.Tensor:
        replace["vectors"] = vectors
        with _token_vectors(vectors_at, before, replace, rnn):
            out, _ = classifier(batch)
        return torch.softmax(out[0].float(), dim=-1)[label]

    reference = _baseline(table, run.vocab.pad_id, baseline, x)
    scores, value, base_value, error = _explain(f, x, reference, method, steps)
    ids = batch.input_ids[0].tolist()
    tokens = [run.tokenizer.id_to_token(i) or str(i) for i in ids]
    where = Message("the label of the {task} classifier {finetune_id}", task=saved.task_name,
                    finetune_id=saved.finetune_id)
    return Attribution(saved.finetune_id, run.family, run.step, method, steps if method == "integrated_gradients"
                       else 1, baseline if method == "integrated_gradients" else "", tokens, scores, labels[label],
                       where, value, base_value, error)


def attributions(run_dir, text: str, method: str = "integrated_gradients", steps: int = DEFAULT_STEPS
                 ) -> list[tuple[str, float]]:
    """One (token, attribution) pair per token the model read, for the family's own answer at the first [MASK] or
    the next token (docs/contract.md §7); `explain_prediction` has the details (the answer, the completeness check, the
    baseline)."""
    return explain_prediction(run_dir, text, method, steps).pairs

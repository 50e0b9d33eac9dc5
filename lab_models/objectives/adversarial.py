"""Adversarial training on the input embeddings: an add-on objective `adversarial` for pretraining BERT, RoBERTa,
ALBERT and SpanBERT, and an option of fine-tuning (Understand tab, `python -m lab_models finetune --adversarial`).

Both methods perturb the word embeddings (the output of the token embedding table, before positions and segments
are added) by delta, kept inside an L2 ball of radius epsilon per example, found by K steps of gradient ascent:

    delta_0  = U(-1, 1) * sigma / sqrt(n * E)        on the n real (non-padding) tokens of an example, 0 on padding
    delta_k+1 = Proj_eps(delta_k + alpha * g_k / ||g_k||)          g_k = d(ascent objective) / d delta_k
    Proj_eps(d) = d * min(1, eps / ||d||)                          ||.|| = the Frobenius norm of one example's (n, E)

- SMART / ALUM ("smart", the pretraining method): Jiang et al. (2020). SMART: Robust and Efficient Fine-Tuning for
  Pre-trained Natural Language Models through Principled Regularized Optimization. ACL; and its pretraining use, Liu
  et al. (2020). Adversarial Training for Large Neural Language Models (ALUM). arXiv:2004.08994. The ascent objective
  and the trained loss are the symmetric KL divergence between the model's predictions on the clean and on the
  perturbed input (a smoothness regulariser; no label is read):

      R(theta) = max_{||delta|| <= eps} l_s(f(x; theta), f(x + delta; theta)),   l_s(P, Q) = KL(P||Q) + KL(Q||P)
      total    = the family's loss + weight * R        (ALUM pretrains BERT with weight 10, SMART uses 1 to 5)

  In pretraining, f is the family's main token prediction at its target rows (`FamilyModel.target_logits`: the MLM
  logits of BERT, RoBERTa, ALBERT and SpanBERT).
- FreeLB ("freelb", the fine-tuning default): Zhu, Cheng, Gan, Sun, Goldstein, Liu (2020). FreeLB: Enhanced
  Adversarial Training for Natural Language Understanding. ICLR. The ascent objective is the task loss itself, and the
  trained loss is the mean of the K losses met on the way (Algorithm 1 accumulates their parameter gradients):

      L_adv = (1/K) sum_{k=0..K-1} L(x + delta_k, y)            total = L(x, y) + weight * L_adv

Why SMART for pretraining. FreeLB's perturbation is the gradient of the loss of the *targets*. In pretraining the
targets are tokens of the text itself, so delta would carry them into the input (the "label leaking" of Kurakin,
Goodfellow, Bengio 2017): the model could read a masked word back from the perturbation of its neighbours. SMART's
ascent reads only the model's own predictions, which depend only on the (corrupted) input. Even that is leak-free
only where every perturbed input is visible to every prediction row anyway: the MLM families. In a causal LM (GPT),
a permutation LM (XLNet, MPNet), UniLM's left-to-right modes, GLM's Part B or an encoder-decoder's decoder, the
gradient that shapes delta at one position flows from rows that see later tokens, so delta would carry the future into
the past. ELECTRA is left out too: its predictions f are the generator's, so the regulariser would not reach the
discriminator, the model ELECTRA keeps. `--objective adversarial=1` for any other family is a ValueError that says
this. In fine-tuning the label is not in the input, so both methods are leak-free there (any Transformer family).
So pretraining always uses SMART (the add-on's settings have no method); fine-tuning picks one with `--adversarial
freelb|smart` (FreeLB, K = 2, alpha = 0.1, in the Understand tab's default; `FINETUNE_SETTINGS`).

Worked example of the projection (the golden test): eps = 1, two examples of one token, E = 2:

    delta = [[3.0, 4.0]], [[0.3, 0.4]]     norms 5.0 and 0.5
    Proj  = [[0.6, 0.8]], [[0.3, 0.4]]     the first is scaled by 1/5 onto the sphere, the second is inside: kept

>>> project(torch.tensor([[[3.0, 4.0]], [[0.3, 0.4]]]), epsilon=1.0).tolist()
[[[0.6000000238418579, 0.800000011920929]], [[0.30000001192092896, 0.4000000059604645]]]
>>> round(float(symmetric_kl(torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.9, 0.1]])))), 4)
0.8789

Logged parts (metrics.jsonl "losses"; the Train tab draws each as a curve): `adversarial` = the trained loss (SMART's
symmetric KL, weighted into the total), `clean_nll` and `adversarial_nll` = the mean negative log-likelihood of the
main objective's targets under the clean and under the final perturbed input (for comparison only, not added to
the total). Validation rows carry them too (the ascent then runs with gradients on, the weights untouched).

How it runs inside the loss (the engine is unchanged): one clean pass with its graph, K ascent passes whose gradient
is taken with `torch.autograd.grad` with respect to delta only, then one perturbed pass with its graph; the total's
backward reaches the parameters through the clean and the final perturbed pass (SMART differentiates both sides).
Every pass replays the same dropout masks (the global RNG state is restored before each, then set to where the clean
pass left it), so clean and perturbed predictions differ by delta alone. delta_0 is drawn from a torch.Generator
seeded from the batch's content (as ELECTRA's samples): reproducible across runs, resumes and ranks. Step time: about
(K + 3) forward passes instead of 1 (measured in benchmarks/bench_addons.py; docs/addons.md).

Deviations, stated:
- One L2 ball per example (FreeLB's), also for SMART and ALUM, which bound each token's perturbation in the
  L-infinity norm; the ascent step is normalised by the gradient's L2 norm per example (FreeLB), not its L-infinity.
- delta_0 is FreeLB's scaled uniform draw for both methods (SMART draws N(0, sigma^2)).
- ALUM starts adversarial pretraining from a standard-pretrained BERT and pretrains on; here it can be on from the
  first step. The lab's defaults: K = 1 (ALUM, SMART), eps = 1, alpha = 1 (one ascent step reaches the sphere),
  sigma = 0.1. FreeLB replaces the clean loss by L_adv; the lab adds L_adv to it (weight 1 by default), so that the
  clean and the adversarial loss can be compared on one curve.
- SMART's Bregman proximal point (momentum) term is not used: it is a separate part of SMART's optimiser.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.objectives.losses import content_seed

OBJECTIVE = "adversarial"
FAMILIES = ("bert", "roberta", "albert", "spanbert")  # pretraining: the leak-free ones (module docstring)
METHODS = ("smart", "freelb")


@dataclass(frozen=True)
class Settings:
    """The adversarial add-on's settings (`--set adversarial.NAME=VALUE`)."""

    steps: int = 1  # K: ascent steps on delta (SMART/ALUM 1, FreeLB 2-3)
    epsilon: float = 1.0  # radius of the L2 ball delta stays in, per example
    step_size: float = 1.0  # alpha: length of each normalised ascent step
    init_magnitude: float = 0.1  # sigma: size of the random start delta_0 (0 = start at the clean input)

    def __post_init__(self):
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or not 1 <= self.steps <= 10:
            raise LabError("adversarial.steps must be a whole number from 1 to 10, got {steps!r}", steps=self.steps)
        for name in ("epsilon", "step_size", "init_magnitude"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (value == 0 and name == "epsilon"):
                raise LabError("adversarial.{name} must be a finite number {comparison} "
                               "0, got {value!r}",
                               name=name, comparison='>' if name == 'epsilon' else '>=', value=value)


# ------------------------------------------------------------------------------------------------ the pieces


def project(delta: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Each example's (T, E) slice of `delta` (B, T, E) scaled onto the L2 ball of radius `epsilon` when outside it."""
    norms = delta.flatten(1).norm(dim=1).clamp(min=1e-12)  # (B,)
    scale = (epsilon / norms).clamp(max=1.0)  # (B,)
    return delta * scale.view(-1, *([1] * (delta.dim() - 1)))


def initial_delta(shape: torch.Size, real: torch.Tensor, magnitude: float, generator: torch.Generator) -> torch.Tensor:
    """FreeLB's start: U(-1, 1) on the real tokens, scaled by magnitude / sqrt(n_real * E) per example (B, T, E)."""
    B, T, E = shape
    delta = torch.rand(B, T, E, generator=generator) * 2 - 1  # (B, T, E) on the CPU: the generator's device
    real = real.detach().to("cpu", torch.float32)  # (B, T)
    scale = magnitude / (real.sum(dim=1).clamp(min=1) * E).sqrt()  # (B,)
    return delta * real.unsqueeze(-1) * scale.view(B, 1, 1)


def symmetric_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(P||Q) + KL(Q||P) of the softmax of two (N, C) logit tensors, averaged over the N rows (an exact,
    graph-connected 0 when N = 0)."""
    p_log, q_log = F.log_softmax(p_logits.float(), dim=-1), F.log_softmax(q_logits.float(), dim=-1)  # (N, C)
    per_row = ((p_log.exp() - q_log.exp()) * (p_log - q_log)).sum(dim=-1)  # (N,)
    return per_row.sum() / max(per_row.numel(), 1)


class EmbeddingPerturbation:
    """Adds delta_k to the output of the k-th call of an `nn.Embedding` in each forward pass run under `active()`.

    A family's forward may look tokens up more than once (ELECTRA's generator and discriminator, an encoder and a
    decoder, MPNet's [MASK] slots): each lookup gets its own delta, drawn on the first pass (`initial_delta`; padding
    rows stay 0) and the same on every later pass. `ascend(grads)` takes one normalised ascent step and projects."""

    def __init__(self, embedding: nn.Embedding, pad_id: int, settings: Settings, generator: torch.Generator):
        if not isinstance(embedding, nn.Embedding):
            raise LabError("adversarial training perturbs an nn.Embedding, got {embedding_type}",
                           embedding_type=type(embedding).__name__)
        self.embedding, self.pad_id, self.settings, self.generator = embedding, pad_id, settings, generator
        self.deltas: list[torch.Tensor] = []  # one (B, T, E) per lookup, leaf tensors that require grad
        self.real: list[torch.Tensor] = []  # (B, T) bool per lookup
        self._calls = 0

    @contextmanager
    def active(self):
        self._calls = 0
        handle = self.embedding.register_forward_hook(self._add_delta)
        try:
            yield self
        finally:
            handle.remove()

    def _add_delta(self, module, args, output):
        k = self._calls
        self._calls += 1
        if k == len(self.deltas):  # the first pass meets this lookup: draw its delta_0
            real = args[0] != self.pad_id  # (B, T)
            delta = initial_delta(output.shape, real, self.settings.init_magnitude, self.generator)
            self.real.append(real)
            self.deltas.append(project(delta, self.settings.epsilon).to(output.device, output.dtype)
                               .requires_grad_(True))
        delta = self.deltas[k]
        if delta.shape != output.shape:
            raise LabError("lookup {k} of this pass has shape {output_shape}, but the first pass's had "
                           "{delta_shape}: the forward pass must be the same on every ascent step",
                           k=k, output_shape=tuple(output.shape), delta_shape=tuple(delta.shape))
        return output + delta  # (B, T, E)

    def ascend(self, grads) -> None:
        """delta <- Proj(delta + alpha * g / ||g||) per example, for every lookup (a lookup without a gradient, or an
        example whose gradient is 0, stays where it is)."""
        moved = []
        for delta, grad, real in zip(self.deltas, grads, self.real):
            delta = delta.detach()
            if grad is not None:
                grad = grad.detach() * real.unsqueeze(-1).to(grad.dtype)  # (B, T, E): padding stays at 0
                norms = grad.flatten(1).norm(dim=1)  # (B,)
                step = grad / norms.clamp(min=1e-12).view(-1, 1, 1)
                step = torch.where((norms > 0).view(-1, 1, 1), step, torch.zeros_like(step))
                delta = project(delta + self.settings.step_size * step, self.settings.epsilon)
            moved.append(delta.requires_grad_(True))
        self.deltas = moved


class _DropoutReplay:
    """Remembers the global RNG state (CPU, and the device's on CUDA) so that every pass draws the dropout masks of
    the first one; `finish()` leaves the RNG where the first pass left it."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device
        self.start = self._get()
        self.after_first = None

    @classmethod
    def from_seed(cls, device: torch.device, seed: int) -> "_DropoutReplay":
        """For a first pass that already ran right after `torch.manual_seed(seed)`: replay from that seed's state and
        finish where the RNG is now."""
        replay = cls(device)
        torch.manual_seed(seed)
        replay.start, replay.after_first = replay._get(), replay.start
        replay._set(replay.after_first)
        return replay

    def _get(self):
        return (torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if self.cuda else None)

    def _set(self, state) -> None:
        torch.set_rng_state(state[0])
        if self.cuda:
            torch.cuda.set_rng_state(state[1], self.device)

    def replay(self) -> None:
        if self.after_first is None:
            self.after_first = self._get()
        self._set(self.start)

    def finish(self) -> None:
        if self.after_first is not None:
            self._set(self.after_first)


def _grads(loss: torch.Tensor, deltas: list[torch.Tensor], retain_graph: bool = False):
    if not loss.requires_grad:
        return [None] * len(deltas)
    return torch.autograd.grad(loss, deltas, retain_graph=retain_graph, allow_unused=True)


# ------------------------------------------------------------------------------------------------ the two methods


def smart(predict: Callable[[], torch.Tensor], clean_logits: torch.Tensor, perturbation: EmbeddingPerturbation,
          replay: _DropoutReplay) -> tuple[torch.Tensor, torch.Tensor]:
    """SMART's regulariser: K ascent steps on symmetric_kl(clean, f(x + delta)), then that divergence with its graph.
    `predict()` runs the model's forward and returns its logits (N, C); `clean_logits` are the clean pass's (with
    their graph). Returns (the regulariser, the final perturbed logits)."""
    with torch.enable_grad():
        for _ in range(perturbation.settings.steps):
            replay.replay()
            with perturbation.active():
                perturbed = predict()
            perturbation.ascend(_grads(symmetric_kl(clean_logits.detach(), perturbed), perturbation.deltas))
        replay.replay()
        with perturbation.active():
            perturbed = predict()
        replay.finish()
        return symmetric_kl(clean_logits, perturbed), perturbed


def freelb(loss_of: Callable[[torch.Tensor], torch.Tensor], predict: Callable[[], torch.Tensor],
           perturbation: EmbeddingPerturbation, replay: _DropoutReplay) -> tuple[torch.Tensor, torch.Tensor]:
    """FreeLB: the mean of the task loss at delta_0 .. delta_(K-1), each with its graph (Algorithm 1's accumulated
    gradient), ascending on that loss in between. Returns (L_adv, the last perturbed logits)."""
    losses = []
    with torch.enable_grad():
        for k in range(perturbation.settings.steps):
            replay.replay()
            with perturbation.active():
                perturbed = predict()
            losses.append(loss_of(perturbed))
            if k < perturbation.settings.steps - 1:
                perturbation.ascend(_grads(losses[-1], perturbation.deltas, retain_graph=True))
        replay.finish()
    return torch.stack(losses).mean(), perturbed


def _nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if targets.numel() == 0:
        return torch.zeros((), device=logits.device)
    return F.cross_entropy(logits.detach().float(), targets)


def content_generator(*tensors: torch.Tensor) -> torch.Generator:
    return torch.Generator().manual_seed(content_seed(*tensors, salt="adversarial"))


# ------------------------------------------------------------------------------------------------ pretraining


def pretraining_loss(model, batch: Batch, settings: Settings) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """SMART on the family's main token prediction (pretraining's only method: FreeLB would leak, see the module
    docstring): (the regulariser with its graph, the logged parts clean_nll and adversarial_nll)."""
    device = batch.input_ids.device
    replay = _DropoutReplay(device)
    replay.replay()  # the clean pass draws the masks every perturbed pass will replay
    with torch.enable_grad():
        clean = model.target_logits(batch)  # (N, V)
    perturbation = EmbeddingPerturbation(model.backbone.embeddings.token, model.vocab.pad_id, settings,
                                         content_generator(batch.input_ids, batch.targets != IGNORE_INDEX))
    regulariser, perturbed = smart(lambda: model.target_logits(batch), clean, perturbation, replay)
    targets = batch.targets[batch.targets != IGNORE_INDEX]  # (N,), the order of target_logits' rows
    return regulariser, {"clean_nll": _nll(clean, targets), "adversarial_nll": _nll(perturbed, targets)}


# ------------------------------------------------------------------------------------------------ fine-tuning


def finetune_loss(classifier, batch, clean_logits: torch.Tensor, loss_of: Callable[[torch.Tensor], torch.Tensor],
                  method: str, settings: Settings, generator: torch.Generator, dropout_seed: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The adversarial loss of one fine-tuning step (inference/finetuning/run.py's hook): FreeLB's L_adv (`method`
    "freelb") or SMART's regulariser ("smart") on the classifier's logits. `classifier(batch)` returns (logits,
    hidden); `clean_logits` are the step's own (with their graph), computed right after
    `torch.manual_seed(dropout_seed)`, whose dropout masks every perturbed pass replays; `loss_of(logits)` is the
    task loss. Returns (the loss to add with its weight, the task loss under the final perturbation, detached)."""
    base = getattr(classifier, "base", None)
    backbone = getattr(base, "backbone", None)
    if backbone is None:
        raise LabError("adversarial fine-tuning perturbs a Transformer's token embeddings; "
                       "{base_family} is an LSTM model: fine-tune it without it",
                       base_family=getattr(base, 'family', 'this run'))
    replay = _DropoutReplay.from_seed(batch.input_ids.device, dropout_seed)
    perturbation = EmbeddingPerturbation(backbone.embeddings.token, base.vocab.pad_id, settings, generator)

    def predict() -> torch.Tensor:
        return classifier(batch)[0]

    if method == "freelb":
        adversarial, perturbed = freelb(loss_of, predict, perturbation, replay)
    else:  # SMART on the scored rows: every sequence, or (token tasks) the labelled word pieces
        rows = (batch.labels != IGNORE_INDEX) if clean_logits.dim() == 3 else None

        def scored(logits: torch.Tensor) -> torch.Tensor:
            return logits[rows] if rows is not None else logits  # (N, C)

        adversarial, _ = smart(lambda: scored(predict()), scored(clean_logits), perturbation, replay)
        replay.replay()  # the task loss under the final delta, for the log (no graph)
        with torch.no_grad(), perturbation.active():
            perturbed = predict()
        replay.finish()
    return adversarial, loss_of(perturbed.detach()).detach()


FINETUNE_METHODS = ("none", "freelb", "smart")
# Fine-tuning's settings per method: FreeLB's GLUE recipe (K = 2 ascent steps of 0.1 from a 0.1 start, so the ball is
# rarely reached: FreeLB's released configs often leave it unbounded) and SMART's (one step onto the sphere).
FINETUNE_SETTINGS = {"freelb": Settings(steps=2, epsilon=1.0, step_size=0.1, init_magnitude=0.1), "smart": Settings()}

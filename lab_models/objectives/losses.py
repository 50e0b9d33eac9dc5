"""Loss pieces every family's `loss(model, batch)` is written from: `LossOutput`, the sparse vocabulary loss, the
masked mean, sentence-level classification, and the weighted sum of the enabled objectives.

The rule every MLM-style loss here follows (and the design's "predict only where there is a target"): the hidden
states are gathered at the rows that carry a target *before* the vocabulary projection, because the (N, H) x (H, V)
projection is the expensive part of a small model. `Backbone.lm_logits(hidden, positions)` does the gather.

Worked example (one row of 4 tokens, targets at positions 1 and 3; `sparse_token_loss` returns the mean over those two
rows, their ids in row-major order and their negative log-likelihoods):

    targets     -100  17  -100  9        -> target_ids = [17, 9], target_nll = [nll(17 | h_1), nll(9 | h_3)]
    loss        = (target_nll[0] + target_nll[1]) / 2

A batch may hold no target of some kind (e.g. every NSP label is IGNORE_INDEX for one-token rows). The means below
then return an exact 0 that is still connected to the graph (sum / max(count, 1)), never NaN, so every parameter the
objective reaches still gets a (zero) gradient: DDP without `find_unused_parameters` keeps working.

Paper: none of its own; these are the cross-entropy and binary cross-entropy losses of the papers each family cites.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lab_models.messages import LabError
from lab_models.batch import IGNORE_INDEX, TARGET_ROWS, Batch
from lab_models.nn.vocab_loss import chunked_vocab_loss


@dataclass
class LossOutput:
    """What `FamilyModel.loss(batch)` returns."""

    total: torch.Tensor  # scalar: sum of weight * part over the enabled objectives (carries the graph)
    parts: dict[str, torch.Tensor]  # objective name -> its unweighted scalar loss (detached, for logging)
    target_ids: torch.Tensor  # (N,) long: the ids the family's main token-level objective predicted
    target_nll: torch.Tensor  # (N,) float: their negative log-likelihoods in nats (detached)


def run_backbone(backbone, batch: Batch, input_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The one-stream forward pass of `batch` (its "self" attention): hidden (B, T, H). `input_ids` replaces the
    batch's inputs (ELECTRA's discriminator reads the generator's samples)."""
    if "self" not in batch.attention:
        raise LabError("this family reads one attention stream 'self', but the batch has "
                       "{attention}: was it built by another family's batch builder?",
                       attention=sorted(batch.attention))
    ids = batch.input_ids if input_ids is None else input_ids
    return backbone(ids, batch.attention["self"], batch.position_ids, batch.segment_ids)  # (B, T, H)


def sparse_token_loss(backbone, hidden: torch.Tensor, targets: torch.Tensor,
                      positions: torch.Tensor | None = None, keep_logits: bool = False,
                      rows: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Cross-entropy of the vocabulary logits against `targets`, computed only at the rows that carry a target.

    hidden (B, T, H); targets (B, T) long with IGNORE_INDEX where there is no loss; positions (B, T) bool, the rows to
    project (default: targets != IGNORE_INDEX). Returns (mean loss with graph, target_ids (N,), target_nll (N,)
    detached, logits (N, V)), rows in row-major order. A backbone set to `chunked_vocab_loss` (performance setting
    vocab_loss=chunked) never keeps the logits and returns None for them, unless `keep_logits` (ELECTRA samples from
    its generator's). `rows`: the same default positions as flat indices, found on the host by the training engine
    (batch.extras[TARGET_ROWS]), so that no boolean index makes a GPU report its size to the host.
    """
    if positions is None and rows is not None:
        positions, target_ids = rows, targets.reshape(-1).index_select(0, rows)  # (N,) long, (N,)
    else:
        positions = targets != IGNORE_INDEX if positions is None else positions  # (B, T) bool
        target_ids = targets[positions]  # (N,)
    if getattr(backbone, "chunked_vocab_loss", False) and not keep_logits:
        mean, nll = chunked_vocab_loss(backbone.lm_inputs(hidden, positions), backbone.output_weight,
                                       backbone.lm_bias, target_ids)
        return mean, target_ids, nll, None
    logits = backbone.lm_logits(hidden, positions)  # (N, V): only the rows with a target reach the vocabulary
    nll = F.cross_entropy(logits.float(), target_ids, reduction="none")  # (N,)
    return masked_mean(nll), target_ids, nll.detach(), logits


def masked_mean(values: torch.Tensor, count: torch.Tensor | None = None) -> torch.Tensor:
    """values.sum() / max(count, 1): a mean that is an exact, graph-connected 0 when there is nothing to average.
    `count` defaults to values.numel()."""
    total = values.sum()
    if count is None:
        return total / max(values.numel(), 1)
    return total / count.clamp(min=1).to(total.dtype)


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the labels that are not IGNORE_INDEX. logits (B, C), labels (B,) long."""
    if labels.dtype != torch.long or labels.shape != logits.shape[:1]:
        raise LabError("labels must be a ({n_rows},) long tensor, got {labels_dtype} of shape "
                       "{labels_shape}",
                       n_rows=logits.shape[0], labels_dtype=labels.dtype, labels_shape=tuple(labels.shape))
    losses = F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX, reduction="none")  # (B,)
    return masked_mean(losses, (labels != IGNORE_INDEX).sum())


def require_extra(batch: Batch, key: str, family: str) -> torch.Tensor:
    """batch.extras[key], or a ValueError that names the batch builder setting to turn on."""
    if key not in batch.extras:
        raise LabError("{family}'s loss needs extras[{key!r}], but this batch has {extras}: "
                       "build it with {family}'s make_batch (and the setting that produces {key!r} turned on)",
                       family=family, key=key, extras=sorted(batch.extras))
    return batch.extras[key]


def empty_targets(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(target_ids, target_nll) with no rows: what a loss returns when its token-level objective is switched off."""
    return (torch.zeros(0, dtype=torch.long, device=device), torch.zeros(0, dtype=torch.float32, device=device))


def combine(weights: dict[str, float], parts: dict[str, torch.Tensor], target_ids: torch.Tensor,
            target_nll: torch.Tensor) -> LossOutput:
    """total = sum of weights[name] * parts[name]; `parts` holds only the objectives that were computed."""
    if not parts:
        raise LabError("no objective was computed: give at least one objective a positive weight")
    total = sum(float(weights[name]) * part for name, part in parts.items())
    return LossOutput(total=total, parts={name: part.detach() for name, part in parts.items()},
                      target_ids=target_ids, target_nll=target_nll)


def content_seed(*tensors: torch.Tensor, salt: str = "") -> int:
    """A 63-bit seed from a hash of the tensors' values (and `salt`): the same batch always gets the same seed, on
    every run and every rank that sees it, with no state to checkpoint. One small device-to-host copy per tensor.

    >>> content_seed(torch.tensor([1, 2, 3])) == content_seed(torch.tensor([1, 2, 3]))
    True
    """
    digest = hashlib.blake2b(salt.encode(), digest_size=8)
    for t in tensors:
        digest.update(t.detach().to("cpu", torch.int64).contiguous().numpy().tobytes())
        digest.update(str(tuple(t.shape)).encode())
    return int.from_bytes(digest.digest(), "little") & (2**63 - 1)


def token_and_sentence_parts(model, batch: Batch, token_objective: str, sentence: tuple[str, str] | None = None
                             ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """The BERT-style parts on one forward pass of `model.backbone`: the token objective (`mlm` / `cloze`) with the
    sparse vocabulary head, and optionally a sentence objective `(name, extras key)` (nsp / sop) through
    `model.heads[name]` on the first position. Objectives with weight 0 are skipped.

    Returns (hidden (B, T, H), parts, target_ids, target_nll)."""
    weights = model.objective_weights
    hidden = run_backbone(model.backbone, batch)  # (B, T, H)
    parts: dict[str, torch.Tensor] = {}
    target_ids, target_nll = empty_targets(hidden.device)
    if weights[token_objective] > 0:
        parts[token_objective], target_ids, target_nll, _ = sparse_token_loss(
            model.backbone, hidden, batch.targets, rows=batch.extras.get(TARGET_ROWS))
    if sentence is not None:
        name, key = sentence
        if weights.get(name, 0.0) > 0:
            labels = require_extra(batch, key, model.family)  # (B,) long
            parts[name] = classification_loss(model.heads[name](hidden), labels)
    return hidden, parts, target_ids, target_nll


def mlm_with_sentence_objective(model, batch: Batch, token_objective: str,
                                sentence: tuple[str, str] | None = None) -> LossOutput:
    """`token_and_sentence_parts`, weighted and summed (BERT, RoBERTa, ALBERT, UniLM)."""
    _, parts, target_ids, target_nll = token_and_sentence_parts(model, batch, token_objective, sentence)
    return combine(model.objective_weights, parts, target_ids, target_nll)

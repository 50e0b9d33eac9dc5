"""The vocabulary projection and its cross-entropy in chunks of rows, so the full (N, V) logits are never kept.

`chunked_vocab_loss(x, weight, bias, targets)` is the mean of -log softmax(x W^T + b)[target] over the N rows, and
each row's negative log-likelihood. It follows the fused linear cross-entropy of Liger-Kernel (Hsu et al. 2024,
"Liger Kernel: Efficient Triton Kernels for LLM Training") and the idea of Cut Your Losses (Wijmans et al. 2024):
the rows go through the projection a chunk at a time; for each chunk the forward pass computes the logits, their
log-sum-exp, the target's log-probability, and at once the chunk's gradient (softmax minus the one-hot target,
divided by N) pushed back through the projection into dL/dx, dL/dW and dL/db. The backward pass only scales these by
the incoming gradient, so no logits are stored for it and none are recomputed: the memory of the logits drops from
N x V to chunk x V at no extra matrix FLOPs.

Deviations, stated: plain torch (no Triton kernel), so each chunk's softmax and its gradient are separate kernels; the
gradient is computed in the forward pass, which assumes the returned mean is used linearly (as every loss of the lab
uses it: a weighted sum of parts); while `torch.compile` traces, the plain projection and loss are used instead
(the chunk loop's length depends on the data, and the compiler fuses the plain version itself).

Worked example (2 rows, a vocabulary of 3, one chunk of 1 row: the same numbers as the plain loss):

>>> x, w = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
>>> mean, nll = chunked_vocab_loss(x, w, None, torch.tensor([0, 1]), chunk_rows=1)
>>> plain = F.cross_entropy(x @ w.T, torch.tensor([0, 1]), reduction="none")
>>> torch.allclose(nll, plain), torch.allclose(mean, plain.mean())
(True, True)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

# the logits of one chunk hold at most this many values (fp32: 256 MiB), whatever the vocabulary
CHUNK_VALUES = 2**26


def chunk_rows_for(vocab_size: int) -> int:
    """Rows per chunk for a vocabulary: CHUNK_VALUES / V, at least 1.

    >>> chunk_rows_for(50257), chunk_rows_for(10**9)
    (1335, 1)
    """
    return max(1, CHUNK_VALUES // max(1, vocab_size))


class _ChunkedVocabLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, targets, chunk_rows):  # x (N, E), weight (V, E), bias (V,) or None, targets (N,)
        N = x.shape[0]
        nll = torch.empty(N, dtype=torch.float32, device=x.device)  # (N,)
        grad_x = torch.empty_like(x) if ctx.needs_input_grad[0] else None  # (N, E)
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if ctx.needs_input_grad[1] else None  # (V, E)
        grad_bias = (torch.zeros_like(bias, dtype=torch.float32)
                     if bias is not None and ctx.needs_input_grad[2] else None)  # (V,)
        scale = 1.0 / max(N, 1)
        for start in range(0, N, chunk_rows):
            rows = slice(start, min(start + chunk_rows, N))
            x_chunk, target_chunk = x[rows], targets[rows]  # (C, E), (C,)
            logits = F.linear(x_chunk, weight, bias).float()  # (C, V), in fp32 as the plain loss reads it
            log_probs = logits.log_softmax(dim=-1)  # (C, V)
            nll[rows] = -log_probs.gather(1, target_chunk.unsqueeze(1)).squeeze(1)  # (C,)
            grad_logits = log_probs.exp_()  # (C, V): softmax, in place of the log-probabilities
            grad_logits[torch.arange(grad_logits.shape[0], device=x.device), target_chunk] -= 1.0
            grad_logits.mul_(scale)  # d mean / d logits
            grad_logits = grad_logits.to(x.dtype if not torch.is_autocast_enabled(x.device.type)
                                         else torch.get_autocast_dtype(x.device.type))
            if grad_x is not None:
                grad_x[rows] = (grad_logits @ weight.to(grad_logits.dtype)).to(x.dtype)  # (C, E)
            if grad_weight is not None:
                grad_weight += (grad_logits.T @ x_chunk.to(grad_logits.dtype)).float()  # (V, E)
            if grad_bias is not None:
                grad_bias += grad_logits.float().sum(dim=0)  # (V,)
        ctx.save_for_backward(grad_x, grad_weight, grad_bias)
        ctx.weight_dtype = weight.dtype
        ctx.mark_non_differentiable(nll)
        return nll.sum() * scale, nll

    @staticmethod
    def backward(ctx, grad_mean, grad_nll):  # grad_nll is None: the row losses carry no gradient
        grad_x, grad_weight, grad_bias = ctx.saved_tensors
        scale = grad_mean.to(torch.float32)
        return (None if grad_x is None else grad_x * scale.to(grad_x.dtype),
                None if grad_weight is None else (grad_weight * scale).to(ctx.weight_dtype),
                None if grad_bias is None else (grad_bias * scale).to(ctx.weight_dtype), None, None)


def chunked_vocab_loss(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, targets: torch.Tensor,
                       chunk_rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x (N, E) rows to project, weight (V, E), bias (V,) or None, targets (N,) long -> (mean NLL with its gradient,
    the rows' NLL (N,) fp32 without). N = 0 gives an exact, graph-connected 0 (as losses.masked_mean)."""
    if x.shape[0] == 0 or torch.compiler.is_compiling():
        nll = F.cross_entropy(F.linear(x, weight, bias).float(), targets, reduction="none")  # (N,)
        return nll.sum() / max(x.shape[0], 1), nll.detach()
    return _ChunkedVocabLoss.apply(x, weight, bias, targets, chunk_rows or chunk_rows_for(weight.shape[0]))

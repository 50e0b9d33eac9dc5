"""Model FLOPs per training token, and MFU (model FLOPs utilisation) against the device's peak.

MFU is the measure that PaLM (Chowdhery et al. 2022, appendix B) introduced and nanoGPT reports: the FLOPs the model
*needs* per second (FLOPs per token x tokens per second), divided by the hardware's peak for the dtype in use.
Rematerialisation (activation checkpointing) does not count, so MFU compares training setups honestly.

How the lab counts, for every family alike: one real training batch of the run goes through a forward and backward
pass under torch's own `FlopCounterMode`, which adds up the FLOPs of every matrix product the step actually performs:

- the streams the family really runs: XLNet's and MPNet's query rows next to the content rows, MASS's and T5's
  encoder, decoder and cross-attention, ELECTRA's generator *and* discriminator, ALBERT's one shared block once per
  layer it is applied to (so ALBERT costs what BERT costs, although it has a ninth of the parameters);
- the vocabulary projection only for the rows that carry a target (the lab gathers them first: MLM families pay for
  ~15% of the rows, not all of them);
- attention as the dense Tq x Tk rectangle each SDPA call computes (4 * d * Tq * Tk forward), whatever the mask: the
  convention of PaLM's and nanoGPT's MFU, in which a causal mask is not halved. A UniLM seq2seq, GLM or XLNet mask
  therefore costs what a full mask of the same shape costs, as it does for the kernels.

FLOPs per token = the step's FLOPs / the tokens the step fed the model (encoder plus decoder inputs, as the engine's
tokens/s counts them). The backward pass is counted as run: twice the forward for every matrix product, attention
included (torch's own formula for flash-attention backward adds the recomputed probabilities, which is
rematerialisation; `_attention_flops` counts it the PaLM way). On a CPU, SDPA dispatches to
`_scaled_dot_product_flash_attention_for_cpu`, which torch's counter does not know; it is registered with the
standard SDPA formula, so the CPU and CUDA counts agree.

Worked example: GPT-2 124M's analytic count (nanoGPT's `estimate_mfu`: 6N + 12 L H T per token) and MFU at 100k
tokens/s on an A100's bf16 peak:

>>> round(analytic_flops_per_token(n_params=85_000_000, n_layers=12, d_model=768, seq_len=1024) / 1e6, 1)
623.2
>>> round(mfu(623.2e6, tokens_per_s=100_000, peak_flops=312e12), 3)
0.2
>>> peak_flops("NVIDIA H100 80GB HBM3", "bf16") / 1e12, peak_flops("NVIDIA H100 PCIe", "bf16") / 1e12
(989.0, 756.0)
>>> peak_flops("cpu", "fp32") is None
True
>>> device_peak(torch.device("cuda"), "bf16", device_name="NVIDIA A100-SXM4-80GB").source
"NVIDIA's data sheet for the A100 (bf16, dense)"

Where the table has no row (every CPU, Apple GPUs, GPUs missing from it), the peak is the device's own, measured by
a short matmul probe in the run's precision and cached per machine in the lab home
(lab_models/training/matmul_probe.py); `Peak.source` says which way it was obtained.

Deviation from PaLM's formula: PaLM counts 6N for every parameter (which is wrong for ALBERT's shared layers and for
MLM heads that project only some rows) plus 12 L H Q T for attention; the lab counts what runs instead, so its
numbers equal PaLM's for GPT-2 (tested) and differ where the families really differ.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils import flop_counter

from lab_models.messages import LabError, Message
from lab_models.training.matmul_probe import MatmulPeaks

logger = logging.getLogger(__name__)

# Dense (no sparsity) peak TFLOPs per second from NVIDIA's data sheets, by a substring of the CUDA device name.
# The first matching row wins, so the more specific names come first. "fp32" is the plain FP32 rate (torch does not
# use TF32 for matmuls unless asked); "bf16" the tensor-core rate with FP32 accumulation.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"bf16": 756.0, "fp32": 51.0}),
    ("H100 NVL", {"bf16": 835.0, "fp32": 60.0}),
    ("H100", {"bf16": 989.0, "fp32": 67.0}),  # SXM5 (the "80GB HBM3" name)
    ("H200", {"bf16": 989.0, "fp32": 67.0}),
    ("GH200", {"bf16": 989.0, "fp32": 67.0}),
    ("B200", {"bf16": 2250.0, "fp32": 80.0}),
    ("A100", {"bf16": 312.0, "fp32": 19.5}),
    ("L40S", {"bf16": 362.0, "fp32": 91.6}),
    ("L4", {"bf16": 121.0, "fp32": 30.3}),
    ("A10G", {"bf16": 70.0, "fp32": 31.2}),
    ("A10", {"bf16": 125.0, "fp32": 31.2}),
    ("RTX 4090", {"bf16": 165.2, "fp32": 82.6}),
    ("RTX 3090", {"bf16": 71.0, "fp32": 35.6}),
)
DTYPES = ("bf16", "fp32")


def peak_flops(device_name: str, dtype: str) -> float | None:
    """The device's dense peak FLOPs/s for `dtype` ("bf16" or "fp32"), or None when the device is not in the table
    (every CPU, Apple GPUs, GPUs not listed): MFU is then "unknown"."""
    if dtype not in DTYPES:
        raise LabError("unknown dtype {dtype!r}: choose one of {dtypes}", dtype=dtype, dtypes=', '.join(DTYPES))
    for fragment, peaks in PEAK_TFLOPS:
        if fragment.lower() in str(device_name).lower():
            return peaks[dtype] * 1e12
    return None


def table_row(device_name: str) -> str | None:
    """The PEAK_TFLOPS fragment that matches `device_name` ("A100" for "NVIDIA A100-SXM4-80GB"), or None."""
    for fragment, _ in PEAK_TFLOPS:
        if fragment.lower() in str(device_name).lower():
            return fragment
    return None


@dataclass(frozen=True)
class Peak:
    """The peak FLOPs/s MFU divides by, and how it was obtained (for the run's log and the Train tab)."""

    flops: float | None  # None: unknown (no table row and no probe)
    source: Message  # "NVIDIA's data sheet for the H100 (bf16, dense)", "a 1024 x 1024 bf16 matmul probe on ...", ...
    kind: str  # "table", "probe" or "unknown"

    def to_dict(self) -> dict:
        return {"peak_flops": self.flops, "peak_source": self.source, "peak_kind": self.kind}


def device_peak(device: torch.device, dtype: str, peaks: Callable[[], MatmulPeaks] | None = None, *,
                device_name: str | None = None) -> Peak:
    """The device's peak for `dtype`: NVIDIA's data sheet where the GPU is in PEAK_TFLOPS, else `peaks()` (the
    cached matmul probe, lab_models/training/matmul_probe.py), else unknown."""
    if dtype not in DTYPES:
        raise LabError("unknown dtype {dtype!r}: choose one of {dtypes}", dtype=dtype, dtypes=', '.join(DTYPES))
    if device.type == "cuda":
        name = device_name or torch.cuda.get_device_name(device)
        row = table_row(name)
        if row is not None:
            return Peak(peak_flops(name, dtype), Message("NVIDIA's data sheet for the {row} ({dtype}, dense)", row=row,
                                                         dtype=dtype), "table")
    if peaks is None:
        return Peak(None, Message("unknown: no data-sheet row and no matmul probe"), "unknown")
    probe = peaks()
    return Peak(probe.flops(dtype), probe.describe(dtype), "probe")


def device_peak_flops(device: torch.device, dtype: str) -> float | None:
    """`peak_flops` for a torch device from the data-sheet table alone (None for a CPU, MPS or a GPU not listed;
    `device_peak` with a probe knows those)."""
    return device_peak(device, dtype).flops


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation in [0, 1]: the FLOPs/s the model needs over the peak (None when the peak is unknown)."""
    if not peak_flops or flops_per_token <= 0 or tokens_per_s < 0:
        return None
    return flops_per_token * tokens_per_s / peak_flops


def analytic_flops_per_token(n_params: int, n_layers: int, d_model: int, seq_len: int) -> float:
    """PaLM's / nanoGPT's estimate for a decoder-only model: 6N (forward and backward through every weight) plus
    12 * L * d_model * T (attention's two matrix products, forward and backward). N excludes the embeddings."""
    return 6.0 * n_params + 12.0 * n_layers * d_model * seq_len


def _sdpa_forward(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def _sdpa_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    # twice the forward: the gradients of both matrix products. torch's own formula adds the recomputation of the
    # attention probabilities that flash kernels do (rematerialisation, which MFU does not count).
    return 2 * flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def _attention_flops() -> dict:
    """SDPA's kernels counted the PaLM way: the CPU kernels torch's counter does not know, and every backward
    kernel at twice its forward."""
    ops = torch.ops.aten
    forward = ("_scaled_dot_product_flash_attention_for_cpu",)
    backward = ("_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_flash_attention_backward",
                "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_cudnn_attention_backward")
    mapping = {getattr(ops, name): _sdpa_forward for name in forward if hasattr(ops, name)}
    mapping.update({getattr(ops, name): _sdpa_backward for name in backward if hasattr(ops, name)})
    return mapping


def count_step_flops(loss_fn, batch, autocast=None) -> int:
    """The FLOPs of one forward (under `autocast`, a context manager, when given) and backward pass of
    `loss_fn(batch)` (a LossOutput with `.total`). The gradients it leaves behind are the caller's to drop."""
    counter = flop_counter.FlopCounterMode(display=False, custom_mapping=_attention_flops())
    with counter:
        with autocast if autocast is not None else contextlib.nullcontext():
            out = loss_fn(batch)
        out.total.backward()
    return int(counter.get_total_flops())


def training_flops_per_token(model: torch.nn.Module, batch, tokens: int, autocast=None) -> float:
    """FLOPs per token of one training step of `model` on `batch` (see the module docstring for what is counted).

    `tokens`: the tokens the batch feeds the model (lab_models.training.engine.count_tokens). The model's gradients are
    set to None afterwards and the global RNG is restored, so the run's trajectory does not change.
    """
    if tokens <= 0:
        raise LabError("a batch must feed at least one token to count FLOPs per token, got {tokens}", tokens=tokens)
    was_training = model.training
    model.train()
    try:
        with torch.random.fork_rng(devices=[batch.input_ids.device] if batch.input_ids.is_cuda else []):
            flops = count_step_flops(model.loss, batch, autocast)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return flops / tokens

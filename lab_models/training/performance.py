"""The fast path of training: precision, fused AdamW, `torch.compile`, FlexAttention, gradient accumulation,
activation checkpointing and batch prefetching, each behind one setting of `PerformanceConfig`.

None of these change *what* a family computes (its masks, targets and losses); they change how fast and in how much
memory it is computed. The settings are saved in config.json ("train" -> "performance") with every run, and what they
resolved to on the device (the precision that ran and why) in config.json "performance_used".

| setting | default ("auto") | what it does |
| --- | --- | --- |
| `precision` | bf16 autocast on CUDA and on a CPU with native bf16 (confirmed by a matmul probe), fp32 elsewhere | matmuls and attention in bf16 with fp32 weights and optimizer state (Micikevicius et al. 2018's mixed precision, without loss scaling: bf16 has fp32's range) |
| `fused_adamw` | on for CUDA and the CPU | torch's fused AdamW kernel: one pass over every parameter instead of a loop of a dozen elementwise ops per tensor (on a CPU the loop was a quarter of a `small` step) |
| `compile` | off | `torch.compile` (inductor); compile time is measured before step 1 and reported apart from the step time (`compile_s` in the first metrics row) |
| `compile_scope` | `blocks` | with `compile`: `blocks` compiles every Transformer block apart; `model` compiles the whole training forward pass (embeddings, masks, blocks, the vocabulary projection and the loss) as one graph. ten of the thirteen Transformer families trace without a graph break; ELECTRA breaks where it seeds and draws its generator's samples, XLNet and MPNet where their two streams' joined mask is read back (tests/training/test_compiled_step.py) |
| `attention` | `sdpa` | `flex`: FlexAttention with a block mask built once per batch from the family's boolean mask (skips fully masked tiles of the structured masks: UniLM's seq2seq prefix, GLM's Part A/B, MASS's decoder); CUDA and `compile` only, as FlexAttention has no CPU backward. Streams with a relative position bias (T5, MPNet) or XLNet's relative attention keep their own path |
| `vocab_loss` | `plain` | `chunked`: the vocabulary projection and its cross-entropy a chunk of rows at a time, with the gradient computed in the forward pass (nn/vocab_loss.py, after Liger-Kernel's fused linear cross-entropy), so the (N, V) logits are never kept: GPT-2's 16 x 1024 rows over 50,257 words are 3.3 GB of fp32 logits. ELECTRA's generator keeps its logits (it samples from them) |
| `grad_accum` | 1 | K micro-batches per optimizer step: the effective batch is K x batch_size (the paper batch sizes on one GPU) |
| `activation_checkpointing` | off | recompute each block's activations in the backward pass instead of keeping them (for `base` on small GPUs; about a third more compute) |
| `prefetch` | on for CUDA | build and pin the next step's batch in a background thread while the device computes the current one |

Precision on the CPU. A CPU with AVX-512 BF16 or AMX-BF16 (recent Xeons and EPYCs) multiplies bf16
matrices natively, 2 to 7 times as fast as fp32; elsewhere torch emulates bf16 (converting around every product),
which is correct but slower than fp32. So `auto` asks torch which instruction sets the CPU has
(lab_models/training/matmul_probe.py) and confirms with a one-second matmul probe, cached per machine in the lab home,
that bf16 is at least MIN_BF16_SPEEDUP times fp32 there; then it picks bf16 autocast for every model whose matrix
products are big enough to pay for autocast's casts (MIN_BF16_FLOPS_PER_TOKEN: the small preset and up), else fp32.
`precision=bf16` is accepted on any CPU, with a warning where bf16 is emulated. The optimizer's master weights and moments stay fp32
either way: autocast casts copies of the weights for each product, never the parameters themselves.

On the CPU the other defaults are the plain path (plain AdamW, SDPA, no prefetch thread, which would compete with
the compute threads for the same cores).

Deviation, stated: the defaults of `compile` and `attention` are off/`sdpa` until they are measured on a GPU
(`benchmarks/bench_gpu.py` prints both ways); docs/speed.md gives the figures where they were measured.

Worked example (`peaks` stands in for the cached probe: 441 against 201 GFLOP/s, an EPYC with AVX-512 BF16):

>>> cfg = PerformanceConfig.from_dict({"grad_accum": 4, "precision": "fp32"})
>>> cfg.grad_accum, cfg.resolved_precision(torch.device("cuda")), cfg.resolved_precision(torch.device("cpu"))
(4, 'fp32', 'fp32')
>>> PerformanceConfig().resolved_precision(torch.device("cuda")), PerformanceConfig().uses_fused_adamw(torch.device("mps"))
('bf16', False)
>>> peaks = lambda: MatmulPeaks("cpu", "EPYC", "key", 1024, 201e9, 441e9, {"fp32": 5, "bf16": 5}, 0.0)
>>> choice = choose_precision("auto", torch.device("cpu"), peaks, features=("avx512_bf16",))
>>> choice.precision, choice.why
('bf16', 'native_bf16')
>>> choose_precision("auto", torch.device("cpu"), peaks, features=("avx512_bf16",), flops_per_token=0.9e6).why
'model_too_small'
>>> choose_precision("auto", torch.device("cpu"), peaks, features=()).precision
'fp32'
>>> choose_precision("bf16", torch.device("cpu"), peaks, features=()).emulated
True
>>> parse_performance_overrides(["grad_accum=2", "compile=true"])
{'grad_accum': 2, 'compile': True}
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from lab_models.messages import LabError, Message
from lab_models.nn.backbone import Backbone, Block
from lab_models.training.matmul_probe import MatmulPeaks, describe_features, native_bf16_features

logger = logging.getLogger(__name__)

PRECISIONS = ("auto", "bf16", "fp32")
FUSED_ADAMW_DEVICES = ("cuda", "cpu")  # where fused_adamw=auto turns it on (measured: bench_train_speed.py)
ATTENTION_BACKENDS = ("sdpa", "flex")
COMPILE_SCOPES = ("blocks", "model")
VOCAB_LOSSES = ("plain", "chunked")
# the backend of compile=true; the tests trace with "aot_eager" (the same graphs, without inductor's minute of C++ build)
COMPILE_BACKEND = "inductor"
# auto picks bf16 on a native-bf16 CPU only where the probe's bf16 matmul is at least this much faster than fp32's:
# a margin over the probe's noise, and over autocast's own cost (a bf16 copy of every weight for each step)
MIN_BF16_SPEEDUP = 1.2
# ... and only for models whose matrix products are big enough to pay for autocast's casts (a bf16 copy of every
# activation entering a product and of every weight, per step): measured on an AMX Xeon pinned to 2 cores, quiet
# (bf16 / fp32 tokens/s): the tiny preset (0.7 to 1.0 MFLOPs per token) 0.84 (BERT) to 0.99 (GPT), the small preset
# (21 to 27 MFLOPs per token) 1.53 (GPT) and 1.64 (BERT). The threshold lies between them.
MIN_BF16_FLOPS_PER_TOKEN = 4e6
# why a precision was chosen: the `why` of PrecisionChoice (the page translates these codes; train.log has `reason`)
PRECISION_REASONS = ("requested", "cuda", "native_bf16", "model_too_small", "bf16_not_faster", "not_probed",
                     "no_native_bf16", "no_bf16_device")


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run computes in on its device, and why (saved in config.json "performance_used")."""

    precision: str  # "bf16" (autocast; fp32 master weights) or "fp32"
    requested: str  # the setting: "auto", "bf16" or "fp32"
    why: str  # one of PRECISION_REASONS
    reason: str  # one English sentence, for train.log
    emulated: bool = False  # bf16 on a CPU without native bf16: correct, but slower than fp32
    bf16_speedup: float | None = None  # the probe's bf16 / fp32 matmul speed, where it was asked

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def choose_precision(requested: str, device: torch.device, peaks: Callable[[], MatmulPeaks] | None = None, *,
                     features: tuple[str, ...] | None = None, flops_per_token: float | None = None) -> PrecisionChoice:
    """What `precision=requested` runs as on `device`. `peaks()` gives the cached matmul probe (asked only on a CPU
    with native bf16 under auto); `features` the CPU's native bf16 instruction sets (default: torch's answer);
    `flops_per_token` the model's training FLOPs per token (None: not counted yet, the rule is described instead)."""
    if requested not in PRECISIONS:
        raise LabError("unknown precision {requested!r}: choose one of {precisions}",
                       requested=requested, precisions=', '.join(PRECISIONS))
    if device.type == "cpu" and requested != "fp32":
        features = native_bf16_features() if features is None else tuple(features)
        if not features:
            if requested == "bf16":
                return PrecisionChoice("bf16", requested, "requested", emulated=True, reason=(
                    "bf16 autocast as requested; this CPU has no native bf16 (no AVX-512 BF16 or AMX), so torch "
                    "emulates it: correct, but usually slower than fp32 (precision=auto would pick fp32)"))
            return PrecisionChoice("fp32", requested, "no_native_bf16", reason=(
                "fp32: this CPU has no native bf16 (no AVX-512 BF16 or AMX), where bf16 would be emulated and slower"))
        if requested == "bf16":
            return PrecisionChoice("bf16", requested, "requested", reason=(
                f"bf16 autocast as requested; this CPU computes bf16 natively ({describe_features(features)})"))
        if flops_per_token is not None and flops_per_token < MIN_BF16_FLOPS_PER_TOKEN:
            return PrecisionChoice("fp32", requested, "model_too_small", reason=(
                f"fp32: this CPU computes bf16 natively ({describe_features(features)}), but this model's matrix "
                f"products are too small to pay for autocast's casts ({flops_per_token / 1e6:.1f} MFLOPs per "
                f"token, under {MIN_BF16_FLOPS_PER_TOKEN / 1e6:.0f}; the tiny preset trains 0.84 to 0.99x as fast "
                "in bf16)"))
        probe = peaks() if peaks is not None else None
        if probe is None:
            return PrecisionChoice("fp32", requested, "not_probed", reason=(
                f"fp32: this CPU reports native bf16 ({describe_features(features)}) but no matmul probe confirmed it"))
        speedup = probe.bf16_speedup
        facts = f"{speedup:.1f}x fp32 ({probe.bf16 / 1e9:,.0f} vs {probe.fp32 / 1e9:,.0f} GFLOP/s)"
        if speedup >= MIN_BF16_SPEEDUP:
            return PrecisionChoice("bf16", requested, "native_bf16", bf16_speedup=speedup, reason=(
                f"bf16 autocast: this CPU computes bf16 natively ({describe_features(features)}) and a bf16 matmul "
                f"ran {facts} in the probe"))
        return PrecisionChoice("fp32", requested, "bf16_not_faster", bf16_speedup=speedup, reason=(
            f"fp32: this CPU reports native bf16 ({describe_features(features)}) but a bf16 matmul ran only {facts} "
            "in the probe"))
    if requested != "auto":
        return PrecisionChoice(requested, requested, "requested", reason=f"{requested} as requested")
    if device.type == "cuda":
        return PrecisionChoice("bf16", requested, "cuda", reason="bf16 autocast: the default on CUDA")
    return PrecisionChoice("fp32", requested, "no_bf16_device", reason=f"fp32: the default on {device.type}")


@dataclass(frozen=True)
class PerformanceConfig:
    precision: str = "auto"  # "auto" = bf16 autocast on CUDA and on a CPU with native bf16, fp32 elsewhere
    fused_adamw: bool | None = None  # None = on for CUDA and the CPU (torch >= 2.4 has a CPU kernel)
    compile: bool = False  # torch.compile; off until measured on a GPU (see the module docstring)
    compile_scope: str = "blocks"  # "blocks": each Transformer block apart; "model": the whole forward pass and loss
    attention: str = "sdpa"  # "flex" = FlexAttention block masks (CUDA + compile)
    vocab_loss: str = "plain"  # "chunked" = projection + cross-entropy in chunks of rows (nn/vocab_loss.py)
    grad_accum: int = 1  # micro-batches per optimizer step
    activation_checkpointing: bool = False
    prefetch: bool | None = None  # None = on for CUDA (a background thread would compete for a CPU's cores)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise LabError("unknown precision {precision!r}: choose one of {precisions}",
                           precision=self.precision, precisions=', '.join(PRECISIONS))
        if self.compile_scope not in COMPILE_SCOPES:
            raise LabError("unknown compile scope {scope!r}: choose one of {scopes}",
                           scope=self.compile_scope, scopes=', '.join(COMPILE_SCOPES))
        if self.vocab_loss not in VOCAB_LOSSES:
            raise LabError("unknown vocab_loss {vocab_loss!r}: choose one of {choices}",
                           vocab_loss=self.vocab_loss, choices=', '.join(VOCAB_LOSSES))
        if self.attention not in ATTENTION_BACKENDS:
            raise LabError("unknown attention backend {attention!r}: choose one of "
                           "{attention_backends}",
                           attention=self.attention, attention_backends=', '.join(ATTENTION_BACKENDS))
        if isinstance(self.grad_accum, bool) or not isinstance(self.grad_accum, int) or self.grad_accum < 1:
            raise LabError("grad_accum must be a whole number >= 1, got {grad_accum!r}", grad_accum=self.grad_accum)
        for name in ("compile", "activation_checkpointing"):
            if not isinstance(getattr(self, name), bool):
                raise LabError("{name} must be true or false, got {value!r}", name=name, value=getattr(self, name))
        for name in ("fused_adamw", "prefetch"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise LabError("{name} must be true, false or auto, got {value!r}",
                               name=name, value=getattr(self, name))

    # ---- resolution against a device ---------------------------------------------------------------------------

    def precision_choice(self, device: torch.device, peaks: Callable[[], MatmulPeaks] | None = None,
                         flops_per_token: float | None = None) -> PrecisionChoice:
        """What this run's precision resolves to on `device` (`choose_precision`)."""
        return choose_precision(self.precision, device, peaks, flops_per_token=flops_per_token)

    def resolved_precision(self, device: torch.device, peaks: Callable[[], MatmulPeaks] | None = None) -> str:
        """"bf16" or "fp32". On a CPU with native bf16, `auto` needs `peaks` (the cached matmul probe) to say bf16."""
        return self.precision_choice(device, peaks).precision

    def uses_fused_adamw(self, device: torch.device) -> bool:
        return device.type in FUSED_ADAMW_DEVICES if self.fused_adamw is None else self.fused_adamw

    def uses_prefetch(self, device: torch.device) -> bool:
        return device.type == "cuda" if self.prefetch is None else self.prefetch

    def check_device(self, device: torch.device) -> None:
        """ValueError for a combination the device cannot run."""
        if self.attention == "flex" and device.type != "cuda":
            raise LabError("attention=flex needs a CUDA GPU (FlexAttention has no CPU backward): use "
                           "attention=sdpa on this device")
        if self.attention == "flex" and not self.compile:
            raise LabError("attention=flex needs compile=true (uncompiled FlexAttention runs a slow reference "
                           "path)")

    def autocast(self, device: torch.device, precision: str | None = None):
        """The autocast context of a training or evaluation step on `device` in `precision` (default: what this
        config resolves to without a probe)."""
        return autocast_context(device, precision or self.resolved_precision(device))

    # ---- (de)serialisation -------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict | None) -> "PerformanceConfig":
        """From config.json's dict; unknown keys raise ValueError (a typo should not be silently dropped)."""
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise LabError("unknown performance setting(s) {unknown}: choose from {known}",
                           unknown=', '.join(unknown), known=', '.join(known))
        return cls(**values)


def autocast_context(device: torch.device, precision: str):
    """bf16 autocast for "bf16" (the weights, the gradients and AdamW's state stay fp32), nothing for "fp32"."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _parse_value(name: str, text: str):
    lowered = text.strip().lower()
    field_type = {f.name: f.type for f in dataclasses.fields(PerformanceConfig)}[name]
    if "bool" in str(field_type):
        if lowered in ("auto", "none") and "None" in str(field_type):
            return None
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise LabError("--perf {name} must be true or false{or_auto}, "
                       "got {text!r}",
                       name=name, or_auto=Message(" or auto") if 'None' in str(field_type) else '', text=text)
    if "int" in str(field_type):
        try:
            return int(text)
        except ValueError:
            raise LabError("--perf {name} must be a whole number, got {text!r}", name=name, text=text) from None
    return text.strip()


def parse_performance_overrides(items: list[str]) -> dict:
    """`--perf KEY=VALUE` items -> a dict of PerformanceConfig fields (checked by building the config)."""
    known = [f.name for f in dataclasses.fields(PerformanceConfig)]
    values: dict = {}
    for item in items:
        if "=" not in item:
            raise LabError("--perf takes KEY=VALUE (e.g. grad_accum=4), got {item!r}", item=item)
        name, text = item.split("=", 1)
        name = name.strip()
        if name not in known:
            raise LabError("unknown --perf setting {name!r}: choose from {known}", name=name, known=', '.join(known))
        values[name] = _parse_value(name, text)
    PerformanceConfig(**values)  # validates the combination of values
    return values


# ---- applying the settings to a model ----------------------------------------------------------------------------


def _blocks(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, Block)]


def enable_activation_checkpointing(model: nn.Module) -> int:
    """Recompute every Transformer block in the backward pass. The state dict keeps its names (torch's checkpoint
    wrapper strips its own prefix), so checkpoints are unchanged. Returns the number of blocks wrapped."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl,
                                                                             apply_activation_checkpointing,
                                                                             checkpoint_wrapper)


    n = len(_blocks(model))
    apply_activation_checkpointing(
        model, check_fn=lambda module: isinstance(module, Block),
        checkpoint_wrapper_fn=lambda module: checkpoint_wrapper(module, checkpoint_impl=CheckpointImpl.NO_REENTRANT))
    return n


def compile_blocks(model: nn.Module) -> int:
    """`torch.compile` each distinct Transformer block in place (`nn.Module.compile`): every stream, the decoder and
    ALBERT's shared block go through compiled code, while the batch-dependent mask preparation stays eager. Returns
    the number of blocks compiled."""
    blocks = _blocks(model)
    for block in blocks:
        block.compile(backend=COMPILE_BACKEND)
    return len(blocks)


def set_attention_backend(model: nn.Module, backend: str) -> None:
    """Every backbone of `model` (ELECTRA has two) prepares its masks for `backend` ("sdpa" or "flex")."""

    if backend not in ATTENTION_BACKENDS:
        raise LabError("unknown attention backend {backend!r}: choose one of {attention_backends}",
                       backend=backend, attention_backends=', '.join(ATTENTION_BACKENDS))
    for module in model.modules():
        if isinstance(module, Backbone):
            module.flex_attention = backend == "flex"


def set_chunked_vocab_loss(model: nn.Module, chunked: bool) -> int:
    """Every backbone of `model` computes its vocabulary loss in chunks (or not); returns how many backbones."""
    backbones = [module for module in model.modules() if isinstance(module, Backbone)]
    for backbone in backbones:
        backbone.chunked_vocab_loss = chunked
    return len(backbones)


def prepare_model(model: nn.Module, config: PerformanceConfig, device: torch.device) -> dict:
    """Apply the settings that change the model (activation checkpointing, attention backend, compile); returns
    what was done, for the run's log."""
    config.check_device(device)
    done: dict = {}
    if config.activation_checkpointing:
        done["checkpointed_blocks"] = enable_activation_checkpointing(model)
    if config.attention != "sdpa":
        set_attention_backend(model, config.attention)
        done["attention"] = config.attention
    if config.vocab_loss != "plain":
        done["chunked_vocab_loss"] = set_chunked_vocab_loss(model, True)
    if config.compile and config.compile_scope == "blocks":
        done["compiled_blocks"] = compile_blocks(model)
    elif config.compile:
        done["compiled"] = "the whole forward pass and loss"  # the engine compiles its forward (compile_forward)
    return done


# dynamo's settings for the whole-model graph: the gather of the rows that carry a target (a boolean index, whose size
# only the data knows) stays in the graph as a size-unknown operator instead of breaking it
WHOLE_MODEL_DYNAMO = dict(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True)


def compile_forward(forward: nn.Module) -> Callable:
    """`forward(batch) -> LossOutput` compiled whole (compile_scope="model"), called under WHOLE_MODEL_DYNAMO. The
    batch's masks must be prepared on the host (nn/attention.py's prepare_batch_masks, as the engine does), or their
    read-back breaks the graph."""
    compiled = torch.compile(forward, backend=COMPILE_BACKEND)

    def run(batch):
        with torch._dynamo.config.patch(**WHOLE_MODEL_DYNAMO):
            return compiled(batch)

    return run


def warm_up(model: nn.Module, batch, autocast, forward: Callable | None = None) -> float:
    """One forward and backward pass of `batch` (through `forward`, default `model.loss`) to trigger compilation, with
    the RNG restored and the gradients dropped (the run's trajectory does not change). Returns its wall time in
    seconds."""
    started = time.perf_counter()
    devices = [batch.input_ids.device] if batch.input_ids.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        with autocast:
            out = (forward or model.loss)(batch)
        out.total.backward()
    model.zero_grad(set_to_none=True)
    if batch.input_ids.is_cuda:
        torch.cuda.synchronize(batch.input_ids.device)
    return time.perf_counter() - started


class Prefetcher:
    """Builds (and pins) the next batch in one background thread while the device runs this one.

    `build(key)` must depend only on `key` (the engine's batches do: their generator is seeded from the seed, the
    step, the micro-step and the rank), so prefetching changes no batch. `get(key, following)` returns build(key),
    computed ahead when it was asked for in order, and starts building `following` (None at the end)."""

    def __init__(self, build: Callable[[Any], Any], pin: bool):
        self._build = build
        self._pin = pin
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-prefetch")
        self._pending: tuple[Any, concurrent.futures.Future] | None = None

    def _make(self, key):
        batch = self._build(key)
        return batch.pin_memory() if self._pin else batch

    def get(self, key, following=None):
        if self._pending is not None and self._pending[0] == key:
            batch = self._pending[1].result()
        else:
            if self._pending is not None:
                self._pending[1].cancel()
            batch = self._make(key)
        self._pending = None if following is None else (following, self._pool.submit(self._make, following))
        return batch

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

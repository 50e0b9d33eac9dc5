"""The training loop: model-agnostic, deterministic from a seed, and a generator of events.

The loop knows nothing about families. It needs a model with `loss(batch) -> LossOutput` (total, parts, target_ids,
target_nll; see lab_models/models/family.py) and a batch source with `train_batch(generator) -> Batch` and
`validation_batches(generators) -> list[Batch]` (lab_models/training/batches.py's `PackedBatches`). It yields events;
the caller (lab_models/training/run.py) turns them into metrics.jsonl rows, status.json and checkpoints, and may stop
between events:

    trainer = Trainer(model, batches, EngineConfig(steps=50, lr=1e-3, ...), device=device, byte_lengths=table)
    for event in trainer.run(should_stop=lambda: flag):
        StepEvent -> a metrics row (and a checkpoint when event.checkpoint_due)
        EvalEvent -> a validation row; StopEvent -> checkpoint and exit

What it does, following nanoGPT's loop and BERT/GPT-2 practice:
- AdamW (Loshchilov & Hutter 2019) with decoupled weight decay on matrices only: parameters with 2 or more
  dimensions (linear weights, embedding tables) decay; biases and LayerNorm gains (1-D) do not (BERT excludes
  "bias" and "LayerNorm.weight"; nanoGPT uses the same dim >= 2 rule). Fused AdamW on CUDA and the CPU.
- Learning rate: linear warmup over `warmup_steps`, then cosine decay to `min_lr_ratio * lr` at the last step
  (`schedule="cosine"`), or constant after warmup (`schedule="constant"`). BERT decays linearly; cosine is GPT-3's.
- Gradient clipping at global norm `grad_clip` (1.0, as BERT and GPT-2). bf16 autocast on CUDA and on a CPU with
  native bf16 (`precision=auto`, lab_models/training/performance.py); the weights and AdamW's state stay fp32.
- Evaluation every `eval_every` steps and at the last step, on fixed validation batches: the mean total loss and
  parts, the NLL of the main token targets per token (perplexity = exp of it, meaningful for causal LMs), and
  bits per byte = sum(target_nll) / ln 2 / sum(UTF-8 bytes of the target tokens), comparable across tokenizers.

Determinism. Steps are numbered from 1. The batch of step s on rank r is built with a torch.Generator seeded from
derive_seed(seed, "batch", s, r), and the global RNG (dropout, ELECTRA's sampling) is reseeded from
derive_seed(seed, "dropout", s, r) before the step. Nothing else is random, so a run restored from a checkpoint of
step k (weights and AdamW state, bit-exact through safetensors) repeats steps k+1.. exactly on the CPU, in fp32 and
in bf16 alike (within one precision: a run resumed in another precision goes on from the same weights but rounds differently). On
CUDA, non-deterministic kernels make resumes close rather than identical.

Reading back. A step on a GPU runs ahead of the host until the host needs a value from the device; each such read
empties the device's queue. So the engine builds every batch with `host_ready` (on the host, in the prefetch thread
on CUDA): the attention masks are prepared there (their pattern and empty rows are read from host memory) and the
rows that carry a target are found there as indices (batch.py's TARGET_ROWS); the backbones check the value ranges
of ids and positions on the first batch and trust the batch builder after it, until the run ends. An eager GPT or
BERT step then reads nothing back before the loss is logged; `compile_scope=model` (performance.py) compiles the
whole forward pass and loss as one graph for the families listed there.

Distributed. With `torch.distributed` initialised and world size > 1, the model is wrapped in
DistributedDataParallel (through a small module whose forward calls `model.loss`, so DDP's hooks run).
`find_unused_parameters` is the caller's choice (train.py probes one batch: True only if some trainable parameter
got no gradient; DDP then costs one extra graph traversal per step). Each rank draws its own
batches (the rank is in the seed); logged losses, evaluation sums and the stop flag are reduced across ranks, so
every rank stops at the same step.

Models and batch sources with a plan of their own (the RNN families, lab_models/models/rnn/common.py):
- `batches.train_batch_at(step, generator)`, when it exists, is called instead of `train_batch(generator)`: the batch
  may depend on the step (ULMFiT's stages, CVT's alternating labelled and unlabelled minibatches).
- `model.optimizer_groups(weight_decay)`, when it exists, gives the AdamW parameter groups (ULMFiT's layer groups)
  instead of `parameter_groups`, and `model.begin_step(step, config) -> StepPlan` (lab_models/models/rnn/common.py)
  gives each group's learning rate for the step (and fields for its metrics row, `StepEvent.record`). A group whose rate
  is 0 for a step is frozen for it: its gradients are dropped before clipping, so AdamW leaves its weights and moments
  untouched (gradual unfreezing). `StepEvent.lr` is then the highest group rate.
- A step may report only some objectives (CVT's labelled or unlabelled loss): each logged part is the mean over the
  steps of the interval that reported it, NaN (logged as null) when none did. Every rank must report the same parts
  at the same step (a step-based plan does).

Events are emitted every `log_every` steps, at checkpoint steps, at the last step and on a stop; an evaluation step
yields its StepEvent (marked `evaluation_follows`) and then its EvalEvent, also when the run is stopping there; each
emission reads the loss back from the device (one sync). A NaN/inf loss or gradient norm anywhere in the interval
raises `NonFiniteLossError` ("non-finite loss at step N: ...", N the first bad step) at the next emission, before any
checkpoint of the bad weights can be written (and lab_models/training/runs.py refuses to checkpoint non-finite weights
whatever the loss said). With
`on_nonfinite="skip"` a step whose loss or gradient norm is NaN/inf instead changes nothing (no AdamW update, no moment
update; one extra sync per step), is logged as a warning and listed in its metrics row's "skipped_steps"; more than
MAX_SKIPPED_IN_A_ROW such steps in a row fail the run as above.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

import torch
import torch.distributed as dist
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.batch import TARGET_ROWS, Batch, target_rows
from lab_models.nn.attention import prepare_batch_masks
from lab_models.nn.backbone import Backbone
from lab_models.objectives.losses import LossOutput
from lab_models.home import lab_home
from lab_models.training.flops import Peak, device_peak, mfu, training_flops_per_token
from lab_models.training.matmul_probe import MatmulPeaks, cached_matmul_peaks
from lab_models.training.performance import (PerformanceConfig, Prefetcher, autocast_context, compile_forward,
                                             prepare_model, warm_up)
from lab_models.training.faults import poisoned_loss

logger = logging.getLogger(__name__)

SCHEDULES = ("cosine", "constant")
NONFINITE_POLICIES = ("fail", "skip")
MAX_SKIPPED_IN_A_ROW = 10  # with on_nonfinite="skip": more non-finite steps than this in a row fail the run anyway
LN2 = math.log(2.0)


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


class BatchSource(Protocol):
    def train_batch(self, generator: torch.Generator) -> Batch: ...

    def validation_batches(self, generators: Callable[[int], torch.Generator]) -> list[Batch]: ...


@dataclass(frozen=True)
class EngineConfig:
    steps: int
    lr: float = 1e-3
    schedule: str = "cosine"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1  # cosine decays to this fraction of lr at the last step
    weight_decay: float = 0.01  # BERT's value
    betas: tuple[float, float] = (0.9, 0.98)  # RoBERTa's beta2 = 0.98: steadier than 0.999 at large lr / small batch
    eps: float = 1e-8
    grad_clip: float = 1.0  # 0 turns clipping off (the norm is still logged)
    eval_every: int = 0  # 0 = evaluate only at the last step
    log_every: int = 1
    checkpoint_every: int = 0  # 0 = no periodic checkpoints (the caller still gets StopEvent and the end)
    seed: int = 0
    on_nonfinite: str = "fail"  # "fail": stop the run at a NaN/inf loss; "skip": drop that step's update and go on

    def __post_init__(self):
        for name in ("steps", "log_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LabError("{name} must be a positive whole number, got {value!r}", name=name, value=value)
        for name in ("warmup_steps", "eval_every", "checkpoint_every", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise LabError("{name} must be a whole number >= 0, got {value!r}", name=name, value=value)
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise LabError("lr must be a positive number such as 3e-4, got {lr!r}", lr=self.lr)
        if self.on_nonfinite not in NONFINITE_POLICIES:
            raise LabError("on_nonfinite must be one of {nonfinite_policies}, got {on_nonfinite!r}",
                           nonfinite_policies=', '.join(NONFINITE_POLICIES), on_nonfinite=self.on_nonfinite)
        if self.schedule not in SCHEDULES:
            raise LabError("unknown schedule {schedule!r}: choose one of {schedules}",
                           schedule=self.schedule, schedules=', '.join(SCHEDULES))
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise LabError("min_lr_ratio must be in [0, 1], got {min_lr_ratio!r}", min_lr_ratio=self.min_lr_ratio)
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise LabError("weight_decay must be >= 0, got {weight_decay!r}", weight_decay=self.weight_decay)
        if not (math.isfinite(self.grad_clip) and self.grad_clip >= 0):
            raise LabError("grad_clip must be >= 0 (0 = off), got {grad_clip!r}", grad_clip=self.grad_clip)


def learning_rate(step: int, config: EngineConfig) -> float:
    """The learning rate of step `step` (1-based).

    >>> cfg = EngineConfig(steps=10, lr=1.0, warmup_steps=2, min_lr_ratio=0.0)
    >>> [round(learning_rate(s, cfg), 3) for s in (1, 2, 6, 10)]
    [0.5, 1.0, 0.5, 0.0]
    """
    warmup = config.warmup_steps
    if warmup and step <= warmup:
        return config.lr * step / warmup
    if config.schedule == "constant":
        return config.lr
    progress = min(1.0, (step - warmup) / max(1, config.steps - warmup))
    ratio = config.min_lr_ratio + (1.0 - config.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.lr * ratio


def derive_seed(*parts) -> int:
    """A 63-bit seed from any parts, stable across runs, processes and machines.

    >>> derive_seed(0, "batch", 1, 0) == derive_seed(0, "batch", 1, 0) != derive_seed(0, "batch", 2, 0)
    True
    """
    digest = hashlib.blake2b("|".join(map(repr, parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def init_seed(seed: int) -> int:
    """The seed a run's model is initialised with (`build_model(..., seed=init_seed(config.seed))`): the step-0
    model of a run, which the probes rebuild as their random-init control (lab_models/inference/probing.py).

    >>> init_seed(0) == init_seed(0) != init_seed(1)
    True
    """
    return derive_seed(seed, "init") & 0x7FFFFFFF


def generator_for(*parts) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(*parts))


def bits_per_byte(nll_nats: float, n_bytes: float) -> float:
    """Total NLL in nats over the UTF-8 bytes it predicted, in bits per byte (nan when there are no bytes).

    >>> round(bits_per_byte(3 * math.log(2), 4), 3)   # 3 bits of surprise spread over 4 bytes
    0.75
    """
    return nll_nats / LN2 / n_bytes if n_bytes > 0 else float("nan")


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: matrices decay, vectors (biases, LayerNorm gains) do not. Shared (tied) parameters once."""
    decay, no_decay = [], []
    for param in model.parameters():  # parameters() yields a tied tensor once
        if param.requires_grad:
            (decay if param.dim() >= 2 else no_decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def count_tokens(batch: Batch) -> int:
    """Input tokens a batch feeds the model (encoder plus decoder side)."""
    n = batch.input_ids.numel()
    if batch.decoder_input_ids is not None:
        n += batch.decoder_input_ids.numel()
    return n


@dataclass(frozen=True)
class StepEvent:
    step: int
    loss: float  # mean total loss over the steps since the last event (and over ranks)
    losses: dict[str, float]  # objective -> mean unweighted loss, likewise
    lr: float
    grad_norm: float  # before clipping, of the last step
    tokens_per_s: float
    elapsed_s: float  # wall time since the run began, across resumes
    tokens_seen: int  # input tokens trained on so far, all ranks
    checkpoint_due: bool = False
    evaluation_follows: bool = False  # an EvalEvent of this same step comes next: checkpoint after it, so that a kill
    # between the two never leaves a checkpoint whose step's evaluation is missing (a resume would skip it)
    record: dict = field(default_factory=dict)  # the model's StepPlan.record of the last step (stage, group rates)
    flops_per_token: float | None = None  # model FLOPs of one training token (lab_models/training/flops.py)
    mfu: float | None = None  # model FLOPs utilisation per device; None when the device's peak is unknown


@dataclass(frozen=True)
class EvalEvent:
    step: int
    loss: float
    losses: dict[str, float]
    nll_per_token: float  # mean NLL (nats) of the main token targets
    perplexity: float  # exp(nll_per_token): perplexity for causal LMs
    bits_per_byte: float
    targets: int  # how many target tokens were scored
    bytes: int  # their UTF-8 bytes
    elapsed_s: float


@dataclass(frozen=True)
class StopEvent:
    step: int  # the last completed step
    reason: str = "stop requested"


Event = StepEvent | EvalEvent | StopEvent


def host_ready(batch: Batch) -> Batch:
    """`batch` (on the host) with what a step would otherwise read back from its device found here, where reading
    waits for nothing: the attention masks prepared (nn/attention.py's prepare_batch_masks) and the rows that carry a
    target as indices (batch.py's TARGET_ROWS). The engine builds every training batch this way."""
    return dataclasses.replace(batch, attention=prepare_batch_masks(batch.attention),
                               extras={**batch.extras, TARGET_ROWS: target_rows(batch.targets)})


class _LossForward(nn.Module):
    """Routes DDP's forward to `model.loss`, so that DistributedDataParallel's hooks see the computation."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: Batch):
        return self.model.loss(batch)


@dataclass
class _Interval:
    """Sums since the last emitted event (kept on the device; read back once per event)."""

    steps: int = 0
    total: torch.Tensor | None = None
    parts: dict[str, torch.Tensor] = field(default_factory=dict)
    part_steps: dict[str, int] = field(default_factory=dict)  # how many steps of the interval reported each part
    finite: list[torch.Tensor] = field(default_factory=list)  # per counted step: was its loss finite? (on the device)
    finite_steps: list[int] = field(default_factory=list)  # the step number of each entry of `finite`
    skipped: list[int] = field(default_factory=list)  # steps whose update was dropped (on_nonfinite="skip")
    tokens: int = 0
    seconds: float = 0.0


def _mean_outputs(outputs: list) -> LossOutput:
    """One LossOutput for K micro-batches: the mean total and parts (for logging; each micro-batch already did its
    backward), and the targets of all of them."""

    k = len(outputs)
    parts = {name: sum(o.parts[name] for o in outputs if name in o.parts) /
             sum(1 for o in outputs if name in o.parts) for name in {n for o in outputs for n in o.parts}}
    return LossOutput(total=sum(o.total.detach() for o in outputs) / k, parts=parts,
                      target_ids=torch.cat([o.target_ids for o in outputs]),
                      target_nll=torch.cat([o.target_nll for o in outputs]))


def _distributed(world_size: int) -> bool:
    return world_size > 1 and dist.is_available() and dist.is_initialized()


class Trainer:
    """Owns the optimizer, the step counter and the DDP wrapper; `run` yields events until the last step."""

    def __init__(self, model: nn.Module, batches: BatchSource, config: EngineConfig, *,
                 device: torch.device | str = "cpu", byte_lengths: torch.Tensor | None = None,
                 rank: int = 0, world_size: int = 1, find_unused_parameters: bool = True,
                 performance: PerformanceConfig | None = None, home=None):
        self.model = model
        self.batches = batches
        self.config = config
        self.device = torch.device(device)
        self.rank = rank
        self.world_size = world_size
        self.byte_lengths = None if byte_lengths is None else byte_lengths.to(self.device)
        self.step = 0  # completed steps
        self.elapsed_before = 0.0  # seconds spent in earlier processes (restored from a checkpoint)
        self.tokens_seen = 0
        self._validation: list[Batch] | None = None
        self._part_names: list[str] | None = None
        self.performance = performance or PerformanceConfig()
        self.performance.check_device(self.device)
        self.home = home  # the lab home whose cache keeps the matmul probe (None: $PRETRAINING_LAB_HOME or ~)
        self._matmul_peaks: MatmulPeaks | None = None
        # provisional until measure_model() (the first run() calls it): precision=auto on a CPU with native bf16
        # depends on the model's FLOPs per token, and MFU's peak on the precision
        self.precision = self.performance.precision_choice(self.device)
        self.probe_tokens: int | None = None
        self.flops_per_token: float | None = None
        self.peak = Peak(None, "not measured yet", "unknown")
        self.peak_flops: float | None = None
        self._measured = False
        self._probe_batch: Batch | None = None
        self.compile_s: float | None = None
        self._prepared = False
        self._prefetcher: Prefetcher | None = None
        self.model.to(self.device)
        fused = self.performance.uses_fused_adamw(self.device)
        own_groups = getattr(model, "optimizer_groups", None)
        self._own_plan = callable(getattr(model, "begin_step", None))
        groups = own_groups(config.weight_decay) if callable(own_groups) else parameter_groups(model,
                                                                                                config.weight_decay)
        self._record: dict = {}
        self.last_step_skipped = False  # set by train_step (on_nonfinite="skip")
        self.optimizer = torch.optim.AdamW(groups, lr=config.lr,
                                           betas=tuple(config.betas), eps=config.eps,
                                           **({"fused": True} if fused else {}))
        self.forward = _LossForward(model)
        self._step_forward: Callable | None = None  # the compiled forward of compile_scope="model"
        self._inputs_trusted = False
        if _distributed(world_size):
            from torch.nn.parallel import DistributedDataParallel

            import inspect

            device_ids = [self.device.index] if self.device.type == "cuda" else None
            # the model's buffers are constants (no running statistics): nothing to sync on each forward. torch 2.13
            # renamed broadcast_buffers to forward_sync_buffers; the old name still works but warns.
            no_buffer_sync = ({"forward_sync_buffers": False}
                              if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
                              else {"broadcast_buffers": False})
            self.forward = DistributedDataParallel(self.forward, device_ids=device_ids,
                                                   find_unused_parameters=find_unused_parameters, **no_buffer_sync)

    # -------------------------------------------------------------------------------- state
    def state(self) -> dict:
        """The JSON-able part of a checkpoint (weights and AdamW state are saved by runs.save_checkpoint)."""
        return {"step": self.step, "elapsed_s": self.elapsed_before + self._elapsed_here(),
                "tokens_seen": self.tokens_seen, "lr": learning_rate(max(1, self.step), self.config),
                "schedule": {"name": self.config.schedule, "warmup_steps": self.config.warmup_steps,
                             "total_steps": self.config.steps, "min_lr_ratio": self.config.min_lr_ratio,
                             "next_step": self.step + 1}}

    def restore(self, state: dict) -> None:
        """Continue after a checkpoint whose weights and optimizer state are already loaded."""
        self.step = int(state["step"])
        self.elapsed_before = float(state.get("elapsed_s", 0.0))
        self.tokens_seen = int(state.get("tokens_seen", 0))

    def matmul_peaks(self) -> MatmulPeaks:
        """This device's matmul probe, from the lab home's cache (probed once per machine, about a second)."""
        if self._matmul_peaks is None:
            self._matmul_peaks = cached_matmul_peaks(self.device, lab_home(self.home))
        return self._matmul_peaks

    def performance_used(self) -> dict:
        """What the performance settings resolved to on this device (config.json "performance_used")."""
        return {"precision": self.precision.to_dict(), **self.peak.to_dict()}

    def _elapsed_here(self) -> float:
        started = getattr(self, "_started", None)
        return 0.0 if started is None else time.perf_counter() - started

    # -------------------------------------------------------------------------------- one step
    def _autocast_context(self):
        return autocast_context(self.device, self.precision.precision)

    def _build_batch(self, key: tuple[int, int]) -> Batch:
        """The batch of micro-step `micro` of step `step`, on the host. Micro-step 0 uses the step's own generator,
        so a run without accumulation draws exactly the batches it always drew."""
        step, micro = key
        parts = (self.config.seed, "batch", step, self.rank) + ((("micro", micro),) if micro else ())
        generator = generator_for(*parts)
        batch_at = getattr(self.batches, "train_batch_at", None)
        batch = batch_at(step, generator) if callable(batch_at) else self.batches.train_batch(generator)
        return host_ready(batch)

    def _batch(self, step: int, micro: int) -> Batch:
        if self._prefetcher is None:
            return self._build_batch((step, micro))
        accum = self.performance.grad_accum
        following = (step, micro + 1) if micro + 1 < accum else (step + 1, 0)
        return self._prefetcher.get((step, micro), following if following[0] <= self.config.steps else None)

    def measure_model(self) -> None:
        """Once: count the model's FLOPs per token on a real batch (uncompiled, without recomputation, so MFU counts
        what the model needs), then resolve the precision with it (precision=auto on a CPU with native bf16 picks bf16
        only for models big enough) and the peak MFU divides by, and log both with why. `run()` calls it first; run.py
        calls it before writing config.json, which records the outcome ("performance_used")."""
        if self._measured:
            return
        self._measured = True
        probe = self._build_batch((max(1, self.step + 1), 0))
        tokens = count_tokens(probe)
        self.probe_tokens = tokens  # a micro-batch's tokens: what a FLOP budget's steps are counted in (run.py)
        self._probe_batch = probe.to(self.device)
        try:
            self.flops_per_token = training_flops_per_token(self.model, self._probe_batch, tokens)
        except Exception:  # noqa: BLE001 - MFU is a reading, never a reason for a run to fail
            logger.warning("could not count the model's FLOPs; MFU will not be reported", exc_info=True)
        self.precision = self.performance.precision_choice(self.device, self.matmul_peaks, self.flops_per_token)
        logger.info("precision: %s", self.precision.reason)
        if self.precision.emulated:
            logger.warning("precision=bf16 on a CPU without native bf16: torch emulates it, which is correct but "
                           "usually slower than fp32")
        self.peak = device_peak(self.device, self.precision.precision, self.matmul_peaks)
        self.peak_flops = self.peak.flops
        logger.info("MFU peak: %s", self.peak.source)

    def _prepare(self) -> None:
        """Once, before the first step: `measure_model`, then apply the performance settings that change the model
        (activation checkpointing, attention backend, compile; compilation is timed by a warm-up pass)."""
        if self._prepared:
            return
        self._prepared = True
        self.measure_model()
        probe, self._probe_batch = self._probe_batch, None
        done = prepare_model(self.model, self.performance, self.device)
        if done:
            logger.info("performance settings applied: %s", done)
        if self.performance.compile and self.performance.compile_scope == "model":
            self._step_forward = compile_forward(self.forward)
        if self.performance.compile:
            self.compile_s = warm_up(self.model, probe, self._autocast_context(), self._step_forward)
            logger.info("compiled in %.1f s (warm-up pass, not counted in the step times)", self.compile_s)
        if self.performance.uses_prefetch(self.device):
            self._prefetcher = Prefetcher(self._build_batch, pin=self.device.type == "cuda")

    def train_step(self, step: int):
        """Run step `step` (1-based): returns its LossOutput (on the device) and the grad norm tensor."""
        torch.manual_seed(derive_seed(self.config.seed, "dropout", step, self.rank))
        if self._own_plan:  # before the batch: the model learns the step (ULMFiT's stage) and sets its rates
            plan = self.model.begin_step(step, self.config)
            lrs = [float(lr) for lr in plan.lrs]
            if len(lrs) != len(self.optimizer.param_groups):
                raise LabError("begin_step gave {n_lrs} learning rates for {n_param_groups} "
                               "optimizer groups", n_lrs=len(lrs), n_param_groups=len(self.optimizer.param_groups))
            self._record = dict(plan.record)
        else:
            lrs = [learning_rate(step, self.config)] * len(self.optimizer.param_groups)
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        lr = max(lrs) if lrs else 0.0
        self.model.train()
        accum = self.performance.grad_accum
        outputs, tokens = [], 0
        for micro in range(accum):
            batch = self._batch(step, micro)
            tokens += count_tokens(batch)
            batch = batch.to(self.device)
            # DDP: reduce the gradients once per optimizer step, on the last micro-batch
            sync = micro == accum - 1 or not isinstance(self.forward, nn.parallel.DistributedDataParallel)
            with (contextlib.nullcontext() if sync else self.forward.no_sync()):
                with self._autocast_context():
                    out = (self._step_forward or self.forward)(batch)
                # test-only fault injection (lab_models/training/faults.py); else a no-op
                out.total = poisoned_loss(out.total, step)
                (out.total / accum if accum > 1 else out.total).backward()
            outputs.append(out)
        out = outputs[0] if accum == 1 else _mean_outputs(outputs)
        if self._own_plan:  # a group at rate 0 is frozen this step: no AdamW update, no moment update
            for group, group_lr in zip(self.optimizer.param_groups, lrs):
                if group_lr == 0:
                    for param in group["params"]:
                        param.grad = None
        max_norm = self.config.grad_clip if self.config.grad_clip > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        self.last_step_skipped = self.config.on_nonfinite == "skip" and self._any_rank(
            not bool(torch.isfinite(out.total.detach()) & torch.isfinite(grad_norm)))  # one sync, in skip mode only
        if not self.last_step_skipped:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if not self._inputs_trusted:
            # the batch builder's first batch passed the backbones' range checks: later batches come from the same
            # builder and vocabulary, so the checks' read-backs (waits for a GPU) stop
            self._trust_inputs(True)
        return out, grad_norm, tokens * self.world_size, lr

    def _trust_inputs(self, trusted: bool) -> None:
        self._inputs_trusted = trusted
        for module in self.model.modules():
            if isinstance(module, Backbone):
                module.trust_input_values = trusted

    # -------------------------------------------------------------------------------- reductions
    def _all_reduce(self, values: torch.Tensor, op=None) -> torch.Tensor:
        if _distributed(self.world_size):
            dist.all_reduce(values, op=op or dist.ReduceOp.SUM)
        return values

    def _stop_agreed(self, local: bool) -> bool:
        if not _distributed(self.world_size):
            return local
        flag = torch.tensor([1.0 if local else 0.0], device=self._collective_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    def _any_rank(self, local: bool) -> bool:
        return self._stop_agreed(local)  # the same MAX reduction as the stop flag

    def _collective_device(self) -> torch.device:
        backend = dist.get_backend() if _distributed(self.world_size) else "gloo"
        return self.device if backend == "nccl" else torch.device("cpu")

    def _first_nonfinite_step(self, interval: _Interval) -> int:
        """The first step of the interval whose loss was NaN/inf on any rank (every rank calls this together)."""
        first = self.step + 1  # no bad step here: another rank had it
        if interval.finite:
            bad = (~torch.stack(interval.finite)).nonzero()
            if len(bad):
                first = interval.finite_steps[int(bad[0, 0])]
        first_step = torch.tensor([float(first)])
        if _distributed(self.world_size):
            first_step = first_step.to(self._collective_device())
            dist.all_reduce(first_step, op=dist.ReduceOp.MIN)
        return int(first_step.item())

    def _emit_step(self, interval: _Interval, lr: float, grad_norm: torch.Tensor, checkpoint_due: bool,
                   evaluation_follows: bool = False) -> StepEvent:
        names = self._part_names or []
        zero = torch.zeros((), device=self.device)
        total = interval.total if interval.total is not None else zero  # None: every step of the interval skipped
        unfinite = (~torch.stack(interval.finite)).sum() if interval.finite else zero
        stacked = torch.stack([total.float(), *[interval.parts.get(n, zero).float() for n in names],
                               unfinite.float()])
        stacked = self._all_reduce(stacked.to(self._collective_device())).cpu()
        if stacked[-1].item() > 0:
            step = self._first_nonfinite_step(interval)
            raise NonFiniteLossError(Message("non-finite loss at step {step}: the training loss or its gradient "
                                             "became NaN or infinite; lower --lr, check the data, or pass "
                                             "--on-nonfinite skip to skip such steps", step=step))
        sums = stacked[:-1].tolist()
        counted = interval.steps - len(interval.skipped)
        loss = sums[0] / (counted * self.world_size) if counted else float("nan")
        losses = {}
        for name, total in zip(names, sums[1:]):  # each part: the mean over the steps that reported it
            count = interval.part_steps.get(name, 0) * self.world_size
            losses[name] = total / count if count else float("nan")
        seconds = max(interval.seconds, 1e-9)
        tokens_per_s = interval.tokens / seconds
        record = dict(self._record)
        if self.compile_s is not None and not getattr(self, "_compile_reported", False):
            record["compile_s"] = self.compile_s  # once, in the first row after compiling
            self._compile_reported = True
        per_device = tokens_per_s / self.world_size  # MFU is per device: each device's tokens against its peak
        if interval.skipped:  # a metrics row says which of its steps changed nothing
            record["skipped_steps"] = list(interval.skipped)
        return StepEvent(step=self.step, loss=loss, losses=losses, lr=lr,
                         grad_norm=float(grad_norm), tokens_per_s=tokens_per_s,
                         elapsed_s=self.elapsed_before + self._elapsed_here(), tokens_seen=self.tokens_seen,
                         checkpoint_due=checkpoint_due, evaluation_follows=evaluation_follows,
                         record=record, flops_per_token=self.flops_per_token,
                         mfu=None if self.flops_per_token is None else mfu(self.flops_per_token, per_device,
                                                                            self.peak_flops))

    # -------------------------------------------------------------------------------- evaluation
    def validation_batches(self) -> list[Batch]:
        """The fixed validation batches (built once, with the same seeds in every process)."""
        if self._validation is None:
            self._validation = self.batches.validation_batches(
                lambda i: generator_for(self.config.seed, "validation", i))
        return self._validation

    @torch.no_grad()
    def evaluate(self) -> EvalEvent:
        """Loss, perplexity and bits per byte on the validation batches (sharded over ranks, sums reduced)."""
        batches = self.validation_batches()
        names = self._part_names
        sums = {"total": 0.0, "batches": 0.0, "nll": 0.0, "targets": 0.0, "bytes": 0.0}
        part_sums: dict[str, float] = {}
        self.model.eval()
        try:
            for i in range(self.rank, len(batches), self.world_size):
                torch.manual_seed(derive_seed(self.config.seed, "validation-rng", i))
                batch = batches[i].to(self.device)
                with self._autocast_context():
                    out = self.model.loss(batch)
                sums["total"] += float(out.total)
                sums["batches"] += 1
                for name, value in out.parts.items():
                    part_sums[name] = part_sums.get(name, 0.0) + float(value)
                nll = out.target_nll.float()
                sums["nll"] += float(nll.sum())
                sums["targets"] += nll.numel()
                if self.byte_lengths is not None and out.target_ids.numel():
                    sums["bytes"] += float(self.byte_lengths[out.target_ids.long()].sum())
        finally:
            self.model.train()
        names = names or sorted(part_sums)
        vector = torch.tensor([sums["total"], sums["batches"], sums["nll"], sums["targets"], sums["bytes"],
                               *[part_sums.get(n, 0.0) for n in names]], dtype=torch.float64)
        if _distributed(self.world_size):
            moved = vector.to(self._collective_device())
            dist.all_reduce(moved)
            vector = moved.cpu()
        total, n_batches, nll, targets, n_bytes, *parts = vector.tolist()
        n_batches = max(n_batches, 1.0)
        per_token = nll / targets if targets else float("nan")
        return EvalEvent(step=self.step, loss=total / n_batches,
                         losses={n: v / n_batches for n, v in zip(names, parts)}, nll_per_token=per_token,
                         perplexity=math.exp(per_token) if per_token < 700 else float("inf"),
                         bits_per_byte=bits_per_byte(nll, n_bytes), targets=int(targets), bytes=int(n_bytes),
                         elapsed_s=self.elapsed_before + self._elapsed_here())

    # -------------------------------------------------------------------------------- the loop
    def run(self, should_stop: Callable[[], bool] = lambda: False) -> Iterator[Event]:
        """Train from step `self.step + 1` to `config.steps`, yielding events; ends early with a StopEvent when
        `should_stop()` turns true (checked after every step, agreed across ranks)."""
        self._prepare()
        self._started = time.perf_counter()
        interval = _Interval()
        try:
            yield from self._loop(should_stop, interval)
        finally:
            self._trust_inputs(False)  # the model may next read inputs from elsewhere (generation, fine-tuning)
            if self._prefetcher is not None:
                self._prefetcher.close()
                self._prefetcher = None

    def _loop(self, should_stop: Callable[[], bool], interval: "_Interval") -> Iterator[Event]:
        skipped_in_a_row = 0
        # the config is read afresh every step: a wall-time budget (run.py) sets the steps once the run is timed
        while self.step < self.config.steps:
            cfg = self.config
            resumed = time.perf_counter()
            step = self.step + 1
            out, grad_norm, tokens, lr = self.train_step(step)
            self.step = step
            self.tokens_seen += tokens
            if self._part_names is None or not set(out.parts) <= set(self._part_names):
                self._part_names = sorted(set(self._part_names or ()) | set(out.parts))
            total = out.total.detach().float()
            interval.steps += 1
            if self.last_step_skipped:
                interval.skipped.append(step)
                skipped_in_a_row = skipped_in_a_row + 1
                logger.warning("step %d skipped: its loss or gradient was NaN or infinite (on_nonfinite=skip)", step)
                if skipped_in_a_row > MAX_SKIPPED_IN_A_ROW:
                    raise NonFiniteLossError(Message("non-finite loss at step {step}: {skipped} steps in a row were "
                                                     "skipped (--on-nonfinite skip); lower --lr or check the data",
                                                     step=step, skipped=skipped_in_a_row))
            else:
                skipped_in_a_row = 0
                interval.total = total if interval.total is None else interval.total + total
                for name, value in out.parts.items():
                    value = value.detach().float()
                    interval.parts[name] = value if name not in interval.parts else interval.parts[name] + value
                    interval.part_steps[name] = interval.part_steps.get(name, 0) + 1
                interval.finite.append(torch.isfinite(total) & torch.isfinite(grad_norm.detach().to(total.device)))
                interval.finite_steps.append(step)
            interval.tokens += tokens
            stop = self._stop_agreed(bool(should_stop()))
            last = step == cfg.steps
            checkpoint_due = bool(cfg.checkpoint_every) and step % cfg.checkpoint_every == 0
            evaluate = last or (cfg.eval_every and step % cfg.eval_every == 0)
            interval.seconds += time.perf_counter() - resumed
            if last or stop or checkpoint_due or evaluate or step % cfg.log_every == 0:
                event = self._emit_step(interval, lr, grad_norm, checkpoint_due, bool(evaluate))
                interval = _Interval()
                yield event
            if evaluate:  # also when stopping: a resume after the stop starts past this step
                yield self.evaluate()
            if stop and not last:
                yield StopEvent(step=self.step)
                return

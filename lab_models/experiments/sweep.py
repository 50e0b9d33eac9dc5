"""Scaling sweeps: one family trained at several sizes, and a power law fitted to its validation loss.

    python -m lab_models sweep --family gpt --sizes 32x1,64x2,tiny,128x2 --steps 300 [--switch]
        [--preset tiny] [--corpus NAME] [--seed S] [--device auto] [--max-minutes M] [--out DIR] [--home DIR]
        [--n-experts 8] [--capacity-factor 1.25] [--expert-every 2] [--model KEY=VALUE ...]

Papers: Kaplan et al. (2020), Scaling Laws for Neural Language Models (L(N) = (N_c / N)^alpha_N, N the non-embedding
parameters, and C ~ 6 N T training FLOPs); Brown et al. (2020), GPT-3 (the same laws at 175B); Fedus, Zoph, Shazeer
(2022), Switch Transformers (at a fixed FLOP budget, more parameters through experts lower the loss).

What a sweep does. Every size is an ordinary run of `python -m lab_models train`, one after another, in
`<sweep folder>/runs/<size>-<dense|switch>/` (config.json, metrics.jsonl, weights: everything a run has). The sizes
share everything but the model's dimensions: the `--preset`'s corpus, tokenizer size, sequence length, batch size,
learning rate and schedule, and `--steps` and `--seed`. A size is a preset's name (its d_model, n_layers, n_heads and
d_ff: tiny = 64x2, small = 256x4, medium = 512x8, base = 768x12) or `DxL` (d_model D, L layers, d_ff = 4D, heads of
32 dimensions up to d_model 128 and of 64 above, as GPT-2 and BERT). With `--switch`, every size is also trained with
Switch Transformer layers (same FLOPs per token), right after its dense run; a size with fewer layers than
`--expert-every` gets one Switch layer, its last. The sweep folder's `sweep.json` is
rewritten after every run: the configuration, one point per (size, variant) and the fits; `status.json` and the run
folders follow the job contract (lab_models/training/jobs/manager.py), so the app queues a sweep like a training run.

One point per run: its state, message, parameters (total, non-embedding, active non-embedding: a Switch layer counts
its router and one expert), training tokens (tokens_seen of the last logged step), training FLOPs = 6 x active
non-embedding parameters x training tokens (Kaplan's C = 6NT: forward 2N, backward 4N per token; the attention
over the context and the embeddings are left out, as Kaplan's N leaves them out), the final validation loss and bits
per byte, and the seconds it took.

A size that fails does not stop the sweep: out of memory (an exception in the trainer, or the OOM killer's SIGKILL),
any other error, or the `--max-minutes` limit (the trainer gets SIGTERM, checkpoints and stops; then SIGKILL after
60 s) is recorded as that point's state and message, and the next size starts. SIGTERM or Ctrl-C to the sweep stops
the running size the same way and leaves the remaining ones "not run".

The fit. For each variant, a power law y = a x^(-alpha) through the finished points by least squares on log y
against log x (`numpy.polyfit`, degree 1; the slope is -alpha), with x the non-embedding parameters and, separately,
the training FLOPs; alpha, a and R^2 are stored. Deviations from Kaplan et al.: the loss is validation bits per byte
(comparable across tokenizers) rather than nats per token; every size trains the same number of steps at the same
learning rate (Kaplan trains to convergence or holds compute fixed with tuned rates), so at CPU sizes and short runs
the larger models are under-trained and the fitted exponent is a property of this budget, not of the architecture.

>>> [s.label for s in parse_sizes("tiny,128x2")], parse_sizes("128x2")[0].n_heads
(['tiny', '128x2'], 4)
>>> law = fit_power_law([1e3, 1e4, 1e5], [8.0, 4.0, 2.0])
>>> round(law.exponent, 4), round(law.r2, 4)
(0.301, 1.0)
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab_models.messages import LabError, Message, message_of
from lab_models.training import runs
from lab_models.home import atomic_write_json, lab_home
from lab_models.nn.config import PRESETS
from lab_models.training.console import OneLineParser, say_error
from lab_models.training.jobs.files import PACKAGE_ROOT, format_value
from lab_models.models.family import TRAINED_FAMILIES
from lab_models.models.family import build_model
from lab_models.models.family import family_model_config
from lab_models.objectives import objective_module
from lab_models.families import RNN_FAMILIES
from lab_models.training.config import MAX_STEPS, PRESET_DEFAULTS, check_budget_flops, check_budget_minutes
from lab_models.text.vocab import VocabInfo
from lab_models.models.family import model_config_from_dict
from lab_models.models.switch import parameter_counts
from lab_models.objectives.settings import settings_from_dict
from lab_models.training.config import parse_model_overrides

logger = logging.getLogger(__name__)

SWEEPS_FOLDER = "sweeps"
SWEEP_FILE = "sweep.json"
VARIANTS = ("dense", "switch")
X_AXES = {"parameters": "non-embedding parameters", "flops": "training FLOPs (6 N T)"}
STOP_GRACE_S = 60.0
POLL_S = 0.5
EXIT_BAD_ARGUMENT = 2
_SIZE = re.compile(r"^(\d+)x(\d+)$")
MAX_SWEEP_D_MODEL = 16_384  # a size beyond these is refused (docs/reliability.md): GPT-3's widest is 12,288 x 96
MAX_SWEEP_LAYERS = 256


# ------------------------------------------------------------------------------------------------ sizes


@dataclass(frozen=True)
class SizeSpec:
    """One model size of a sweep: its label and the ModelConfig dimensions it sets."""

    label: str
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int

    def model_overrides(self) -> dict[str, int]:
        return {"d_model": self.d_model, "n_layers": self.n_layers, "n_heads": self.n_heads, "d_ff": self.d_ff}


def default_heads(d_model: int) -> int:
    """Heads of 32 dimensions up to d_model 128, of 64 above (at least 1).

    >>> [default_heads(d) for d in (16, 64, 128, 192, 256, 768)]
    [1, 2, 4, 3, 4, 12]
    """
    size = 32 if d_model <= 128 else 64
    return max(1, d_model // size) if d_model % size == 0 else 1


def parse_sizes(text: str) -> list[SizeSpec]:
    """Comma-separated sizes: preset names (tiny, small, medium, base) or DxL (d_model x layers). ValueError with
    what to write for anything else, a repeated size or an empty list."""
    if not isinstance(text, str) or not text.strip():
        raise LabError("give at least one size, e.g. --sizes 32x1,64x2,tiny")
    sizes, seen = [], set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item in PRESETS:
            dims = PRESETS[item]
            size = SizeSpec(item, dims["d_model"], dims["n_layers"], dims["n_heads"], dims["d_ff"])
        else:
            match = _SIZE.match(item)
            if not match:
                raise LabError("unknown size {item!r}: write a preset ({presets}) or DxL, e.g. 128x2 "
                               "for d_model 128 with 2 layers", item=item, presets=', '.join(PRESETS))
            d_model, n_layers = int(match.group(1)), int(match.group(2))
            if d_model < 1 or n_layers < 1:
                raise LabError("size {item!r}: d_model and the number of layers must be at least 1", item=item)
            if d_model > MAX_SWEEP_D_MODEL or n_layers > MAX_SWEEP_LAYERS:
                raise LabError("size {item!r}: d_model must be at most {max_sweep_d_model:,} and the number of "
                               "layers at most {max_sweep_layers} (the base preset is 768x12)",
                               item=item, max_sweep_d_model=MAX_SWEEP_D_MODEL, max_sweep_layers=MAX_SWEEP_LAYERS)
            size = SizeSpec(item, d_model, n_layers, default_heads(d_model), 4 * d_model)
        if (size.d_model, size.n_layers, size.n_heads, size.d_ff) in seen:
            raise LabError("size {item!r} is listed twice", item=item)
        seen.add((size.d_model, size.n_layers, size.n_heads, size.d_ff))
        sizes.append(size)
    if not sizes:
        raise LabError("give at least one size, e.g. --sizes 32x1,64x2,tiny")
    return sizes


# ------------------------------------------------------------------------------------------------ the fit


@dataclass(frozen=True)
class PowerLaw:
    """y = coefficient * x^(-exponent), fitted on `points` (x, y) pairs; r2 in log space."""

    exponent: float
    coefficient: float
    r2: float
    points: int

    def __call__(self, x: float) -> float:
        return self.coefficient * x ** (-self.exponent)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def fit_power_law(xs, ys) -> PowerLaw:
    """Least squares in log-log space (numpy.polyfit, degree 1) through (x, y) points with x, y > 0. ValueError for
    fewer than two usable points or a single x value."""
    import numpy as np

    pairs = [(float(x), float(y)) for x, y in zip(xs, ys)
             if x is not None and y is not None and math.isfinite(float(x)) and math.isfinite(float(y))
             and float(x) > 0 and float(y) > 0]
    if len(pairs) < 2:
        raise LabError("a power law needs at least 2 points with positive values, got {n_pairs}", n_pairs=len(pairs))
    log_x = np.log([x for x, _ in pairs])
    log_y = np.log([y for _, y in pairs])
    if np.ptp(log_x) == 0:
        raise LabError("a power law needs points at 2 or more different sizes")
    slope, intercept = np.polyfit(log_x, log_y, 1)
    predicted = slope * log_x + intercept
    residual = float(((log_y - predicted) ** 2).sum())
    spread = float(((log_y - log_y.mean()) ** 2).sum())
    r2 = 1.0 - residual / spread if spread > 0 else 1.0
    return PowerLaw(exponent=float(-slope), coefficient=float(math.exp(intercept)), r2=r2, points=len(pairs))


def fits(points: list[dict]) -> dict[str, dict]:
    """{variant: {"parameters": PowerLaw dict or {"error": why}, "flops": ...}} over the finished points."""
    out: dict[str, dict] = {}
    for variant in VARIANTS:
        done = [p for p in points if p.get("variant") == variant and p.get("state") == "finished"
                and p.get("bits_per_byte") is not None]
        if not [p for p in points if p.get("variant") == variant]:
            continue
        entry = {}
        for axis, key in (("parameters", "non_embedding"), ("flops", "train_flops")):
            try:
                entry[axis] = fit_power_law([p.get(key) for p in done], [p["bits_per_byte"] for p in done]).to_dict()
            except ValueError as error:
                entry[axis] = {"error": message_of(error)}
        out[variant] = entry
    return out


# ------------------------------------------------------------------------------------------------ the sweep


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep is made of (saved as sweep.json "config")."""

    family: str
    sizes: tuple[str, ...]
    steps: int | None  # None under a budget: each run trains the steps its budget buys
    out: str
    switch: bool = False
    preset: str = "tiny"
    corpus: str | None = None
    seed: int = 0
    device: str = "auto"
    max_minutes: float | None = None
    n_experts: int = 8
    capacity_factor: float = 1.25
    expert_every: int = 2
    model: dict = field(default_factory=dict)  # more --model overrides for every run
    home: str | None = None
    # instead of steps: the same training FLOPs (an iso-FLOP sweep) or the same wall time for every size
    budget_flops: float | None = None
    budget_minutes: float | None = None

    def length_arguments(self) -> list[str]:
        """The trainer's `--steps N`, `--budget-flops F` or `--budget-minutes M`."""
        if self.budget_flops is not None:
            return ["--budget-flops", repr(float(self.budget_flops))]
        if self.budget_minutes is not None:
            return ["--budget-minutes", repr(float(self.budget_minutes))]
        return ["--steps", str(self.steps)]

    def to_dict(self) -> dict:
        values = dataclasses.asdict(self)
        values["sizes"] = list(self.sizes)
        return values

    def variants(self) -> tuple[str, ...]:
        return VARIANTS if self.switch else VARIANTS[:1]

    def overrides(self, size: SizeSpec, variant: str) -> dict:
        values = {**self.model, **size.model_overrides()}
        if variant == "switch":
            values.update(ffn="switch", n_experts=self.n_experts, capacity_factor=self.capacity_factor,
                          expert_every=min(self.expert_every, size.n_layers))  # a shallow size: its last layer
        return values


def run_folder(config: SweepConfig, size: SizeSpec, variant: str) -> Path:
    return Path(config.out) / "runs" / f"{size.label}-{variant}"


def trainer_arguments(config: SweepConfig, size: SizeSpec, variant: str) -> list[str]:
    """The `python -m lab_models train` arguments of one (size, variant) run."""

    args = ["--family", config.family, "--out", str(run_folder(config, size, variant)), "--preset", config.preset,
            *config.length_arguments(), "--seed", str(config.seed), "--device", config.device]
    if config.corpus:
        args += ["--corpus", config.corpus]
    if config.home:
        args += ["--home", config.home]
    for key, value in config.overrides(size, variant).items():
        args += ["--model", f"{key}={format_value(value)}"]
    return args


def check_config(config: SweepConfig) -> list[SizeSpec]:
    """The sizes, after checking that every (size, variant) builds a valid model (on the meta device: no memory).
    ValueError with the trainer's own message otherwise."""
    import torch


    if config.family not in TRAINED_FAMILIES:
        raise LabError("unknown family {family!r}: choose one of {trained_families}",
                       family=config.family, trained_families=', '.join(TRAINED_FAMILIES))
    if config.family in RNN_FAMILIES:
        raise LabError("{family} is an LSTM family: a sweep changes a Transformer's d_model and layers; "
                       "choose a Transformer family", family=config.family)
    if config.preset not in PRESET_DEFAULTS:
        raise LabError("unknown preset {preset!r}: choose one of {preset_defaults}",
                       preset=config.preset, preset_defaults=', '.join(PRESET_DEFAULTS))
    lengths = [config.steps is not None, config.budget_flops is not None, config.budget_minutes is not None]
    if sum(lengths) != 1:
        raise LabError("give a sweep one of --steps, --budget-flops or --budget-minutes: each decides how long every "
                       "run trains")
    if config.steps is not None and (isinstance(config.steps, bool) or not isinstance(config.steps, int)
                                     or not 1 <= config.steps <= MAX_STEPS):
        raise LabError("--steps must be a whole number from 1 to {max_steps:,}, got {steps!r}",
                       max_steps=MAX_STEPS, steps=config.steps)
    if config.budget_flops is not None:
        check_budget_flops(config.budget_flops)
    if config.budget_minutes is not None:
        check_budget_minutes(config.budget_minutes)
    if config.max_minutes is not None and not config.max_minutes > 0:
        raise LabError("--max-minutes must be above 0, got {max_minutes!r}", max_minutes=config.max_minutes)
    sizes = parse_sizes(",".join(config.sizes))
    settings = objective_module(config.family).Settings()
    vocab = stand_in_vocab(PRESET_DEFAULTS[config.preset]["vocab_size"] + 64)  # + the lab's special tokens
    for size in sizes:
        for variant in config.variants():
            try:
                model_config = family_model_config(config.family, config.preset, vocab.size, settings=settings,
                                                   **config.overrides(size, variant))
                with torch.device("meta"):
                    build_model(config.family, model_config, settings, vocab, None)
            except ValueError as error:
                raise LabError("size {label} ({variant}): {error}",
                               label=size.label, variant=variant, error=error) from None
    return sizes


def stand_in_vocab(size: int):
    """A `VocabInfo` of `size` ids for building a model only to count or check it (ids 0-7 special, then 32
    sentinels)."""

    return VocabInfo(size=size, pad_id=0, mask_id=1, cls_id=2, sep_id=3, bos_id=4, eos_id=5, start_id=6, end_id=7,
                     sentinel_ids=tuple(range(8, 40)), random_ids=tuple(range(40, max(41, size))))


def point_of(config: SweepConfig, size: SizeSpec, variant: str, state: str, message: Message | str,
             seconds: float) -> dict:
    """What one finished (or failed) run contributes: see the module docstring."""
    folder = run_folder(config, size, variant)
    point = {"size": size.label, "variant": variant, "d_model": size.d_model, "n_layers": size.n_layers,
             "n_heads": size.n_heads, "d_ff": size.d_ff, "state": state, "message": message,
             "seconds": round(seconds, 1),
             "run_dir": str(folder), "total": None, "non_embedding": None, "active_non_embedding": None,
             "tokens": None, "train_flops": None, "bits_per_byte": None, "val_loss": None, "step": None}
    counts = _parameter_counts(folder)
    if counts:
        point.update(counts)
    rows = runs.read_metrics(folder) if (folder / runs.METRICS_FILE).is_file() else []
    train = [row for row in rows if row.get("split", "train") == "train"]
    val = [row for row in rows if row.get("split") == "val"]
    if train:
        point["tokens"] = train[-1].get("tokens")
        point["step"] = train[-1].get("step")
    if val and state == "finished":
        point["bits_per_byte"] = val[-1].get("bits_per_byte")
        point["val_loss"] = val[-1].get("loss")
    if point["tokens"] and point["active_non_embedding"]:
        point["train_flops"] = 6.0 * point["active_non_embedding"] * point["tokens"]
    return point


def _parameter_counts(folder: Path) -> dict | None:
    """Parameter counts of the run's saved config, from a model built on the meta device."""
    import torch


    config = runs.read_config(folder)
    if not isinstance(config.get("model"), dict):
        return None
    family = config["family"]
    model_config = model_config_from_dict(family, config["model"])
    vocab = stand_in_vocab(model_config.vocab_size)  # the counts depend on the size only
    with torch.device("meta"):
        model = build_model(family, model_config, settings_from_dict(family, config.get("settings") or {}), vocab,
                            config.get("objectives") or None)
    return parameter_counts(model)


class SweepStop:
    """Set by SIGTERM/SIGINT: the running size is stopped (the trainer checkpoints) and no further size starts."""

    def __init__(self):
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        self.signal_name = self.signal_name or signal.Signals(signum).name

    def __call__(self) -> bool:
        return self.signal_name is not None


def _run_one(command: list[str], limit_s: float | None, stop: SweepStop, log) -> tuple[int | None, str]:
    """Run one trainer; returns (exit code, why it was stopped: "" / "time" / "stop")."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    started = time.monotonic()
    reason, signalled_at = "", None
    while True:
        try:
            return process.wait(timeout=POLL_S), reason
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if signalled_at is None and (stop() or (limit_s is not None and now - started > limit_s)):
            reason = "stop" if stop() else "time"
            signalled_at = now
            process.send_signal(signal.SIGTERM)  # the trainer finishes its step, checkpoints and exits "stopped"
        elif signalled_at is not None and now - signalled_at > STOP_GRACE_S:
            process.kill()


def _message(folder: Path, code: int | None, reason: str, config: SweepConfig) -> tuple[str, Message | str]:
    """(state, message) of one run from its exit and its status.json."""
    status = runs.read_status(folder)
    total = config.steps or status.get("total_steps")
    where = (Message("at step {step} of {steps}", step=status["step"], steps=total) if status.get("step")
             else Message("before its first step"))
    if reason == "time":
        return "failed", Message("ran past the {minutes:g}-minute limit (--max-minutes): stopped {where}",
                                 minutes=config.max_minutes, where=where)
    if reason == "stop":
        return "stopped", Message("the sweep was stopped {where}", where=where)
    if code == 0 and status.get("state") == "finished":
        return "finished", status.get("message") or Message("finished")
    if status.get("state") == "failed" and status.get("message"):
        return "failed", status["message"]
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        if -code == signal.SIGKILL:
            return "failed", Message("the trainer was killed by {signal} (out of memory?)", signal=name)
        return "failed", Message("the trainer was killed by {signal}", signal=name)
    return "failed", Message("the trainer exited with code {code}", code=code)


def run_sweep(config: SweepConfig, *, trainer_command: list[str] | None = None,
              stop: SweepStop | None = None) -> dict:
    """Train every (size, variant) in turn and return sweep.json's content (also written after every run)."""
    sizes = check_config(config)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    stop = stop or SweepStop()
    prefix = list(trainer_command) if trainer_command else [sys.executable, "-m", "lab_models", "train"]
    jobs = [(size, variant) for size in sizes for variant in config.variants()]
    record = {"config": config.to_dict(), "created": time.time(), "points": [], "fits": {}, "x_axes": X_AXES,
              "flops_note": "training FLOPs = 6 x active non-embedding parameters x training tokens (Kaplan's 6NT)"}
    limit_s = None if config.max_minutes is None else 60.0 * config.max_minutes
    runs.write_status(out, "running", step=0, total_steps=len(jobs),
                      message=Message("training {label}", label=jobs[0][0].label))
    for index, (size, variant) in enumerate(jobs):
        folder = run_folder(config, size, variant)
        if stop():
            point = point_of(config, size, variant, "stopped", Message("not run: the sweep was stopped"), 0.0)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            runs.write_status(out, "running", step=index, total_steps=len(jobs),
                              message=Message("training {label} ({variant}), {number} of {total}", label=size.label,
                                              variant=variant, number=index + 1, total=len(jobs)))
            logger.info("sweep: training %s (%s), %d of %d", size.label, variant, index + 1, len(jobs))
            started = time.monotonic()
            with open(out / "sweep.log", "ab") as log:
                command = prefix + trainer_arguments(config, size, variant)
                log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
                log.flush()
                code, reason = _run_one(command, limit_s, stop, log)
            state, message = _message(folder, code, reason, config)
            point = point_of(config, size, variant, state, message, time.monotonic() - started)
            if state != "finished":
                logger.warning("sweep: %s (%s) %s: %s", size.label, variant, state, message)
        record["points"].append(point)
        record["fits"] = fits(record["points"])
        atomic_write_json(out / SWEEP_FILE, record)
    finished = sum(1 for p in record["points"] if p["state"] == "finished")
    summary = Message("{finished} of {total} runs finished", finished=finished, total=len(jobs))
    if stop():
        runs.write_status(out, "stopped", step=len(jobs), total_steps=len(jobs),
                          message=Message("stopped: {summary}", summary=summary))
    else:
        runs.write_status(out, "finished", step=len(jobs), total_steps=len(jobs), message=summary)
    return record


# ------------------------------------------------------------------------------------------------ reading sweeps


def sweeps_dir(home=None) -> Path:
    return lab_home(home) / SWEEPS_FOLDER


def new_sweep_dir(home, family: str) -> Path:
    """A fresh `<home>/sweeps/<family>-sweep-<time>-<hex>` folder (created)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = sweeps_dir(home)
    for _ in range(100):
        folder = root / f"{family}-sweep-{stamp}-{secrets.token_hex(2)}"
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            continue
        return folder
    raise LabError("could not create a sweep folder in {root}; is the lab home writable?", root=root)


def read_sweep(folder) -> dict:
    """sweep.json of a sweep folder with its status (state, step, total_steps, message) and id; {} when absent."""
    folder = Path(folder)
    record = runs.read_json(folder / SWEEP_FILE)
    status = runs.read_status(folder)
    if not record and not status:
        return {}
    return {"sweep_id": folder.name, "folder": str(folder), "status": status, **record}


def list_sweeps(home=None) -> list[dict]:
    """Every sweep under `<home>/sweeps/`, newest first (`read_sweep` of each)."""
    root = sweeps_dir(home)
    if not root.is_dir():
        return []
    found = [read_sweep(folder) for folder in root.iterdir() if folder.is_dir()]
    found = [sweep for sweep in found if sweep]
    return sorted(found, key=lambda s: s.get("created") or s.get("status", {}).get("updated") or 0, reverse=True)


# ------------------------------------------------------------------------------------------------ the CLI


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models sweep", description="Train one family at several sizes and fit "
                                                                      "a power law to its validation bits per byte.")
    p.add_argument("--family", required=True)
    p.add_argument("--sizes", required=True, help="comma-separated: preset names or DxL, e.g. 32x1,64x2,tiny,128x2")
    p.add_argument("--steps", type=int, help="training steps of every run")
    p.add_argument("--budget-flops", type=float, metavar="F",
                   help="instead of --steps: the training FLOPs of every run (an iso-FLOP sweep: a bigger size trains "
                        "fewer steps)")
    p.add_argument("--budget-minutes", type=float, metavar="M",
                   help="instead of --steps: the minutes of wall time of every run")
    p.add_argument("--switch", action="store_true", help="also train every size with Switch Transformer layers")
    p.add_argument("--preset", default="tiny", help="the data and training defaults every size shares (default tiny)")
    p.add_argument("--corpus")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--max-minutes", type=float, help="time limit per run; a run past it is stopped and recorded")
    p.add_argument("--n-experts", type=int, default=8)
    p.add_argument("--capacity-factor", type=float, default=1.25)
    p.add_argument("--expert-every", type=int, default=2)
    p.add_argument("--model", action="append", default=[], metavar="KEY=VALUE", help="more model overrides")
    p.add_argument("--out", help="the sweep folder (default: a new one in <home>/sweeps/)")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    return p


def sweep_arguments(config: SweepConfig) -> list[str]:
    """The `python -m lab_models sweep` arguments that run `config` (the inverse of `config_from_args`)."""

    args = ["--family", config.family, "--sizes", ",".join(config.sizes), *config.length_arguments(),
            "--preset", config.preset, "--seed", str(config.seed), "--device", config.device]
    if config.switch:
        args += ["--switch", "--n-experts", str(config.n_experts), "--capacity-factor",
                 format_value(float(config.capacity_factor)), "--expert-every", str(config.expert_every)]
    if config.corpus:
        args += ["--corpus", config.corpus]
    if config.max_minutes is not None:
        args += ["--max-minutes", format_value(float(config.max_minutes))]
    for key, value in config.model.items():
        args += ["--model", f"{key}={format_value(value)}"]
    if config.out:
        args += ["--out", config.out]
    if config.home:
        args += ["--home", config.home]
    return args


def config_from_args(args) -> SweepConfig:
    model = parse_model_overrides(args.model, args.family)
    for key in ("d_model", "n_layers", "n_heads", "d_ff", "ffn"):
        if key in model:
            raise LabError("--model {key} is set by the sweep (by --sizes, or --switch for ffn)", key=key)
    home = str(Path(args.home).expanduser().resolve()) if args.home else None
    out = Path(args.out).expanduser().resolve() if args.out else None
    config = SweepConfig(family=args.family, sizes=tuple(s.label for s in parse_sizes(args.sizes)), steps=args.steps,
                         out=str(out) if out else "", switch=args.switch, preset=args.preset, corpus=args.corpus,
                         seed=args.seed, device=args.device, max_minutes=args.max_minutes, n_experts=args.n_experts,
                         capacity_factor=args.capacity_factor, expert_every=args.expert_every, model=model, home=home,
                         budget_flops=args.budget_flops, budget_minutes=args.budget_minutes)
    check_config(config)
    if not out:
        config = dataclasses.replace(config, out=str(new_sweep_dir(home, args.family)))
    return config


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_from_args(build_parser().parse_args(argv))
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    stop = SweepStop()
    stop.install()
    record = run_sweep(config, stop=stop)
    for point in record["points"]:
        bpb = point["bits_per_byte"]
        logger.info("%-8s %-6s %-8s N=%s bits/byte=%s %s", point["size"], point["variant"], point["state"],
                    point["non_embedding"], "—" if bpb is None else f"{bpb:.4f}",
                    point["message"] if point["state"] != "finished" else "")
    for variant, entry in record["fits"].items():
        for axis, law in entry.items():
            logger.info("%s, bits/byte against %s: %s", variant, X_AXES[axis],
                        law.get("error") or f"exponent {law['exponent']:.4f} (R^2 {law['r2']:.3f}, "
                                            f"{law['points']} points)")
    logger.info("sweep folder: %s", config.out)
    return 0


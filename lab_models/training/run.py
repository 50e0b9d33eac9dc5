"""Headless training: `python -m lab_models train` (docs/contract.md §2), its `TrainConfig`, and the presets.

    python -m lab_models train --family NAME --out DIR [options]   # every option: --help, or lab_models/training/cli.py

The same command runs under `torchrun --nproc_per_node K` (DistributedDataParallel; gloo on CPU, nccl on CUDA): each
rank draws its own batches, rank 0 alone writes files, logged numbers are averaged over ranks. The batch size is per
rank. A bad argument exits with status 2 and one line on stderr ("error: ...").

Presets, `TrainConfig` and the parsing of overrides (`--objective`, `--set`, `--model`) are in
lab_models/training/config.py; the argument parser and `--resume` in lab_models/training/cli.py.
This module runs the training: the distributed world, signals, the run folder, the loop and the exit statuses.

Data. The corpus is a source (lab_models/text/corpus_sources.py: a name or a path of any size, read in place). Before
its first step a run prepares it (lab_models/training/corpus_tokens.py): the tokenizer (trained on a bounded, seeded
sample of a big corpus, or found through its fit record), then the corpus tokenized once into memory-mapped token
shards in the lab home (lab_models/text/token_shards.py; reused by every later run on the same corpus and
tokenizer), and training windows are drawn from the memory map, the same batches an in-memory stream gave. Until the
first step status.json says "running" with "phase": "tokenizing" and the progress (the Train tab's bar), and stderr
gets a progress line every few seconds (none for a corpus prepared within 2 s). SIGTERM during tokenization stops it
between two batches: what is tokenized is kept, the run ends "stopped", and starting it again continues. Under
torchrun rank 0 prepares the data while the other ranks wait in a gloo group with a timeout of days (a big corpus
takes longer than the default group's 10 to 30 minutes), then map the same shards.

The RNN families (lab_models/models/rnn/) run through the same loop. Where their data is not corpus windows (CoVe's
sentence pairs, ULMFiT's three stages, CVT's labelled and unlabelled minibatches), the family module's
`batch_source(context)` replaces PackedBatches, and `tokenizer_corpus(corpus, settings)` adds what the tokenizer must
know (CoVe: the Chinese side of the pairs). A model's StepPlan record (ULMFiT's `stage`, `stage_name`, `lrs`) is
written into each train row of metrics.jsonl.

Starting from another run (`--init-from RUN`, lab_models/training/init_from.py): the starting run's tokenizer is
copied into the run folder instead of training one, its model dimensions are used, its weights are loaded into the
new family's model where the names and shapes agree (new heads keep their own initialisation), and config.json keeps
its token roles and framing with "initialized_from"; NOTE.md says what was loaded, new and dropped.

Translation (MASS, T5): `--objective translation=W` adds English -> Chinese translation of the synthetic corpus's
sentence pairs (whatever --corpus is; the pairs are built in, see lab_models/objectives/translation.py) to every step:
batch_size pair rows beside the denoising rows, loss = denoising + W * translation. `--objective seq2seq=0` (MASS)
or `--objective span_corruption=0` (T5) with translation on trains translation alone. With translation on, the
tokenizer is also trained on the pairs (their Chinese side) unless the corpus is the synthetic one, and, for T5, on
its task prefix; config.json records it all under "translation".

Add-on objectives (lab_models/objectives/addons.py): `--objective contrastive=W`, `adversarial=W` or
`back_translation=W` for the families that support them, tuned with `--set NAME.SETTING=VALUE`; their settings are
saved under "train.addons", their facts under config.json "addons", their numbers in the validation rows.

Signals. SIGTERM or SIGINT: the current step finishes, a checkpoint and model.safetensors are written, status.json
says "stopped", the exit status is 0. A NaN/inf loss: status "failed", message "non-finite loss at step N: ...", exit
status 1, and the last good checkpoint is kept (non-finite weights are never checkpointed); `--on-nonfinite skip`
instead drops such a step's update, logs it and goes on (lab_models/training/engine.py). A full disk: status "failed",
message "disk full: ...", the last complete checkpoint intact (a full disk while tokenizing: "disk full while tokenizing
...", the tokenized part kept). Any other exception: status "failed" with the message.
The run folder's files are described in lab_models/training/runs.py.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from lab_models.messages import LabError, Message, message_of, messages_restored, with_records
from lab_models.training import runs
from lab_models.text.corpora import Corpus
from lab_models.text.corpus_sources import TOKENIZER_SAMPLE_BYTES, MemorySource
from lab_models.text.streams import TokenStream
from lab_models.text.token_shards import TokenizingDiskFull, TokenizingStopped, open_shards, tokenize_to_shards
from lab_models.training.corpus_tokens import TokenizingStatus, run_tokenizer
from lab_models.training.batches import PackedBatches
from lab_models.training.device import select_device
from lab_models.training.engine import EvalEvent, NonFiniteLossError, StepEvent, Trainer, derive_seed, generator_for
from lab_models.training.engine import init_seed
from lab_models.home import lab_home
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.models.switch import switch_metrics
from lab_models.text.tokenization import load_tokenizer_file
from lab_models.text.vocab import prepare_tokenizer, token_byte_lengths

from lab_models.training.config import (CALIBRATION_STEPS, EXIT_BAD_ARGUMENT, EXIT_FAILED, MAX_STEPS,
                                        STATUS_INTERVAL_S, TrainConfig, steps_for_budget, steps_for_minutes)
from lab_models.objectives.settings import settings_from_dict
from lab_models.training.cli import build_parser, check_at_least, config_from_args, config_from_run
from lab_models.training.console import TrainProgress, say, say_error
from lab_models.home import atomic_write_text
from lab_models.objectives.translation import TRANSLATION_FAMILIES
from lab_models.models.rnn.common import DataContext
from lab_models.objectives.translation import TranslationPairs
from lab_models.objectives.translation import pairs_language, tokenizer_texts_note
from lab_models.models.family import MAIN_OBJECTIVE
from lab_models.models.family import build_model
from lab_models.objectives.addons import attach
from lab_models.models.family import model_config_from_dict
from lab_models.models.family import family_model_config
from lab_models.text.framing import FRAMING_KEY
from lab_models.text.tokenizer_inspect import tokenizer_kind
from lab_models.training.init_from import (check_sentinels, check_start, load_starting_weights,
                                           read_starting_point, write_note)

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ distributed
RANK0_WAIT = timedelta(days=7)  # how long the other ranks wait for rank 0's tokenizer and token shards (below)


@dataclass
class _World:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    wait_group: object = None  # a gloo group with a long timeout: the other ranks wait in it while rank 0 tokenizes

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _init_world(device_choice: str) -> _World:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = select_device(device_choice)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
    world = _World(rank, world_size, local_rank, device)
    if world.distributed:
        if not dist.is_available():
            raise LabError("WORLD_SIZE > 1 but this torch has no torch.distributed")
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, **({"device_id": device} if device.type == "cuda" else {}))
        # Rank 0 alone trains the tokenizer and tokenizes the corpus (minutes to hours for a big one); the others wait
        # for it in a broadcast on this CPU group, whose timeout is days instead of the default group's 10 minutes
        # (NCCL) or 30 (gloo), so a long tokenization is not taken for a hung rank.
        world.wait_group = dist.new_group(backend="gloo", timeout=RANK0_WAIT)
    return world


def _spend_budget(config: TrainConfig, trainer: Trainer, world: _World) -> tuple[TrainConfig, dict]:
    """(the config with the steps its FLOP budget buys, config.json's "budget": the budget, the steps, the FLOPs of
    one step and what they are made of). Counted on this process's first batch; run.py hands rank 0's to all."""
    tokens_per_step = (trainer.probe_tokens or 0) * config.performance_config().grad_accum * world.world_size
    steps = steps_for_budget(config.budget_flops, trainer.flops_per_token, tokens_per_step)
    per_step = trainer.flops_per_token * tokens_per_step
    logger.info("a budget of %.3g FLOPs buys %d steps of %.3g FLOPs (%.3g per token, %d tokens a step)",
                config.budget_flops, steps, per_step, trainer.flops_per_token, tokens_per_step)
    if world.is_main:
        say(f"a budget of {config.budget_flops:.3g} FLOPs buys {steps:,} steps of {per_step:.3g} FLOPs")
    return dataclasses.replace(config, steps=steps), {
        "flops": config.budget_flops, "steps": steps, "flops_per_step": per_step,
        "flops_per_token": trainer.flops_per_token, "tokens_per_step": tokens_per_step, "flops_spent": steps * per_step}


class _MinutesBudget:
    """A wall-time budget (--budget-minutes) being turned into steps: the run starts with MAX_STEPS as its provisional
    count (so the schedule's decay has barely begun), times CALIBRATION_STEPS steps after the first one it logs, and
    then fixes its steps (`steps_for_minutes`); rank 0's decision is everyone's. config.json "budget" records the
    minutes, the steps and the measured speed, and a resume keeps them."""

    def __init__(self, minutes: float):
        self.minutes = minutes
        self.first: tuple[int, float] | None = None  # (step, elapsed seconds) of the first logged step

    def decide(self, config: TrainConfig, step: int, elapsed_s: float) -> tuple[TrainConfig, dict] | None:
        """The config with its steps and the "budget" record once enough steps are timed (or the time is spent),
        else None."""
        if self.first is None:
            self.first = (step, elapsed_s)
            if elapsed_s < self.minutes * 60:
                return None
        first_step, first_elapsed = self.first
        timed = step - first_step
        if timed < CALIBRATION_STEPS and elapsed_s < self.minutes * 60:
            return None
        seconds_per_step = (elapsed_s - first_elapsed) / timed if timed else elapsed_s / max(step, 1)
        steps = steps_for_minutes(self.minutes, elapsed_s, step, seconds_per_step)
        logger.info("a budget of %g minutes buys %d steps at %.4f s a step", self.minutes, steps, seconds_per_step)
        return dataclasses.replace(config, steps=steps), {
            "minutes": self.minutes, "steps": steps, "seconds_per_step": seconds_per_step, "timed_steps":
            [first_step + 1, step]}


def _broadcast_object(world: _World, value):
    """Rank 0's `value` (a text, a message: anything that pickles; None stays None) on every rank; the other ranks
    wait for it as long as rank 0 works."""
    if not world.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=world.wait_group)
    return box[0]


def _all_ranks_true(world: _World, value: bool) -> bool:
    if not world.distributed:
        return value
    flag = torch.tensor([0.0 if value else 1.0], device=world.device if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item() == 0.0


# ------------------------------------------------------------------------------------------------ signals
class StopRequest:
    """Set by SIGTERM/SIGINT; the loop checks it after every step. Repeated signals change nothing (torchrun and a
    job manager may both forward one)."""

    def __init__(self):
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            logger.info("received %s: finishing the current step, then checkpointing", self.signal_name)

    def __call__(self) -> bool:
        return self.signal_name is not None


# ------------------------------------------------------------------------------------------------ the run
def _setup_logging(out: Path, is_main: bool) -> list[logging.Handler]:
    """Warnings to stderr; everything from INFO up to DIR/train.log (rank 0). Returns the handlers added."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handlers: list[logging.Handler] = [stderr]
    if is_main:
        handler = logging.FileHandler(out / runs.LOG_FILE, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(handler)
    for handler in handlers:
        root.addHandler(handler)
    return handlers


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # ru_maxrss is in KiB on Linux


def _prepare_run_dir(config: TrainConfig, source, resume: bool, status: TokenizingStatus) -> dict:
    """Rank 0, before any other rank touches DIR: the tokenizer (lab_models/training/corpus_tokens.py), stale files,
    a first status. Returns tokenizer facts for config.json."""
    out = Path(config.out)
    has_checkpoint = runs.has_checkpoint(out)
    if has_checkpoint and not resume:
        raise LabError("{out} already holds a run with a checkpoint: pass --resume to continue it, or choose "
                       "another --out", out=out)
    previous = runs.read_config(out)
    if resume and has_checkpoint and (out / runs.TOKENIZER_FILE).is_file():
        return previous.get("tokenizer", {})
    # A fresh start (also a resume of a run that never reached its first checkpoint).
    (out / runs.METRICS_FILE).unlink(missing_ok=True)
    if config.init_from:  # the starting run's tokenizer, as it is (training/init_from.py)
        start = read_starting_point(config.init_from, config.home)
        text = (start.run_dir / runs.TOKENIZER_FILE).read_text(encoding="utf-8")
        atomic_write_text(out / runs.TOKENIZER_FILE, text)
        tokenizer = load_tokenizer_file(out / runs.TOKENIZER_FILE)
        return {"kind": tokenizer_kind(tokenizer), "vocab_size": tokenizer.get_vocab_size(),
                "source": f"the tokenizer of {start.run_dir.name}",
                "note": "the starting run's tokenizer (--init-from)"}
    choice, facts = run_tokenizer(source, family=config.family, kind=config.tokenizer, vocab_size=config.vocab_size,
                                  settings=config.settings, translation=_translation_weight(config) > 0,
                                  home=config.home, status=status)
    prepared, _ = prepare_tokenizer(choice.tokenizer)
    atomic_write_text(out / runs.TOKENIZER_FILE, prepared.to_str())
    return facts


def _run_status(out: Path, config: TrainConfig):
    """The `write(message, progress)` of a run's TokenizingStatus: status.json says "running" with "phase":
    "tokenizing" (the page shows "tokenizing" and the progress bar of `tokenizing`) until the first step."""
    def write(message: str, progress: dict) -> None:
        runs.write_status(out, "running", step=0, total_steps=config.steps, message=message, phase="tokenizing",
                          tokenizing=progress)
    return write


def _token_shards(config: TrainConfig, source, tokenizer, info, world: _World, stop: "StopRequest",
                  status: TokenizingStatus):
    """Rank 0 tokenizes the corpus into token shards (or finds them finished); the other ranks wait for the folder's
    name and map the same shards (a lab home on a file system every machine sees, across machines). Returns the
    shards; raises TokenizingStopped (a stop), TokenizingDiskFull (a full disk) or ValueError on every rank."""
    outcome = None
    if world.is_main:
        try:
            status.phase("tokenizing")
            shards = tokenize_to_shards(source, tokenizer, info.eos_id, home=lab_home(config.home), progress=status,
                                        should_stop=stop)
            outcome = json.dumps({"folder": str(shards.folder)})
        except (TokenizingStopped, TokenizingDiskFull, ValueError) as error:
            if not world.distributed:
                raise
            said = error.strerror if isinstance(error, TokenizingDiskFull) else message_of(error)
            outcome = json.dumps(with_records({"error": type(error).__name__, "message": said or str(error)}))
    reply = messages_restored(json.loads(_broadcast_object(world, outcome)))
    if "error" in reply:
        raise {"TokenizingStopped": TokenizingStopped, "TokenizingDiskFull": _DiskFullOnRank}.get(
            reply["error"], LabError.of)(reply["message"])
    shards = open_shards(Path(reply["folder"]))
    if shards is None:
        raise LabError("rank {rank} cannot see the token shards rank 0 wrote at {folder}: put the "
                       "lab home (--home) on a file system every machine sees", rank=world.rank, folder=reply['folder'])
    return shards


class _DiskFullOnRank(TokenizingDiskFull):
    """Rank 0's full disk, as the other ranks learn of it (its message, no errno of their own)."""

    def __init__(self, message: Message | str):
        super().__init__(28, message)


def _inherited(start, out: Path) -> dict:
    """What a run started from another keeps of it in config.json: the tokens that play the lab's roles and the
    text framing (an imported checkpoint's), read from the starting run on a fresh start, from the run's own
    config.json on a resume (with "initialized_from")."""
    if start is not None:
        return {key: value for key, value in (("token_roles", start.token_roles), (FRAMING_KEY, start.framing))
                if value is not None}
    previous = runs.read_config(out)
    return {key: previous[key] for key in ("token_roles", FRAMING_KEY, "initialized_from") if key in previous}


def _translation_weight(config: TrainConfig) -> float:
    if config.family not in TRANSLATION_FAMILIES:
        return 0.0
    return float(config.objectives.get("translation", 0.0))


def _family_batch_source(module, config: TrainConfig, source, tokenizer, info, settings, shards, model_config):
    """The RNN families' own batch source (`batch_source(context)` in lab_models/models/rnn/<family>.py), or None."""
    if not hasattr(module, "batch_source"):
        return None

    context = DataContext(
        tokenizer=tokenizer, vocab=info, settings=settings, train_stream=TokenStream(shards.train()),
        validation_stream=TokenStream(shards.validation()), seq_len=config.seq_len,
        batch_size=config.batch_size, eval_batches=config.eval_batches, steps=config.steps,
        max_positions=model_config.max_positions, pairs_language=pairs_language(source))
    return module.batch_source(context)


def _addon_corpus(source) -> Corpus:
    """The sentences the contrastive add-on draws from (objectives/contrastive.py): the whole corpus when it is held
    in memory, else the tokenizer's bounded sample of its training split and its first 4 MB of validation text."""
    if isinstance(source, MemorySource):
        return source.corpus
    sample = source.tokenizer_corpus(TOKENIZER_SAMPLE_BYTES)
    return Corpus(source.name, source.source, sample.train, source.validation_documents(), sample.fingerprint)


def _translation_pairs(config: TrainConfig, source, tokenizer, info, max_positions: int):
    """The sentence pairs, tokenized, when the run trains translation (MASS, T5); else None: the corpus's own pairs
    for a built-in bilingual corpus (synthetic, stories), else the synthetic corpus's. A pair is cut
    to the model's max_positions on each side (not to seq_len: T5's task prefix alone is ~25 tokens of a small
    vocabulary)."""
    if _translation_weight(config) <= 0:
        return None

    pairs = TranslationPairs(config.family, tokenizer, info, max_len=max_positions,
                             settings=settings_from_dict(config.family, config.settings),
                             language=pairs_language(source))
    if pairs.unknown_target_fraction > 0.01:
        logger.warning("%.1f%% of the Chinese target tokens are unknown to the tokenizer", 100 *
                       pairs.unknown_target_fraction)
    if pairs.truncated_fraction > 0:
        logger.warning("%.1f%% of the translation pairs are longer than the model's %d positions and are cut",
                       100 * pairs.truncated_fraction, max_positions)
    return pairs


def _translation_json(config: TrainConfig, corpus, pairs) -> dict | None:
    if pairs is None:
        return None

    return {"weight": _translation_weight(config), **pairs.facts(), "pairs_per_step": config.batch_size,
            "denoising_rows": config.objectives.get(_main_objective(config.family), 0.0) > 0,
            "tokenizer_trained_on": tokenizer_texts_note(corpus, config.family)}


def _main_objective(family: str) -> str:
    return MAIN_OBJECTIVE[family]


def _config_json(config: TrainConfig, model, tokenizer_facts: dict, source, shards, world: _World,
                 created: float, validation_note: str, translation: dict | None = None) -> dict:
    mc = model.model_config
    info = model.vocab
    extra = {} if translation is None else {"translation": translation}
    return {
        "family": config.family, "preset": config.preset, "corpus": config.corpus,
        "corpus_fingerprint": source.fingerprint(), "seed": config.seed, "device": config.device,
        "token_shards": {"folder": str(shards.folder), "dtype": shards.dtype, "train_tokens": shards.train_tokens,
                         "validation_tokens": shards.validation_tokens,
                         "documents": shards.index.get("documents"), "read_notes": shards.notes},
        "device_used": str(world.device), "world_size": world.world_size, "steps": config.steps,
        "d_model": mc.d_model, "n_layers": mc.n_layers, "n_heads": mc.n_heads, "d_ff": mc.d_ff,
        "vocab_size": mc.vocab_size, "seq_len": config.seq_len, "batch_size": config.batch_size,
        "objectives": dict(model.objective_weights), "settings": config.settings, "model": mc.to_dict(),
        "num_parameters": model.num_parameters(), "tokenizer": tokenizer_facts,
        "special_ids": {"pad": info.pad_id, "mask": info.mask_id, "cls": info.cls_id, "sep": info.sep_id,
                        "bos": info.bos_id, "eos": info.eos_id, "start": info.start_id, "end": info.end_id},
        "validation_note": validation_note, "train": config.to_dict(), "created": created,
        "torch_version": torch.__version__, "zoo": config.zoo, **extra,
    }


def _find_unused_needed(model, batches: PackedBatches, world: _World, seed: int) -> bool:
    """Whether DDP needs find_unused_parameters: one probe forward/backward on a fixed batch (the same on every
    rank), then the gradients are dropped. The step RNG is reseeded per step, so the probe changes no trajectory."""
    torch.manual_seed(derive_seed(seed, "probe"))
    batch = batches.train_batch(generator_for(seed, "probe")).to(world.device)
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=world.device.type == "cuda"):
        out = model.loss(batch)
    out.total.backward()
    unused = any(p.requires_grad and p.grad is None for p in model.parameters())
    model.zero_grad(set_to_none=True)
    return not _all_ranks_true(world, not unused)


def run(config: TrainConfig, source, *, resume: bool) -> int:
    """Train as configured on `source` (text/corpus_sources.py `open_corpus`); returns the exit status. Errors are
    reported in status.json and on stderr."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    world = _init_world(config.device)
    handlers = _setup_logging(out, world.is_main)
    try:
        return _run(config, source, resume, world, out)
    finally:
        for handler in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()


def _run(config: TrainConfig, source, resume: bool, world: _World, out: Path) -> int:
    stop = StopRequest()
    stop.install()
    if world.is_main:
        say(f"preparing {out}: the corpus, the tokenizer and the batches")
    created = float(runs.read_config(out).get("created") or time.time()) if resume else time.time()
    step = 0
    status = TokenizingStatus(source.name, _run_status(out, config) if world.is_main else None, stop)
    try:
        failure = None
        tokenizer_facts: dict = {}
        if world.is_main:
            try:
                tokenizer_facts = _prepare_run_dir(config, source, resume, status)
            except ValueError as error:
                failure = ("error", message_of(error))
            except TokenizingStopped as error:  # stopped while reading the corpus for its fingerprint or sample
                failure = ("stopped", message_of(error))
        failure = _broadcast_object(world, failure)
        if failure is not None and failure[0] == "stopped":
            raise TokenizingStopped(failure[1])
        if failure is not None:
            raise LabError.of(failure[1])

        checkpoint = runs.latest_checkpoint(out) if resume else None
        # --init-from: the starting run is read for a fresh start; a resume keeps what config.json recorded then
        start = read_starting_point(config.init_from, config.home) if config.init_from and checkpoint is None \
            else None
        inherited = _inherited(start, out) if config.init_from else {}
        tokenizer, info = prepare_tokenizer(load_tokenizer_file(out / runs.TOKENIZER_FILE),
                                            inherited.get("token_roles"))
        shards = _token_shards(config, source, tokenizer, info, world, stop, status)
        byte_lengths = token_byte_lengths(tokenizer)
        module = objective_module(config.family)
        settings = settings_from_dict(config.family, config.settings)
        saved_model = runs.read_config(out).get("model") if checkpoint is not None else None
        if saved_model:

            model_config = model_config_from_dict(config.family, saved_model)
        elif start is not None:
            model_config = check_start(start, config.family, settings, config.model)
        else:

            model_config = family_model_config(config.family, config.preset, info.size, settings=settings,
                                               **config.model)
        if config.init_from:
            check_sentinels(config.family, settings, config.seq_len, info)
        pairs = _translation_pairs(config, source, tokenizer, info, model_config.max_positions)
        batches = _family_batch_source(module, config, source, tokenizer, info, settings, shards, model_config) or \
            PackedBatches(shards.train(), shards.validation(), seq_len=config.seq_len, batch_size=config.batch_size,
                          objective=module, batch_config=BatchConfig(settings, info),
                          eval_batches=config.eval_batches, translation=pairs,
                          denoising=config.objectives.get(_main_objective(config.family), 0.0) > 0)
        if batches.validation_note:
            logger.warning(batches.validation_note)
        model = build_model(config.family, model_config, settings, info, config.objectives,
                            seed=init_seed(config.seed))
        if start is not None:  # every weight the new family shares with the starting run; new heads as built
            done = load_starting_weights(model, start)
            inherited["initialized_from"] = done.facts(start)
            if world.is_main:
                write_note(out, start, config.family, done, model.objective_weights)
            logger.info("started from %s: %d tensors loaded, new %s, dropped %s", start.run_dir.name,
                        len(done.loaded), inherited["initialized_from"]["new"],
                        inherited["initialized_from"]["dropped"])
        model.to(world.device)

        addon_corpus = _addon_corpus(source) if "contrastive" in config.addons else None
        batches, addons, addon_facts = attach(model, config.addons, tokenizer=tokenizer, vocab=info,
                                              corpus=addon_corpus, batches=batches, batch_size=config.batch_size,
                                              max_positions=model_config.max_positions)
        engine_config = config.engine_config()
        find_unused = _find_unused_needed(model, batches, world, config.seed) if world.distributed else False
        trainer = Trainer(model, batches, engine_config, device=world.device, byte_lengths=byte_lengths,
                          rank=world.rank, world_size=world.world_size, find_unused_parameters=find_unused,
                          performance=config.performance_config(), home=config.home)
        if checkpoint is not None:
            trainer.restore(runs.load_checkpoint(out, model=model, optimizer=trainer.optimizer))
            logger.info("resumed from %s at step %d", checkpoint.name, trainer.step)
            started_in = (runs.read_config(out).get("performance_used") or {}).get("precision") or {}
            if started_in.get("requested") == "auto" and started_in.get("precision") == trainer.precision.precision:
                logger.info("precision: the resume keeps %s, what precision=auto chose when the run started, so "
                            "that it repeats its trajectory exactly (--perf precision=auto chooses afresh)",
                            started_in["precision"])
        step = trainer.step
        trainer.measure_model()  # FLOPs per token, and the precision and MFU peak they decide (config.json)
        budget = runs.read_config(out).get("budget") if checkpoint is not None else None
        if config.budget_flops is not None and checkpoint is None:  # the steps the budget buys, from rank 0's count
            config, budget = _broadcast_object(world, _spend_budget(config, trainer, world))
            trainer.config = config.engine_config()
        minutes = None
        if config.budget_minutes is not None and not (budget or {}).get("steps"):  # decided while it trains
            minutes = _MinutesBudget(config.budget_minutes)
            config = dataclasses.replace(config, steps=MAX_STEPS)
            trainer.config = config.engine_config()
        if world.is_main:
            runs.truncate_metrics(out, trainer.step)
            runs.write_config(out, {**_config_json(config, model, tokenizer_facts, source, shards, world, created,
                                                   batches.validation_note, _translation_json(config, source, pairs)),
                                    **addon_facts, **inherited, **({"budget": budget} if budget else {}),
                                    "performance_used": trainer.performance_used()})
            runs.write_status(out, "running", step=trainer.step, total_steps=config.steps, message=Message("training"))
            logger.info("training %s (%d parameters) on %s for %d steps", config.family, model.num_parameters(),
                        world.device, config.steps)
            length = (f"the steps that fit in {config.budget_minutes:g} minutes (timing the first ones)" if minutes
                      else f"{config.steps:,} steps")
            say(f"training {config.family} ({model.num_parameters():,} parameters) on {world.device} for {length}")
    except TokenizingStopped as error:
        message = Message("{reason}; resumable", reason=message_of(error))
        logger.info("%s", message)
        if world.is_main:
            runs.write_status(out, "stopped", step=0, total_steps=config.steps, message=message)
        _finish_world(world)
        return 0
    except TokenizingDiskFull as error:
        return _fail(out, world, config, step, error.strerror or str(error), EXIT_FAILED)
    except ValueError as error:
        return _fail(out, world, config, step, message_of(error), EXIT_BAD_ARGUMENT)
    except Exception as error:  # noqa: BLE001 - reported in status.json, with the traceback in train.log
        logger.exception("setting up the run failed")
        message = runs.disk_error_message(error, out) or f"{type(error).__name__}: {error}"  # "disk full: ..."
        return _fail(out, world, config, step, message, EXIT_FAILED)

    causal = model.objective_weights.get("clm", 0) > 0 or getattr(model, "is_language_model", False)
    last_status = 0.0
    saved_step = trainer.step if checkpoint is not None else -1
    checkpoint_after_eval = False
    # the lines for a person at a terminal; a wall-time budget's total is unknown until its steps are timed
    progress = TrainProgress(None if minutes is not None else config.steps, trainer.step, time.monotonic())
    try:
        for event in trainer.run(should_stop=stop):
            step = event.step
            if minutes is not None and isinstance(event, StepEvent):  # every rank, to share rank 0's decision
                decided = _broadcast_object(world, minutes.decide(config, event.step, event.elapsed_s))
                if decided is not None:
                    config, budget = decided
                    trainer.config = config.engine_config()
                    progress.total_steps = config.steps
                    minutes = None
                    if world.is_main:
                        say(f"a budget of {budget['minutes']:g} minutes buys {config.steps:,} steps at "
                            f"{budget['seconds_per_step'] * 1000:.0f} ms a step")
                        runs.write_config(out, {**runs.read_config(out), "steps": config.steps,
                                                "train": config.to_dict(), "budget": budget})
            if not world.is_main:
                continue
            if isinstance(event, StepEvent):
                runs.append_metrics(out, {
                    "split": "train", "step": event.step, "loss": _finite(event.loss),
                    "losses": {k: _finite(v) for k, v in event.losses.items()}, "lr": event.lr,
                    "grad_norm": _finite(event.grad_norm), "tokens_per_s": event.tokens_per_s,
                    "elapsed_s": event.elapsed_s, "tokens": event.tokens_seen, "max_rss_mb": _max_rss_mb(),
                    **_speed_fields(event), **event.record, **switch_metrics(model)})
                checkpoint_now = event.checkpoint_due and not event.evaluation_follows  # else after the evaluation
                checkpoint_after_eval = event.checkpoint_due and event.evaluation_follows
                if checkpoint_now:
                    runs.save_checkpoint(out, model=model, optimizer=trainer.optimizer, state=_state(trainer, config))
                    saved_step = event.step
                line = progress.step_line(event.step, event.loss, event.tokens_per_s, now=time.monotonic())
                if line is not None:
                    say(line)
                if checkpoint_now or time.monotonic() - last_status >= STATUS_INTERVAL_S:
                    runs.write_status(out, "running", step=event.step, total_steps=config.steps,
                                      message=Message("training"), loss=_finite(event.loss))
                    last_status = time.monotonic()
            elif isinstance(event, EvalEvent):
                row = {"split": "val", "step": event.step, "loss": _finite(event.loss),
                       "losses": {k: _finite(v) for k, v in event.losses.items()},
                       "bits_per_byte": _finite(event.bits_per_byte), "nll_per_token": _finite(event.nll_per_token),
                       "targets": event.targets, "bytes": event.bytes, "elapsed_s": event.elapsed_s}
                if causal:
                    row["perplexity"] = _finite(event.perplexity)
                if addons is not None:  # alignment, uniformity, BLEU, ... (objectives/addons.py)
                    row.update({k: _finite(v) for k, v in addons.evaluate(model).items()})
                runs.append_metrics(out, row)
                logger.info("step %d: val loss %.4f, %.4f bits per byte", event.step, event.loss, event.bits_per_byte)
                say(progress.evaluation_line(event.step, event.loss, event.bits_per_byte))
                if checkpoint_after_eval:  # the step is complete once its evaluation is logged
                    runs.save_checkpoint(out, model=model, optimizer=trainer.optimizer, state=_state(trainer, config))
                    saved_step, checkpoint_after_eval = event.step, False
                    runs.write_status(out, "running", step=event.step, total_steps=config.steps,
                                      message=Message("training"))
                    last_status = time.monotonic()
        step = trainer.step
        stopped = trainer.step < config.steps
        if world.is_main:
            if saved_step != trainer.step:
                runs.save_checkpoint(out, model=model, optimizer=trainer.optimizer, state=_state(trainer, config))
            runs.save_weights(model, out / runs.MODEL_FILE)
            if stopped:
                message = Message("stopped by {signal} at step {step}; resumable", signal=stop.signal_name or "request",
                                  step=trainer.step)
                runs.write_status(out, "stopped", step=trainer.step, total_steps=config.steps, message=message)
            else:
                runs.write_status(out, "finished", step=trainer.step, total_steps=config.steps,
                                  message=Message("finished {steps} steps", steps=trainer.step))
            logger.info("%s at step %d", "stopped" if stopped else "finished", trainer.step)
            for line in progress.end_lines("stopped" if stopped else "finished", trainer.step, out.resolve(),
                                           now=time.monotonic()):
                say(line)
        _finish_world(world)
        return 0
    except NonFiniteLossError as error:
        return _fail(out, world, config, step, message_of(error), EXIT_FAILED)
    except Exception as error:  # noqa: BLE001
        logger.exception("training failed at step %d", step)
        message = runs.disk_error_message(error, out) or f"{type(error).__name__}: {error}"  # "disk full: ..."
        return _fail(out, world, config, step, message, EXIT_FAILED)


def _speed_fields(event: StepEvent) -> dict:
    """FLOPs per token and MFU for a metrics row (the peak MFU divides by is in config.json "performance_used";
    "mfu" is null only where the device's peak is unknown)."""
    if event.flops_per_token is None:
        return {}
    return {"flops_per_token": event.flops_per_token, "mfu": event.mfu}


def _state(trainer: Trainer, config: TrainConfig) -> dict:
    return {**trainer.state(), "train": config.to_dict()}


def _finish_world(world: _World) -> None:
    if world.distributed and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _fail(out: Path, world: _World, config: TrainConfig, step: int, message: Message | str, code: int) -> int:
    if " ".join(message.split()) != message:  # one line: a message of the lab keeps its template when it is one
        message = " ".join(message.split())
    if world.is_main:
        try:
            runs.write_status(out, "failed", step=step, total_steps=config.steps, message=message)
        except OSError:
            pass
    say_error(message)
    if world.distributed and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the other ranks may be gone already
            pass
    return code


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        check_at_least("steps", args.steps)
        if args.resume:
            config, source = config_from_run(args)
        else:
            config, source = config_from_args(args)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    return run(config, source, resume=args.resume)


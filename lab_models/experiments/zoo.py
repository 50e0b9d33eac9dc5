"""The model zoo: one run of every chosen family on one corpus at one budget, in one command or one click.

    python -m lab_models zoo [--preset tiny|small|medium] [--families all|gpt,bert,...] [--corpus NAME_OR_PATH]
                             [--budget-flops F | --budget-minutes M | --steps N] [--seed S] [--seeds N]
                             [--workers N] [--device auto|cpu|cuda|mps] [--home DIR]

What it is
----------
A zoo is a set of ordinary runs (`<lab home>/runs/zoo-<zoo>-<family>-<time>-<hex>/`), one per family, queued on the
job manager (lab_models/training/jobs/manager.py: worker processes in order, one or a few per device) and tagged with
the zoo's name (job.json and config.json "zoo"). The name says what the runs share: the preset, the corpus and the
budget (`tiny-stories-1e12flops`, `tiny-synthetic-300steps`, `small-stdlib-docs-2.5e13flops`). Everything that reads
runs (Compare, Understand, the Leaderboard) sees the zoo's runs as they finish; the Leaderboard can rank one zoo
alone.

A variant (`ZooConfig.variant` and `variant_args`) is a zoo whose runs add a few trainer arguments after the recipe's
(`--set nsp=false`, `--model ffn=switch`), named after it (`tiny-stories-1e12flops-bert-no-nsp`): the arms of the
claims (lab_models/experiments/claims.py) are variants, or the zoo itself where an arm adds nothing.

Calling it again continues: a family whose run finished (status "finished" and model.safetensors) is skipped, one
that stopped or failed is resumed (from its last checkpoint when it has one), one still queued or running elsewhere is
waited for, and a missing one is started. Ctrl-C (or SIGTERM) stops the running trainer cleanly (it finishes its
step and checkpoints), takes the others off the queue, and exits with status 130 and a line saying how to continue.
The CLI's job manager does not take over runs that another process (an app on the same lab home) queued.

The order is GPT and GPT-2 first: both continue a text, so the first two runs already answer the same prompt side by
side in Compare (a fill-mask family and a continuation family cannot: one needs a blank, the other refuses one). BERT
and T5 come next (a fill-mask and an infilling, which answer the same prompt with a blank), then the other
Transformers, then the slower RNN-era families, CoVe last (its attentional LSTM is the slowest).

Budget: equal compute. Every family of a zoo gets the same training FLOPs (ZOO_BUDGET_FLOPS: tiny 1e12), counted
the way MFU counts them (lab_models/training/flops.py); each run trains the steps they buy at its own FLOPs per token
(`train --budget-flops`, lab_models/training/config.py `steps_for_budget`), so a family whose step costs more takes
fewer steps (at tiny, with 32-token rows: BERT about 2,700, GPT about 1,900, ELMo about 380). `--budget-flops F`
gives another budget, `--steps N` one step count for every family and `--budget-minutes M` one wall time instead (each its own zoo name).
With steps, evaluation and checkpoints are spaced to the run's length (EVALUATIONS_PER_RUN, CHECKPOINTS_PER_RUN).

The tiny zoo trains on the "stories" language (ZOO_CORPUS; lab_models/text/stories.py), where a word's class, a verb's
number and a pronoun's referent come from the context, so that its probes and blanks measure training rather than
word identity; at a vocabulary of 1024 tokens instead of the preset's 512 (ZOO_VOCAB_SIZE says why), and with one
recipe for every Transformer (ZOO_RECIPE: learning rate, warmup, rows of 32 tokens, 40% masking where the objective
masks); MASS and T5 also train translation on the corpus's own sentence pairs (ZOO_TRANSLATION_WEIGHT), as CoVe does.
What the budget buys is measured by benchmarks/bench_zoo.py and written in docs/zoo.md: at 1e12 GPT and GPT-2 write
sentences of the language, MPNet (and BERT with one seed of three) fills the blanks only the story decides at twice
the best trivial baseline, the other masked LMs have only just left the unigram plateau, and the span fillers have
not; the zoo says so rather than give some families more.

Speed: the tiny zoo runs one run per core at once, each with one thread (`ZooConfig.workers_here`; the job manager's
`parallel`): two one-thread tiny runs on 2 cores finish in half the time of the same two in a row. The one-seed tiny
zoo takes under 10 minutes on a 2-core CPU (docs/zoo.md has the measured time). The runs take the trainer's defaults
(no `--perf`; lab_models/training/performance.py): fused AdamW, and precision=auto, which keeps the tiny zoo in fp32
(its products are too small for bf16 autocast to pay) and trains `--preset small` in bf16 autocast on a CPU with
AVX-512 BF16 or AMX and on CUDA.

Deviation from a "model zoo" of published checkpoints: nothing is downloaded; every model is trained here, small,
on one corpus.
"""
from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lab_models.messages import LabError, Message
from lab_models.families import family_record
from lab_models.home import lab_home
from lab_models.training.jobs.files import ACTIVE_STATES, available_cores
from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.store import RunStore
from lab_models.models.family import TRAINED_FAMILIES
from lab_models.training.runs import MODEL_FILE
from lab_models.training.config import (MAX_STEPS, PRESET_DEFAULTS, check_budget_flops, check_budget_minutes,
                                         check_seed)
from lab_models.training.console import OneLineParser, say, say_error
from lab_models.text.corpus_sources import open_corpus
from lab_models.training.device import select_device

logger = logging.getLogger(__name__)

ZOO_ORDER: tuple[str, ...] = ("gpt", "gpt2", "bert", "t5", "roberta", "albert", "spanbert", "electra", "xlnet",
                              "mpnet", "unilm", "mass", "glm", "elmo", "ulmfit", "cvt", "cove")
# The zoo's runs that the Understand tab shows first for fill-mask: BERT and the three that changed its objective
# (RoBERTa's dynamic masking without NSP, MPNet's permuted view of every position, UniLM's mixed masks). At the demo
# zoo's 1e12 FLOPs MPNet (and BERT with one seed of three) fills the stories' reference blanks at more than twice the
# best trivial baseline, RoBERTa and UniLM have only just left the unigram plateau (docs/zoo.md): the view shows both.
ZOO_FILL_MASK_SHOWCASE: tuple[str, ...] = ("bert", "roberta", "mpnet", "unilm")
# What each Understand view picks by itself until the reader picks (api.view_picks): the zoo's runs that make the
# view's point (a bidirectional encoder beside a left-to-right one, the RNN era beside both), as many as shown.
ZOO_SHOWCASES: dict[str, tuple[str, ...]] = {
    "fill_mask": ZOO_FILL_MASK_SHOWCASE,
    "embeddings": ("bert", "gpt", "elmo", "t5"),
    "sentences": ("bert", "gpt"),
    "probing": ("bert", "gpt", "elmo"),
    "lens": ("gpt", "bert"),
    "attributions": ("bert", "gpt"),
    "finetune": ("bert", "gpt"),
}
ZOO_PRESETS = ("tiny", "small", "medium")
MAX_SEEDS = 20  # runs per family in one zoo
DEMO_ZOO_PRESET = "tiny"

# The training FLOPs every family of a zoo gets at each preset (the lab's own count, lab_models/training/flops.py, the
# one MFU uses): equal compute, not equal steps, so a family whose step costs more takes fewer of them. Tiny: what
# the 17 families spend in under 10 minutes on a 2-core CPU with two one-thread workers (`ZooConfig.workers_here`; docs/zoo.md has
# the measured time); at 1e12 a tiny BERT takes about 2,700 steps of 32-token rows, GPT about 1,900, ELMo about 380.
# Small and medium: about what 500 and 2000 steps of GPT cost there.
ZOO_BUDGET_FLOPS: dict[str, float] = {"tiny": 1e12, "small": 2.5e13, "medium": 2e15}
# The corpus each preset's zoo trains on when none is given: the tiny zoo on the "stories" language, where context
# decides (lab_models/text/stories.py); small and medium on their preset's corpus.
ZOO_CORPUS: dict[str, str] = {"tiny": "stories"}
# The tiny zoo's recipe, fixed before its runs and the same for every family it applies to: the tiny preset's 1e-3
# with 5 warmup steps leaves a masked LM on the unigram plateau for the whole budget (a tiny BERT on the stories at
# 2000 steps still answers "the" to every blank); a peak of 3e-3 after 200 warmup steps, 40% masking (Wettig et al.
# 2023, "Should You Mask 15% in Masked Language Modeling?") and rows of 32 tokens instead of 64 take it off the
# plateau within 1e12 FLOPs. The row length is what decides it (measured at 1e12, docs/zoo.md): at 64 tokens no
# learning rate, schedule, batch size, dropout or norm placement tried gets a BERT off the plateau, while at 32 it
# fills 15% of the reference blanks (3x the best trivial baseline) and GPT's continuations parse 96% to 100% of the
# time instead of 63%. A story is 20 to 40 words, so a 32-token row still holds most of one. The RNN era keeps the
# preset's settings (its LSTMs are not what the recipe was measured on).
ZOO_RECIPE: dict[str, dict[str, float]] = {"tiny": {"lr": 3e-3, "warmup_steps": 200, "mask_rate": 0.4, "seq_len": 32}}
# The zoo's MASS and T5 also train translation (objectives/translation.py, on the zoo corpus's own sentence pairs) at
# this weight beside their denoising objective, at every preset, so that the Compare tab's translate mode and the
# translation benchmark compare the three translating families (CoVe trains nothing else). The translation rows are
# part of the run's FLOPs, so they cost denoising steps: the budget stays equal.
ZOO_TRANSLATION_WEIGHT = 1.0
ZOO_TRANSLATING_FAMILIES = ("mass", "t5")
# The families whose objective has a mask_rate setting (the masked token budget), which the recipe's rate replaces
MASK_RATE_FAMILIES = ("bert", "roberta", "albert", "spanbert", "electra", "unilm")
# Runs of a zoo that share the CPU at once (`ZooConfig.workers_here`), each with one thread: a tiny step leaves a core idle while it runs Python
# (two one-thread tiny runs on 2 cores finish in half the time of the two in a row with two threads each; four at
# once are no faster, measured). None: one per core, at most MAX_ZOO_WORKERS; small and medium, and any GPU, one.
MAX_ZOO_WORKERS = 8
# The tiny zoo's vocabulary: the tiny preset's 512 tokens spend about 330 on the Chinese half of the synthetic corpus,
# which leaves the English words in 2 to 5 pieces ("beautiful" = b ea u ti fu l) and GPT's continuation of "the small
# cat" half-spelled after 1000 steps ("does not watclean a beaure"); at 1024 every English word of the grammar is one
# token and the same run writes "the small cat does not see the new worm ." (validation 0.76 against 1.06 bits per
# byte). A corpus that supports fewer tokens lowers it, one whose alphabet needs more raises it
# (lab_models/training/batches.py).
ZOO_VOCAB_SIZE: dict[str, int] = {"tiny": 1024}
EVALUATIONS_PER_RUN = 10
CHECKPOINTS_PER_RUN = 4
POLL_INTERVAL_S = 0.5
PROGRESS_LINE_EVERY_S = 15.0  # the CLI prints a running run's progress at most this often
EXIT_FAILED = 1
EXIT_BAD_ARGUMENT = 2
EXIT_INTERRUPTED = 130
TERMINAL = ("finished", "stopped", "failed")
_NAME_PART = re.compile(r"[^a-z0-9.]+")


def _slug(text: str) -> str:
    """A corpus name or path as part of a zoo name: 'My Notes.txt' -> 'my-notes.txt' (lower case, '-' between)."""
    return _NAME_PART.sub("-", Path(str(text)).name.lower()).strip("-.")[:40].strip("-.") or "corpus"


@dataclass(frozen=True)
class ZooConfig:
    """What a zoo trains: which families, at which preset, on which corpus, for how many steps. Saved in every
    member run (job.json "zoo" = `name`); the same config always gives the same name."""

    preset: str = DEMO_ZOO_PRESET
    families: tuple[str, ...] = ZOO_ORDER
    corpus: str | None = None  # None: the preset's corpus (synthetic for tiny)
    steps: int | None = None  # a number: that many for every family instead of the preset's FLOP budget
    seed: int = 0
    device: str = "auto"
    # training FLOPs for every family: each run trains the steps they buy (train --budget-flops); None: the preset's
    # (ZOO_BUDGET_FLOPS) unless steps or budget_minutes is given
    budget_flops: float | None = None
    # wall time for every family instead (train --budget-minutes): each run trains the steps that fit in it
    budget_minutes: float | None = None
    # runs per family, with the seeds seed, seed + 1, ...: a zoo of several seeds says how much a second seed moves
    # each score (the Leaderboard's intervals)
    seeds: int = 1
    # runs that share the CPU at once (None: `workers_here`'s rule); the results do not depend on it
    workers: int | None = None
    # a variant of the zoo's recipe (a claim's arm, lab_models/experiments/claims.py): a slug that ends the zoo's
    # name ("tiny-stories-1e12flops-bert-no-nsp") and the trainer arguments it adds after the recipe's (a later
    # --set, --objective or --model of the same key wins); None: the zoo itself
    variant: str | None = None
    variant_args: tuple[str, ...] = ()

    def __post_init__(self):
        if self.preset not in ZOO_PRESETS:
            raise LabError("Unknown zoo preset {preset!r}: choose one of {zoo_presets}.",
                           preset=self.preset, zoo_presets=', '.join(ZOO_PRESETS))
        if isinstance(self.families, str) or not self.families:
            raise LabError("A zoo needs at least one family, e.g. families=('gpt', 'bert').")
        unknown = [f for f in self.families if f not in TRAINED_FAMILIES]
        if unknown:
            raise LabError("Unknown family {unknown!r} for a zoo: choose from {zoo_order}.",
                           unknown=unknown[0], zoo_order=', '.join(ZOO_ORDER))
        if len(set(self.families)) != len(self.families):
            raise LabError("Each family can be in a zoo once; remove the repeated name.")
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, int)
                                       or not 1 <= self.steps <= MAX_STEPS):
            raise LabError("steps must be a whole number from 1 to {max_steps:,} (or None for the zoo's table), "
                           "got {steps!r}.", max_steps=MAX_STEPS, steps=self.steps)
        if self.corpus is not None and (not isinstance(self.corpus, str) or not self.corpus.strip()):
            raise LabError("corpus must be a corpus name or a path (or None for the preset's), got {corpus!r}.",
                           corpus=self.corpus)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise LabError("seed must be a whole number >= 0, got {seed!r}.", seed=self.seed)
        check_seed(self.seed)
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or not 1 <= self.seeds <= MAX_SEEDS:
            raise LabError("seeds must be a whole number from 1 to {max_seeds}, got {seeds!r}.", max_seeds=MAX_SEEDS,
                           seeds=self.seeds)
        check_seed(self.seed + self.seeds - 1)
        if self.budget_flops is not None:
            if self.steps is not None:
                raise LabError("Give a zoo steps or a FLOP budget, not both: the budget decides each family's steps.")
            check_budget_flops(self.budget_flops, "budget_flops")
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or not 1 <= self.workers <= MAX_ZOO_WORKERS):
            raise LabError("workers must be a whole number from 1 to {most}, got {workers!r}.", most=MAX_ZOO_WORKERS,
                           workers=self.workers)
        if self.variant is not None and (not isinstance(self.variant, str)
                                         or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9.]+)*", self.variant)):
            raise LabError("A zoo variant is a lower-case slug such as 'bert-no-nsp', got {variant!r}.",
                           variant=self.variant)
        if isinstance(self.variant_args, str) or not all(isinstance(arg, str) for arg in self.variant_args):
            raise LabError("variant_args must be a tuple of trainer arguments such as ('--set', 'nsp=false').")
        if self.variant_args and self.variant is None:
            raise LabError("A zoo with variant_args needs a variant name, so that its runs are not taken for the "
                           "zoo's own.")
        if self.budget_minutes is not None:
            if self.steps is not None or self.budget_flops is not None:
                raise LabError("Give a zoo one of steps, a FLOP budget or a wall-time budget: each decides the "
                               "steps.")
            check_budget_minutes(self.budget_minutes, "budget_minutes")

    @property
    def corpus_name(self) -> str:
        """The corpus the zoo trains on: the one given, else the preset's zoo corpus (ZOO_CORPUS), else the preset's."""
        return self.corpus or ZOO_CORPUS.get(self.preset) or PRESET_DEFAULTS[self.preset]["corpus"]

    @property
    def flops(self) -> float | None:
        """The training FLOPs every family gets: the given budget, else the preset's (ZOO_BUDGET_FLOPS) when neither
        steps nor minutes are given; None under steps or minutes."""
        if self.budget_flops is not None:
            return float(self.budget_flops)
        if self.steps is None and self.budget_minutes is None:
            return ZOO_BUDGET_FLOPS[self.preset]
        return None

    @property
    def name(self) -> str:
        """The preset, the corpus, and the budget: 'tiny-stories-1e12flops' (the default tiny zoo), 'tiny-300steps'
        with one step count for every family on the synthetic corpus, 'tiny-stories-2min' with one wall-time budget.

        >>> ZooConfig().name, ZooConfig(corpus="stdlib-docs", steps=300).name, ZooConfig(corpus="synthetic").name
        ('tiny-stories-1e12flops', 'tiny-stdlib-docs-300steps', 'tiny-synthetic-1e12flops')
        >>> ZooConfig(budget_flops=3e12).name, ZooConfig(budget_flops=2.5e13).name, ZooConfig(budget_minutes=2).name
        ('tiny-stories-3e12flops', 'tiny-stories-2.5e13flops', 'tiny-stories-2min')
        >>> ZooConfig(preset="small").name, ZooConfig(variant="bert-no-nsp", variant_args=("--set", "nsp=false")).name
        ('small-stdlib-docs-2.5e13flops', 'tiny-stories-1e12flops-bert-no-nsp')
        """
        parts = [self.preset, _slug(self.corpus_name)]
        if self.steps is not None:
            parts.append(f"{self.steps}steps")
        if self.flops is not None:
            parts.append(f"{self.flops:.3g}".replace("e+", "e").replace("+", "") + "flops")
        if self.budget_minutes is not None:
            parts.append(f"{self.budget_minutes:g}".replace(".", "p") + "min")
        if self.variant is not None:
            parts.append(self.variant)
        return "-".join(parts)

    @property
    def seed_values(self) -> tuple[int, ...]:
        """The seeds of the zoo's runs, e.g. (0, 1, 2) for seeds=3."""
        return tuple(range(self.seed, self.seed + self.seeds))

    def steps_for(self, family: str) -> int | None:
        """The steps `family` trains in this zoo; None under a budget (the run finds them out when it starts)."""
        return self.steps

    @property
    def workers_here(self) -> int:
        """How many of the zoo's runs share the machine at once: `workers`, else one per core (at most
        MAX_ZOO_WORKERS) for the tiny preset on a CPU, else one."""
        if self.workers is not None:
            return self.workers
        if self.preset != "tiny" or select_device(self.device).type != "cpu":
            return 1
        return min(MAX_ZOO_WORKERS, available_cores())

    def recipe_args(self, family: str) -> list[str]:
        """The preset's zoo recipe for `family` (ZOO_RECIPE): the learning rate, warmup and row length for a
        Transformer, the masking rate for a family whose objective has one; and translation for MASS and T5 at every
        preset (ZOO_TRANSLATION_WEIGHT).

        >>> ZooConfig().recipe_args("bert"), ZooConfig().recipe_args("elmo")
        (['--lr', '0.003', '--warmup-steps', '200', '--seq-len', '32', '--set', 'mask_rate=0.4'], [])
        >>> ZooConfig().recipe_args("gpt"), ZooConfig(preset="small").recipe_args("bert")
        (['--lr', '0.003', '--warmup-steps', '200', '--seq-len', '32'], [])
        >>> ZooConfig(preset="small").recipe_args("t5")
        ['--objective', 'translation=1']
        """
        translating = (["--objective", f"translation={ZOO_TRANSLATION_WEIGHT:g}"]
                       if family in ZOO_TRANSLATING_FAMILIES else [])
        recipe = ZOO_RECIPE.get(self.preset, {})
        if not recipe or family_record(family).kind == "rnn":
            return translating
        args = []
        if "lr" in recipe:
            args += ["--lr", f"{recipe['lr']:g}"]
        if "warmup_steps" in recipe:
            args += ["--warmup-steps", str(int(recipe["warmup_steps"]))]
        if "seq_len" in recipe:
            args += ["--seq-len", str(int(recipe["seq_len"]))]
        if "mask_rate" in recipe and family in MASK_RATE_FAMILIES:
            args += ["--set", f"mask_rate={recipe['mask_rate']:g}"]
        return args + translating

    def trainer_args(self, family: str) -> list[str]:
        """The budget (FLOPs or minutes) or, with steps, evaluation and checkpoint intervals spaced to the run's
        length (the module docstring says why); the zoo's vocabulary size where it has one (ZOO_VOCAB_SIZE); the
        recipe (`recipe_args`). Under a budget the run spaces its evaluations itself (the steps are not known before
        it counts its FLOPs or times its steps)."""
        steps = self.steps_for(family)
        vocabulary = ZOO_VOCAB_SIZE.get(self.preset)
        if self.flops is not None:
            spacing = ["--budget-flops", repr(self.flops)]
        elif self.budget_minutes is not None:
            spacing = ["--budget-minutes", repr(float(self.budget_minutes))]
        else:
            spacing = ["--eval-every", str(max(1, steps // EVALUATIONS_PER_RUN)),
                       "--checkpoint-every", str(max(1, steps // CHECKPOINTS_PER_RUN))]
        return (spacing + (["--vocab-size", str(vocabulary)] if vocabulary else []) + self.recipe_args(family)
                + list(self.variant_args))


DEMO_ZOO = ZooConfig()


@dataclass(frozen=True)
class ZooRun:
    """One family's place in a zoo, as the run folders say now. `state` is "not started" when there is no run."""

    family: str
    title: str
    run_id: str | None
    state: str
    step: int
    total_steps: int
    loss: float | None
    val_bits_per_byte: float | None
    message: Message | str = ""
    queue_position: int | None = None
    seed: int = 0

    @property
    def fraction(self) -> float:
        """How far the run is, from 0 to 1 (a finished run is 1 whatever its step)."""
        if self.state == "finished":
            return 1.0
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0


@dataclass(frozen=True)
class ZooProgress:
    """Where a whole zoo stands: one `ZooRun` per family in the zoo's order."""

    name: str
    runs: tuple[ZooRun, ...]

    @property
    def finished(self) -> int:
        return sum(run.state == "finished" for run in self.runs)

    @property
    def active(self) -> bool:
        """Whether any run of the zoo is queued or running."""
        return any(run.state in ACTIVE_STATES for run in self.runs)

    @property
    def fraction(self) -> float:
        """The zoo's progress: the mean of its runs' fractions (every run counts the same).

        >>> run = lambda state, step: ZooRun("gpt", "GPT", "r", state, step, 10, None, None)
        >>> ZooProgress("tiny", (run("finished", 10), run("running", 5), run("not started", 0))).fraction
        0.5
        """
        return sum(run.fraction for run in self.runs) / len(self.runs) if self.runs else 0.0


def _finished(store: RunStore, row: dict) -> bool:
    """"Finished" for a zoo: the trainer wrote state finished, and the final weights are there."""
    try:
        return row.get("state") == "finished" and (store.run_dir(row["run_id"]) / MODEL_FILE).is_file()
    except ValueError:
        return False


def zoo_rows(store: RunStore, name: str) -> dict[tuple[str, int], dict]:
    """(family, seed) -> the newest run tagged with zoo `name` (its `RunStore.summary` row)."""
    newest: dict[tuple[str, int], dict] = {}
    for row in store.list_runs():  # newest first
        key = (row.get("family"), int(row.get("seed") or 0))
        if row.get("zoo") == name and key[0] and key not in newest:
            newest[key] = row
    return newest


def zoo_progress(store: RunStore, config: ZooConfig = DEMO_ZOO) -> ZooProgress:
    """Every run of the zoo (family by family, each seed in turn) with its state, step, total steps, last loss and
    validation bits per byte."""
    rows = zoo_rows(store, config.name)
    runs = []
    for family in config.families:
        title = family_record(family).title
        for seed in config.seed_values:
            row = rows.get((family, seed))
            if row is None:
                runs.append(ZooRun(family, title, None, "not started", 0, config.steps_for(family) or 0, None, None,
                                   seed=seed))
                continue
            state = row.get("state") or "unknown"
            if state == "finished" and not _finished(store, row):
                state = "failed"
            runs.append(ZooRun(family, title, row["run_id"], state, int(row.get("step") or 0),
                               int(row.get("total_steps") or config.steps_for(family) or 0), row.get("loss"),
                               row.get("val_bits_per_byte"), row.get("message") or "", row.get("queue_position"),
                               seed))
    return ZooProgress(config.name, tuple(runs))


def trained_seeds(store: RunStore, config: ZooConfig) -> int:
    """How many seeds, from `config.seed` on, the zoo has runs of (at least 1): a zoo first trained with --seeds 3
    is shown with its three seeds by a page that only knows its name."""
    seeds = [seed for (_, seed) in zoo_rows(store, config.name) if seed >= config.seed]
    return min(MAX_SEEDS, max(seeds) - config.seed + 1) if seeds else 1


@dataclass(frozen=True)
class ZooPlan:
    """What `start_zoo` did, family by family: started anew, resumed, skipped (finished) or left (already active)."""

    name: str
    started: tuple[str, ...]
    resumed: tuple[str, ...]
    skipped: tuple[str, ...]
    active: tuple[str, ...]

    @property
    def queued(self) -> tuple[str, ...]:
        return self.started + self.resumed


def start_zoo(jobs: JobManager, config: ZooConfig = DEMO_ZOO) -> ZooPlan:
    """Queue every family of the zoo that is not finished yet, in the zoo's order (see the module docstring)."""
    rows = zoo_rows(jobs, config.name)
    started, resumed, skipped, active = [], [], [], []
    for seed in config.seed_values:  # every family's first seed before any second one: a first comparison sooner
        for family in config.families:
            member = family if config.seeds == 1 else f"{family}/seed{seed}"
            row = rows.get((family, seed))
            if row is None:
                jobs.start(family, preset=config.preset, corpus=config.corpus_name,
                           steps=config.steps_for(family), seed=seed, device=config.device,
                           extra_args=config.trainer_args(family), zoo=config.name, parallel=config.workers_here)
                started.append(member)
            elif _finished(jobs, row):
                skipped.append(member)
            elif jobs.status(row["run_id"])["state"] in ACTIVE_STATES:
                active.append(member)
            else:  # stopped, failed, interrupted, or "finished" without weights: run it again from its checkpoint
                jobs.resume(row["run_id"])
                resumed.append(member)
    logger.info("zoo %s: started %s, resumed %s, skipped %s, already active %s", config.name, started, resumed,
                skipped, active)
    return ZooPlan(config.name, tuple(started), tuple(resumed), tuple(skipped), tuple(active))


def stop_zoo(jobs: JobManager, name: str = DEMO_ZOO.name) -> list[str]:
    """Stop every queued or running run of zoo `name`: the queued ones first (so that none starts meanwhile), then
    the running one (it checkpoints). Returns the run ids stopped; calling `start_zoo` again continues."""
    rows = list(zoo_rows(jobs, name).values())
    stopped = []
    for wanted in ("queued", "running"):
        for row in rows:
            try:
                if jobs.status(row["run_id"])["state"] == wanted:
                    jobs.stop(row["run_id"])
                    stopped.append(row["run_id"])
            except ValueError:  # it ended meanwhile
                continue
    return stopped


def list_zoos(store: RunStore) -> list[dict]:
    """Every zoo in the lab home, the newest first: {"name", "runs", "finished"}."""
    zoos: dict[str, dict] = {}
    for row in store.list_runs():
        name = row.get("zoo")
        if not name:
            continue
        entry = zoos.setdefault(name, {"name": name, "families": set(), "finished": set()})
        member = (row.get("family"), int(row.get("seed") or 0))  # one run per family and seed
        entry["families"].add(member)
        if row.get("state") == "finished":
            entry["finished"].add(member)
    return [{"name": e["name"], "runs": len(e["families"]), "finished": len(e["finished"])} for e in zoos.values()]


# ------------------------------------------------------------------------------------------------ the CLI
def parse_families(text: str | None) -> tuple[str, ...]:
    """'all' (or nothing) -> every family in the zoo's order; 'bert, gpt' -> ('gpt', 'bert') (the zoo's order).

    >>> parse_families("t5,gpt"), len(parse_families("all"))
    (('gpt', 't5'), 17)
    """
    if text is None or text.strip().lower() in ("", "all"):
        return ZOO_ORDER
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in ZOO_ORDER]
    if unknown:
        raise LabError("unknown family {unknown!r} in --families: use all, or a comma list of "
                       "{zoo_order}", unknown=unknown[0], zoo_order=', '.join(ZOO_ORDER))
    return tuple(family for family in ZOO_ORDER if family in names)


def progress_line(index: int, total: int, run: ZooRun, seconds: float | None, show_seed: bool = False) -> str:
    """One line of the CLI's output: '[ 1/17] GPT       finished  1000/1000 steps  loss 2.31  bits/byte 1.42  31.2 s'
    (with `show_seed`, in a zoo of several seeds: 'GPT s1').

    >>> progress_line(0, 17, ZooRun("gpt", "GPT", "r", "running", 40, 1000, 3.2, None), 5.0)
    '[ 1/17] GPT       running     40/1000 steps  loss 3.200  5.0 s'
    >>> progress_line(1, 34, ZooRun("gpt", "GPT", "r", "queued", 0, 1000, None, None, seed=1), None, show_seed=True)
    '[ 2/34] GPT s1    queued        0/1000 steps'
    """
    label = f"{run.title} s{run.seed}" if show_seed else run.title
    parts = [f"[{index + 1:>2}/{total}] {label:<9} {run.state:<9} {run.step:>5}/{run.total_steps} steps"]
    if run.loss is not None:
        parts.append(f"loss {run.loss:.3f}")
    if run.val_bits_per_byte is not None and run.state == "finished":
        parts.append(f"bits/byte {run.val_bits_per_byte:.3f}")
    if seconds is not None:
        parts.append(f"{seconds:.1f} s")
    if run.state == "failed" and run.message:
        parts.append(run.message[:200])
    return "  ".join(parts)


def watch(store: RunStore, config: ZooConfig, *, poll_s: float = POLL_INTERVAL_S,
          line_every_s: float = PROGRESS_LINE_EVERY_S) -> Iterator[str]:
    """The CLI's progress lines until no run of the zoo is queued or running: one when a run ends (family,
    step/total, loss, seconds since it started running), and one at most every `line_every_s` for a running run."""
    started_at: dict[str, float] = {}
    watched: set[str] = set()  # runs seen queued or running: each gets a line when it ends
    last_line = time.monotonic()
    while True:
        progress = zoo_progress(store, config)
        now = time.monotonic()
        due = now - last_line >= line_every_s  # a line for every running run (a zoo runs several at once)
        for index, run in enumerate(progress.runs):
            if run.run_id is None:
                continue
            if run.state in ACTIVE_STATES:
                watched.add(run.run_id)
            if run.state == "running":
                started_at.setdefault(run.run_id, now)
                if due:
                    last_line = now
                    yield progress_line(index, len(progress.runs), run, now - started_at[run.run_id],
                                        config.seeds > 1)
            elif run.state in TERMINAL and run.run_id in watched:
                watched.discard(run.run_id)
                last_line = now
                since = started_at.get(run.run_id)
                yield progress_line(index, len(progress.runs), run, None if since is None else now - since,
                                    config.seeds > 1)
        if not progress.active:
            return
        time.sleep(poll_s)


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models zoo",
                       description="Train one run of every chosen family on one corpus at one budget.")
    p.add_argument("--preset", default=DEMO_ZOO_PRESET, help="tiny | small | medium (default tiny)")
    p.add_argument("--families", default="all", help="all, or a comma list such as gpt,bert,t5")
    p.add_argument("--corpus", help="a built-in or imported corpus name, or a path (default: the preset's)")
    p.add_argument("--steps", type=int, help="steps for every family instead of the preset's FLOP budget")
    p.add_argument("--budget-flops", type=float, metavar="F",
                   help="the training FLOPs every family may spend, e.g. 1e13 (default: the preset's, tiny 1e12); "
                        "each trains the steps they buy at its own FLOPs per token (equal compute, not equal steps)")
    p.add_argument("--budget-minutes", type=float, metavar="M",
                   help="instead of --steps: the minutes of wall time every family may train, e.g. 2; each trains "
                        "the steps that fit (equal time on this machine, not equal compute)")
    p.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    p.add_argument("--seeds", type=int, default=1,
                   help="runs per family, with the seeds --seed, --seed + 1, ... (default 1); the Leaderboard shows "
                        "each score's mean and 95%% interval over them")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")
    p.add_argument("--workers", type=int,
                   help="runs that share the machine at once, one thread each (default: one per core for the tiny "
                        "preset on a CPU, else 1)")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    return p


def _config_from_args(args, home: Path) -> ZooConfig:
    if args.corpus is not None:
        open_corpus(args.corpus, home=home)  # a ValueError now, not 17 failed runs later (nothing read yet)
    if args.device not in ("auto", "cpu", "cuda", "mps"):
        raise LabError("unknown device {device!r}: choose auto, cpu, cuda or mps", device=args.device)
    select_device(args.device)
    corpus = args.corpus
    if corpus is not None and Path(corpus).expanduser().exists():
        corpus = str(Path(corpus).expanduser().resolve())
    return ZooConfig(preset=args.preset, families=parse_families(args.families), corpus=corpus, steps=args.steps,
                     seed=args.seed, device=args.device, budget_flops=args.budget_flops,
                     budget_minutes=args.budget_minutes, seeds=args.seeds, workers=args.workers)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None, *, trainer_command: list[str] | None = None) -> int:
    """The CLI: queue the zoo, print a line per run, exit 0 when every run finished (1 if one failed, 130 on
    Ctrl-C or SIGTERM after stopping the zoo cleanly). `trainer_command` replaces `python -m lab_models train`
    (the tests' fake trainer)."""
    try:
        args = build_parser().parse_args(argv)
        home = lab_home(args.home)
        config = _config_from_args(args, home)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # recover=False: never mark the runs another process (an app on this home) has queued as interrupted
    jobs = JobManager(home, recover=False, trainer_command=trainer_command)
    began = time.monotonic()
    try:
        plan = start_zoo(jobs, config)
        budget = (f"{config.flops:.3g} training FLOPs each" if config.flops is not None else
                  f"{config.budget_minutes:g} minutes each" if config.budget_minutes is not None else
                  f"{config.steps} steps each")
        say(f"zoo {config.name}: {len(config.families)} families on {config.corpus_name} "
             f"({config.preset} preset, {budget}, {config.workers_here} at a time) in {home}: "
             f"{len(plan.queued)} queued, {len(plan.skipped)} finished already, {len(plan.active)} running elsewhere")
        for line in watch(jobs, config):
            say(line)
        jobs.wait_until_idle()  # a trainer that wrote "finished" may still be exiting
    except KeyboardInterrupt:
        say("stopping the zoo: the running trainer checkpoints, the queued runs are taken off the queue ...",
             stream=sys.stderr)
        stop_zoo(jobs, config.name)
        jobs.close()
        progress = zoo_progress(jobs, config)
        say(f"stopped: {progress.finished} of {len(progress.runs)} runs finished; run the same command again to "
             "continue where it stopped", stream=sys.stderr)
        return EXIT_INTERRUPTED
    except ValueError as error:
        jobs.close()
        say_error(error)
        return EXIT_BAD_ARGUMENT
    jobs.close()
    progress = zoo_progress(jobs, config)
    failed = [run for run in progress.runs if run.state != "finished"]
    say(f"zoo {config.name}: {progress.finished} of {len(progress.runs)} runs finished in "
         f"{time.monotonic() - began:.1f} s")
    if failed:
        for run in failed:
            say_error(f"{run.family} (seed {run.seed}) {run.state}: {run.message or 'see its train.log'} "
                      f"(run {run.run_id})")
        return EXIT_FAILED
    return 0


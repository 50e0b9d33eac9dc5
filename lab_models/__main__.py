"""`python -m lab_models <command> [options]`: the lab's one command line.

    python -m lab_models train ...       train one run of one family (lab_models/training/run.py; docs/contract.md §2)
    python -m lab_models tokenize ...    a corpus into token shards ahead of a run (lab_models/training/corpus_tokens.py)
    python -m lab_models zoo ...         one run of every chosen family on one corpus (lab_models/experiments/zoo.py)
    python -m lab_models sweep ...       one family at several sizes, with a power law (lab_models/experiments/sweep.py)
    python -m lab_models claims ...      the survey's claims tested, with verdicts (lab_models/experiments/claims.py)
    python -m lab_models finetune ...    fine-tune a run on a labelled task (lab_models/inference/finetuning/run.py)
    python -m lab_models import-hf ...   a Hugging Face checkpoint folder becomes a run (lab_models/interop/cli.py)
    python -m lab_models export-hf ...   a run becomes a folder transformers loads (lab_models/interop/cli.py)

`python -m lab_models --help` lists the commands, `python -m lab_models <command> --help` shows one command's
options. Each command's parser lives with its stage; this module only dispatches, as `pip` and
`torch.distributed.run` do, and imports a command's module only when that command runs (`--help` stays instant).
Under torchrun: `torchrun --nproc_per_node K -m lab_models train ...`.

An unknown command exits 2 with one `error: ...` line on stderr, like every command's bad argument.
"""
from __future__ import annotations

import importlib
import sys

from lab_models.training.console import say, say_error

EXIT_BAD_ARGUMENT = 2

# command -> (module, its entry point, one line for --help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "train": ("lab_models.training.run", "main", "train one run of one family"),
    "tokenize": ("lab_models.training.corpus_tokens", "main", "tokenize a corpus into token shards ahead of a run"),
    "zoo": ("lab_models.experiments.zoo", "main", "one run of every chosen family on one corpus at one budget"),
    "sweep": ("lab_models.experiments.sweep", "main", "one family at several sizes, and the power law of its loss"),
    "claims": ("lab_models.experiments.claims", "main", "the survey's claims, each tested at equal FLOPs with a verdict"),
    "finetune": ("lab_models.inference.finetuning.run", "main", "fine-tune a pretrained run on a labelled task"),
    "import-hf": ("lab_models.interop.cli", "import_main", "a local Hugging Face checkpoint folder becomes a run"),
    "export-hf": ("lab_models.interop.cli", "export_main", "a run becomes a folder that from_pretrained loads"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m lab_models <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, _, summary) in COMMANDS.items()]
    lines += ["", "python -m lab_models <command> --help shows a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        say(usage())
        return 0 if argv else EXIT_BAD_ARGUMENT
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        say_error(f"unknown command {command!r}: choose one of {', '.join(COMMANDS)} (python -m lab_models --help)")
        return EXIT_BAD_ARGUMENT
    module_name, entry, _ = COMMANDS[command]
    return getattr(importlib.import_module(module_name), entry)(rest)


if __name__ == "__main__":
    sys.exit(main())

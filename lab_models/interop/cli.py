"""`python -m lab_models import-hf` and `python -m lab_models export-hf`: checkpoints in and out, from a terminal.

    python -m lab_models import-hf --from DIR --out RUN_DIR [--generator GEN_DIR] [--allow-pickle]
                                   [--corpus NAME] [--home DIR] [--look]
    python -m lab_models export-hf --run RUN --out DIR [--home DIR]

import-hf: DIR is what transformers' `save_pretrained` writes (config.json, model.safetensors or its shards, the
tokenizer files); nothing is downloaded. RUN_DIR must not exist yet; put it under `<lab home>/runs/` for the app to
list it. `--generator` is ELECTRA's generator folder
(the discriminator is --from). `--allow-pickle` reads a pytorch_model.bin with torch.load(weights_only=True); without
it such a folder is refused. `--corpus` names the corpus the run is filed under and evaluated on (default
stdlib-docs; it was not trained on it). `--look` prints what the folder holds as JSON and writes nothing.

export-hf: RUN is a run folder, or a run id under `<lab home>/runs/`. DIR must not exist yet. It receives config.json,
model.safetensors, tokenizer.json, tokenizer_config.json and a README.md (ELECTRA: the generator in DIR/generator/).
Families whose architecture transformers has: GPT, GPT-2, BERT, RoBERTa, ALBERT, ELECTRA, XLNet, MPNet and T5, when
the run's options match the transformers class; for the others (SpanBERT, UniLM, MASS, GLM, the RNN era) the error
says why, and the lab's run folder stays their format.

Exit status 0 on success (the folder's path is logged on stderr); 2 with one `error: ...` line on stderr for anything
the user can fix (not a checkpoint, an unsupported architecture, a shape mismatch, a refused pickle, an existing
folder). Nothing is half-written. See lab_models/interop/__init__.py for the conversion and docs/checkpoints.md for the
table of architectures.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from lab_models.messages import LabError
from lab_models.home import lab_home
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import DEFAULT_CORPUS, import_into_home, inspect_checkpoint
from lab_models.training.console import OneLineParser, say_error

EXIT_BAD_ARGUMENT = 2
logger = logging.getLogger(__name__)


def import_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models import-hf",
                      description="Import a local Hugging Face checkpoint folder as a lab run.")
    p.add_argument("--from", dest="source", required=True, metavar="DIR", help="the checkpoint folder")
    p.add_argument("--out", metavar="RUN_DIR", help="the new run folder (must not exist)")
    p.add_argument("--generator", metavar="GEN_DIR", help="ELECTRA only: the generator's folder")
    p.add_argument("--allow-pickle", action="store_true", help="read pytorch_model.bin (weights only)")
    p.add_argument("--corpus", default=DEFAULT_CORPUS,
                   help=f"the corpus to file the run under (default {DEFAULT_CORPUS})")
    p.add_argument("--home", default=None, help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    p.add_argument("--look", action="store_true", help="describe the folder as JSON on stdout; write nothing")
    return p


def import_main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        args = import_parser().parse_args(argv)
        if args.look:
            summary = inspect_checkpoint(args.source, generator=args.generator, allow_pickle=args.allow_pickle)
            sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
            return 0
        if not args.out:
            raise LabError("--out RUN_DIR is required (or --look to only describe the folder)")
        run_dir = import_into_home(args.source, args.out, generator=args.generator, allow_pickle=args.allow_pickle,
                                   corpus=args.corpus, home=args.home)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    logger.info("run folder: %s", run_dir)
    return 0


def export_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models export-hf",
                      description="Export a lab run as a transformers checkpoint folder.")
    p.add_argument("--run", required=True, metavar="RUN", help="a run folder, or a run id in the lab home")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (must not exist)")
    p.add_argument("--home", default=None, help="the lab home for run ids (default: $PRETRAINING_LAB_HOME)")
    return p


def export_main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        args = export_parser().parse_args(argv)
        run = Path(args.run).expanduser()
        if not run.is_dir():  # a run id
            run = lab_home(args.home) / "runs" / args.run
        folder = export_run(run, args.out)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    logger.info("exported to %s", folder)
    return 0

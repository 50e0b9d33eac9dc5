"""`python -m lab_models.import_hf`: a Hugging Face checkpoint folder on this machine becomes a lab run folder.

    python -m lab_models.import_hf --from DIR --out RUN_DIR [--generator GEN_DIR] [--allow-pickle]
                                   [--corpus NAME] [--look]

DIR is what transformers' `save_pretrained` writes (config.json, model.safetensors or its shards, the tokenizer
files); nothing is downloaded. RUN_DIR must not exist yet; put it under `<lab home>/runs/` for the app to list it.
`--generator` is ELECTRA's generator folder (the discriminator is --from). `--allow-pickle` reads a
pytorch_model.bin with torch.load(weights_only=True); without it such a folder is refused. `--corpus` names the
corpus the run is filed under and evaluated on (default stdlib-docs; it was not trained on it). `--look` prints
what the folder holds and writes nothing. See lab_models/interop/ for the conversion and README.md for the table of
architectures.

Exit status 0 on success (the run folder's path is logged on stderr with the steps); 2 with one `error: ...` line
on stderr for anything the user can fix (not a checkpoint, an unsupported architecture, a shape mismatch, a
refused pickle, an existing RUN_DIR). Nothing is half-written.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from .cli_output import say_error

EXIT_BAD_ARGUMENT = 2
logger = logging.getLogger("lab_models.import_hf")


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m lab_models.import_hf",
                       description="Import a local Hugging Face checkpoint folder as a lab run.")
    p.add_argument("--from", dest="source", required=True, metavar="DIR", help="the checkpoint folder")
    p.add_argument("--out", metavar="RUN_DIR", help="the new run folder (must not exist)")
    p.add_argument("--generator", metavar="GEN_DIR", help="ELECTRA only: the generator's folder")
    p.add_argument("--allow-pickle", action="store_true", help="read pytorch_model.bin (weights only)")
    p.add_argument("--corpus", default=None, help="the corpus to file the run under (default stdlib-docs)")
    p.add_argument("--look", action="store_true", help="describe the folder as JSON on stdout; write nothing")
    return p


def main(argv: list[str] | None = None) -> int:
    from lab_models import api

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        if args.look:
            summary = api.inspect_hf(args.source, generator_dir=args.generator, allow_pickle=args.allow_pickle)
            sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
            return 0
        if not args.out:
            raise ValueError("--out RUN_DIR is required (or --look to only describe the folder)")
        options = {"corpus": args.corpus} if args.corpus else {}
        run_dir = api.import_hf(args.source, args.out, generator_dir=args.generator, allow_pickle=args.allow_pickle,
                                **options)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    logger.info("run folder: %s", run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m lab_models.export_hf`: a lab run becomes a folder transformers' `from_pretrained` loads.

    python -m lab_models.export_hf --run RUN --out DIR

RUN is a run folder, or a run id under `<lab home>/runs/`. DIR must not exist yet. It receives config.json,
model.safetensors, tokenizer.json, tokenizer_config.json and a README.md (ELECTRA: the generator in DIR/generator/).
Families whose architecture transformers has: GPT, GPT-2, BERT, RoBERTa, ALBERT, ELECTRA (and XLNet, MPNet, T5 where
their converters are in this build), when the run's options match the transformers class; for the others
(SpanBERT, UniLM, MASS, GLM, the RNN era) the error says why, and the lab's run folder stays their format.

Exit status 0 on success; 2 with one `error: ...` line on stderr otherwise. Nothing is half-written.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from .cli_output import say_error

EXIT_BAD_ARGUMENT = 2
logger = logging.getLogger("lab_models.export_hf")


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m lab_models.export_hf",
                       description="Export a lab run as a transformers checkpoint folder.")
    p.add_argument("--run", required=True, metavar="RUN", help="a run folder, or a run id in the lab home")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write (must not exist)")
    p.add_argument("--home", default=None, help="the lab home for run ids (default: $PRETRAINING_LAB_HOME)")
    return p


def main(argv: list[str] | None = None) -> int:
    from lab_models import api

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        run = Path(args.run).expanduser()
        if not run.is_dir():  # a run id
            run = api.lab_home(args.home) / "runs" / args.run
        folder = api.export_hf(run, args.out)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    logger.info("exported to %s", folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())

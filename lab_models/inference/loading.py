"""Load a trained run back as a model, for generation, fill-mask, probes and attention views.

A run folder (lab_models/training/run.py) holds `config.json` (the resolved configuration, with the exact `ModelConfig`
under "model" and the objective settings under "settings"), `tokenizer.json` and, once the trainer has stopped or
finished, `model.safetensors`. A run that is still training has no `model.safetensors` yet; its newest checkpoint's
weights are used instead, so a user can look at a model while it trains.

    run = load_run("~/.pretraining-lab/runs/gpt-small-...")
    run.family, run.model (a FamilyModel in eval mode), run.tokenizer, run.vocab, run.step, run.framing

`run.framing` is how the run frames a text (lab_models/text/framing.py, decided once here from config.json): the
lab's runs read text bare, an imported checkpoint as its own tokenizer frames it. Every inference that encodes text
asks it.

The model is rebuilt exactly as the trainer built it (`build_model` with the saved config, settings and objective
weights), then the weights are loaded strictly: a file that does not fit raises ValueError, never a tensor error.
Loads are cached by (folder, weights file, its modification time, device), so a page that asks the same run many
times reads it once and sees new weights when a checkpoint replaces the old ones.
"""
from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer

from lab_models.messages import LabError
from lab_models.training import runs
from lab_models.nn.config import ModelConfig
from lab_models.text.vocab import VocabInfo
from lab_models.models.family import TRAINED_FAMILIES
from lab_models.models.family import build_model
from lab_models.text.tokenization import load_tokenizer_file
from lab_models.objectives.settings import settings_from_dict
from lab_models.text.vocab import prepare_tokenizer
from lab_models.text.framing import Framing, run_framing
from lab_models.models.family import model_config_from_dict

logger = logging.getLogger(__name__)


_CACHE_SIZE = 8  # loaded runs kept (small models; a page compares up to 4)


@dataclass(frozen=True)
class TrainedRun:
    """A trained run, ready for inference. `model` is in eval mode on `device`."""

    run_dir: Path
    run_id: str
    family: str
    config: dict  # config.json as written by the trainer
    model: torch.nn.Module  # a lab_models.models.family.FamilyModel
    tokenizer: Tokenizer
    vocab: VocabInfo
    settings: object  # the family's objective Settings
    step: int  # the step the weights were saved at
    device: torch.device
    framing: Framing  # how this run frames a text (lab_models/text/framing.py)

    @property
    def model_config(self) -> ModelConfig:
        return self.model.model_config

    @property
    def max_positions(self) -> int:
        return self.model.model_config.max_positions


def weights_file(run_dir: str | os.PathLike) -> tuple[Path, int]:
    """The weights to load and their step: model.safetensors (the final or stopped weights), else the newest
    checkpoint's. ValueError when there are none yet."""
    run_dir = Path(run_dir)
    final = run_dir / runs.MODEL_FILE
    checkpoint = runs.latest_checkpoint(run_dir)
    status = runs.read_status(run_dir)
    if final.is_file():
        step = int(status.get("step") or 0)
        if checkpoint is not None and status.get("state") in ("running", "queued"):
            # resumed: model.safetensors is from the earlier stop; the checkpoint is newer
            checkpoint_step = int(runs.read_json(checkpoint / "state.json").get("step") or 0)
            if checkpoint_step > step:
                return checkpoint / runs.MODEL_FILE, checkpoint_step
        return final, step
    if checkpoint is not None:
        return checkpoint / runs.MODEL_FILE, int(runs.read_json(checkpoint / "state.json").get("step") or 0)
    raise LabError("run {name} has no weights yet: wait for its first checkpoint, or train it first", name=run_dir.name)


def load_run(run_dir: str | os.PathLike, device: str | torch.device | None = None) -> TrainedRun:
    """The run in `run_dir`, rebuilt and loaded (cached). device: None = CPU (inference here is small and the
    trainer may hold the GPU); ValueError for a folder that is not a trained run."""

    run_dir = Path(run_dir).expanduser()
    if not run_dir.is_dir():
        raise LabError("no run folder at {run_dir}: pick a run from the list of runs", run_dir=run_dir)
    config = runs.read_config(run_dir)
    family = config.get("family")
    if not config or not isinstance(config.get("model"), dict):
        raise LabError("{name} is not a trained run (its config.json is missing or incomplete)", name=run_dir.name)
    if family not in TRAINED_FAMILIES:
        raise LabError("run {name} has family {family!r}, which this version of the lab cannot load",
                       name=run_dir.name, family=family)
    weights, step = weights_file(run_dir)
    device = torch.device(device or "cpu")
    return _load(run_dir.resolve(), family, weights, weights.stat().st_mtime_ns, step, device)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _load(run_dir: Path, family: str, weights: Path, mtime_ns: int, step: int, device: torch.device) -> TrainedRun:
    """Build and load (cached by the weights file and its modification time: new weights, a new load)."""

    config = runs.read_config(run_dir)
    tokenizer_path = run_dir / runs.TOKENIZER_FILE
    if not tokenizer_path.is_file():
        raise LabError("run {name} has no {tokenizer_file}", name=run_dir.name, tokenizer_file=runs.TOKENIZER_FILE)
    # an imported checkpoint's own special tokens play the lab's roles (lab_models/interop); trained runs: None
    roles = config.get("token_roles") if isinstance(config.get("token_roles"), dict) else None
    tokenizer, vocab = prepare_tokenizer(load_tokenizer_file(tokenizer_path), roles)
    settings = settings_from_dict(family, config.get("settings") or {})

    model_config = model_config_from_dict(family, config["model"])  # an RNNConfig for the RNN families
    model = build_model(family, model_config, settings, vocab, config.get("objectives") or None)
    runs.load_weights(model, weights)
    model.to(device).eval()
    run = TrainedRun(run_dir=run_dir, run_id=run_dir.name, family=family, config=config, model=model,
                     tokenizer=tokenizer, vocab=vocab, settings=settings, step=step, device=device,
                     framing=run_framing(config, tokenizer, vocab, family))
    logger.info("loaded run %s (%s, step %d) on %s", run.run_id, family, step, device)
    return run

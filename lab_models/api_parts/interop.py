"""`lab_models.api`'s interop section (re-exported there: the UI imports only `lab_models.api`).

Real checkpoints in the lab and the lab's runs in transformers (lab_models/interop/): a local Hugging Face
checkpoint folder becomes an ordinary run folder (every tab reads it like a trained run), and a run of a family
that transformers has becomes a folder `from_pretrained` loads. Nothing is downloaded.
"""
from __future__ import annotations

from pathlib import Path

from .. import corpora
from .. import interop as _interop
from ..home import lab_home

INTEROP_DEFAULT_CORPUS = _interop.DEFAULT_CORPUS
__all__ = ["INTEROP_DEFAULT_CORPUS", "import_hf", "inspect_hf", "export_hf", "interop_architectures"]


def inspect_hf(src_dir, *, generator_dir=None, allow_pickle: bool = False) -> dict:
    """What the checkpoint folder `src_dir` holds and what importing it would make, without writing anything: path,
    model_type, architecture, family, d_model, n_layers, n_heads, d_ff, vocab_size, max_positions, activation,
    parameters, weights_size, tokenizer (source, kind, size, added, roles), files [(name, bytes)], generator.
    ValueError saying why it cannot be imported."""
    return _interop.inspect_checkpoint(src_dir, generator=generator_dir, allow_pickle=allow_pickle)


def import_hf(src_dir, out_dir=None, *, generator_dir=None, allow_pickle: bool = False,
              corpus: str = INTEROP_DEFAULT_CORPUS, home=None, progress=None) -> Path:
    """Import the local checkpoint folder `src_dir` (what `save_pretrained` writes) as a run folder; returns it.

    out_dir: the new run folder (must not exist); None = `<lab home>/runs/<family>-imported-<time>-<hex>`, where
    every tab lists it. generator_dir: ELECTRA's generator folder. allow_pickle: accept pytorch_model.bin, read with
    torch.load(weights_only=True). corpus: the corpus the run is filed under and evaluated on (it was not trained on
    it). progress(fraction, message). ValueError (what to do) for a folder that is not a checkpoint, an unsupported
    architecture, a shape mismatch, a refused pickle, an existing out_dir; nothing is half-written."""
    known = corpora.list_corpora(home=home)
    if corpus not in known:
        raise ValueError(f"Unknown corpus {corpus!r} to file the imported run under: choose one of {', '.join(known)}.")
    if out_dir is None or not str(out_dir).strip():
        out_dir = _interop.default_run_dir(src_dir, lab_home(home) / "runs", allow_pickle=allow_pickle)
    return _interop.import_checkpoint(src_dir, out_dir, generator=generator_dir, allow_pickle=allow_pickle,
                                      corpus=corpus, progress=progress)


def export_hf(run_dir, out_dir) -> Path:
    """Write the run `run_dir` as a transformers checkpoint folder `out_dir` (must not exist); returns it. ValueError
    saying why for a family without a transformers class (SpanBERT, UniLM, MASS, GLM, the RNN era) or a run whose
    options the class lacks."""
    return _interop.export_run(run_dir, out_dir)


def interop_architectures() -> list[dict]:
    """One row per architecture the lab converts: module, family, model_types, reference (the transformers class
    export writes), and available (whether its converter is in this build)."""
    rows = []
    for name, available in _interop.available().items():
        model_types, family = _interop.ARCHITECTURES[name]
        reference = _interop.reference_class(name) if available else None
        rows.append({"module": name, "family": family, "model_types": list(model_types), "reference": reference,
                     "available": available})
    return rows

"""Real checkpoints in the lab and the lab's runs in transformers: a local Hugging Face checkpoint folder becomes an
ordinary run folder (every tab reads it like a trained run), and a run of a family that transformers has becomes a
folder `from_pretrained` loads. The Hugging Face cache is listed without a network, each listed checkpoint imports
with one call, and an export is written as a folder plus a zip to download. Nothing is downloaded.

The work is in lab_models/interop/: importer.py and exporter.py (through each architecture's converter, registry.py),
checkpoint.py (reading a checkpoint folder) and cache.py (the Hugging Face cache, read with huggingface_hub's scanner).
"""
from __future__ import annotations

from pathlib import Path

from lab_models.home import lab_home
from lab_models.interop import cache as _cache
from lab_models.interop import checkpoint as _checkpoint
from lab_models.interop import exporter as _exporter
from lab_models.interop import importer as _importer
from lab_models.interop import registry as _registry

__all__ = ["INTEROP_DEFAULT_CORPUS", "EXPORTS_FOLDER", "inspect_hf", "import_hf", "export_hf",
           "interop_architectures", "cached_checkpoints", "hf_cache_dir", "checkpoint_files", "import_cached",
           "export_problem", "export_hf_archive"]

INTEROP_DEFAULT_CORPUS = _importer.DEFAULT_CORPUS
EXPORTS_FOLDER = "exports"  # <lab home>/exports/<run id>-transformers-<time>-<hex>/


def inspect_hf(src_dir, *, generator_dir=None, allow_pickle: bool = False) -> dict:
    """What the checkpoint folder `src_dir` holds and what importing it would make, without writing anything: path,
    model_type, architecture, family, d_model, n_layers, n_heads, d_ff, vocab_size, max_positions, activation,
    parameters, weights_size, tokenizer (source, kind, size, added, roles), files [(name, bytes)], generator.
    ValueError saying why it cannot be imported."""
    return _importer.inspect_checkpoint(src_dir, generator=generator_dir, allow_pickle=allow_pickle)


def import_hf(src_dir, out_dir=None, *, generator_dir=None, allow_pickle: bool = False,
              corpus: str = INTEROP_DEFAULT_CORPUS, home=None, progress=None) -> Path:
    """Import the local checkpoint folder `src_dir` (what `save_pretrained` writes) as a run folder; returns it.

    out_dir: the new run folder (must not exist); None = `<lab home>/runs/<family>-imported-<time>-<hex>`, where
    every tab lists it. generator_dir: ELECTRA's generator folder. allow_pickle: accept pytorch_model.bin, read with
    torch.load(weights_only=True). corpus: the corpus the run is filed under and evaluated on (it was not trained on
    it). progress(fraction, message). ValueError (what to do) for a folder that is not a checkpoint, an unsupported
    architecture, a shape mismatch, a refused pickle, an existing out_dir; nothing is half-written."""
    return _importer.import_into_home(src_dir, out_dir, generator=generator_dir, allow_pickle=allow_pickle,
                                      corpus=corpus, home=home, progress=progress)


def export_hf(run_dir, out_dir) -> Path:
    """Write the run `run_dir` as a transformers checkpoint folder `out_dir` (must not exist); returns it. ValueError
    saying why for a family without a transformers class (SpanBERT, UniLM, MASS, GLM, the RNN era) or a run whose
    options the class lacks."""
    return _exporter.export_run(run_dir, out_dir)


def interop_architectures() -> list[dict]:
    """One row per architecture the lab converts: module, family, model_types, reference (the transformers class
    export writes), and available (whether its converter is in this build)."""
    rows = []
    for name, available in _registry.available().items():
        model_types, family = _registry.ARCHITECTURES[name]
        reference = _registry.reference_class(name) if available else None
        rows.append({"module": name, "family": family, "model_types": list(model_types), "reference": reference,
                     "available": available})
    return rows


def cached_checkpoints(cache_dir=None) -> list[dict]:
    """The model repositories in the Hugging Face cache (default: the one huggingface_hub uses, HF_HUB_CACHE or
    HF_HOME/hub or ~/.cache/huggingface/hub), read with huggingface_hub's scanner, no network: one dict each with
    repo_id, revision, path (the snapshot folder `import_hf` takes), architecture, model_type, family, parameters,
    size, size_text, supported (bool) and reason ("" when supported). Supported ones first."""
    return _cache.cached_checkpoints(cache_dir)


def hf_cache_dir() -> Path:
    """The Hugging Face cache folder `cached_checkpoints` reads by default (from this process's environment)."""
    return _cache.default_cache_dir()


def checkpoint_files(folder) -> list[tuple[str, int]]:
    """(name, bytes) of a checkpoint folder's files, for the page's files table (ValueError: not a folder)."""
    return _checkpoint.list_files(_checkpoint.source_folder(folder))


def import_cached(repo_id: str, *, cache_dir=None, corpus: str = INTEROP_DEFAULT_CORPUS, home=None,
                  progress=None) -> Path:
    """Import the cached checkpoint `repo_id` (as `cached_checkpoints` lists it) into the lab home; returns the new
    run folder. ValueError when the cache has no such model or the lab cannot import it (saying why)."""
    return import_hf(_cache.cached_checkpoint_path(repo_id, cache_dir), corpus=corpus, home=home, progress=progress)


def export_problem(run_dir) -> str:
    """"" when `export_hf` would export the run, else why not (nothing is written)."""
    return _exporter.export_problem(run_dir)


def export_hf_archive(run_dir, *, home=None) -> dict:
    """Export the run into a new folder under `<lab home>/exports/` that `from_pretrained` loads, and zip it for a
    download: {"folder": Path, "zip": Path (in a new temporary folder)}. ValueError saying why a run cannot be
    exported."""
    folder, archive = _exporter.export_archive(run_dir, lab_home(home) / EXPORTS_FOLDER)
    return {"folder": folder, "zip": archive}

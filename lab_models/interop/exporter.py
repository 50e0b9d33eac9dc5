"""Exporting a lab run as a folder that `transformers` loads with `from_pretrained`.

    export_run(run_dir, out_dir) -> out_dir
    export_problem(run_dir) -> "" or why the run cannot be exported (nothing written)
    export_archive(run_dir, exports_dir) -> (a new folder in exports_dir, a zip of it in a temporary folder)

The folder holds what `save_pretrained` writes: config.json (the architecture's own fields, from the converter's
`export_config`), model.safetensors (`export_state`: transformers' tensor names, no shared storage), the run's
tokenizer.json with a tokenizer_config.json naming the tokens that play pad, mask, cls, sep, bos and eos (so
`AutoTokenizer.from_pretrained(out)` gives the lab's tokenizer as a `PreTrainedTokenizerFast`), and a README.md
saying which run it came from. `AutoModelForCausalLM` (GPT, GPT-2), `AutoModelForMaskedLM` or
`AutoModelForPreTraining` (BERT, RoBERTa, ALBERT, ELECTRA) then load it.

Which runs: a family whose architecture has a transformers class, when the run's options match that class (a
GPT-2 run with an output bias does not: the converter says which option differs). ELECTRA: the discriminator is the
folder itself (ElectraForPreTraining) and, when the run's generator was trained, `generator/` beside it holds the
generator (ElectraForMaskedLM), with the shared embeddings copied in. SpanBERT, UniLM, MASS, GLM and the RNN-era
families have no transformers class: a clear ValueError says why, and the lab's run folder stays their format.

Like the import, the folder is written under a hidden name beside `out_dir` and renamed at the end; an existing
`out_dir` is never overwritten.

Deviations from what `save_pretrained` writes: the tokenizer class is transformers' generic
`PreTrainedTokenizerFast` over tokenizer.json, not the architecture's own (a lab run's tokenizer is the lab's, not
BERT's WordPiece files or GPT-2's vocab.json), and there is no generation_config.json (transformers derives one).

Worked example:

>>> import tempfile
>>> export_run(tempfile.mkdtemp(), tempfile.mkdtemp())
Traceback (most recent call last):
...
lab_models.messages.LabError: ... already exists: choose a new folder for the export (nothing is overwritten)
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
from pathlib import Path

from safetensors.torch import save_file

from lab_models.messages import LabError, Message, message_of
from lab_models.home import atomic_write_text
from lab_models.interop.hf_tokenizer import export_tokenizer_config
from lab_models.interop.registry import architecture_module, module_name_for_family
from lab_models.inference.loading import load_run

logger = logging.getLogger(__name__)

COMPANION_HOOK = "export_companions"  # optional in a converter: {sub-folder: (config, state)} (ELECTRA's generator)
TOKENIZER_HOOK = "export_tokenizer"  # optional: (model, tokenizer) -> the tokenizer to write (MPNet: ids permuted)
TOKENIZER_CONFIG_HOOK = "tokenizer_config_extras"  # optional: (model, tokenizer) -> more tokenizer_config.json fields


def _target(out_dir) -> Path:
    if out_dir is None or not str(out_dir).strip():
        raise LabError("Give the folder to export to (--out DIR).")
    target = Path(str(out_dir).strip()).expanduser()
    if target.exists() or target.is_symlink():
        raise LabError("{target} already exists: choose a new folder for the export (nothing is overwritten)",
                       target=target)
    return target


def _roles(run) -> dict[str, str]:
    """Which token plays each lab role: an imported run's token_roles, else the lab's own names."""
    roles = run.config.get("token_roles")
    if isinstance(roles, dict):
        return roles
    v = run.vocab
    return {name: run.tokenizer.id_to_token(token_id) for name, token_id in (
        ("[PAD]", v.pad_id), ("[MASK]", v.mask_id), ("[CLS]", v.cls_id), ("[SEP]", v.sep_id), ("[BOS]", v.bos_id),
        ("[EOS]", v.eos_id))}


def _write_folder(folder: Path, config: dict, state: dict, run, readme: str, module) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "config.json", json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer = getattr(module, TOKENIZER_HOOK)(run.model, run.tokenizer) if hasattr(module, TOKENIZER_HOOK) \
        else run.tokenizer
    atomic_write_text(folder / "tokenizer.json", tokenizer.to_str())
    extras = getattr(module, TOKENIZER_CONFIG_HOOK)(run.model, tokenizer) if hasattr(module, TOKENIZER_CONFIG_HOOK) \
        else None
    tokenizer_config = export_tokenizer_config(_roles(run), tokenizer, run.max_positions, extras)
    atomic_write_text(folder / "tokenizer_config.json", json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n")
    atomic_write_text(folder / "README.md", readme)


def _exportable(run_dir):
    """(the loaded run, its converter module, the transformers config.json) or ValueError saying why not."""
    if run_dir is None or not str(run_dir).strip():
        raise LabError("Give the run folder to export (--run RUN).")
    run = load_run(str(run_dir).strip())
    module = architecture_module(module_name_for_family(run.family))
    model_config = getattr(run.model, "model_config", None)
    if getattr(model_config, "ffn", "dense") != "dense":
        raise LabError("{run_id} has Switch Transformer feed-forward layers (ffn={ffn}), which "
                       "the transformers class of {family} does not have: it stays in the lab's own format",
                       run_id=run.run_id, ffn=model_config.ffn, family=run.family)
    return run, module, module.export_config(run.model)


def export_problem(run_dir) -> Message | str:
    """"" when `export_run` would export the run, else why not (nothing is written; for the page's Export button).

    >>> import tempfile
    >>> "is not a trained run" in export_problem(tempfile.mkdtemp())
    True
    """
    try:
        _exportable(run_dir)
    except ValueError as error:
        return message_of(error)
    return ""


def export_archive(run_dir, exports_dir) -> tuple[Path, Path]:
    """Export the run into a new folder `<exports_dir>/<run id>-transformers-<time>` and zip that folder into a new
    temporary folder (for a download); returns (the folder, the zip). The zip is written in full before anyone
    can be handed it; nothing in `exports_dir` is overwritten."""
    import tempfile

    run, _, _ = _exportable(run_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = export_run(run.run_dir, Path(exports_dir) / f"{run.run_id}-transformers-{stamp}-{secrets.token_hex(2)}")
    scratch = Path(tempfile.mkdtemp(prefix="lab-export-"))
    archive = shutil.make_archive(str(scratch / folder.name), "zip", root_dir=folder.parent, base_dir=folder.name)
    return folder, Path(archive)


def export_run(run_dir, out_dir) -> Path:
    """Write the run `run_dir` as a transformers folder `out_dir` (see the module docstring); returns `out_dir`.
    ValueError: not a run, no weights, a family without a transformers class, an option the class lacks, an
    existing `out_dir`."""

    target = _target(out_dir)
    run, module, config = _exportable(run_dir)
    state = module.export_state(run.model)
    companions = getattr(module, COMPANION_HOOK)(run.model) if hasattr(module, COMPANION_HOOK) else {}
    source = run.config.get("imported_from") or {}
    readme = (f"# {run.run_id}\n\nExported by the Pretraining Lab on {time.strftime('%Y-%m-%d %H:%M:%S')} from the "
              f"lab run `{run.run_dir}` (family `{run.family}`, step {run.step}) as {config['architectures'][0]}.\n"
              + (f"\nThat run was itself imported from `{source.get('path')}` ({source.get('architecture')}).\n"
                 if source else "")
              + "".join(f"\n`{name}/` holds the {sub['architectures'][0]} that belongs with it.\n"
                        for name, (sub, _) in companions.items())
              + "\nLoad it with `AutoModelForPreTraining.from_pretrained(DIR)` (or the task class of its "
                "architecture) and `AutoTokenizer.from_pretrained(DIR)`. "
                + ("The tokenizer frames text as the checkpoint it came from did (its own post-processor).\n"
                   if run.framing.source == "checkpoint" else
                   "The tokenizer adds no [CLS]/[SEP] framing: the lab trained without it.\n"))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.exporting-{secrets.token_hex(3)}"
    try:
        _write_folder(staging, config, state, run, readme, module)
        for name, (sub_config, sub_state) in companions.items():
            _write_folder(staging / name, sub_config, sub_state, run, readme, module)
        if target.exists():
            raise LabError("{target} appeared while exporting: choose a new folder (nothing is overwritten)",
                           target=target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("exported %s (%s) to %s", run.run_id, config["architectures"][0], target)
    return target

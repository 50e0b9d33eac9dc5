"""Importing a Hugging Face checkpoint folder as an ordinary lab run folder, and looking at one first.

    inspect_checkpoint(src)                 -> a summary: architecture, family, sizes, parameters, tokenizer, files
    import_checkpoint(src, out)             -> out, a run folder every tab reads like a trained run

What the run folder holds (the same files a training run leaves, lab_models/training/runs.py):

    config.json        family, "model" (the exact ModelConfig), "settings", "objectives", preset "imported", the
                       corpus the lab files it under, "token_roles" (which of the checkpoint's tokens plays [MASK],
                       [EOS], ...), "framing" (how its tokenizer frames a text: [CLS] ... [SEP], <s> ... </s>, T5's
                       </s>, XLNet's <sep> <cls>, or nothing; lab_models/text/framing.py), and "imported_from": the
                       source path as typed and resolved, the architecture, the time, the source config.json, the
                       tokens the lab added
    model.safetensors  the weights in the lab's names, float32
    tokenizer.json     the checkpoint's tokenizer (converted from vocab.txt / vocab.json + merges.txt if needed)
    status.json        "finished" at step 0: nothing was trained in the lab
    NOTE.md, train.log where it came from and what the lab changed, in words

Steps: read the folder (lab_models/interop/checkpoint.py), pick the converter by config.json "model_type"
(registry.py), build the lab's config from the checkpoint's (`import_config`), read the tokenizer and decide the
roles (hf_tokenizer.py), build the model on the `meta` device (no memory, no random init), convert the tensors
(`import_state`), append embedding rows for tokens the lab had to add (the mean row; the model never saw them),
check that every weight is finite, load the tensors into the model as they are (`assign=True`: no second copy),
then write everything into a hidden folder beside `out` and rename it into place: a failure at
any step leaves nothing behind, and an existing `out` is never overwritten.

Deviations from the checkpoint: weights stored in float16 or bfloat16 become float32 (the lab computes in float32 on
the CPU); dropout rates are taken from config.json (they only matter for fine-tuning). The corpus an imported run is
filed under is the one the lab evaluates it on (Leaderboard: held-out text, fill-mask, infill); it was not trained
on it, and config.json says so.

Worked example (the out folder must not exist):

>>> import tempfile
>>> taken = tempfile.mkdtemp()
>>> import_checkpoint(tempfile.mkdtemp(), taken)
Traceback (most recent call last):
...
lab_models.messages.LabError: ... already exists: choose a new folder for the imported run (nothing is overwritten)
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import secrets
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

import torch

from lab_models.messages import LabError, Message
from lab_models.training import runs
from lab_models.home import atomic_write_text
from lab_models.objectives import objective_module
from lab_models.interop.checkpoint import (TENSOR_NAMES_KEY, CheckpointFolder, folder_size_text, list_files,
                                           load_state, read_checkpoint_folder, tensor_shapes)
from lab_models.interop.hf_tokenizer import CheckpointTokenizer, checkpoint_tokenizer
from lab_models.interop.registry import architecture_module, module_name_for_model_type
from lab_models.models.family import resolve_objective_weights
from lab_models.models.family import build_model
from lab_models.home import lab_home
from lab_models.text.corpora import list_corpora
from lab_models.objectives.settings import settings_to_dict
from lab_models.text.vocab import prepare_tokenizer
from lab_models.text.framing import FRAMING_KEY, TEXT_A, framing_record

logger = logging.getLogger(__name__)

DEFAULT_CORPUS = "stdlib-docs"  # real English, like the text the released checkpoints learned from
IMPORTED_PRESET = "imported"
NOTE_FILE = "NOTE.md"
GENERATOR_KEY = "_generator"  # hf_config[GENERATOR_KEY]: an ELECTRA generator's config.json; its tensors are
GENERATOR_PREFIX = "_generator."  # in hf_state under this prefix (lab_models/interop/electra.py)

Progress = Callable[[float, str], None]
VOCABULARY_TENSORS = ("embeddings.token.weight", "lm_bias", "lm_out.weight")  # one row per token id


@dataclasses.dataclass(frozen=True)
class _Source:
    """The checkpoint folder, its converter, its config.json (with an ELECTRA generator's under GENERATOR_KEY)."""

    folder: CheckpointFolder
    module: object
    hf_config: dict
    generator: CheckpointFolder | None


def _source(src, generator, allow_pickle: bool) -> _Source:
    folder = read_checkpoint_folder(src, allow_pickle=allow_pickle)
    module = architecture_module(module_name_for_model_type(folder.model_type))
    hf_config = dict(folder.config)
    if not folder.pickled:  # the names, from the safetensors headers (no tensor is read)
        hf_config[TENSOR_NAMES_KEY] = tuple(tensor_shapes(folder))
    companion = None
    if module.FAMILY == "electra":
        if "ElectraForMaskedLM" in folder.architectures and generator is None:
            raise LabError("{path} is an ELECTRA generator (ElectraForMaskedLM). Import the discriminator "
                           "(ElectraForPreTraining) with --from, and pass this folder as --generator.",
                           path=folder.path)
        if generator is not None and str(generator).strip():
            companion = read_checkpoint_folder(generator, allow_pickle=allow_pickle)
            if companion.model_type != "electra":
                raise LabError("--generator {path} is a {model_type} checkpoint, not an "
                               "ELECTRA generator", path=companion.path, model_type=companion.model_type)
            hf_config[GENERATOR_KEY] = dict(companion.config)
    elif generator is not None and str(generator).strip():
        raise LabError("--generator is for ELECTRA (its generator is a second checkpoint); {path} is "
                       "{model_type}", path=folder.path, model_type=folder.model_type)
    return _Source(folder, module, hf_config, companion)


def _import_config(source: _Source):
    try:
        return source.module.import_config(source.hf_config)
    except KeyError as error:
        raise LabError("{path} has no {reason!r}, which a "
                       "{model_type} config needs",
                       path=source.folder.path / 'config.json', reason=error.args[0],
                       model_type=source.folder.model_type) from None
    except (TypeError, AttributeError) as error:
        raise LabError("{path} has a field of the wrong type for "
                       "{model_type}: {error}",
                       path=source.folder.path / 'config.json', model_type=source.folder.model_type,
                       error=error) from None


class _Combined(Mapping):
    """Several checkpoints' tensors as one mapping, each under its name prefix (ELECTRA: the generator's under
    GENERATOR_PREFIX); tensors are read when asked for."""

    def __init__(self, parts: dict[str, Mapping]):
        self.parts = parts

    def __getitem__(self, name: str) -> torch.Tensor:
        for prefix, part in sorted(self.parts.items(), key=lambda item: -len(item[0])):
            if name.startswith(prefix) and name[len(prefix):] in part:
                return part[name[len(prefix):]]
        raise KeyError(name)

    def __contains__(self, name) -> bool:
        return any(name.startswith(prefix) and name[len(prefix):] in part for prefix, part in self.parts.items())

    def __iter__(self):
        for prefix, part in self.parts.items():
            for name in part:
                yield prefix + name

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts.values())


def _tokenizer(source: _Source) -> CheckpointTokenizer:
    """The folder's tokenizer with the roles its converter asks for (optional attributes USES_MASK_TOKEN, default
    True, and ROLE_CHAINS, lab_models/interop/hf_tokenizer.py)."""
    return checkpoint_tokenizer(source.folder.path, source.folder.model_type,
                                uses_mask=getattr(source.module, "USES_MASK_TOKEN", True),
                                chains=getattr(source.module, "ROLE_CHAINS", None))


def _architecture(source: _Source) -> str:
    names = [name for name in source.folder.architectures if name in source.module.HF_ARCHITECTURES]
    return names[0] if names else (source.folder.architectures or source.module.HF_ARCHITECTURES)[0]


def inspect_checkpoint(src, *, generator=None, allow_pickle: bool = False) -> dict:
    """What an import of `src` would make, without converting anything: path, model_type, architecture, family,
    sizes (d_model, n_layers, n_heads, d_ff, vocab_size, max_positions), parameters (from the safetensors headers;
    None for pickled weights), weights_size, objectives (every objective's weight in the run it would make),
    tokenizer (source, kind, size, added tokens, roles, sentinels: how many T5 <extra_id_k> it has), files [(name,
    bytes)], generator (ELECTRA: its path and sizes). ValueError with the reason when it cannot be imported."""

    source = _source(src, generator, allow_pickle)
    model_config, settings, objectives = _import_config(source)
    family = source.module.FAMILY
    objectives = resolve_objective_weights(  # what the run will train: the converter's, the family's for the rest
        family, dataclasses.replace(objective_module(family).Settings(), **settings), objectives)
    tokenizer = _tokenizer(source)
    shapes = tensor_shapes(source.folder)
    summary = {
        "path": str(source.folder.path), "model_type": source.folder.model_type,
        "architecture": _architecture(source), "family": source.module.FAMILY,
        "d_model": model_config.d_model, "n_layers": model_config.n_layers, "n_heads": model_config.n_heads,
        "d_ff": model_config.d_ff, "vocab_size": model_config.vocab_size,
        "max_positions": model_config.max_positions, "activation": model_config.activation,
        "parameters": sum(math.prod(shape) for shape in shapes.values()) if shapes else None,
        "weights_size": folder_size_text(source.folder.weight_bytes()), "pickled": source.folder.pickled,
        "objectives": objectives, "settings": settings,
        "tokenizer": {"source": tokenizer.source, "kind": tokenizer.kind, "size": tokenizer.original_size,
                      "added": list(tokenizer.added), "roles": _shown_roles(tokenizer),
                      "framing": framing_text(framing_record(tokenizer.tokenizer)),
                      "sentinels": sum(1 for name in tokenizer.roles if name.startswith("<extra_id_"))},
        "files": list_files(source.folder.path), "generator": None,
    }
    if source.generator is not None:
        generator_shapes = tensor_shapes(source.generator)
        summary["generator"] = {"path": str(source.generator.path),
                                "hidden_size": source.generator.config.get("hidden_size"),
                                "parameters": sum(math.prod(s) for s in generator_shapes.values()) or None}
    return summary


def framing_text(record: dict) -> str:
    """A framing record's single-text template in words.

    >>> framing_text({"single": [["[CLS]", 0], ["$A", 0], ["[SEP]", 0]]}), framing_text({"single": [["$A", 0]]})
    ('[CLS] text [SEP]', 'text')
    """
    return " ".join("text" if token == TEXT_A else str(token) for token, _ in record["single"])


def _shown_roles(tokenizer: CheckpointTokenizer) -> dict[str, str]:
    return {name: token for name, token in tokenizer.roles.items() if not name.startswith("<extra_id_")}


def _fit_vocab(info, size: int):
    """The VocabInfo cut to the first `size` ids (for the model built at the checkpoint's own vocabulary size, before
    the lab's added tokens get their rows)."""
    if info.size <= size:
        return info
    changes = {"size": size, "random_ids": tuple(i for i in info.random_ids if i < size) or (0,)}
    if info.word_start is not None:
        changes["word_start"] = info.word_start[:size]
    if hasattr(info, "word_end"):
        changes["word_end"] = info.word_end[:size]
    return dataclasses.replace(info, **changes)


def _build_on_meta(family, model_config, settings, vocab, objectives):
    """The FamilyModel with every tensor on the meta device: its structure and names, no memory, no init."""

    with torch.device("meta"):
        return build_model(family, model_config, settings, vocab, objectives)


def _grow_vocabulary(state: dict[str, torch.Tensor], old_size: int, new_size: int, added_ids: list[int],
                     model) -> dict[str, torch.Tensor]:
    """The vocabulary-sized tensors (first dimension `old_size` in the checkpoint, `new_size` in the lab's model)
    grown to `new_size` rows, and the rows of the tokens the lab added set: embedding-like tensors get the mean of
    the checkpoint's rows (an added token may also land in an unused padding row of the checkpoint's table), biases
    zero."""
    wanted = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    for name, tensor in list(state.items()):
        shape = wanted.get(name)
        if not name.endswith(VOCABULARY_TENSORS) or shape is None or tensor.shape[0] != old_size \
                or shape[0] != new_size:
            continue
        grown = torch.cat([tensor, tensor.new_zeros(new_size - old_size, *tensor.shape[1:])])  # (new_size, ...)
        if tensor.dim() > 1:
            mean = tensor.mean(dim=0)
            grown[old_size:] = mean
            for token_id in added_ids:
                grown[token_id] = mean
        else:
            for token_id in added_ids:
                grown[token_id] = 0.0
        state[name] = grown
    return state


def _owned(tensor: torch.Tensor) -> torch.Tensor:
    """A float32 contiguous tensor that owns its storage: a slice of a checkpoint tensor (MPNet's position table
    without its two padding rows) is copied, or safetensors would refuse to save the run (and keep the whole
    storage alive)."""
    tensor = tensor.detach().to(torch.float32).contiguous()
    if tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size():
        tensor = tensor.clone()
    return tensor


def _check_state(state: dict[str, torch.Tensor], model) -> None:
    wanted = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    missing = sorted(set(wanted) - set(state))
    extra = sorted(set(state) - set(wanted))
    if missing or extra:
        raise LabError("the converted weights do not fit the lab's model: missing {missing}, unexpected "
                       "{extra}", missing=missing[:4], extra=extra[:4])
    for name, shape in wanted.items():
        if tuple(state[name].shape) != shape:
            raise LabError("shape mismatch after conversion: {name} is {state_shape}, the lab's "
                           "model needs {shape}", name=name, state_shape=tuple(state[name].shape), shape=shape)


def _check_finite(state: dict[str, torch.Tensor]) -> None:
    """Every converted weight must be a finite number: a corrupt download is refused, not saved. A tensor's sum is
    NaN or infinite when any of its numbers is (it only overflows for weights near 1e38, corrupt as well), and a sum
    reads each number once without an elementwise mask: for GPT-2's 124M weights on the busy 2-core machine 0.35 s,
    against 2.7 s for torch.isfinite over every element and 1.5 s for a forward pass."""
    for name, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor.sum())):
            raise LabError("the checkpoint's weights for {name} hold NaN or infinite numbers: the file is corrupt",
                           name=name)


def _note(source: _Source, out: Path, tokenizer: CheckpointTokenizer, added_ids: dict[str, int], family: str,
          corpus: str, architecture: str) -> str:
    lines = [f"# Imported checkpoint: {out.name}", "",
             f"- from `{source.folder.path}` ({source.folder.path.resolve()})",
             f"- architecture {architecture} (config.json model_type `{source.folder.model_type}`), lab family "
             f"`{family}`",
             f"- imported {time.strftime('%Y-%m-%d %H:%M:%S')}; weights: "
             + ", ".join(p.name for p in source.folder.weight_files)
             + (" (a pickle, read with torch.load(weights_only=True))" if source.folder.pickled else ""),
             f"- tokenizer: {tokenizer.source} ({tokenizer.kind}, {tokenizer.original_size} tokens)"]
    if source.generator is not None:
        lines.append(f"- ELECTRA generator from `{source.generator.path}`")
    elif family == "electra":
        lines.append("- no ELECTRA generator was given: the generator is untrained (its mlm weight is 0), so "
                     "fill-mask and mask-predict refuse this run; the discriminator is the imported model")
    if added_ids:
        shown = ", ".join(f"{token} = {token_id}" for token, token_id in added_ids.items())
        lines.append(f"- tokens the lab added, which the model never saw in training (embedding row = the mean of "
                     f"the others): {shown}")
    lines += [f"- {note}" for note in tokenizer.notes]
    lines.append(f"- the lab frames text as the checkpoint's tokenizer does: "
                 f"{framing_text(framing_record(tokenizer.tokenizer))} (config.json \"{FRAMING_KEY}\")")
    lines.append(f"- nothing was trained in the lab (step 0). The corpus `{corpus}` is the one the lab evaluates "
                 "it on and files it under; the model was not trained on it.")
    return "\n".join(lines) + "\n"


def default_run_dir(src, runs_dir: Path, *, allow_pickle: bool = False) -> Path:
    """A fresh run folder for `src` under `runs_dir`: `<family>-imported-<YYYYmmdd-HHMMSS>-<4 hex>` (the lab's run
    id pattern, with "imported" where a trained run has its preset)."""
    folder = read_checkpoint_folder(src, allow_pickle=allow_pickle)
    family = architecture_module(module_name_for_model_type(folder.model_type)).FAMILY
    for _ in range(100):
        candidate = Path(runs_dir) / f"{family}-{IMPORTED_PRESET}-{time.strftime('%Y%m%d-%H%M%S')}-" \
                                     f"{secrets.token_hex(2)}"
        if not candidate.exists():
            return candidate
    raise LabError("could not find a free run folder name in {runs_dir}", runs_dir=runs_dir)


def _target(out) -> Path:
    if out is None or not str(out).strip():
        raise LabError("Give the folder to write the imported run to (--out RUN_DIR).")
    target = Path(str(out).strip()).expanduser()
    if target.exists() or target.is_symlink():
        raise LabError("{target} already exists: choose a new folder for the imported run (nothing is "
                       "overwritten)", target=target)
    return target


def import_into_home(src, out=None, *, generator=None, allow_pickle: bool = False, corpus: str = DEFAULT_CORPUS,
                     home=None, progress: Callable[[float, str], None] | None = None) -> Path:
    """`import_checkpoint` as a user asks for it (the page, the API, `python -m lab_models import-hf`): `corpus` must
    be a corpus of the lab home, and no `out` means a new folder `<home>/runs/<family>-imported-<time>-<hex>`, where
    every tab lists it."""

    known = list_corpora(home=home)
    if corpus not in known:
        raise LabError("Unknown corpus {corpus!r} to file the imported run under: choose one of {known}.",
                       corpus=corpus, known=', '.join(known))
    if out is None or not str(out).strip():
        out = default_run_dir(src, lab_home(home) / "runs", allow_pickle=allow_pickle)
    return import_checkpoint(src, out, generator=generator, allow_pickle=allow_pickle, corpus=corpus,
                             progress=progress)


def import_checkpoint(src, out, *, generator=None, allow_pickle: bool = False, corpus: str = DEFAULT_CORPUS,
                      progress: Progress | None = None) -> Path:
    """Import the checkpoint folder `src` as a run folder `out` (see the module docstring); returns `out`.

    generator: ELECTRA's generator folder (ElectraForMaskedLM), optional. allow_pickle: read pytorch_model.bin with
    torch.load(weights_only=True). corpus: the corpus the run is filed under and evaluated on. progress(fraction,
    message) is called between the steps. ValueError (what to do) for everything the user can fix; nothing is
    written unless the whole import succeeds."""

    def step(fraction: float, message: Message) -> None:
        logger.info("import: %s", message)
        if progress is not None:
            progress(fraction, message)

    target = _target(out)
    if not isinstance(corpus, str) or not corpus.strip():
        raise LabError("corpus must be the name of the corpus to file the imported run under, e.g. stdlib-docs")
    step(0.02, Message("reading the checkpoint folder"))
    source = _source(src, generator, allow_pickle)
    family = source.module.FAMILY
    model_config, settings_overrides, objectives = _import_config(source)
    architecture = _architecture(source)
    tokenizer = _tokenizer(source)
    settings = dataclasses.replace(objective_module(family).Settings(), **settings_overrides)
    prepared, vocab = prepare_tokenizer(tokenizer.tokenizer, tokenizer.roles)
    V = model_config.vocab_size
    if tokenizer.original_size > V:
        raise LabError("the tokenizer has {original_size} tokens but the model's embedding only {V} "
                       "rows: they do not belong together", original_size=tokenizer.original_size, V=V)
    added_ids = {token: prepared.token_to_id(token) for token in tokenizer.added}

    step(0.1, Message("loading {size} of weights", size=folder_size_text(source.folder.weight_bytes())))
    hf_state = load_state(source.folder)
    if source.generator is not None:
        generator_state = load_state(source.generator)
        hf_state = _Combined({"": hf_state, GENERATOR_PREFIX: generator_state})
    step(0.45, Message("converting {architecture} to the lab's {family}", architecture=architecture, family=family))
    checkpoint_model = _build_on_meta(family, model_config, settings, _fit_vocab(vocab, V), objectives)
    state = source.module.import_state(source.hf_config, hf_state, checkpoint_model)
    del hf_state
    final_size = max(V, vocab.size)
    if final_size != V:
        model_config = dataclasses.replace(model_config, vocab_size=final_size)
    model = _build_on_meta(family, model_config, settings, vocab, objectives)
    if final_size != V or added_ids:
        state = _grow_vocabulary(state, V, final_size, list(added_ids.values()), model)
    _check_state(state, model)
    for name in list(state):  # in place: each transposed view's source is freed as its copy is made
        state[name] = _owned(state[name])
    step(0.6, Message("checking that every weight is a finite number"))
    _check_finite(state)
    model.load_state_dict(state, strict=True, assign=True)
    del state
    model.eval()

    step(0.7, Message("writing the run folder"))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.importing-{secrets.token_hex(3)}"
    staging.mkdir()
    try:
        now = time.time()
        imported_from = {
            "path": str(source.folder.path), "resolved_path": str(source.folder.path.resolve()),
            "model_type": source.folder.model_type, "architecture": architecture,
            "imported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "weight_files": [p.name for p in
                                                                                 source.folder.weight_files],
            "pickled": source.folder.pickled, "tokenizer_source": tokenizer.source,
            "added_tokens": added_ids, "config": source.folder.config,
            "generator": None if source.generator is None else {"path": str(source.generator.path),
                                                                 "config": source.generator.config},
        }
        config = {
            "family": family, "model": model_config.to_dict(), "settings": settings_to_dict(settings),
            "objectives": dict(model.objective_weights), "preset": IMPORTED_PRESET, "corpus": corpus.strip(),
            "corpus_note": "the corpus the lab evaluates this imported model on; it was not trained on it",
            "seq_len": model_config.max_positions, "steps": 0, "seed": 0, "created": now, "device_used": "cpu",
            "world_size": 1, "d_model": model_config.d_model, "n_layers": model_config.n_layers,
            "n_heads": model_config.n_heads, "d_ff": model_config.d_ff, "vocab_size": model_config.vocab_size,
            "num_parameters": model.num_parameters(), "token_roles": tokenizer.roles,
            FRAMING_KEY: framing_record(prepared),
            "special_ids": {"pad": vocab.pad_id, "mask": vocab.mask_id, "cls": vocab.cls_id, "sep": vocab.sep_id,
                            "bos": vocab.bos_id, "eos": vocab.eos_id, "start": vocab.start_id, "end": vocab.end_id},
            "tokenizer": {"kind": tokenizer.kind, "vocab_size": vocab.size, "source": tokenizer.source,
                          "note": "the checkpoint's own tokenizer"},
            "torch_version": torch.__version__, "imported_from": imported_from,
            "train": {"family": family, "preset": IMPORTED_PRESET, "corpus": corpus.strip(), "steps": 0,
                      "seq_len": model_config.max_positions, "model": {}, "objectives": dict(model.objective_weights),
                      "settings": settings_to_dict(settings)},
        }
        runs.write_config(staging, config)
        atomic_write_text(staging / runs.TOKENIZER_FILE, prepared.to_str())
        step(0.8, Message("writing model.safetensors"))
        runs.save_weights(model, staging / runs.MODEL_FILE)
        note = _note(source, target, tokenizer, added_ids, family, corpus.strip(), architecture)
        atomic_write_text(staging / NOTE_FILE, note)
        atomic_write_text(staging / runs.LOG_FILE, note.replace("# ", "").replace("- ", ""))
        runs.write_status(staging, "finished", step=0, total_steps=0,
                          message=Message("imported from {path} ({architecture})", path=source.folder.path,
                                          architecture=architecture))
        if target.exists():
            raise LabError("{target} appeared while importing: choose a new folder (nothing is overwritten)",
                           target=target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    step(1.0, Message("imported {architecture} as {name}", architecture=architecture, name=target.name))
    return target

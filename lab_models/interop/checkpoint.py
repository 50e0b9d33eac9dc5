"""Reading a Hugging Face checkpoint folder from the local disk: its config.json, its weights and its files.

A checkpoint folder is what `transformers`' `save_pretrained` writes (or what a hub download holds); this module
reads that layout as transformers documents it, with two deliberate differences: pickles are refused by default,
and shard names must stay inside the folder.

    config.json                          the architecture: "model_type", "architectures", the sizes
    model.safetensors                    the weights, or shards listed by model.safetensors.index.json
    pytorch_model.bin                    older checkpoints: a pickle (refused unless allow_pickle; see below)
    tokenizer.json / vocab.txt / ...     the tokenizer (lab_models/interop/hf_tokenizer.py reads it)

Nothing is downloaded: the folder must exist on this machine. Paths are read as typed (`~` expanded); every file this
module opens is named by the folder itself or by its shard index, and a shard name that is absolute or steps out of
the folder (`../x.safetensors`) is refused. Files that are symbolic links (the Hugging Face cache's snapshot folders
link into its blobs/) are followed: they are the folder's own files.

Pickle. `pytorch_model.bin` is a Python pickle, which can run code when it is loaded. It is refused with a message
saying so unless the caller passes `allow_pickle=True` (`--allow-pickle`); even then it is read with
`torch.load(weights_only=True)`, which unpickles tensors and plain containers only.

Worked example (a folder that is not a checkpoint):

>>> import tempfile
>>> read_checkpoint_folder(tempfile.mkdtemp())
Traceback (most recent call last):
...
lab_models.messages.LabError: ... has no config.json: it is not a Hugging Face checkpoint folder
(save_pretrained writes ...)
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from lab_models.messages import LabError, Message

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_FILE = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"
OTHER_FRAMEWORKS = ("tf_model.h5", "flax_model.msgpack", "model.ckpt.index")
MAX_CONFIG_BYTES = 1 << 20  # a config.json is a few KB; refuse to parse megabytes of something else
# the importer puts the checkpoint's tensor names (from the safetensors headers; absent for a pickle) into the
# config dict its converter reads, under this key: T5 saved by transformers 5 says whether its lm_head is tied only
# through them (lab_models/interop/t5.py)
TENSOR_NAMES_KEY = "_tensor_names"


@dataclass(frozen=True)
class CheckpointFolder:
    """A checkpoint folder, read: where it is, its config.json, and the weight files to load (not loaded yet)."""

    path: Path  # as typed, with ~ expanded
    config: dict  # config.json
    weight_files: tuple[Path, ...]  # safetensors shards, or the pickle file(s)
    pickled: bool  # the weights are pytorch_model.bin (read with weights_only=True)
    files: tuple[str, ...] = field(default=())  # every file name in the folder, sorted (for the page's listing)

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type") or "")

    @property
    def architectures(self) -> tuple[str, ...]:
        names = self.config.get("architectures") or ()
        return tuple(str(name) for name in names) if isinstance(names, (list, tuple)) else ()

    def weight_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.weight_files)


def source_folder(path) -> Path:
    """The folder the user named, as typed (`~` expanded, not resolved); ValueError when it is not a folder."""
    if path is None or not str(path).strip():
        raise LabError("Give the path of a checkpoint folder (the folder that save_pretrained wrote).")
    folder = Path(str(path).strip()).expanduser()
    try:
        folder.stat()
    except FileNotFoundError:
        pass  # said below
    except OSError as error:  # a name too long for the file system, a forbidden folder, ...
        raise LabError("The path {folder!r} cannot be read on this machine ({reason}): give the "
                       "path of a checkpoint folder that is on disk.",
                       folder=str(folder)[:200], reason=error.strerror) from None
    if not folder.exists():
        raise LabError("{folder} does not exist on this machine: give the path of a checkpoint folder that is "
                       "already on disk (the lab never downloads).", folder=folder)
    if not folder.is_dir():
        raise LabError("{folder} is a file, not a folder: give the folder that holds config.json and the weights.",
                       folder=folder)
    return folder


def inside(folder: Path, name: str, what: Message) -> Path:
    """`folder / name` for a plain relative name inside the folder; ValueError for an absolute name or one that steps
    out of the folder with `..` (a shard index naming ../../secret is not read).

    >>> inside(Path("/ckpt"), "model-00001-of-00002.safetensors", Message("a shard")).name
    'model-00001-of-00002.safetensors'
    >>> inside(Path("/ckpt"), "../other/model.safetensors", Message("a shard"))
    Traceback (most recent call last):
    ...
    lab_models.messages.LabError: a shard named '../other/model.safetensors' is outside the checkpoint folder /ckpt: ...
    """
    candidate = Path(name)
    if not name or candidate.is_absolute() or ".." in candidate.parts:
        raise LabError("{what} named {name!r} is outside the checkpoint folder {folder}: only files inside the "
                       "folder you named are read", what=what, name=name, folder=folder)
    return folder / candidate


def read_json_file(path: Path, what: Message) -> dict:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise LabError("{path} is too big to be a {what} ({size} bytes)",
                           path=path, what=what, size=path.stat().st_size)
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise LabError("cannot read {path}: {reason}", path=path, reason=error.strerror or error) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LabError("{path} is not valid JSON ({error}): is it really a {what}?",
                       path=path, error=error, what=what) from None
    if not isinstance(data, dict):
        raise LabError("{path} holds a JSON {data_type}, not the object a {what} is",
                       path=path, data_type=type(data).__name__, what=what)
    return data


def _shards(folder: Path, index_name: str) -> tuple[Path, ...]:
    index = read_json_file(folder / index_name, Message("shard index"))
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise LabError("{path} has no weight_map: the shard index is incomplete", path=folder / index_name)
    names = sorted({str(name) for name in weight_map.values()})
    shards = tuple(inside(folder, name, Message("a shard")) for name in names)
    missing = [path.name for path in shards if not path.is_file()]
    if len(missing) == 1:
        raise LabError("the shard index names {missing}, which is not in {folder}: the download is incomplete",
                       missing=missing[0], folder=folder)
    if missing:
        raise LabError("the shard index names {missing}, which are not in {folder}: the download is incomplete",
                       missing=", ".join(missing), folder=folder)
    return shards


def read_checkpoint_folder(path, *, allow_pickle: bool = False) -> CheckpointFolder:
    """The folder's config.json and the weight files to load, checked; ValueError (what to do) for a folder that
    is not a checkpoint, weights in another framework, a pickle without allow_pickle, or an incomplete shard set."""
    folder = source_folder(path)
    files = tuple(sorted(entry.name for entry in folder.iterdir()))
    if CONFIG_FILE not in files:
        raise LabError("{folder} has no config.json: it is not a Hugging Face checkpoint folder (save_pretrained "
                       "writes config.json, model.safetensors and the tokenizer files)", folder=folder)
    config = read_json_file(folder / CONFIG_FILE, Message("model config.json"))
    if not config.get("model_type"):
        raise LabError("{path} has no model_type: it is not a transformers model config (a "
                       "tokenizer or training config sits in some folders under that name)", path=folder / CONFIG_FILE)
    if SAFETENSORS_FILE in files:
        return CheckpointFolder(folder, config, (folder / SAFETENSORS_FILE,), False, files)
    if SAFETENSORS_INDEX in files:
        return CheckpointFolder(folder, config, _shards(folder, SAFETENSORS_INDEX), False, files)
    pickles = PICKLE_FILE in files or PICKLE_INDEX in files
    if pickles and not allow_pickle:
        raise LabError("{folder} holds its weights only as {pickle_file}, a Python pickle, which can run code "
                       "when it is loaded. If you trust where it came from, pass --allow-pickle (api: "
                       "allow_pickle=True): it is then read with torch.load(weights_only=True). Better: convert "
                       "it to model.safetensors once (save_pretrained(..., safe_serialization=True)).",
                       folder=folder, pickle_file=PICKLE_FILE)
    if PICKLE_FILE in files:
        return CheckpointFolder(folder, config, (folder / PICKLE_FILE,), True, files)
    if PICKLE_INDEX in files:
        return CheckpointFolder(folder, config, _shards(folder, PICKLE_INDEX), True, files)
    other = [name for name in OTHER_FRAMEWORKS if name in files]
    if other:
        raise LabError("{folder} holds {other}, weights for another framework (TensorFlow or Flax): the lab "
                       "reads PyTorch weights only. Convert them with transformers (from_pretrained(..., "
                       "from_tf=True) then save_pretrained) first.", folder=folder, other=other[0])
    raise LabError("{folder} has a config.json but no weights: expected {safetensors_file} (or "
                   "{safetensors_index} with its shards, or {pickle_file}); the download may be incomplete",
                   folder=folder, safetensors_file=SAFETENSORS_FILE, safetensors_index=SAFETENSORS_INDEX,
                   pickle_file=PICKLE_FILE)


def tensor_shapes(folder: CheckpointFolder) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape, read from the safetensors headers without loading the data (for a quick look
    at a folder); {} for pickled weights, which cannot be inspected without unpickling."""
    if folder.pickled:
        return {}
    shapes: dict[str, tuple[int, ...]] = {}
    for path in folder.weight_files:
        try:
            with safe_open(str(path), "pt") as handle:
                for name in handle.keys():
                    shapes[name] = tuple(handle.get_slice(name).get_shape())
        except Exception as error:  # noqa: BLE001 - safetensors raises its own error types for corrupt files
            raise LabError("{path} is not a readable safetensors file ({error}); the download may be corrupt",
                           path=path, error=error) \
                from None
    return shapes


class LazyState(Mapping):
    """A checkpoint's tensors by name, each read from its safetensors file when asked for (and not kept): converting a
    124M-parameter model then holds the converted tensors, not a second full copy of the checkpoint. `add` puts
    more files in under a name prefix (ELECTRA's generator). Reading everything (`dict(state)`) works too."""

    def __init__(self):
        self._where: dict[str, tuple[object, str]] = {}  # name -> (open safetensors handle, name in that file)

    def add(self, paths, prefix: str = "") -> "LazyState":
        for path in paths:
            try:
                handle = safe_open(str(path), "pt")
                names = list(handle.keys())
            except Exception as error:  # noqa: BLE001 - safetensors raises its own error types for corrupt files
                raise LabError("{path} is not a readable safetensors file ({error}); the download may be "
                               "corrupt", path=path, error=error) from None
            for name in names:
                if prefix + name in self._where:
                    raise LabError("the tensor {name} appears in two shards ({path_name} and another)",
                                   name=name, path_name=path.name)
                self._where[prefix + name] = (handle, name)
        return self

    def __getitem__(self, name: str) -> torch.Tensor:
        handle, stored = self._where[name]
        return handle.get_tensor(stored)

    def __contains__(self, name) -> bool:  # without reading the tensor (Mapping's default would)
        return name in self._where

    def __iter__(self):
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def load_state(folder: CheckpointFolder) -> Mapping[str, torch.Tensor]:
    """Every tensor of the checkpoint by its own name, on the CPU, as stored (fp16 stays fp16 until converted):
    a `LazyState` over the safetensors files, or the unpickled dict of a pytorch_model.bin."""
    if not folder.pickled:
        return LazyState().add(folder.weight_files)
    state: dict[str, torch.Tensor] = {}
    for path in folder.weight_files:
        try:
            part = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, EOFError, ...
            raise LabError("{path} could not be read as weights only ({error_type}: "
                           "{first_line}); the lab does not run other "
                           "pickled objects",
                           path=path, error_type=type(error).__name__,
                           first_line=str(error).splitlines()[0] if str(error) else '') from None
        if isinstance(part, dict) and "state_dict" in part and isinstance(part["state_dict"], dict):
            part = part["state_dict"]
        if not isinstance(part, dict) or not all(isinstance(v, torch.Tensor) for v in part.values()):
            raise LabError("{path} does not hold a plain name -> tensor state dict", path=path)
        overlap = sorted(set(state) & set(part))
        if overlap:
            raise LabError("the tensor {overlap} appears in two shards of {path}", overlap=overlap[0], path=folder.path)
        state.update(part)
    return state


def folder_size_text(n_bytes: int) -> str:
    """'1.5 GB', '498 MB', '12 KB': a size for people.

    >>> folder_size_text(497_773_000), folder_size_text(2_048)
    ('498 MB', '2.0 KB')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n_bytes >= scale:
            value = n_bytes / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n_bytes} B"


def list_files(folder: Path) -> list[tuple[str, int]]:
    """(name, size in bytes) of the folder's files, sorted by name (sub-folders are left out)."""
    out = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        try:
            if entry.is_file():
                out.append((entry.name, os.stat(entry).st_size))
        except OSError:
            continue
    return out

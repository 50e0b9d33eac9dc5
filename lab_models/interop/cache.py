"""The checkpoints already in the user's Hugging Face cache, listed without a network, each ready to import.

    cached_checkpoints(cache_dir=None) -> [{"repo_id", "path", "architecture", "family", "parameters", "size",
                                            "size_text", "revision", "supported", "reason", ...}, ...]

Where users keep checkpoints: every `from_pretrained("bert-base-uncased")` on this machine left a copy in the Hugging
Face cache, `models--<org>--<name>/snapshots/<commit>/` holding config.json, the weights and the tokenizer files
(links into `blobs/`). The folder is the one huggingface_hub itself uses: `HF_HUB_CACHE`, else `HF_HOME/hub`, else
`$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub` (read from the environment at each call, the rule
of `huggingface_hub.constants`, so that a cache named after the program started is found too). The cache is read by
huggingface_hub's own scanner (`scan_cache_dir`); nothing is downloaded and nothing is written.

Per model repository, the revision that `refs/main` points to is listed (else the newest snapshot), and its snapshot
folder is looked at with the importer's own `inspect_checkpoint` (config.json, the safetensors headers, the
tokenizer): `supported` is True when `api.import_hf(path)` would import it, else `reason` says why, in the importer's
words (an architecture the lab does not convert, weights only as a pickle, no tokenizer.json, ...). Dataset and
Space repositories are left out; a repository the scanner finds corrupt is listed as unsupported with its warning.

Worked example (a folder that holds no cache yet):

>>> import tempfile
>>> cached_checkpoints(tempfile.mkdtemp())
[]
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from lab_models.messages import LabError, Message, fields_mapped, message_of
from lab_models.interop.checkpoint import CONFIG_FILE, folder_size_text, read_json_file
from lab_models.interop.importer import inspect_checkpoint

logger = logging.getLogger(__name__)

CACHE_COLUMNS = ("repo_id", "revision", "path", "architecture", "model_type", "family", "parameters", "size",
                 "size_text", "supported", "reason")


def default_cache_dir() -> Path:
    """The Hugging Face hub cache this process's environment names (huggingface_hub's rule, read now)."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(hub)))


def _revision(repo):
    """The snapshot to list: the one refs/main names, else the newest."""
    revisions = sorted(repo.revisions, key=lambda revision: revision.last_modified, reverse=True)
    for revision in revisions:
        if "main" in revision.refs:
            return revision
    return revisions[0] if revisions else None


def _config_facts(snapshot: Path) -> tuple[str, str]:
    """(architecture, model_type) from config.json, "" where it says nothing (or there is none)."""
    try:
        config = read_json_file(snapshot / CONFIG_FILE, Message("model config.json"))
    except ValueError:
        return "", ""
    names = config.get("architectures") or []
    architecture = str(names[0]) if isinstance(names, list) and names else ""
    return architecture, str(config.get("model_type") or "")


def _snapshot_named(value, snapshot: str):
    """A field of the importer's message with the snapshot's long path said as "the snapshot folder"."""
    if str(value) == snapshot:
        return Message("the snapshot folder")
    return str(value).replace(snapshot, "the snapshot folder") if snapshot in str(value) else value


def _row(repo) -> dict:
    revision = _revision(repo)
    row = {"repo_id": repo.repo_id, "revision": "", "path": "", "architecture": "", "model_type": "", "family": "",
           "parameters": None, "size": int(repo.size_on_disk), "size_text": folder_size_text(int(repo.size_on_disk)),
           "supported": False, "reason": ""}
    if revision is None:
        row["reason"] = Message("the cache holds no snapshot of this repository (an interrupted download)")
        return row
    snapshot = Path(revision.snapshot_path)
    row.update(revision=revision.commit_hash[:12], path=str(snapshot), size=int(revision.size_on_disk),
               size_text=folder_size_text(int(revision.size_on_disk)))
    row["architecture"], row["model_type"] = _config_facts(snapshot)
    try:
        summary = inspect_checkpoint(snapshot)
    except ValueError as error:  # the importer's words, without the long snapshot path it starts with
        row["reason"] = fields_mapped(message_of(error), lambda value: _snapshot_named(value, str(snapshot)))
        return row
    row.update(architecture=summary["architecture"], model_type=summary["model_type"], family=summary["family"],
               parameters=summary["parameters"], supported=True)
    return row


def cached_checkpoints(cache_dir=None) -> list[dict]:
    """Every model repository in the Hugging Face cache `cache_dir` (default: `default_cache_dir()`), one dict each
    (CACHE_COLUMNS): repo_id, revision (the commit, shortened), path (the snapshot folder, which `api.import_hf`
    takes), architecture, model_type, family (the lab family it becomes; "" when unsupported), parameters (None when
    unknown), size (bytes on disk) and size_text, supported, reason ("" when supported). Sorted: supported first,
    then by repository id. A cache folder that does not exist holds nothing: []."""
    from huggingface_hub import scan_cache_dir  # gradio's dependency; imported here, as only this function reads it
    from huggingface_hub.errors import CacheNotFound

    folder = Path(cache_dir).expanduser() if cache_dir is not None and str(cache_dir).strip() else default_cache_dir()
    if not folder.is_dir():
        return []
    try:
        info = scan_cache_dir(folder)
    except CacheNotFound:
        return []
    rows = [_row(repo) for repo in info.repos if repo.repo_type == "model"]
    for warning in info.warnings:  # a repository huggingface_hub could not read: say so rather than hide it
        logger.warning("Hugging Face cache %s: %s", folder, warning)
        reason = Message("the cache entry is corrupt: {warning}", warning=warning)
        rows.append({"repo_id": Path(str(getattr(warning, "repo_path", "") or "")).name or "?", "revision": "",
                     "path": "", "architecture": "", "model_type": "", "family": "", "parameters": None, "size": 0,
                     "size_text": "", "supported": False, "reason": reason})
    return sorted(rows, key=lambda row: (not row["supported"], row["repo_id"].lower()))


def cached_checkpoint_path(repo_id: str, cache_dir=None) -> Path:
    """The snapshot folder of the cached repository `repo_id` (as `cached_checkpoints` lists it); ValueError when
    the cache has no such model, or the lab cannot import it (with the reason)."""
    if not isinstance(repo_id, str) or not repo_id.strip():
        raise LabError("Pick a checkpoint from the list of the Hugging Face cache first.")
    rows = [row for row in cached_checkpoints(cache_dir) if row["repo_id"] == repo_id.strip()]
    if not rows:
        raise LabError("The Hugging Face cache ({cache_dir}) holds no model "
                       "{repo_id!r}: refresh the list, or type the folder by hand.",
                       cache_dir=cache_dir or default_cache_dir(), repo_id=repo_id.strip())
    if not rows[0]["supported"]:
        raise LabError("{repo_id} cannot be imported: {reason}", repo_id=repo_id.strip(), reason=rows[0]['reason'])
    return Path(rows[0]["path"])

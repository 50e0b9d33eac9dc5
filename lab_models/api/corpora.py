"""Corpora and tokenizers: the built-in and imported corpora, corpora of any size read in place and tokenized once to
disk, the tokenizers and the views that inspect them, and the smallest vocabulary that fits a corpus's alphabet.

lab_models/text/corpora.py keeps the corpora of the lab home (built-in, imported, linked) and text/corpus_files.py
reads an upload; text/corpus_streams.py reads any file or folder in constant memory, text/corpus_sources.py says what
a run reads (fingerprint, split, tokenizer sample), text/token_shards.py keeps the memory-mapped token shards,
training/corpus_tokens.py is `python -m lab_models tokenize` and training/jobs/tokenizing.py runs the Corpora tab's
background tokenizations. Tokenizers are text/tokenization.py's, their inspection text/tokenizer_inspect.py's and the
vocabulary fit text/vocab_fit.py's.

The page passes corpora by name only (`corpus_name`, `load_named_corpus`) and links a server folder only inside the
corpus root (`corpus_root`); a local caller of `load_corpus` may name any path.
"""
from __future__ import annotations

import os
from pathlib import Path

from lab_models.messages import LabError, Message
from lab_models import home as _home
from lab_models.api.checks import trainable_family
from lab_models.api.runs import path_inside
from lab_models.api.training import TRAINING_PRESETS
from lab_models.home import lab_home
from lab_models.text import corpora as _corpora
from lab_models.text import corpus_files as _corpus_files
from lab_models.text import corpus_sources as _corpus_sources
from lab_models.text import corpus_streams as _corpus_streams
from lab_models.text import tokenization
from lab_models.text import tokenizer_inspect as _tokenizer_inspect
from lab_models.text import tokenizer_kinds as _tokenizer_kinds
from lab_models.text import vocab_fit
from lab_models.training.jobs import tokenizing as _tokenizing

__all__ = ["BUILTIN_CORPORA", "list_corpora", "load_corpus", "import_corpus", "inspect_file", "corpus_card",
           "corpus_name", "load_named_corpus", "CORPUS_ROOT_ENV_VAR", "open_corpus", "link_corpus",
           "corpus_overview", "corpus_root", "inspect_server_corpus", "link_server_corpus", "TOKENIZER_KINDS",
           "train_tokenizer", "cached_tokenizer", "load_tokenizer_file", "tokenize_for_display", "merge_replay",
           "merge_count", "tokenizer_stats", "token_length_histogram", "vocab_overlap", "VocabSizeTooSmall",
           "VocabProposal", "minimum_vocab_size", "propose_vocab_size", "TokenizeJobs", "create_tokenize_jobs",
           "start_tokenizing", "tokenizing_status", "stop_tokenizing"]

BUILTIN_CORPORA = _corpora.BUILTIN_CORPORA
list_corpora = _corpora.list_corpora
load_corpus = _corpora.load_corpus
import_corpus = _corpora.import_corpus
inspect_file = _corpus_files.inspect_file
corpus_card = _corpora.corpus_card


def corpus_name(name, *, home=None) -> str:
    """`name` when it names a built-in or imported corpus of the lab home; else ValueError. The page passes corpora by
    name only: a path (which `load_corpus` accepts from a local caller) is refused here, so no request reads files
    outside the lab home."""
    names = _corpora.list_corpora(home=home)
    if not isinstance(name, str) or name.strip() not in names:
        quoted = _home.shown(name) if isinstance(name, str) else type(name).__name__
        raise LabError("Unknown corpus {quoted}: choose one of {names}, or import a file in the Corpora "
                       "tab (the page takes corpus names, not paths).", quoted=quoted, names=', '.join(names))
    return name.strip()


def load_named_corpus(name, *, home=None):
    """`load_corpus` for the page: a built-in or imported corpus by name only (`corpus_name`), never a path."""
    return _corpora.load_corpus(corpus_name(name, home=home), home=home)


# Corpora of any size, read in place: a file or folder on the server, linked by its path inside the corpus root, and
# tokenized once to disk in the background (the tokenize jobs below).
CORPUS_ROOT_ENV_VAR = "PRETRAINING_LAB_CORPUS_ROOT"
open_corpus = _corpus_sources.open_corpus
link_corpus = _corpora.link_corpus
corpus_overview = _corpus_sources.corpus_overview


def corpus_root(root=None, *, home=None) -> Path:
    """The folder whose files the page may link as corpora: `root` (app.py --corpus-root), else
    $PRETRAINING_LAB_CORPUS_ROOT, else `<lab home>/server-corpora` (created). A path typed in the page is read only
    when it resolves inside it (symlinks followed), as with `path_inside`."""
    chosen = root if root is not None else os.environ.get(CORPUS_ROOT_ENV_VAR) or lab_home(home) / "server-corpora"
    folder = Path(chosen).expanduser().resolve()
    if root is None and not os.environ.get(CORPUS_ROOT_ENV_VAR):
        folder.mkdir(parents=True, exist_ok=True)
    if not folder.is_dir():
        raise LabError("The corpus root {folder} is not a folder: start the app with --corpus-root DIR (or set "
                       "{corpus_root_env_var}) to a folder that holds your corpora.",
                       folder=folder, corpus_root_env_var=CORPUS_ROOT_ENV_VAR)
    return folder


def _server_path(path, root) -> Path:
    if not isinstance(path, str) or not path.strip():
        raise LabError("Type the path of a corpus file or folder inside {root} (e.g. web.txt or books/).", root=root)
    try:
        return path_inside(root, path.strip(), Message("corpus path"))
    except (OSError, RuntimeError) as error:  # "~nobody/x" (no such user's home), a name too long to stat
        raise LabError("The corpus path {path} cannot be read: {error}",
                       path=_home.shown(path.strip()), error=error) from None


def inspect_server_corpus(path, *, root, text_column=None) -> dict:
    """What a corpus path inside `root` holds, without reading its text: {"path", "layout", "files", "bytes",
    "formats", "columns", "text_column"} (the text columns of its first table file and the one that would be read)."""
    files = _corpus_streams.find_corpus_files(_server_path(path, root), (text_column or None))
    return {"path": str(files.root), "layout": files.layout, "files": len(files.files), "bytes": files.total_bytes,
            "formats": files.formats(), "columns": list(files.columns), "text_column": files.text_column}


def link_server_corpus(path, *, root, name=None, text_column=None, home=None) -> dict:
    """`link_corpus` for the page: the path must resolve inside `root` (`corpus_root`). Returns the stored facts."""
    return _corpora.link_corpus(_server_path(path, root), name=(name or None), text_column=(text_column or None),
                                home=home)


TOKENIZER_KINDS = _tokenizer_kinds.TOKENIZER_KINDS


def train_tokenizer(kind: str, texts, vocab_size: int):
    """A trained `tokenizers.Tokenizer` of `kind` (bpe, byte_bpe, wordpiece, unigram) on `texts`."""
    return tokenization.train_tokenizer(kind, texts, vocab_size)


cached_tokenizer = tokenization.cached_tokenizer
load_tokenizer_file = tokenization.load_tokenizer_file
tokenize_for_display = _tokenizer_inspect.tokenize_for_display
merge_replay = _tokenizer_inspect.merge_replay
merge_count = _tokenizer_inspect.merge_count
tokenizer_stats = _tokenizer_inspect.tokenizer_stats
token_length_histogram = _tokenizer_inspect.token_length_histogram
vocab_overlap = _tokenizer_inspect.vocab_overlap

# A vocabulary too small for the corpus's alphabet (Chinese at 512 tokens) raises VocabSizeTooSmall with the smallest
# size that works (`.minimum`); propose_vocab_size(kinds, texts, requested) is the smallest size for several kinds.
VocabSizeTooSmall = tokenization.VocabSizeTooSmall
VocabProposal = vocab_fit.VocabProposal
minimum_vocab_size = vocab_fit.minimum_vocab_size
propose_vocab_size = vocab_fit.propose_vocab_size

TokenizeJobs = _tokenizing.TokenizeJobs


def create_tokenize_jobs(home=None) -> TokenizeJobs:
    """The app's background tokenizations for `home`; call `.close()` at exit (running workers stop, keeping their
    work)."""
    return _tokenizing.TokenizeJobs(lab_home(home))


def start_tokenizing(jobs: TokenizeJobs, corpus, *, family: str = "gpt", preset: str = "tiny") -> str:
    """Tokenize a corpus of the lab home (by name) in the background, with the tokenizer a run of `family` at
    `preset` uses, so that such a run starts training at once; returns the job id (`tokenizing_status`)."""
    name = corpus_name(corpus, home=jobs.home)
    trainable_family(family)
    if preset not in TRAINING_PRESETS:
        raise LabError("Unknown preset {preset!r}: choose one of {training_presets}.",
                       preset=preset, training_presets=', '.join(TRAINING_PRESETS))
    return jobs.start(name, family=family, preset=preset)


def tokenizing_status(jobs: TokenizeJobs, job_id) -> dict:
    """{"state": running | finished | stopped | failed | died, "message", "progress": {"phase", "bytes_done",
    "bytes_total", "tokens", "mb_per_s", "eta_s", "fraction", ...}, "corpus", ...} of a tokenize job."""
    if not isinstance(job_id, str) or not job_id.strip():
        raise LabError("Start a tokenization first.")
    return jobs.status(job_id.strip())


def stop_tokenizing(jobs: TokenizeJobs, job_id) -> dict:
    """Stop a tokenize job; what it tokenized is kept and a new start continues it."""
    if not isinstance(job_id, str) or not job_id.strip():
        raise LabError("Start a tokenization first.")
    return jobs.stop(job_id.strip())

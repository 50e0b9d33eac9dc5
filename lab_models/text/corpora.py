"""Corpora: the built-in texts, user uploads imported into the lab home, and a card that summarises any of them.

What it is
----------
A `Corpus` is a frozen record of cleaned, non-empty documents, already split into train and validation, plus a
`fingerprint` (sha256 of the content) that tokenizers and runs use as a cache key. `load_corpus` accepts a built-in
name, the name of a corpus imported into `<lab home>/corpora/`, or a path to a file or folder.

* "stdlib-docs": English prose from the documentation that ships inside CPython itself: the `help()` reference topics
  (`pydoc_data.topics`) and the docstrings of stdlib modules, classes and functions, read with `ast` (nothing is
  imported), cleaned into paragraphs, deduplicated exactly, and cached under `<home>/corpora/_builtin/` per Python
  version.
* "synthetic": little stories from the seeded grammar in `lab_models.text.synthetic`, each English document followed by
  its Chinese translation.
* "stories": the same layout from the seeded language of `lab_models.text.stories`, where context decides a word's
  class, a verb's number, a pronoun's referent and an entailment (its tasks: lab_models/text/story_tasks.py).
* Uploads: `.txt`, `.md`, `.jsonl` and `.csv`, validated (size cap, empty, binary, UTF-8, columns, JSON syntax) and
  stored as `<home>/corpora/<name>/documents.jsonl` + `meta.json`, written to a temporary folder first and renamed
  into place, so a failure or a crash never leaves a half-written corpus.
* Linked corpora (`link_corpus`): a file or folder on this machine, of any size, registered under a name and read in
  place (`<home>/corpora/<name>/meta.json` holds its path; nothing is copied and no cap applies).

What it follows and how it deviates
-----------------------------------
It follows the usual data-card practice (counts, language mix, a sample) and the usual hash-based split (a document's
split depends only on its text, so shuffling or appending documents never moves a document across the split). A
`Corpus` is held in memory; `load_corpus` reads a path with the streamed reader (lab_models/text/corpus_streams.py),
so it gives exactly the documents a run streaming the same path trains on, and it refuses to load a linked corpus of
more than `IN_MEMORY_MAX_BYTES` (64 MB): runs stream those (lab_models/text/corpus_sources.py), and a path given
directly is the caller's choice (no cap).

Beside it: lab_models/text/stdlib_docs.py (the stdlib-docs text and its cleaning), lab_models/text/corpus_files.py
(reading an uploaded file: size cap, formats, text columns; its decisions on splitting text files, CSV delimiters,
JSONL rows and the upload cap are written there) and lab_models/text/corpus_streams.py (reading a path of any size,
and what it does with bad input). This module holds the records, the split, the lab's corpus folders (import, link,
list, load) and the card.

Decisions a user should know about
----------------------------------
* Uploaded documents are not deduplicated (they are the user's data); the built-in stdlib text is.
* Paths loaded directly with `load_corpus` (not uploads) are not capped (the upload cap:
  lab_models/text/corpus_files.py).
* Corpus names are slugs: letters, digits, "-", "_" and "."; they start with a letter or digit (names starting with
  "_" or "." are reserved for the lab's own folders) and may not shadow a built-in name.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lab_models.messages import Joined, LabError, Message
from lab_models.home import atomic_write_json, atomic_write_text, lab_home
from lab_models.text.stories import story_dataset
from lab_models.text.synthetic import synthetic_dataset

from lab_models.text.stdlib_docs import build_stdlib_docs_paragraphs
from lab_models.text.corpus_files import max_upload_bytes, extract_documents
from lab_models.text.corpus_streams import (STREAMED_EXTENSIONS, CorpusFiles, ReadLimits, ReadReport,
                                            find_corpus_files, iter_documents)

logger = logging.getLogger(__name__)

BUILTIN_CORPORA: dict[str, str] = {
    "stdlib-docs": "English prose from CPython's own documentation: help() topics and stdlib docstrings (~1.4 MB).",
    "synthetic": "Seeded toy grammar: short English stories, each followed by its Chinese translation (bilingual).",
    "stories": "Seeded stories where context decides (agreement, reference, word classes, scope), with Chinese "
               "translations (bilingual).",
}
DEFAULT_VALIDATION_FRACTION = 0.05
SAMPLE_DOCUMENTS = 5
SAMPLE_CHARACTERS = 300

_BUILTIN_CACHE_FOLDER = "_builtin"
_STDLIB_DOCS_BUILD_VERSION = 1  # bump when the cleaning rules change, so old caches are rebuilt
_SLUG_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_DOCUMENTS_FILE = "documents.jsonl"
_META_FILE = "meta.json"
_LINK_KEY = "link"  # meta.json of a linked corpus (a path read in place) holds its path under this key
IN_MEMORY_MAX_BYTES = 64 * 2**20  # load_corpus reads a linked corpus whole up to this; runs stream any size


# ------------------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Corpus:
    name: str
    source: str  # "builtin", "upload" (imported into the lab home) or "path"
    train: tuple[str, ...]
    validation: tuple[str, ...]
    fingerprint: str  # sha256 hex of train + validation; see `content_fingerprint`

    def __post_init__(self):
        if self.source not in ("builtin", "upload", "path"):
            raise LabError("Corpus source must be 'builtin', 'upload' or 'path', got {source!r}", source=self.source)
        if not self.train and not self.validation:
            raise LabError("Corpus {name!r} has no documents", name=self.name)
        if not all(isinstance(text, str) and text for text in self.texts):
            raise LabError("Corpus {name!r} has an empty or non-text document", name=self.name)

    @property
    def texts(self) -> tuple[str, ...]:
        return self.train + self.validation


def content_fingerprint(train: Iterable[str], validation: Iterable[str]) -> str:
    """sha256 of the documents and their split, stable across runs and machines.

    Example: `content_fingerprint(["a"], [])` != `content_fingerprint([], ["a"])` (the split is part of the content).
    """
    digest = hashlib.sha256()
    for split_name, documents in (("train", train), ("validation", validation)):
        for text in documents:
            encoded = text.encode("utf-8")
            digest.update(f"{split_name}:{len(encoded)}:".encode())
            digest.update(encoded)
    return digest.hexdigest()


def _make_corpus(name: str, source: str, train: tuple[str, ...], validation: tuple[str, ...]) -> Corpus:
    return Corpus(name, source, train, validation, content_fingerprint(train, validation))


# -------------------------------------------------------------------------------------------------------- splits
def _unit_hash(text: str, salt: str) -> float:
    """Map a document to a number in [0, 1) that depends only on its text (and the salt)."""
    digest = hashlib.sha256((salt + "\0" + text).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def document_split(text: str, *, validation_fraction: float = DEFAULT_VALIDATION_FRACTION, salt: str = "") -> str:
    """The split of one document under `split_train_validation`'s rule, decided from its text alone (so a corpus too
    big to hold can be split while it streams): "validation" when its hash is below the fraction, else "train".
    Unlike `split_train_validation` it cannot see the other documents, so it does not move one document when a split
    would be empty (a streamed corpus holds thousands).

    >>> document_split("a"), document_split("b")
    ('validation', 'train')
    """
    return "validation" if _unit_hash(text, salt) < validation_fraction else "train"


def split_train_validation(
    docs: Iterable[str], *, validation_fraction: float = DEFAULT_VALIDATION_FRACTION, salt: str = ""
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split documents by a hash of each one's text; the order of `docs` is kept within each split.

    A document goes to validation when `sha256(salt, text)` mapped to [0, 1) is below `validation_fraction`, so the
    split does not depend on order and equal documents always land together. With two or more different documents and
    a fraction above 0, validation gets at least one document and train keeps at least one.

    Example: `split_train_validation(["a", "b"])` puts exactly one of the two in validation, the same one every run.
    """
    if not isinstance(validation_fraction, (int, float)) or not 0 <= validation_fraction < 1:
        raise LabError("validation_fraction must be a number in [0, 1), got {validation_fraction!r}",
                       validation_fraction=validation_fraction)
    documents = tuple(docs)
    if not all(isinstance(text, str) for text in documents):
        raise LabError("split_train_validation expects a sequence of strings")
    hashes = [_unit_hash(text, salt) for text in documents]
    in_validation = [value < validation_fraction for value in hashes]
    distinct_hashes = set(hashes)
    if validation_fraction > 0 and len(distinct_hashes) >= 2:
        if not any(in_validation):  # the smallest hash is the one a slightly larger fraction would pick first
            smallest = min(distinct_hashes)
            in_validation = [value == smallest for value in hashes]
        if all(in_validation):
            largest = max(distinct_hashes)
            in_validation = [value != largest for value in hashes]
    train = tuple(text for text, chosen in zip(documents, in_validation) if not chosen)
    validation = tuple(text for text, chosen in zip(documents, in_validation) if chosen)
    return train, validation


def _stdlib_docs_cache_path(home) -> Path:
    version = ".".join(map(str, sys.version_info[:3]))
    key = f"stdlib-docs-{sys.implementation.name}-{version}-v{_STDLIB_DOCS_BUILD_VERSION}.json"
    return lab_home(home) / "corpora" / _BUILTIN_CACHE_FOLDER / key


def _load_stdlib_docs(home) -> Corpus:
    cache_path = _stdlib_docs_cache_path(home)
    if cache_path.is_file():
        try:
            cached = json.loads(cache_path.read_text(encoding="utf-8"))
            corpus = _make_corpus("stdlib-docs", "builtin", tuple(cached["train"]), tuple(cached["validation"]))
            if corpus.fingerprint == cached["fingerprint"]:
                return corpus
            logger.warning("stdlib-docs cache %s does not match its fingerprint; rebuilding", cache_path)
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("stdlib-docs cache %s is unreadable (%s); rebuilding", cache_path, error)
    train, validation = split_train_validation(build_stdlib_docs_paragraphs())
    corpus = _make_corpus("stdlib-docs", "builtin", train, validation)
    try:
        atomic_write_json(cache_path, {"train": list(train), "validation": list(validation),
                                       "fingerprint": corpus.fingerprint})
    except OSError as error:  # a read-only home still gets the corpus, just not the cache
        logger.warning("could not cache stdlib-docs at %s: %s", cache_path, error)
    return corpus


def _load_synthetic() -> Corpus:
    return _bilingual_stories("synthetic", synthetic_dataset(seed=0))


def _load_stories() -> Corpus:
    return _bilingual_stories("stories", story_dataset(seed=0))


def _bilingual_stories(name: str, data) -> Corpus:
    """A corpus of a seeded language's stories: each English story followed by its Chinese translation."""
    english_stories = tuple(" ".join(example.english for example in story) for story in data.stories())
    chinese_stories = tuple("".join(example.chinese for example in story) for story in data.stories())
    translation = dict(zip(english_stories, chinese_stories))
    # Split whole stories, so that a story and its translation always land in the same split.
    train_stories, validation_stories = split_train_validation(english_stories)

    def with_translations(stories):
        return tuple(document for story in stories for document in (story, translation[story]))

    return _make_corpus(name, "builtin", with_translations(train_stories), with_translations(validation_stories))


# ------------------------------------------------------------------------------------------ the lab's corpora
def _corpora_folder(home) -> Path:
    return lab_home(home) / "corpora"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _SLUG_PATTERN.fullmatch(name):
        raise LabError("corpus name {name!r} is not allowed: use 1-80 letters, digits, '-', '_' or '.', "
                       "starting with a letter or digit (e.g. 'my-notes')", name=name)
    if name in BUILTIN_CORPORA:
        raise LabError("corpus name {name!r} is taken by a built-in corpus; choose another name", name=name)
    return name


def slugify(stem: str) -> str:
    """A safe corpus name from a file stem. Example: 'My Notes (2024)' -> 'my-notes-2024'."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-._")[:80].strip("-._")
    if not slug:
        slug = "corpus"
    if slug in BUILTIN_CORPORA:
        slug += "-upload"
    return slug


def _restore_interrupted_replacements(corpora_folder: Path) -> None:
    """Undo a re-import that was killed between moving the old corpus aside and moving the new one in."""
    for aside in corpora_folder.glob(".previous-*"):
        name = aside.name[len(".previous-"):]
        target = corpora_folder / name
        try:
            if target.exists():
                shutil.rmtree(aside, ignore_errors=True)
            elif _SLUG_PATTERN.fullmatch(name):
                os.replace(aside, target)
        except OSError as error:
            logger.warning("could not tidy %s: %s", aside, error)


def imported_corpora(*, home=None) -> list[str]:
    """Names of the corpora imported into the lab home, sorted."""
    folder = _corpora_folder(home)
    _restore_interrupted_replacements(folder)
    return sorted(entry.name for entry in folder.iterdir()
                  if _SLUG_PATTERN.fullmatch(entry.name) and (entry / _META_FILE).is_file())


def list_corpora(*, home=None) -> list[str]:
    """Built-in names first (in BUILTIN_CORPORA order), then imported corpora, sorted."""
    return list(BUILTIN_CORPORA) + [name for name in imported_corpora(home=home) if name not in BUILTIN_CORPORA]


def import_corpus(path, *, name: str | None = None, text_column: str | None = None, home=None,
                  max_bytes: int | None = None) -> Corpus:
    """Validate a .txt/.md/.jsonl/.csv file and store its documents as `<home>/corpora/<name>/`.

    The corpus is written to a temporary folder beside its destination and renamed into place; re-importing a name
    replaces the old corpus. `max_bytes=None` means $PRETRAINING_LAB_MAX_UPLOAD_MB or 200 MB.
    Example: `import_corpus("reviews.csv", text_column="review")` -> Corpus(name="reviews", source="upload", ...).
    """
    path = Path(path)
    name = _check_name(name) if name is not None else slugify(path.stem)
    extracted = extract_documents(path, text_column, max_upload_bytes(max_bytes))
    train, validation = split_train_validation(extracted.documents)
    corpus = _make_corpus(name, "upload", train, validation)
    meta = {
        "name": name,
        "source_file": path.name,
        "format": extracted.file_format,
        "text_column": extracted.text_column,
        "bytes": extracted.size,
        "documents": len(extracted.documents),
        "train_documents": len(train),
        "validation_documents": len(validation),
        "fingerprint": corpus.fingerprint,
    }
    lines = [json.dumps({"split": split_name, "text": text}, ensure_ascii=False)
             for split_name, texts in (("train", train), ("validation", validation)) for text in texts]
    _install(name, home, {_DOCUMENTS_FILE: "\n".join(lines) + "\n"}, meta)
    logger.info("imported %s as corpus %r (%d documents)", path.name, name, len(extracted.documents))
    return corpus


def _install(name: str, home, files: dict[str, str], meta: dict) -> None:
    """Write a corpus folder (its `files`, then meta.json last) to a temporary folder and rename it into place,
    replacing a corpus of that name; a failure or a crash leaves the previous one."""
    corpora_folder = _corpora_folder(home)
    _restore_interrupted_replacements(corpora_folder)
    staging = Path(tempfile.mkdtemp(prefix=f".importing-{name}-", dir=corpora_folder))
    aside = corpora_folder / f".previous-{name}"
    target = corpora_folder / name
    try:
        for file_name, content in files.items():
            atomic_write_text(staging / file_name, content)
        atomic_write_json(staging / _META_FILE, meta)  # written last: a folder without meta.json is not a corpus
        if target.exists():
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(target, aside)
        try:
            os.replace(staging, target)
        except BaseException:
            if aside.exists() and not target.exists():
                os.replace(aside, target)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def link_corpus(path, *, name: str | None = None, text_column: str | None = None, home=None) -> dict:
    """Register a corpus file or folder on this machine under a name, read in place (nothing is copied): a .txt,
    .md, .jsonl, .csv or .parquet file, a folder of them, or a folder written by `datasets`' save_to_disk. The lab
    stores `<home>/corpora/<name>/meta.json` with the path; the name then works wherever a corpus name does, and a
    run on it streams the files (lab_models/text/corpus_sources.py). No size cap: the upload cap is for uploads.
    Returns the stored facts. Example: `link_corpus("/data/web/", name="web")` -> {"name": "web", "link":
    "/data/web", "files": 12, "bytes": 31457280, ...}.
    """
    files = find_corpus_files(path, text_column)
    name = _check_name(name) if name is not None else slugify(files.name)
    meta = {"name": name, _LINK_KEY: str(files.root), "layout": files.layout, "formats": files.formats(),
            "text_column": files.text_column, "columns": list(files.columns), "files": len(files.files),
            "bytes": files.total_bytes}
    _install(name, home, {}, meta)
    logger.info("linked %s as corpus %r (%d files, %d bytes)", files.root, name, len(files.files), files.total_bytes)
    return meta


def linked_corpus(name: str, *, home=None) -> dict | None:
    """The stored facts of a corpus linked with `link_corpus` ("link": its path, "text_column", ...), or None when
    `name` is not a linked corpus."""
    if not isinstance(name, str) or not _SLUG_PATTERN.fullmatch(name) or name in BUILTIN_CORPORA:
        return None
    try:
        meta = json.loads((_corpora_folder(home) / name / _META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and isinstance(meta.get(_LINK_KEY), str) else None


def _load_linked(name: str, meta: dict) -> Corpus:
    size = int(meta.get("bytes") or 0)
    if size > IN_MEMORY_MAX_BYTES:
        raise LabError("the corpus {name!r} ({megabytes:,.0f} MB at {link}) is read in place, too big "
                       "to load whole (the limit is {max_megabytes} MB): runs stream it (the Train "
                       "tab, or python -m lab_models train --corpus NAME) and the Corpora tab tokenizes it; the "
                       "views that load a corpus whole (the Tokenizer Lab, the Mask Explorer, the Leaderboard's "
                       "held-out text) need a smaller one",
                       name=name, megabytes=size / 2**20, link=meta[_LINK_KEY],
                       max_megabytes=IN_MEMORY_MAX_BYTES // 2**20)
    corpus = _load_path(Path(meta[_LINK_KEY]), meta.get("text_column"))
    return Corpus(name, "path", corpus.train, corpus.validation, corpus.fingerprint)


def _load_imported(name: str, home) -> Corpus:
    linked = linked_corpus(name, home=home)
    if linked is not None:
        return _load_linked(name, linked)
    folder = _corpora_folder(home) / name
    problem = Message("imported corpus {name!r} in {folder} is damaged; import the file again", name=name,
                      folder=folder)
    try:
        meta = json.loads((folder / _META_FILE).read_text(encoding="utf-8"))
        splits: dict[str, list[str]] = {"train": [], "validation": []}
        with open(folder / _DOCUMENTS_FILE, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    splits[record["split"]].append(record["text"])
        corpus = _make_corpus(name, "upload", tuple(splits["train"]), tuple(splits["validation"]))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise LabError("{problem} ({error})", problem=problem, error=error) from None
    if corpus.fingerprint != meta.get("fingerprint"):
        raise LabError("{problem} (its contents do not match the fingerprint in {meta_file})",
                       problem=problem, meta_file=_META_FILE)
    return corpus


def _load_path(path: Path, text_column: str | None = None) -> Corpus:
    return corpus_from_files(find_corpus_files(path, text_column))


def corpus_from_files(files: CorpusFiles, limits: ReadLimits = ReadLimits()) -> Corpus:
    """A file or folder read whole into memory, with the streamed reader (corpus_streams.py), so that its documents are
    exactly those a streamed run of the same files trains on; split by `split_train_validation`."""
    report = ReadReport()
    documents = tuple(iter_documents(files, report, limits))
    for note in report.notes():
        logger.warning("%s: %s", files.root, note)
    if not documents:
        notes = report.notes()
        if files.layout == "folder" and report.skipped_files == len(files.files):
            raise LabError("folder {root} has only empty files (or binary ones): {notes}", root=files.root,
                           notes=Joined(notes, "; "))
        raise LabError("{root} has no non-empty text{column}{notes}", root=files.root,
                       column=Message(" in {column!r}", column=files.text_column) if files.text_column else "",
                       notes=Message("; {notes}", notes=Joined(notes, "; ")) if notes else "")
    train, validation = split_train_validation(documents)
    return _make_corpus(files.name, "path", train, validation)


def load_corpus(name_or_path: str, *, home=None, text_column: str | None = None) -> Corpus:
    """A built-in corpus, an imported or linked one (by name), or a file or folder on disk, in that order of lookup;
    `text_column` picks the column of a path's .jsonl/.csv/.parquet/datasets files (default: the suggested one).

    Example: `load_corpus("synthetic")`, `load_corpus("my-notes")`, `load_corpus("~/texts/")`.
    """
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise LabError("expected a corpus name or a path, got {name_or_path!r}; choose one of "
                       "{corpora}", name_or_path=name_or_path, corpora=', '.join(list_corpora(home=home)))
    name_or_path = str(name_or_path)
    if name_or_path == "stdlib-docs":
        return _load_stdlib_docs(home)
    if name_or_path == "synthetic":
        return _load_synthetic()
    if name_or_path == "stories":
        return _load_stories()
    if _SLUG_PATTERN.fullmatch(name_or_path) and name_or_path in imported_corpora(home=home):
        return _load_imported(name_or_path, home)
    path = Path(name_or_path).expanduser()
    if path.exists():
        return _load_path(path, text_column)
    raise LabError("unknown corpus {name_or_path!r}: not a built-in or imported corpus and not an existing path; "
                   "choose one of {corpora}, or give a path to a "
                   "{streamed_extensions} file or a folder of them",
                   name_or_path=name_or_path, corpora=', '.join(list_corpora(home=home)),
                   streamed_extensions=', '.join(STREAMED_EXTENSIONS))


# ------------------------------------------------------------------------------------------------------- cards
_LATIN_LETTERS = re.compile(r"[A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff]")
_CJK_CHARACTERS = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]"
)
_WORD = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]"
                   "|(?:(?![\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                   "\U00020000-\U0002ffff])\\w)+")


def _count(pattern: re.Pattern, text: str) -> int:
    return len(text) - len(pattern.sub("", text))


def corpus_card(corpus: Corpus) -> dict:
    """Counts, language mix and a sample of a corpus.

    `words` counts runs of letters/digits, plus each CJK character as one word. `language_mix` gives the fractions of
    letters that are Latin, CJK (Chinese, Japanese kana, Korean hangul) or other scripts; they sum to 1 (all three are
    0 when the corpus has no letters). Example: the synthetic corpus has latin ≈ 0.8 and cjk ≈ 0.2.
    """
    if not isinstance(corpus, Corpus):
        raise LabError("corpus_card expects a Corpus (from load_corpus), got {corpus_type}",
                       corpus_type=type(corpus).__name__)
    texts = corpus.texts
    latin = cjk = letters = characters = lines = words = size = 0
    for text in texts:
        characters += len(text)
        lines += text.count("\n") + 1
        size += len(text.encode("utf-8"))
        words += sum(1 for _ in _WORD.finditer(text))
        latin += _count(_LATIN_LETTERS, text)
        cjk += _count(_CJK_CHARACTERS, text)
        letters += sum(map(str.isalpha, text))
    other = max(0, letters - latin - cjk)
    total = latin + cjk + other
    mix = ({"latin": latin / total, "cjk": cjk / total, "other": other / total} if total
           else {"latin": 0.0, "cjk": 0.0, "other": 0.0})
    return {
        "name": corpus.name,
        "source": corpus.source,
        "documents": len(texts),
        "train_documents": len(corpus.train),
        "validation_documents": len(corpus.validation),
        "lines": lines,
        "characters": characters,
        "words": words,
        "bytes": size,
        "language_mix": mix,
        "fingerprint": corpus.fingerprint,
        "sample": [text if len(text) <= SAMPLE_CHARACTERS else text[:SAMPLE_CHARACTERS].rstrip() + "…"
                   for text in texts[:SAMPLE_DOCUMENTS]],
    }

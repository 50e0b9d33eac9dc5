"""A corpus as a training run reads it: named, fingerprinted, streamed as (split, document) pairs in constant memory,
and sampled for its tokenizer.

    open_corpus("synthetic" | "my-upload" | "web" (linked) | "~/data/big.txt")  -->  a CorpusSource
    source.documents(report)              -->  ("train", "first doc"), ("validation", "second doc"), ...
    source.tokenizer_corpus()             -->  an in-memory Corpus: every training document, or a bounded sample
    source.fingerprint()                  -->  the key of its tokenizer and token shards in the lab home

Three kinds, one protocol:
* `MemorySource`: a corpus held in memory (`corpora.load_corpus`): the built-in ones, and files or folders of at most
  `corpora.IN_MEMORY_MAX_BYTES` (64 MB), split exactly as today by `split_train_validation` (which can move one
  document so that neither split is empty);
* `ImportedSource`: an upload imported into the lab home, streamed line by line from its documents.jsonl (each line
  carries its split);
* `FileSource`: a bigger file or folder (given as a path, or linked by name with `corpora.link_corpus`), streamed by
  lab_models/text/corpus_streams.py and split document by document with `corpora.document_split` (the same hash rule,
  without the move: a streamed corpus has thousands of documents; one with an empty validation split is evaluated on
  its first training rows, and the run says so).

The tokenizer's training text is bounded (`TOKENIZER_SAMPLE_BYTES`, 16 MB of UTF-8): a corpus whose training split
fits trains its tokenizer on all of it; a bigger one on a seeded sample of its training documents, drawn
uniformly without replacement (each document gets a random key from the generator; the documents with the smallest
keys are kept while they fit) and kept in corpus order. This is what SentencePiece's `input_sentence_size` does
(reservoir-sample that many sentences, default 1M in T5's and ALBERT's setups); deviation: the bound is in bytes, not
sentences, and a document longer than a sixteenth of the bound contributes its first part only.

A streamed corpus's fingerprint is the sha256 of its files' bytes and the reading options (corpus_streams.py
`files_digest`), computed once and cached under `<home>/corpora/_fingerprints/` by the files' paths, sizes and
modification times, so a second run on the same files does not read them to know they are unchanged.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_json, lab_home
from lab_models.text.corpora import (BUILTIN_CORPORA, IN_MEMORY_MAX_BYTES, Corpus, corpus_card, corpus_from_files,
                                     document_split, imported_corpora, linked_corpus, list_corpora, load_corpus)
from lab_models.text.corpus_streams import (STREAMED_EXTENSIONS, CorpusFiles, ReadLimits, ReadReport,
                                            find_corpus_files, files_digest, iter_documents)

logger = logging.getLogger(__name__)

TOKENIZER_SAMPLE_BYTES = 16 * 2**20
TOKENIZER_SAMPLE_SEED = 0
SAMPLE_KEY_BATCH = 4096  # random keys drawn from the generator this many at a time
_FINGERPRINTS_FOLDER = "_fingerprints"  # under <home>/corpora/; "_" keeps it out of the corpus list


# ------------------------------------------------------------------------------------------------ sampling
def sample_documents(documents: Iterable[str], budget_bytes: int, generator: torch.Generator) -> list[str]:
    """A uniform sample without replacement of `documents`, as many as fit in `budget_bytes` of UTF-8, in their
    original order; all of them when they fit. A document longer than budget/16 characters enters with its first
    budget/16 characters (the module docstring).

    >>> sample_documents(["a", "b", "c"], 16, torch.Generator().manual_seed(0))
    ['a', 'b', 'c']
    >>> len(sample_documents(["x"] * 40, 16, torch.Generator().manual_seed(0)))
    16
    """
    if budget_bytes < 16:
        raise LabError("the sample budget must be at least 16 bytes, got {budget_bytes}", budget_bytes=budget_bytes)
    longest = max(1, budget_bytes // 16)
    heap: list[tuple[float, int, str, int]] = []  # (-key, index, text, size): the largest key on top
    total = 0
    keys: list[float] = []
    for index, text in enumerate(documents):
        if not keys:
            keys = torch.rand(SAMPLE_KEY_BATCH, generator=generator, dtype=torch.float64).tolist()[::-1]
        key = keys.pop()
        text = text if len(text) <= longest else text[:longest]
        size = len(text.encode("utf-8"))
        heapq.heappush(heap, (-key, index, text, size))
        total += size
        while total > budget_bytes and heap:
            _, _, _, dropped = heapq.heappop(heap)
            total -= dropped
    return [text for _, _, text, _ in sorted(heap, key=lambda entry: entry[1])]


def _sample_corpus(name: str, source: str, fingerprint: str, train: Iterable[str], budget: int) -> Corpus:
    generator = torch.Generator().manual_seed(TOKENIZER_SAMPLE_SEED)
    sample = tuple(sample_documents(train, budget, generator))
    if not sample:
        raise LabError("the corpus {name!r} has no training text to train a tokenizer on", name=name)
    identity = hashlib.sha256(f"{fingerprint}|sample|{budget}|{TOKENIZER_SAMPLE_SEED}".encode()).hexdigest()
    logger.info("tokenizer sample of %s: %d documents, %d bytes", name, len(sample),
                sum(len(text.encode("utf-8")) for text in sample))
    return Corpus(name, source, sample, (), identity)


# ------------------------------------------------------------------------------------------------ the sources
class MemorySource:
    """A corpus held in memory: built-in, or a file or folder small enough to split exactly (module docstring)."""

    kind = "memory"

    def __init__(self, corpus: Corpus, reference: str):
        self.corpus = corpus
        self.name = corpus.name
        self.source = corpus.source
        self.reference = reference  # what config.json records as the corpus
        self.total_bytes = sum(len(text.encode("utf-8")) for text in corpus.texts)
        self.notes: list[str] = []

    def fingerprint(self, progress=None) -> str:
        return self.corpus.fingerprint

    def documents(self, report: ReadReport) -> Iterator[tuple[str, str]]:
        for split, texts in (("train", self.corpus.train), ("validation", self.corpus.validation)):
            for text in texts:
                report.bytes_done += len(text.encode("utf-8"))
                report.documents += 1
                yield split, text

    def validation_documents(self, limit_bytes: int = 4 * 2**20) -> tuple[str, ...]:
        return self.corpus.validation

    def samples_tokenizer_text(self, budget: int = TOKENIZER_SAMPLE_BYTES) -> bool:
        """Whether its tokenizer trains on a sample (its training split is over `budget` bytes)."""
        return sum(len(text.encode("utf-8")) for text in self.corpus.train) > budget

    def tokenizer_corpus(self, budget: int = TOKENIZER_SAMPLE_BYTES, progress=None) -> Corpus:
        if not self.samples_tokenizer_text(budget):
            return self.corpus  # all of its training split
        return _sample_corpus(self.name, self.source, self.corpus.fingerprint, self.corpus.train, budget)


class ImportedSource:
    """An upload imported into the lab home, streamed from its documents.jsonl (one {"split", "text"} per line)."""

    kind = "imported"

    def __init__(self, name: str, folder: Path):
        self.name = name
        self.source = "upload"
        self.reference = name
        self.folder = folder
        try:
            self.meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
            self.total_bytes = (folder / "documents.jsonl").stat().st_size
        except (OSError, ValueError) as error:
            raise LabError("imported corpus {name!r} in {folder} is damaged; import the file again ({error})",
                           name=name, folder=folder, error=error) \
                from None
        self.notes: list[str] = []

    def fingerprint(self, progress=None) -> str:
        return str(self.meta.get("fingerprint") or "")

    def _records(self, report: ReadReport) -> Iterator[tuple[str, str]]:
        problem = Message("imported corpus {name!r} in {folder} is damaged; import the file again", name=self.name,
                          folder=self.folder)
        with open(self.folder / "documents.jsonl", "rb") as handle:
            for line in handle:
                report.bytes_done += len(line)
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    split, text = record["split"], record["text"]
                except (ValueError, KeyError, TypeError) as error:
                    raise LabError("{problem} ({error})", problem=problem, error=error) from None
                if split not in ("train", "validation") or not isinstance(text, str):
                    raise LabError("{problem} (a line with split {split!r})", problem=problem, split=split)
                report.documents += 1
                yield split, text

    def documents(self, report: ReadReport) -> Iterator[tuple[str, str]]:
        yield from self._records(report)

    def validation_documents(self, limit_bytes: int = 4 * 2**20) -> tuple[str, ...]:
        return _first_validation(self._records(ReadReport()), limit_bytes)

    def samples_tokenizer_text(self, budget: int = TOKENIZER_SAMPLE_BYTES) -> bool:
        return self.total_bytes > budget  # documents.jsonl's size: a little more than its texts'

    def tokenizer_corpus(self, budget: int = TOKENIZER_SAMPLE_BYTES, progress=None) -> Corpus:
        if not self.samples_tokenizer_text(budget):
            return load_corpus(self.name, home=self.folder.parent.parent)  # the whole corpus
        report = ReadReport()
        train = (text for split, text in _reporting(self._records(report), report, self.total_bytes, progress)
                 if split == "train")
        return _sample_corpus(self.name, self.source, self.fingerprint(), train, budget)


class FileSource:
    """A file or folder too big to hold, streamed (corpus_streams.py) and split document by document."""

    kind = "files"

    def __init__(self, files: CorpusFiles, *, name: str, reference: str, home=None,
                 limits: ReadLimits = ReadLimits()):
        self.files = files
        self.name = name
        self.source = "path"
        self.reference = reference
        self.home = lab_home(home)
        self.limits = limits
        self.total_bytes = files.total_bytes
        self.notes: list[str] = []  # what the last full read skipped or replaced (ReadReport.notes)
        self._fingerprint: str | None = None

    def _fingerprint_path(self) -> Path:
        key = hashlib.sha256(f"{self.files.stat_key()}|{self.limits.key()}".encode()).hexdigest()[:32]
        return self.home / "corpora" / _FINGERPRINTS_FOLDER / f"{key}.json"

    def cached_fingerprint(self) -> str | None:
        """The fingerprint when the files are unchanged since it was computed, without reading them; else None."""
        if self._fingerprint is None:
            try:
                self._fingerprint = json.loads(self._fingerprint_path().read_text(encoding="utf-8"))["fingerprint"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
        return self._fingerprint

    def fingerprint(self, progress: Callable[[int, int], None] | None = None) -> str:
        """sha256 of the files' bytes and the reading options; read once, then cached by path, size and time."""
        cached = self.cached_fingerprint()
        if cached is not None:
            return cached
        fingerprint = files_digest(self.files, self.limits, progress)
        try:
            atomic_write_json(self._fingerprint_path(), {"fingerprint": fingerprint, "root": str(self.files.root),
                                                         "bytes": self.total_bytes})
        except OSError as error:  # a read-only home: computed again next time
            logger.warning("could not cache the fingerprint of %s: %s", self.files.root, error)
        self._fingerprint = fingerprint
        return fingerprint

    def documents(self, report: ReadReport) -> Iterator[tuple[str, str]]:
        for text in iter_documents(self.files, report, self.limits):
            yield document_split(text), text
        self.notes = report.notes()

    def validation_documents(self, limit_bytes: int = 4 * 2**20) -> tuple[str, ...]:
        return _first_validation(self.documents(ReadReport()), limit_bytes)

    def samples_tokenizer_text(self, budget: int = TOKENIZER_SAMPLE_BYTES) -> bool:
        return self.total_bytes > budget

    def tokenizer_corpus(self, budget: int = TOKENIZER_SAMPLE_BYTES, progress=None) -> Corpus:
        report = ReadReport()
        train = (text for split, text in _reporting(self.documents(report), report, self.total_bytes, progress)
                 if split == "train")
        return _sample_corpus(self.name, self.source, self.fingerprint(), train, budget)


def _reporting(records: Iterator[tuple[str, str]], report: ReadReport, total: int, progress,
               every: int = 1024) -> Iterator[tuple[str, str]]:
    """`records` unchanged, calling `progress(bytes_done, total)` every `every` documents and at the end."""
    for count, record in enumerate(records, start=1):
        if progress is not None and count % every == 0:
            progress(report.bytes_done, total)
        yield record
    if progress is not None:
        progress(report.bytes_done, total)


def _first_validation(records: Iterator[tuple[str, str]], limit_bytes: int) -> tuple[str, ...]:
    """The first validation documents of a stream, up to `limit_bytes` of UTF-8 (the held-out text of a view)."""
    chosen, size = [], 0
    for split, text in records:
        if split == "validation":
            chosen.append(text)
            size += len(text.encode("utf-8"))
            if size >= limit_bytes:
                break
    return tuple(chosen)


CorpusSource = MemorySource | ImportedSource | FileSource


def open_corpus(name_or_path: str, *, text_column: str | None = None, home=None,
                limits: ReadLimits = ReadLimits()) -> CorpusSource:
    """The corpus a run trains on: a built-in name, an imported or linked corpus's name, or a path (a file or a
    folder; `text_column` for its .jsonl/.csv/.parquet/datasets files), looked up in that order as `load_corpus`
    does. Nothing is read yet beyond the file list (and, for a path of at most 64 MB, the files themselves).

    Example: `open_corpus("~/data/web.jsonl", text_column="content")` -> a FileSource when the file is over 64 MB.
    """
    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path).strip():
        raise LabError("expected a corpus name or a path, got {name_or_path!r}; choose one of "
                       "{corpora}", name_or_path=name_or_path, corpora=', '.join(list_corpora(home=home)))
    reference = str(name_or_path).strip()
    if reference in BUILTIN_CORPORA:
        return MemorySource(load_corpus(reference, home=home), reference)
    if reference in imported_corpora(home=home):
        linked = linked_corpus(reference, home=home)
        if linked is None:
            return ImportedSource(reference, lab_home(home) / "corpora" / reference)
        files = find_corpus_files(linked["link"], linked.get("text_column"), limits=limits)
        return _source_for(files, name=reference, reference=reference, home=home, limits=limits)
    path = Path(reference).expanduser()
    if not path.exists():
        raise LabError("unknown corpus {reference!r}: not a built-in or imported corpus and not an existing path; "
                       "choose one of {corpora}, or give a path to a "
                       "{streamed_extensions} file, a folder of them or a datasets save_to_disk folder",
                       reference=reference, corpora=', '.join(list_corpora(home=home)),
                       streamed_extensions=', '.join(STREAMED_EXTENSIONS))
    files = find_corpus_files(path, text_column, limits=limits)
    return _source_for(files, name=files.name, reference=str(files.root), home=home, limits=limits)


def _source_for(files: CorpusFiles, *, name: str, reference: str, home, limits: ReadLimits) -> CorpusSource:
    if files.total_bytes <= IN_MEMORY_MAX_BYTES:
        corpus = corpus_from_files(files, limits)
        return MemorySource(Corpus(name, "path", corpus.train, corpus.validation, corpus.fingerprint), reference)
    return FileSource(files, name=name, reference=reference, home=home, limits=limits)


# ------------------------------------------------------------------------------------------------ a corpus's card
CARD_SAMPLE_BYTES = 2 * 2**20  # a corpus too big to load is described from this much of its beginning


def tokenized_versions(fingerprint: str | None, *, home=None) -> list[dict]:
    """The finished token shards of a corpus (by fingerprint) in the lab home, newest first: {"folder", "dtype",
    "vocab_size", "documents", "train_tokens", "validation_tokens", "created"}."""
    if not fingerprint:
        return []
    found = []
    for index_path in (lab_home(home) / "token_shards").glob("*/index.json"):
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(index, dict) and index.get("corpus_fingerprint") == fingerprint:
            tokens = index.get("tokens") or {}
            found.append({"folder": str(index_path.parent), "dtype": index.get("dtype"),
                          "vocab_size": index.get("vocab_size"), "documents": index.get("documents"),
                          "train_tokens": tokens.get("train"), "validation_tokens": tokens.get("validation"),
                          "notes": (index.get("read") or {}).get("notes", []), "created": index.get("created")})
    return sorted(found, key=lambda entry: -(entry["created"] or 0))


def corpus_overview(name: str, *, home=None) -> dict:
    """The card of any corpus of the lab home (`corpora.corpus_card`'s fields), plus "tokenized" (its finished
    token shards). A linked corpus too big to load is described from its files and its first 2 MB: "documents",
    "lines", "words" and "characters" are None (until it is tokenized: then "documents" is the shards' count),
    "language_mix" and "sample" are those of its beginning, and "sampled_bytes" says how much was read."""
    source = open_corpus(name, home=home)
    if not isinstance(source, FileSource):
        corpus = source.corpus if isinstance(source, MemorySource) else load_corpus(name, home=home)
        card = corpus_card(corpus)
        card["tokenized"] = tokenized_versions(source.fingerprint(), home=home)
        return card
    report, documents, size = ReadReport(), [], 0
    for _, text in source.documents(report):
        documents.append(text)
        size += len(text.encode("utf-8"))
        if size >= CARD_SAMPLE_BYTES:
            break
    card = corpus_card(Corpus(name, "path", tuple(documents), (), "0" * 64))
    tokenized = tokenized_versions(source.cached_fingerprint(), home=home)
    card.update(documents=tokenized[0]["documents"] if tokenized else None, train_documents=None,
                validation_documents=None, lines=None, words=None, characters=None, bytes=source.total_bytes,
                fingerprint=source.cached_fingerprint(), sampled_bytes=size, tokenized=tokenized,
                path=str(source.files.root), files=len(source.files.files), formats=source.files.formats(),
                text_column=source.files.text_column)
    return card

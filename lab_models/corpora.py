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
* "synthetic": little stories from the seeded grammar in `lab_models.synthetic`, each English document followed by
  its Chinese translation.
* Uploads: `.txt`, `.md`, `.jsonl` and `.csv`, validated (size cap, empty, binary, UTF-8, columns, JSON syntax) and
  stored as `<home>/corpora/<name>/documents.jsonl` + `meta.json`, written to a temporary folder first and renamed
  into place, so a failure or a crash never leaves a half-written corpus.

What it follows and how it deviates
-----------------------------------
It follows the usual data-card practice (counts, language mix, a sample) and the usual hash-based split (a document's
split depends only on its text, so shuffling or appending documents never moves a document across the split). It
deviates from large-corpus pipelines in keeping every corpus in memory: the lab's corpora are a few MB.

Decisions a user should know about
----------------------------------
* Text files are split into documents on blank lines; a file with no blank line at all is read one line per document.
  Line breaks inside a paragraph are kept; trailing spaces and Windows line endings are normalised.
* In `.csv` files the first row is the header, and the delimiter is whichever of `, ; TAB |` the header row uses most.
  `.jsonl` lines must be JSON objects; rows where the chosen field is missing, null or not a string are skipped.
* Uploaded documents are not deduplicated (they are the user's data); the built-in stdlib text is.
* The upload cap is `max_bytes` when given, else the environment variable PRETRAINING_LAB_MAX_UPLOAD_MB, else 200 MB.
  Paths loaded directly with `load_corpus` (not uploads) are not capped.
* Corpus names are slugs: letters, digits, "-", "_" and "."; they start with a letter or digit (names starting with
  "_" or "." are reserved for the lab's own folders) and may not shadow a built-in name.
"""
from __future__ import annotations

import ast
import csv
import hashlib
import io
import json
import logging
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lab_models.home import atomic_write_json, atomic_write_text, lab_home
from lab_models.synthetic import synthetic_dataset

logger = logging.getLogger(__name__)

BUILTIN_CORPORA: dict[str, str] = {
    "stdlib-docs": "English prose from CPython's own documentation: help() topics and stdlib docstrings (~1.4 MB).",
    "synthetic": "Seeded toy grammar: short English stories, each followed by its Chinese translation (bilingual).",
}
DEFAULT_MAX_UPLOAD_BYTES = 200 * 1024 * 1024
MAX_UPLOAD_ENV_VAR = "PRETRAINING_LAB_MAX_UPLOAD_MB"
SUPPORTED_EXTENSIONS = {".txt": "txt", ".md": "md", ".jsonl": "jsonl", ".csv": "csv"}
DEFAULT_VALIDATION_FRACTION = 0.05
SAMPLE_DOCUMENTS = 5
SAMPLE_CHARACTERS = 300

_BUILTIN_CACHE_FOLDER = "_builtin"
_STDLIB_DOCS_BUILD_VERSION = 1  # bump when the cleaning rules change, so old caches are rebuilt
_SLUG_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_DOCUMENTS_FILE = "documents.jsonl"
_META_FILE = "meta.json"
_PREFERRED_TEXT_COLUMNS = ("text", "content", "body", "document", "sentence", "review", "paragraph", "message")


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
            raise ValueError(f"Corpus source must be 'builtin', 'upload' or 'path', got {self.source!r}")
        if not self.train and not self.validation:
            raise ValueError(f"Corpus {self.name!r} has no documents")
        if not all(isinstance(text, str) and text for text in self.texts):
            raise ValueError(f"Corpus {self.name!r} has an empty or non-text document")

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
        raise ValueError(f"validation_fraction must be a number in [0, 1), got {validation_fraction!r}")
    documents = tuple(docs)
    if not all(isinstance(text, str) for text in documents):
        raise ValueError("split_train_validation expects a sequence of strings")
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


# ---------------------------------------------------------------------------------------------- stdlib-docs text
_SKIPPED_STDLIB_FOLDERS = frozenset({
    "test", "tests", "idle_test", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo", "ensurepip",
    "__pycache__", "pydoc_data", "encodings", "config-3", "distutils", "venv",
})
_UNDERLINE = re.compile(r"^\s*([=\-~*^#+`'\"._:])\1{2,}\s*$")
_TABLE_LINE = re.compile(r"^\s*(\+[-=+]+\+?|\|.*)\s*$")
_BULLET = re.compile(r"^\s*(?:[*\-+•]|\d+[.)])\s+")
_ROLE = re.compile(r":[a-zA-Z:]+:`~?([^`]+)`")
_DOUBLE_BACKTICKS = re.compile(r"``([^`]+)``")
_SINGLE_BACKTICKS = re.compile(r"`([^`]+)`_?")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(\w[^*\n]*?\w|\w)\*{1,2}(?![\w*])")
_WHITESPACE = re.compile(r"\s+")
_CODE_WORD = re.compile(r"[\[\]{}=<>_\\/@$%^&|~;#]|\w\(|\)\.|^\W*\w+\.\w")  # x[0], a_b, f(, ).x, os.path
_MIN_PARAGRAPH_CHARACTERS = 40


def _looks_like_prose(paragraph: str) -> bool:
    """Keep paragraphs of sentences; drop code, tables, signatures and lists of names."""
    if len(paragraph) < _MIN_PARAGRAPH_CHARACTERS:
        return False
    visible = paragraph.replace(" ", "")
    letters = sum(map(str.isalpha, visible))
    if letters < 0.75 * len(visible):
        return False
    words = paragraph.split()
    if len(words) < 6:
        return False
    plain_words = sum(map(str.isalpha, (word.strip(".,;:!?\"'()") for word in words)))
    code_words = sum(map(bool, map(_CODE_WORD.search, words)))
    return plain_words >= 0.6 * len(words) and code_words <= 0.15 * len(words)


def _join_wrapped_lines(lines: list[str]) -> str:
    """Join wrapped lines with spaces, but mend words split after a hyphen: ["built-", "in"] -> "built-in"."""
    joined = lines[0]
    for line in lines[1:]:
        joined += line if re.search(r"[A-Za-z]-$", joined) and line[:1].islower() else " " + line
    return joined


def _strip_inline_markup(text: str) -> str:
    text = _ROLE.sub(r"\1", text)
    text = _DOUBLE_BACKTICKS.sub(r"\1", text)
    text = _SINGLE_BACKTICKS.sub(r"\1", text)
    return _EMPHASIS.sub(r"\1", text)


def prose_paragraphs(text: str) -> list[str]:
    """Clean reStructuredText-ish documentation into one-line prose paragraphs.

    Drops doctest lines ('>>>', '...') with their output, literal blocks after '::', '.. ' directives, tables, title
    underlines (and the titles above them) and anything that does not read as prose; strips inline markup and bullets;
    collapses whitespace.

    Example: "Returns the sum of the\\nvalues in the iterable, starting at zero.\\n\\n>>> sum([1, 2])\\n3"
    -> ["Returns the sum of the values in the iterable, starting at zero."]
    """
    paragraphs: list[str] = []
    literal_indent: int | None = None  # set after a paragraph ending in '::': deeper-indented blocks are code
    for block in re.split(r"\n[ \t]*\n", text.expandtabs(8)):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        indent = len(lines[0]) - len(lines[0].lstrip())
        if literal_indent is not None:
            if indent > literal_indent:
                continue
            literal_indent = None
        kept: list[str] = []
        in_doctest = in_directive = False
        for line in lines:
            stripped = line.strip()
            if stripped.startswith((">>>", "... ")) or stripped == "...":
                in_doctest = True
            if in_doctest:
                continue
            if stripped.startswith(".. ") or stripped == "..":
                in_directive = True
                continue
            if in_directive and line[:1].isspace():
                continue
            in_directive = False
            if _UNDERLINE.match(line):
                if kept:
                    kept.pop()  # the title above an underline is a heading, not prose
                continue
            if _TABLE_LINE.match(line):
                continue
            kept.append(_BULLET.sub("", stripped))
        if not kept:
            continue
        paragraph = _WHITESPACE.sub(" ", _strip_inline_markup(_join_wrapped_lines(kept))).strip()
        if paragraph.endswith("::"):
            literal_indent = indent
            paragraph = paragraph[:-1]
        if _looks_like_prose(paragraph):
            paragraphs.append(paragraph)
    return paragraphs


def _stdlib_sources(stdlib_root: Path) -> list[Path]:
    sources = []
    for folder, subfolders, files in os.walk(stdlib_root):
        subfolders[:] = sorted(
            name for name in subfolders
            if name not in _SKIPPED_STDLIB_FOLDERS and not name.startswith((".", "config-"))
        )
        sources += [Path(folder, name) for name in sorted(files) if name.endswith(".py")]
    return sources


def _docstrings(tree: ast.Module) -> list[str]:
    """The module docstring, then class and function docstrings (not those of functions nested in functions)."""
    found = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop(0)
        docstring = ast.get_docstring(node, clean=True)
        if docstring:
            found.append(docstring)
        if isinstance(node, (ast.Module, ast.ClassDef)):
            pending += [child for child in node.body
                        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


def build_stdlib_docs_paragraphs() -> list[str]:
    """All prose paragraphs of CPython's help() topics and stdlib docstrings, deduplicated, in a fixed order."""
    texts: list[str] = []
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip pydoc_data; the docstrings remain
        logger.warning("pydoc_data is not installed; stdlib-docs will hold docstrings only")
        topics = {}
    texts += [topics[key] for key in sorted(topics)]
    stdlib_root = Path(sysconfig.get_paths()["stdlib"])
    for source in _stdlib_sources(stdlib_root):
        try:
            tree = ast.parse(source.read_bytes(), filename=str(source))
        except (SyntaxError, ValueError, OSError) as error:
            logger.debug("skipping %s: %s", source, error)
            continue
        texts += _docstrings(tree)
    seen: set[str] = set()
    paragraphs = []
    for text in texts:
        for paragraph in prose_paragraphs(text):
            if paragraph not in seen:
                seen.add(paragraph)
                paragraphs.append(paragraph)
    return paragraphs


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
    data = synthetic_dataset(seed=0)
    english_stories = tuple(" ".join(example.english for example in story) for story in data.stories())
    chinese_stories = tuple("".join(example.chinese for example in story) for story in data.stories())
    translation = dict(zip(english_stories, chinese_stories))
    # Split whole stories, so that a story and its translation always land in the same split.
    train_stories, validation_stories = split_train_validation(english_stories)

    def with_translations(stories):
        return tuple(document for story in stories for document in (story, translation[story]))

    return _make_corpus("synthetic", "builtin", with_translations(train_stories), with_translations(validation_stories))


# ----------------------------------------------------------------------------------------------- upload checks
def max_upload_bytes(max_bytes: int | None = None) -> int:
    """The upload cap: `max_bytes` if given, else $PRETRAINING_LAB_MAX_UPLOAD_MB, else 200 MB."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ValueError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
        return max_bytes
    configured = os.environ.get(MAX_UPLOAD_ENV_VAR, "").strip()
    if not configured:
        return DEFAULT_MAX_UPLOAD_BYTES
    try:
        megabytes = float(configured)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0 or megabytes == float("inf"):
        raise ValueError(f"{MAX_UPLOAD_ENV_VAR} must be a positive number of megabytes, got {configured!r}")
    return int(megabytes * 1024 * 1024)


def _human_size(size: int) -> str:
    """Example: 512 -> '512 bytes', 3 * 1024 * 1024 -> '3.0 MB'."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _file_format(path: Path) -> str:
    file_format = SUPPORTED_EXTENSIONS.get(path.suffix.lower())
    if file_format is None:
        shown = path.suffix or "(no extension)"
        raise ValueError(f"{path.name}: unsupported file type {shown}; upload a "
                         f"{', '.join(SUPPORTED_EXTENSIONS)} file (plain text, Markdown, JSON Lines or CSV)")
    return file_format


_TEXT_CONTROL_BYTES = b"\t\n\r\x0c\x1b"  # tab, newlines, form feed and escape appear in real text files
_CONTROL_BYTES = bytes(byte for byte in range(32) if byte not in _TEXT_CONTROL_BYTES) + b"\x7f"


def _decode_text(data: bytes, file_name: str) -> str:
    """Check that bytes are non-empty UTF-8 text (a BOM is accepted) and decode them."""
    if not data.strip():
        raise ValueError(f"{file_name} is empty (or holds only whitespace); there is no text to train on")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(f"{file_name} is UTF-16 encoded; re-save it as UTF-8 (e.g. in your editor's "
                         f"'Save with encoding' menu, or `iconv -f UTF-16 -t UTF-8`)")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    nul_offset = data.find(b"\x00")
    if nul_offset >= 0:
        raise ValueError(f"{file_name} looks like a binary file (a NUL byte at byte offset {nul_offset}); "
                         f"upload plain text: export documents, PDFs or spreadsheets to .txt or .csv first")
    control_count = len(data) - len(data.translate(None, delete=_CONTROL_BYTES))
    if control_count > 0.1 * len(data):
        raise ValueError(f"{file_name} looks like a binary file ({control_count} of {len(data)} bytes are control "
                         f"characters); upload plain text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{file_name} is not valid UTF-8: byte 0x{data[error.start]:02x} at byte offset {error.start} "
            f"(line {line}) cannot be decoded; re-save the file as UTF-8 (e.g. `iconv -f latin1 -t UTF-8`)"
        ) from None
    if not text.strip():
        raise ValueError(f"{file_name} holds only whitespace; there is no text to train on")
    return text


def _clean_document(text: str) -> str:
    """Normalise line endings, drop trailing spaces on each line and blank lines at either end."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def _text_documents(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks = re.split(r"\n[ \t]*\n", text)
    if len(blocks) == 1:  # no blank line anywhere: treat every line as a document
        blocks = text.split("\n")
    return [document for document in map(_clean_document, blocks) if document]


# -------------------------------------------------------------------------------------------- table extraction
@dataclass(frozen=True)
class _Table:
    """Rows of a csv or jsonl file as dicts, with the string-valued columns in first-seen order."""
    rows: tuple[dict, ...]
    columns: tuple[str, ...]


def _suggest_column(table: _Table) -> str | None:
    by_lower_name = {column.lower(): column for column in table.columns}
    for preferred in _PREFERRED_TEXT_COLUMNS:
        if preferred in by_lower_name:
            return by_lower_name[preferred]
    if not table.columns:
        return None

    def mean_length(column):
        values = [row[column] for row in table.rows[:1000] if isinstance(row.get(column), str)]
        return sum(map(len, values)) / max(1, len(values))

    return max(table.columns, key=lambda column: (mean_length(column), -table.columns.index(column)))


def _read_jsonl(text: str, file_name: str) -> _Table:
    rows = []
    columns: dict[str, None] = {}
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{file_name}: line {line_number} is not valid JSON ({error.msg} at column "
                             f"{error.colno}); each line must be one JSON object such as "
                             f"{{\"text\": \"...\"}}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{file_name}: line {line_number} is a JSON {type(row).__name__}, not an object; "
                             f"each line must be one JSON object such as {{\"text\": \"...\"}}")
        for key, value in row.items():
            if isinstance(value, str):
                columns.setdefault(key, None)
        rows.append(row)
    return _Table(tuple(rows), tuple(columns))


def _csv_delimiter(text: str) -> str:
    header = text.split("\n", 1)[0]
    counts = {delimiter: header.count(delimiter) for delimiter in (",", ";", "\t", "|")}
    best = max(counts, key=lambda delimiter: counts[delimiter])
    return best if counts[best] else ","


def _read_csv(text: str, file_name: str) -> _Table:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_csv_delimiter(text), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{file_name} has no header row")
        names = [name.strip() or f"column{index + 1}" for index, name in enumerate(header)]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"{file_name}: the header repeats the column name(s) {', '.join(duplicates)}; "
                             f"give every column a different name")
        rows = tuple({name: value for name, value in zip(names, cells)} for cells in reader)
    except csv.Error as error:
        raise ValueError(f"{file_name}: CSV error on line {reader.line_num}: {error}. Check the quoting on that "
                         f"line; cells longer than {csv.field_size_limit()} characters are not supported "
                         f"(use .jsonl for long documents)") from None
    if not rows:
        raise ValueError(f"{file_name} has a header but no rows")

    def is_text(column):
        values = [row.get(column, "").strip() for row in rows]
        return any(value and not _is_number(value) for value in values)

    return _Table(rows, tuple(name for name in names if is_text(name)))


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _table_documents(table: _Table, text_column: str | None, file_name: str, kind: str) -> tuple[list[str], str]:
    if not table.columns:
        raise ValueError(f"{file_name} has no {kind} holding text; it needs at least one "
                         f"{'field with string values' if kind == 'field' else 'column of text'}")
    column = text_column if text_column is not None else _suggest_column(table)
    if column not in table.columns:
        raise ValueError(f"{file_name} has no text {kind} {column!r}; available: {', '.join(table.columns)}")
    documents = []
    skipped = 0
    for row in table.rows:
        value = row.get(column)
        cleaned = _clean_document(value) if isinstance(value, str) else ""
        if cleaned:
            documents.append(cleaned)
        else:
            skipped += 1
    if skipped:
        logger.info("%s: skipped %d rows with an empty or missing %r", file_name, skipped, column)
    return documents, column


@dataclass(frozen=True)
class _Extracted:
    file_format: str
    columns: tuple[str, ...]
    suggested_column: str | None
    text_column: str | None
    documents: tuple[str, ...]
    size: int


def _extract(path, text_column: str | None, max_bytes: int | None) -> _Extracted:
    """Validate one file and pull its documents out; every problem becomes a ValueError naming the file."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    file_format = _file_format(path)
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise ValueError(f"{path.name} is {_human_size(size)}, over the upload limit of {_human_size(max_bytes)}; "
                         f"pass a larger max_bytes or set {MAX_UPLOAD_ENV_VAR} (in MB) to raise the limit")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"could not read {path}: {error.strerror or error}") from None
    text = _decode_text(data, path.name)
    if file_format in ("txt", "md"):
        if text_column is not None:
            raise ValueError(f"{path.name} is plain text; a text column only applies to .csv and .jsonl files")
        documents, columns, suggested, chosen = _text_documents(text), (), None, None
    else:
        table = _read_jsonl(text, path.name) if file_format == "jsonl" else _read_csv(text, path.name)
        kind = "field" if file_format == "jsonl" else "column"
        documents, chosen = _table_documents(table, text_column, path.name, kind)
        columns, suggested = table.columns, _suggest_column(table)
    if not documents:
        raise ValueError(f"{path.name} has no non-empty text" + (f" in {chosen!r}" if chosen else ""))
    return _Extracted(file_format, tuple(columns), suggested, chosen, tuple(documents), size)


def inspect_file(path, *, max_bytes: int | None = None) -> dict:
    """Validate a file as `import_corpus` would and describe it, e.g. for a column picker.

    Example: a csv with header `id,text,label` -> {"format": "csv", "columns": ["text", "label"],
    "suggested_column": "text", "bytes": 123, "documents": 10} (numeric columns such as `id` are not offered).
    """
    extracted = _extract(path, None, max_upload_bytes(max_bytes))
    return {
        "format": extracted.file_format,
        "columns": list(extracted.columns),
        "suggested_column": extracted.suggested_column,
        "bytes": extracted.size,
        "documents": len(extracted.documents),
    }


# ------------------------------------------------------------------------------------------ the lab's corpora
def _corpora_folder(home) -> Path:
    return lab_home(home) / "corpora"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _SLUG_PATTERN.fullmatch(name):
        raise ValueError(f"corpus name {name!r} is not allowed: use 1-80 letters, digits, '-', '_' or '.', "
                         f"starting with a letter or digit (e.g. 'my-notes')")
    if name in BUILTIN_CORPORA:
        raise ValueError(f"corpus name {name!r} is taken by a built-in corpus; choose another name")
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
    extracted = _extract(path, text_column, max_upload_bytes(max_bytes))
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
    corpora_folder = _corpora_folder(home)
    _restore_interrupted_replacements(corpora_folder)
    staging = Path(tempfile.mkdtemp(prefix=f".importing-{name}-", dir=corpora_folder))
    aside = corpora_folder / f".previous-{name}"
    target = corpora_folder / name
    try:
        lines = [json.dumps({"split": split_name, "text": text}, ensure_ascii=False)
                 for split_name, texts in (("train", train), ("validation", validation)) for text in texts]
        atomic_write_text(staging / _DOCUMENTS_FILE, "\n".join(lines) + "\n")
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
    logger.info("imported %s as corpus %r (%d documents)", path.name, name, len(extracted.documents))
    return corpus


def _load_imported(name: str, home) -> Corpus:
    folder = _corpora_folder(home) / name
    problem = f"imported corpus {name!r} in {folder} is damaged; import the file again"
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
        raise ValueError(f"{problem} ({error})") from None
    if corpus.fingerprint != meta.get("fingerprint"):
        raise ValueError(f"{problem} (its contents do not match the fingerprint in {_META_FILE})")
    return corpus


def _load_path(path: Path) -> Corpus:
    if path.is_file():
        documents = _extract(path, None, None).documents
        name = path.stem
    else:
        files = sorted(
            (candidate for candidate in path.rglob("*")
             if candidate.is_file() and candidate.suffix.lower() in SUPPORTED_EXTENSIONS
             and not any(part.startswith(".") for part in candidate.relative_to(path).parts)),
            key=lambda candidate: candidate.relative_to(path).as_posix(),
        )
        if not files:
            raise ValueError(f"folder {path} has no {', '.join(SUPPORTED_EXTENSIONS)} files to read")
        collected: list[str] = []
        for file in files:
            if not file.read_bytes().strip():
                logger.warning("skipping empty file %s", file)
                continue
            try:
                collected += _extract(file, None, None).documents
            except ValueError as error:
                raise ValueError(f"in folder {path}: {error}") from None
        if not collected:
            raise ValueError(f"folder {path} has only empty files")
        documents = tuple(collected)
        name = path.resolve().name or "corpus"
    train, validation = split_train_validation(documents)
    return _make_corpus(name, "path", train, validation)


def load_corpus(name_or_path: str, *, home=None) -> Corpus:
    """A built-in corpus, an imported one (by name), or a file or folder on disk, in that order of lookup.

    Example: `load_corpus("synthetic")`, `load_corpus("my-notes")`, `load_corpus("~/texts/")`.
    """
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise ValueError(f"expected a corpus name or a path, got {name_or_path!r}; choose one of "
                         f"{', '.join(list_corpora(home=home))}")
    name_or_path = str(name_or_path)
    if name_or_path == "stdlib-docs":
        return _load_stdlib_docs(home)
    if name_or_path == "synthetic":
        return _load_synthetic()
    if _SLUG_PATTERN.fullmatch(name_or_path) and name_or_path in imported_corpora(home=home):
        return _load_imported(name_or_path, home)
    path = Path(name_or_path).expanduser()
    if path.exists():
        return _load_path(path)
    raise ValueError(f"unknown corpus {name_or_path!r}: not a built-in or imported corpus and not an existing path; "
                     f"choose one of {', '.join(list_corpora(home=home))}, or give a path to a "
                     f"{', '.join(SUPPORTED_EXTENSIONS)} file or a folder of them")


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
        raise ValueError(f"corpus_card expects a Corpus (from load_corpus), got {type(corpus).__name__}")
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

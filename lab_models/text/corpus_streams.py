"""Documents streamed from corpus files of any size, in constant memory: plain text and Markdown, JSON Lines, CSV,
Parquet, and a `datasets` folder written by `save_to_disk`; one file, or a folder of them.

    find_corpus_files("~/data/web/")      -->  CorpusFiles: the files, their formats and sizes, the text column
    iter_documents(files, report)         -->  "first document", "second document", ...   (read block by block)

The documents are the ones `corpus_files.extract_documents` takes from a small file (the same blank-line paragraphs,
or one line per document when a text file has no blank line; the same cleaning; the same text columns). What differs
is how a file is read: in blocks of `ReadLimits.block_bytes` (1 MiB) instead of whole, so a 300 MB or a 30 GB corpus
costs the memory of a 3 MB one. Parquet files are read with pyarrow one record batch at a time, and the Arrow files
of a `datasets` folder are memory-mapped and read batch by batch (never loaded whole), as `datasets` itself reads
them. In a folder, files are read in the sorted order of their paths (hidden files and folders skipped); a
`datasets` folder (`state.json`, or `dataset_dict.json` with one folder per split) is read split by split, in the
order its `dataset_dict.json` lists them.

Bad input, decided here (a `ReadReport` counts each one, and its `notes()` say so in the run's log and config.json):
* an empty file, or a binary one (a NUL byte, or more than 10% control bytes, in its first 64 KiB), inside a folder is
  skipped and counted; as the whole corpus it is an error that says what the file looks like;
* bytes that are not UTF-8 (a Latin-1 line inside a UTF-8 file: mixed encodings) become U+FFFD and are counted; a
  file that starts with a UTF-16 byte order mark is an error that says how to convert it (read as UTF-8 it would be
  garbage);
* a line or paragraph longer than `ReadLimits.max_document_chars` (16 Mi characters; scraped dumps hold 2 GB lines)
  is cut into documents of at most that many characters, at the last whitespace before the limit where there is
  one, and counted; a JSON line that long is skipped and counted; a CSV line that long is an error (as a CSV cell
  over 128 KiB already is: use .jsonl for long documents);
* a JSON line that does not parse, and a row whose text field is missing, empty or not a string, is skipped and
  counted;
* a Parquet or Arrow file without the named text column is an error naming the columns it has.

Deviation from `corpus_files` (uploads): an upload is checked whole and refused on its first problem (its owner fixes
it and uploads it again); a corpus read in place can be too big to fix by hand, so problems that leave the rest
usable are counted instead of refused. The text column of a .jsonl or .csv file is chosen from its first 1000 rows
(an upload looks at all of them).
"""
from __future__ import annotations

import codecs
import csv
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lab_models.messages import Joined, LabError, Message
from lab_models.text.corpus_files import (binary_reason, check_not_utf16, clean_document,
                                          csv_delimiter, suggest_column)

READER_VERSION = 1  # part of every streamed corpus's fingerprint: bump when the documents read from a file change
STREAMED_EXTENSIONS = {".txt": "txt", ".md": "md", ".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
TABLE_FORMATS = ("jsonl", "csv", "parquet", "arrow")
COLUMN_SAMPLE_ROWS = 1000  # rows read to find a .jsonl / .csv file's text columns
MAX_EXAMPLES = 20  # skipped files and rows named in a report; the rest are counted
_BLANK_LINE = re.compile(r"\n[ \t]*\n")  # corpus_files.text_documents splits paragraphs on exactly this
_CUT_WHITESPACE = (" ", "\t", "\n", "\u3000")


@dataclass(frozen=True)
class ReadLimits:
    """How files are read. Tests make them small to simulate a 2 GB line with a few kilobytes."""

    block_bytes: int = 2**20  # read this much of a file at a time (also the progress bar's granularity)
    max_document_chars: int = 16 * 2**20  # a longer line or paragraph is cut into documents of at most this
    probe_bytes: int = 64 * 2**10  # a file's first bytes, checked for being binary

    def __post_init__(self):
        for name in ("block_bytes", "max_document_chars", "probe_bytes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 16:
                raise LabError("ReadLimits.{name} must be a whole number of at least 16, got "
                               "{value!r}", name=name, value=getattr(self, name))

    def key(self) -> str:
        """What the limits add to a fingerprint: only those that change the documents read."""
        return f"doc{self.max_document_chars}-probe{self.probe_bytes}"


@dataclass(frozen=True)
class CorpusFile:
    path: Path
    relative: str  # the path shown in messages: relative to the folder given, or the file's name
    file_format: str  # txt, md, jsonl, csv, parquet or arrow
    size: int


@dataclass(frozen=True)
class CorpusFiles:
    """What a corpus path holds: its files in reading order, their formats and sizes, and the text column."""

    root: Path  # the file or folder given, resolved
    layout: str  # "file", "folder" or "datasets" (a folder written by datasets' save_to_disk)
    files: tuple[CorpusFile, ...]
    text_column: str | None  # the column of .jsonl/.csv/.parquet/.arrow files; None: each file's suggested one
    columns: tuple[str, ...] = ()  # the text columns of the first table file, for a picker

    @property
    def total_bytes(self) -> int:
        return sum(file.size for file in self.files)

    @property
    def name(self) -> str:
        return (self.root.stem if self.layout == "file" else self.root.name) or "corpus"

    def formats(self) -> list[str]:
        return sorted({file.file_format for file in self.files})

    def stat_key(self) -> str:
        """A hash of every file's path, size and modification time, and the reading options: when it is unchanged,
        the contents are taken as unchanged (corpus_sources.py caches the content fingerprint under it)."""
        digest = hashlib.sha256(f"v{READER_VERSION}|{self.root}|{self.layout}|{self.text_column}".encode())
        for file in self.files:
            stat = file.path.stat()
            digest.update(f"|{file.relative}|{stat.st_size}|{stat.st_mtime_ns}".encode())
        return digest.hexdigest()


@dataclass
class ReadReport:
    """What reading found: counts for the progress bar (`bytes_done`) and the problems that were skipped."""

    bytes_done: int = 0  # of the corpus's files (an estimate inside Parquet files)
    files_read: int = 0
    documents: int = 0
    skipped_files: int = 0
    skipped_file_examples: list = field(default_factory=list)  # (relative path, why), the first MAX_EXAMPLES
    replaced_characters: int = 0  # bytes that were not UTF-8, now U+FFFD (about: one per invalid sequence)
    files_with_replacements: int = 0
    cuts: int = 0  # cuts made in lines, paragraphs or cells longer than max_document_chars
    skipped_rows: int = 0  # JSON lines that do not parse, rows without text, JSON lines over the limit
    skipped_row_examples: list = field(default_factory=list)  # "file line N: why", the first MAX_EXAMPLES

    def skip_file(self, relative: str, why: Message) -> None:
        self.skipped_files += 1
        if len(self.skipped_file_examples) < MAX_EXAMPLES:
            self.skipped_file_examples.append((relative, why))

    def skip_row(self, where: Message, why: Message) -> None:
        self.skipped_rows += 1
        if len(self.skipped_row_examples) < MAX_EXAMPLES:
            self.skipped_row_examples.append(Message("{where}: {why}", where=where, why=why))

    def notes(self) -> list[Message]:
        """One sentence per kind of problem met, for the log, config.json and the corpus card.

        >>> report = ReadReport(skipped_files=1, skipped_file_examples=[("b/x.bin", "binary")], replaced_characters=3,
        ...                     files_with_replacements=1)
        >>> report.notes()
        ['1 file skipped (b/x.bin: binary)', '3 bytes that are not UTF-8 replaced by U+FFFD in 1 file']
        """
        notes = []
        if self.skipped_files:
            shown = Joined((Message("{name}: {why}", name=name, why=why)
                            for name, why in self.skipped_file_examples[:3]), "; ")
            more = ", ..." if self.skipped_files > 3 else ""
            notes.append(Message("{count} file skipped ({shown}{more})", count=self.skipped_files, shown=shown,
                                 more=more) if self.skipped_files == 1 else
                         Message("{count} files skipped ({shown}{more})", count=self.skipped_files, shown=shown,
                                 more=more))
        if self.replaced_characters:
            notes.append(Message("{count} bytes that are not UTF-8 replaced by U+FFFD in {files} file",
                                 count=self.replaced_characters, files=self.files_with_replacements)
                         if self.files_with_replacements == 1 else
                         Message("{count} bytes that are not UTF-8 replaced by U+FFFD in {files} files",
                                 count=self.replaced_characters, files=self.files_with_replacements))
        if self.cuts:
            notes.append(Message("{cuts} cuts made in lines, paragraphs or cells longer than the limit (each piece a "
                                 "document)", cuts=self.cuts))
        if self.skipped_rows:
            shown = Joined(self.skipped_row_examples[:3], "; ")
            more = ", ..." if self.skipped_rows > 3 else ""
            notes.append(Message("{count} row skipped ({shown}{more})", count=self.skipped_rows, shown=shown,
                                 more=more) if self.skipped_rows == 1 else
                         Message("{count} rows skipped ({shown}{more})", count=self.skipped_rows, shown=shown,
                                 more=more))
        return notes

    def to_dict(self) -> dict:
        return {"files_read": self.files_read, "documents": self.documents, "skipped_files": self.skipped_files,
                "replaced_characters": self.replaced_characters, "cuts": self.cuts,
                "skipped_rows": self.skipped_rows, "notes": self.notes()}


# ------------------------------------------------------------------------------------------------ finding the files
def _file_format(path: Path) -> str | None:
    return STREAMED_EXTENSIONS.get(path.suffix.lower())


def _unsupported(path: Path) -> ValueError:
    shown = path.suffix or Message("(no extension)")
    return LabError("{name}: unsupported file type {shown}; give a {streamed_extensions} file, a "
                    "folder of them, or a folder written by datasets' save_to_disk",
                    name=path.name, shown=shown, streamed_extensions=', '.join(STREAMED_EXTENSIONS))


def _datasets_arrow_files(folder: Path) -> list[Path] | None:
    """The Arrow files of a `datasets` save_to_disk folder, in order, or None when `folder` is not one."""
    if (folder / "dataset_dict.json").is_file():  # a DatasetDict: one folder per split
        try:
            splits = json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise LabError("{folder}/dataset_dict.json is not a datasets split list ({error})",
                           folder=folder, error=error) from None
        files: list[Path] = []
        for split in splits:
            found = _datasets_arrow_files(folder / str(split))
            if found is None:
                raise LabError("{folder} lists the split {split!r}, but {path} is not a saved split",
                               folder=folder, split=split, path=folder / str(split))
            files += found
        return files
    if not (folder / "state.json").is_file():
        return None
    try:
        names = [entry["filename"] for entry in json.loads((folder / "state.json").read_text(encoding="utf-8"))
                 ["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise LabError("{folder}/state.json is not a datasets state file ({error})",
                       folder=folder, error=error) from None
    files = [folder / name for name in names]
    missing = [path.name for path in files if not path.is_file()]
    if missing:
        raise LabError("{folder} is a datasets folder without its data file(s) {missing}",
                       folder=folder, missing=', '.join(missing))
    return files


def find_corpus_files(path, text_column: str | None = None, *, limits: ReadLimits = ReadLimits()) -> CorpusFiles:
    """The files of a corpus path: one supported file, a folder of them (recursively, in sorted order), or a
    `datasets` save_to_disk folder; with the text column of its table files checked (or suggested).

    Example: a folder holding a.txt and b/c.jsonl -> CorpusFiles(layout="folder", files=(a.txt, b/c.jsonl), ...).
    """
    if not isinstance(path, (str, Path)) or not str(path).strip():
        raise LabError("expected the path of a corpus file or folder, got {path!r}", path=path)
    try:
        given = Path(path).expanduser()
        exists = given.exists()
        root = given.resolve()
    except (OSError, RuntimeError, ValueError) as error:  # too long a name, a NUL, "~nobody": not a path to read
        shown = str(path) if len(str(path)) <= 80 else str(path)[:40] + "…" + str(path)[-39:]
        raise LabError("{shown!r} is not a readable path ({reason})",
                       shown=shown, reason=getattr(error, 'strerror', None) or error) from None
    if not exists:
        raise LabError("{given} does not exist", given=given)
    if root.is_file():
        file_format = _file_format(root)
        if file_format is None:
            if root.suffix.lower() == ".arrow":
                raise LabError("{name}: give the folder that datasets' save_to_disk wrote (the one holding "
                               "state.json), not one of its .arrow files", name=root.name)
            raise _unsupported(root)
        layout, files = "file", [CorpusFile(root, root.name, file_format, root.stat().st_size)]
    elif root.is_dir():
        arrow_files = _datasets_arrow_files(root)
        if arrow_files is not None:
            layout = "datasets"
            files = [CorpusFile(file, file.relative_to(root).as_posix(), "arrow", file.stat().st_size)
                     for file in arrow_files]
        else:
            layout = "folder"
            found = sorted((candidate for candidate in root.rglob("*")
                            if candidate.is_file() and _file_format(candidate) is not None
                            and not any(part.startswith(".") for part in candidate.relative_to(root).parts)),
                           key=lambda candidate: candidate.relative_to(root).as_posix())
            files = [CorpusFile(file, file.relative_to(root).as_posix(), _file_format(file), file.stat().st_size)
                     for file in found]
        if not files:
            raise LabError("folder {root} has no {streamed_extensions} files to read (nor a datasets "
                           "save_to_disk folder's state.json)",
                           root=root, streamed_extensions=', '.join(STREAMED_EXTENSIONS))
    else:
        raise LabError("{root} is neither a file nor a folder", root=root)
    if text_column is not None and (not isinstance(text_column, str) or not text_column.strip()):
        raise LabError("the text column must be a column name, got {text_column!r}", text_column=text_column)
    column = text_column.strip() if text_column else None
    columns: tuple[str, ...] = ()
    table = next((file for file in files if file.file_format in TABLE_FORMATS), None)
    if table is not None:
        columns, suggested = _table_columns(table, limits)
        if column is not None and column not in columns and table.file_format == "jsonl":
            raise LabError("{relative} has no text field {column!r} in its first {column_sample_rows} rows; "
                           "available: {columns}",
                           relative=table.relative, column=column, column_sample_rows=COLUMN_SAMPLE_ROWS,
                           columns=', '.join(columns) or 'none')
        if column is not None and column not in columns and table.file_format == "csv":
            raise LabError("{relative} has no text column {column!r} in its first {column_sample_rows} rows; "
                           "available: {columns}",
                           relative=table.relative, column=column, column_sample_rows=COLUMN_SAMPLE_ROWS,
                           columns=', '.join(columns) or 'none')
        if column is None and layout != "folder":  # one table (or one datasets folder): its suggested column
            column = suggested
    elif column is not None:
        raise LabError("{name} holds plain text only; a text column applies to .jsonl, .csv, .parquet and "
                       "datasets files", name=root.name)
    if column is not None:  # every Parquet / Arrow file must have it (their schemas are read without the data)
        for file in files:
            if file.file_format in ("parquet", "arrow"):
                schema, _ = _arrow_schema_and_rows(file)
                if column not in schema.names:
                    raise LabError("{relative} has no column {column!r}; its columns: "
                                   "{names}", relative=file.relative, column=column, names=', '.join(schema.names))
    return CorpusFiles(root, layout, tuple(files), column, tuple(columns))


def _table_columns(file: CorpusFile, limits: ReadLimits) -> tuple[tuple[str, ...], str | None]:
    """(the text columns, the suggested one) of a table file, from its schema or its first rows."""
    if file.file_format in ("parquet", "arrow"):
        schema, rows = _arrow_schema_and_rows(file)
        import pyarrow as pa

        names = tuple(f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
        return names, suggest_column(names, rows)
    report = ReadReport()
    rows: list[dict] = []
    columns: dict[str, None] = {}
    if file.file_format == "jsonl":
        for _, row in _jsonl_rows(file, report, limits):
            rows.append(row)
            for key, value in row.items():
                if isinstance(value, str):
                    columns.setdefault(key, None)
            if len(rows) >= COLUMN_SAMPLE_ROWS:
                break
    else:
        names, row_iter = _csv_rows(file, report, limits)
        for row in row_iter:
            rows.append(row)
            if len(rows) >= COLUMN_SAMPLE_ROWS:
                break
        for name in names:
            values = [row.get(name, "").strip() for row in rows]
            if any(value and not _is_number(value) for value in values):
                columns.setdefault(name, None)
    return tuple(columns), suggest_column(tuple(columns), rows)


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------------------------ reading text
def _decoded_blocks(handle, report: ReadReport, limits: ReadLimits) -> Iterator[str]:
    """The file's text, block by block: UTF-8 (a BOM dropped), invalid bytes as U+FFFD, newlines normalised to \\n as
    corpus_files does (\\r\\n and a lone \\r both become \\n; a \\r at a block's end waits for the next block)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    held_cr = ""
    replaced_before = report.replaced_characters
    while True:
        raw = handle.read(limits.block_bytes)
        text = held_cr + decoder.decode(raw, final=not raw)
        report.bytes_done += len(raw)
        replaced = text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")
        if replaced > 0:
            report.replaced_characters += replaced
        held_cr = ""
        if raw and text.endswith("\r"):
            held_cr, text = "\r", text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if text:
            yield text
        if not raw:
            break
    if report.replaced_characters > replaced_before:
        report.files_with_replacements += 1


def _cut_point(text: str, limit: int) -> int:
    """Where to cut `text` (longer than `limit`): after the last whitespace in its first `limit` characters, or at
    `limit` when there is none there (a run of Chinese, say)."""
    best = max(text.rfind(space, 0, limit) for space in _CUT_WHITESPACE)
    return best + 1 if best > 0 else limit


def _lines(blocks: Iterator[str], limit: int) -> Iterator[tuple[str, bool]]:
    """(line, complete) for every line of the text, without its newline; a line longer than `limit` characters comes
    as pieces of at most `limit` (each with complete=False) and then its rest (complete=True)."""
    pending = ""
    for block in blocks:
        parts = block.split("\n")
        parts[0] = pending + parts[0]
        pending = parts.pop()
        for line in parts:
            while len(line) > limit:
                cut = _cut_point(line, limit)
                yield line[:cut], False
                line = line[cut:]
            yield line, True
        while len(pending) > limit:
            cut = _cut_point(pending, limit)
            yield pending[:cut], False
            pending = pending[cut:]
    if pending:
        yield pending, True


def _has_blank_line(file: CorpusFile, limits: ReadLimits) -> bool:
    """Whether the text file has a blank line anywhere (then its documents are paragraphs; else one per line)."""
    carry = ""
    with open(file.path, "rb") as handle:
        for block in _decoded_blocks(handle, ReadReport(), limits):
            if _BLANK_LINE.search(carry + block):
                return True
            end = block.rfind("\n")
            if end >= 0:
                tail = block[end:]
                carry = tail if not tail[1:].strip(" \t") else ""
            elif carry and not block.strip(" \t"):
                carry += block
            else:
                carry = ""
    return False


def _text_file_documents(file: CorpusFile, report: ReadReport, limits: ReadLimits) -> Iterator[str]:
    """corpus_files.text_documents, streamed: blank-line paragraphs, or one document per line."""
    paragraphs = _has_blank_line(file, limits)
    limit = limits.max_document_chars
    with open(file.path, "rb") as handle:
        lines = _lines(_decoded_blocks(handle, report, limits), limit)
        if not paragraphs:
            for line, complete in lines:
                if not complete:
                    report.cuts += 1
                document = clean_document(line)
                if document:
                    yield document
            return
        paragraph: list[str] = []  # the current paragraph's lines
        size = 0
        continuing = False  # the last piece of `paragraph` is a line cut short: the next piece continues it
        for line, complete in lines:
            if complete and not continuing and not line.strip(" \t"):
                document = clean_document("\n".join(paragraph))
                paragraph, size = [], 0
                if document:
                    yield document
                continue
            if paragraph and size + len(line) + (not continuing) > limit:  # a paragraph this long: cut it here
                report.cuts += 1
                document = clean_document("\n".join(paragraph))
                paragraph, size, continuing = [], 0, False  # the rest of a cut line starts the next document
                if document:
                    yield document
            if continuing:
                paragraph[-1] += line
                size += len(line)
            else:
                size += len(line) + bool(paragraph)
                paragraph.append(line)
            continuing = not complete
        document = clean_document("\n".join(paragraph))
        if document:
            yield document


def _jsonl_rows(file: CorpusFile, report: ReadReport, limits: ReadLimits) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every JSON line; malformed and over-long lines are skipped and counted."""
    with open(file.path, "rb") as handle:
        number = 0
        skipping = False  # inside a line longer than the limit
        for line, complete in _lines(_decoded_blocks(handle, report, limits), limits.max_document_chars):
            if skipping or not complete:
                if not skipping:
                    number += 1
                    report.skip_row(Message("{file} line {number}", file=file.relative, number=number),
                                    Message("longer than {limit:,} characters", limit=limits.max_document_chars))
                skipping = not complete
                continue
            number += 1
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                report.skip_row(Message("{file} line {number}", file=file.relative, number=number),
                                Message("not valid JSON ({reason})", reason=getattr(error, 'msg', error)))
                continue
            if not isinstance(row, dict):
                report.skip_row(Message("{file} line {number}", file=file.relative, number=number),
                                Message("a JSON {row_type}, not an object", row_type=type(row).__name__))
                continue
            yield number, row


def _csv_rows(file: CorpusFile, report: ReadReport, limits: ReadLimits):
    """(the header's names, an iterator of rows as dicts). A CSV line longer than the limit is an error."""
    handle = open(file.path, "rb")

    def lines():
        for number, (line, complete) in enumerate(_lines(_decoded_blocks(handle, report, limits),
                                                          limits.max_document_chars), start=1):
            if not complete:
                handle.close()
                raise LabError("{relative}: line {number} is longer than {max_document_chars:,} "
                               "characters; use .jsonl or .txt for such long documents",
                               relative=file.relative, number=number, max_document_chars=limits.max_document_chars)
            yield line + "\n"

    source = lines()
    try:
        first = next(source)
    except StopIteration:
        handle.close()
        return (), iter(())
    reader = csv.reader(_prepend(first, source), delimiter=csv_delimiter(first), strict=True)
    try:
        header = next(reader)
    except csv.Error as error:
        handle.close()
        raise LabError("{relative}: CSV error in its header: {error}", relative=file.relative, error=error) from None
    names = [name.strip() or f"column{index + 1}" for index, name in enumerate(header)]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        handle.close()
        raise LabError("{relative}: the header repeats the column name(s) {duplicates}; give every "
                       "column a different name", relative=file.relative, duplicates=', '.join(duplicates))

    def rows():
        try:
            for cells in reader:
                yield {name: value for name, value in zip(names, cells)}
        except csv.Error as error:
            raise LabError("{relative}: CSV error on line {line}: {error}. Check the quoting on "
                           "that line; cells longer than {field_size_limit} characters are not supported "
                           "(use .jsonl for long documents)",
                           relative=file.relative, line=reader.line_num, error=error,
                           field_size_limit=csv.field_size_limit()) from None
        finally:
            handle.close()

    return tuple(names), rows()


def _prepend(first, rest):
    yield first
    yield from rest


def _cell_documents(value, where: Message, report: ReadReport, limits: ReadLimits) -> Iterator[str]:
    """A table cell as documents: cleaned; cut when longer than the limit; a row without text is counted."""
    if not isinstance(value, str) or not value.strip():
        report.skip_row(where, Message("no text in the column") if value is None or isinstance(value, str) else
                        Message("a {value_type}, not text", value_type=type(value).__name__))
        return
    limit = limits.max_document_chars
    while len(value) > limit:
        cut = _cut_point(value, limit)
        report.cuts += 1
        document = clean_document(value[:cut])
        if document:
            yield document
        value = value[cut:]
    document = clean_document(value)
    if document:
        yield document


def _column_for(file: CorpusFile, files: CorpusFiles, limits: ReadLimits) -> str:
    if files.text_column is not None:
        return files.text_column
    columns, suggested = _table_columns(file, limits)
    if suggested is None:
        raise LabError("{relative} has no column holding text", relative=file.relative)
    return suggested


def _jsonl_documents(file: CorpusFile, files: CorpusFiles, report: ReadReport, limits: ReadLimits) -> Iterator[str]:
    column = _column_for(file, files, limits)
    for number, row in _jsonl_rows(file, report, limits):
        where = Message("{file} line {number}", file=file.relative, number=number)
        yield from _cell_documents(row.get(column), where, report, limits)


def _csv_documents(file: CorpusFile, files: CorpusFiles, report: ReadReport, limits: ReadLimits) -> Iterator[str]:
    column = _column_for(file, files, limits)
    names, rows = _csv_rows(file, report, limits)
    if names and column not in names:
        rows.close()
        raise LabError("{relative} has no column {column!r}; available: {names}",
                       relative=file.relative, column=column, names=', '.join(names))
    for number, row in enumerate(rows, start=2):
        where = Message("{file} row {number}", file=file.relative, number=number)
        yield from _cell_documents(row.get(column), where, report, limits)


def _arrow_schema_and_rows(file: CorpusFile):
    """(the schema, the first rows as dicts) of a Parquet or Arrow file, read without loading it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if file.file_format == "parquet":
            parquet = pq.ParquetFile(file.path)
            batch = next(parquet.iter_batches(batch_size=COLUMN_SAMPLE_ROWS), None)
            return parquet.schema_arrow, (batch.to_pylist() if batch is not None else [])
        with pa.memory_map(str(file.path), "r") as source:
            reader = pa.ipc.open_stream(source)
            batch = next(iter(reader), None)
            rows = batch.slice(0, COLUMN_SAMPLE_ROWS).to_pylist() if batch is not None else []
            return reader.schema, rows
    except (pa.ArrowException, OSError) as error:
        raise LabError("{relative} is not a readable {file_format} file ({error})",
                       relative=file.relative, file_format=file.file_format.capitalize(), error=error) from None


def _arrow_documents(file: CorpusFile, files: CorpusFiles, report: ReadReport, limits: ReadLimits) -> Iterator[str]:
    """A Parquet file (one record batch at a time) or a datasets Arrow file (memory-mapped, batch by batch)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column = _column_for(file, files, limits)
    schema, _ = _arrow_schema_and_rows(file)
    if column not in schema.names:
        raise LabError("{relative} has no column {column!r}; its columns: {names}",
                       relative=file.relative, column=column, names=', '.join(schema.names))
    start = report.bytes_done
    try:
        if file.file_format == "parquet":
            parquet = pq.ParquetFile(file.path)
            total = max(1, parquet.metadata.num_rows)
            done = 0
            for batch in parquet.iter_batches(batch_size=1024, columns=[column]):
                for offset, value in enumerate(batch.column(0).to_pylist()):
                    where = Message("{file} row {number}", file=file.relative, number=done + offset + 1)
                    yield from _cell_documents(value, where, report, limits)
                done += batch.num_rows
                report.bytes_done = start + file.size * done // total
        else:
            with pa.memory_map(str(file.path), "r") as source:
                done = 0
                for batch in pa.ipc.open_stream(source):
                    for offset, value in enumerate(batch.column(column).to_pylist()):
                        where = Message("{file} row {number}", file=file.relative, number=done + offset + 1)
                        yield from _cell_documents(value, where, report, limits)
                    done += batch.num_rows
                    report.bytes_done = start + min(file.size, source.tell())
    except pa.ArrowException as error:
        raise LabError("{relative}: could not be read ({error})", relative=file.relative, error=error) from None
    report.bytes_done = start + file.size


def _probe(file: CorpusFile, limits: ReadLimits) -> Message | str | None:
    """Why a text file is skipped (empty, binary), or None. A UTF-16 file is an error, not a skip."""
    with open(file.path, "rb") as handle:
        head = handle.read(limits.probe_bytes)
    check_not_utf16(head, file.relative)
    if not head.strip():
        if file.size <= len(head):
            return "empty"
        return None  # whitespace first, text later: read it
    return binary_reason(head.removeprefix(b"\xef\xbb\xbf"))


def _only_ascii_whitespace(file: CorpusFile, limits: ReadLimits) -> bool:
    """Whether a text file holds nothing but ASCII whitespace (what an upload calls empty, corpus_files.py)."""
    with open(file.path, "rb") as handle:
        while block := handle.read(limits.block_bytes):
            if block.strip():
                return False
    return True


def iter_documents(files: CorpusFiles, report: ReadReport, limits: ReadLimits = ReadLimits()) -> Iterator[str]:
    """Every document of the corpus, file after file, in constant memory; `report` counts what was read and skipped.

    In a folder an empty or binary file is skipped (and counted); as the whole corpus it is a ValueError.
    """
    for file in files.files:
        skip = _probe(file, limits) if file.file_format in ("txt", "md", "jsonl", "csv") else None
        if skip is not None:
            if files.layout == "file":
                if skip == "empty":
                    raise LabError("{relative} is empty (or holds only whitespace); there is no text to "
                                   "train on", relative=file.relative)
                raise LabError("{relative} looks like a binary file ({skip}); give plain text: export "
                               "documents, PDFs or spreadsheets to .txt or .csv first",
                               relative=file.relative, skip=skip)
            report.skip_file(file.relative, Message("empty") if skip == "empty" else Message("binary: {reason}",
                                                                                              reason=skip))
            report.bytes_done += file.size
            continue
        before = report.documents
        start = report.bytes_done
        if file.file_format in ("txt", "md"):
            documents = _text_file_documents(file, report, limits)
        elif file.file_format == "jsonl":
            documents = _jsonl_documents(file, files, report, limits)
        elif file.file_format == "csv":
            documents = _csv_documents(file, files, report, limits)
        else:
            documents = _arrow_documents(file, files, report, limits)
        for document in documents:
            report.documents += 1
            yield document
        report.bytes_done = start + file.size
        report.files_read += 1
        if report.documents == before and files.layout == "file" and file.file_format in ("txt", "md") \
                and _only_ascii_whitespace(file, limits):
            # whitespace beyond the probe's first bytes: empty all the same (as an upload of it is)
            raise LabError("{relative} is empty (or holds only whitespace); there is no text to train on",
                           relative=file.relative)
        if report.documents == before and files.layout == "folder":
            report.skip_file(file.relative, Message("no text"))


def files_digest(files: CorpusFiles, limits: ReadLimits = ReadLimits(), progress=None) -> str:
    """sha256 of the reading options and every file's bytes, in reading order: the fingerprint of a streamed corpus.
    `progress(bytes_done, total)` is called after each block."""
    digest = hashlib.sha256(f"streamed-v{READER_VERSION}|{files.layout}|{files.text_column}|{limits.key()}".encode())
    done, total = 0, files.total_bytes
    for file in files.files:
        digest.update(f"|{file.relative}|{file.size}|".encode())
        with open(file.path, "rb") as handle:
            while True:
                block = handle.read(limits.block_bytes)
                if not block:
                    break
                digest.update(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)
    return digest.hexdigest()

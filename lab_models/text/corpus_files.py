"""Reading an uploaded corpus file: the size cap, the format (`.txt`, `.md`, `.jsonl`, `.csv`), UTF-8 text without
binary control bytes, documents split on blank lines, and the text column of a table (`inspect_file` shows what an
import would take, without writing anything).

Decisions a user should know about:
* Text files are split into documents on blank lines; a file with no blank line at all is read one line per document.
  Line breaks inside a paragraph are kept; trailing spaces and Windows line endings are normalised.
* In `.csv` files the first row is the header, and the delimiter is whichever of `, ; TAB |` the header row uses most.
  `.jsonl` lines must be JSON objects; rows where the chosen field is missing, null or not a string are skipped.
* The upload cap is `max_bytes` when given, else the environment variable PRETRAINING_LAB_MAX_UPLOAD_MB, else 200 MB.

`lab_models.text.corpora` imports what this module extracts into the lab home.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lab_models.messages import LabError, Message

logger = logging.getLogger(__name__)

DEFAULT_MAX_UPLOAD_BYTES = 200 * 1024 * 1024
MAX_UPLOAD_ENV_VAR = "PRETRAINING_LAB_MAX_UPLOAD_MB"
SUPPORTED_EXTENSIONS = {".txt": "txt", ".md": "md", ".jsonl": "jsonl", ".csv": "csv"}
PREFERRED_TEXT_COLUMNS = ("text", "content", "body", "document", "sentence", "review", "paragraph", "message")


# ----------------------------------------------------------------------------------------------- upload checks
def max_upload_bytes(max_bytes: int | None = None) -> int:
    """The upload cap: `max_bytes` if given, else $PRETRAINING_LAB_MAX_UPLOAD_MB, else 200 MB."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise LabError("max_bytes must be a positive number of bytes, got {max_bytes!r}", max_bytes=max_bytes)
        return max_bytes
    configured = os.environ.get(MAX_UPLOAD_ENV_VAR, "").strip()
    if not configured:
        return DEFAULT_MAX_UPLOAD_BYTES
    try:
        megabytes = float(configured)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0 or megabytes == float("inf"):
        raise LabError("{max_upload_env_var} must be a positive number of megabytes, got {configured!r}",
                       max_upload_env_var=MAX_UPLOAD_ENV_VAR, configured=configured)
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
        raise LabError("{name}: unsupported file type {shown}; upload a "
                       "{supported_extensions} file (plain text, Markdown, JSON Lines or CSV)",
                       name=path.name, shown=shown, supported_extensions=', '.join(SUPPORTED_EXTENSIONS))
    return file_format


_TEXT_CONTROL_BYTES = b"\t\n\r\x0c\x1b"  # tab, newlines, form feed and escape appear in real text files
_CONTROL_BYTES = bytes(byte for byte in range(32) if byte not in _TEXT_CONTROL_BYTES) + b"\x7f"


def check_not_utf16(data: bytes, file_name: str) -> None:
    """A ValueError that says how to convert, when `data` (a file's first bytes) starts with a UTF-16 byte order mark.

    >>> check_not_utf16("hi".encode("utf-16"), "notes.txt")
    Traceback (most recent call last):
    lab_models.messages.LabError: notes.txt is UTF-16 encoded; re-save it as UTF-8 (e.g. in your editor's 'Save with
    encoding' menu, or `iconv -f UTF-16 -t UTF-8`)
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LabError("{file_name} is UTF-16 encoded; re-save it as UTF-8 (e.g. in your editor's "
                       "'Save with encoding' menu, or `iconv -f UTF-16 -t UTF-8`)", file_name=file_name)


def binary_reason(data: bytes) -> Message | None:
    """Why `data` (a whole file, or a large file's first bytes) looks binary, or None when it looks like text.

    >>> binary_reason(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00"), binary_reason(b"plain words")
    ('a NUL byte at byte offset 8', None)
    """
    nul_offset = data.find(b"\x00")
    if nul_offset >= 0:
        return Message("a NUL byte at byte offset {offset}", offset=nul_offset)
    control_count = len(data) - len(data.translate(None, delete=_CONTROL_BYTES))
    if control_count > 0.1 * len(data):
        return Message("{count} of {size} bytes are control characters", count=control_count, size=len(data))
    return None


def decode_text(data: bytes, file_name: str) -> str:
    """Check that bytes are non-empty UTF-8 text (a BOM is accepted) and decode them."""
    if not data.strip():
        raise LabError("{file_name} is empty (or holds only whitespace); there is no text to train on",
                       file_name=file_name)
    check_not_utf16(data, file_name)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    reason = binary_reason(data)
    if reason is not None and "NUL" in reason:  # the English names the NUL byte: a file of another program
        raise LabError("{file_name} looks like a binary file ({reason}); "
                       "upload plain text: export documents, PDFs or spreadsheets to .txt or .csv first",
                       file_name=file_name, reason=reason)
    if reason is not None:
        raise LabError("{file_name} looks like a binary file ({reason}); upload plain text",
                       file_name=file_name, reason=reason)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise LabError(
            "{file_name} is not valid UTF-8: byte 0x{byte:02x} at byte offset {start} "
            "(line {line}) cannot be decoded; re-save the file as UTF-8 (e.g. `iconv -f latin1 -t UTF-8`)",
            file_name=file_name, byte=data[error.start], start=error.start, line=line
        ) from None
    if not text.strip():
        raise LabError("{file_name} holds only whitespace; there is no text to train on", file_name=file_name)
    return text


def clean_document(text: str) -> str:
    """Normalise line endings, drop trailing spaces on each line and blank lines at either end."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def text_documents(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks = re.split(r"\n[ \t]*\n", text)
    if len(blocks) == 1:  # no blank line anywhere: treat every line as a document
        blocks = text.split("\n")
    return [document for document in map(clean_document, blocks) if document]


# -------------------------------------------------------------------------------------------- table extraction
@dataclass(frozen=True)
class _Table:
    """Rows of a csv or jsonl file as dicts, with the string-valued columns in first-seen order."""
    rows: tuple[dict, ...]
    columns: tuple[str, ...]


def suggest_column(columns, rows) -> str | None:
    """The text column to offer: a usual name (text, content, body, ...) if there is one, else the column whose values
    are longest on average over the first 1000 rows (`rows`: dicts).

    >>> suggest_column(["id", "Body"], []), suggest_column(["a", "b"], [{"a": "x", "b": "a longer value"}])
    ('Body', 'b')
    """
    columns = list(columns)
    by_lower_name = {column.lower(): column for column in columns}
    for preferred in PREFERRED_TEXT_COLUMNS:
        if preferred in by_lower_name:
            return by_lower_name[preferred]
    if not columns:
        return None
    sample = list(rows[:1000])

    def mean_length(column):
        values = [row[column] for row in sample if isinstance(row.get(column), str)]
        return sum(map(len, values)) / max(1, len(values))

    return max(columns, key=lambda column: (mean_length(column), -columns.index(column)))


def _read_jsonl(text: str, file_name: str) -> _Table:
    rows = []
    columns: dict[str, None] = {}
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise LabError("{file_name}: line {line_number} is not valid JSON ({reason} at column "
                           "{column}); each line must be one JSON object such as "
                           "{{\"text\": \"...\"}}",
                           file_name=file_name, line_number=line_number, reason=error.msg, column=error.colno) from None
        if not isinstance(row, dict):
            raise LabError("{file_name}: line {line_number} is a JSON {row_type}, not an object; "
                           "each line must be one JSON object such as {{\"text\": \"...\"}}",
                           file_name=file_name, line_number=line_number, row_type=type(row).__name__)
        for key, value in row.items():
            if isinstance(value, str):
                columns.setdefault(key, None)
        rows.append(row)
    return _Table(tuple(rows), tuple(columns))


def csv_delimiter(text: str) -> str:
    header = text.split("\n", 1)[0]
    counts = {delimiter: header.count(delimiter) for delimiter in (",", ";", "\t", "|")}
    best = max(counts, key=lambda delimiter: counts[delimiter])
    return best if counts[best] else ","


def _read_csv(text: str, file_name: str) -> _Table:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=csv_delimiter(text), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise LabError("{file_name} has no header row", file_name=file_name)
        names = [name.strip() or f"column{index + 1}" for index, name in enumerate(header)]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise LabError("{file_name}: the header repeats the column name(s) {duplicates}; "
                           "give every column a different name", file_name=file_name, duplicates=', '.join(duplicates))
        rows = tuple({name: value for name, value in zip(names, cells)} for cells in reader)
    except csv.Error as error:
        raise LabError("{file_name}: CSV error on line {line}: {error}. Check the quoting on that "
                       "line; cells longer than {field_size_limit} characters are not supported "
                       "(use .jsonl for long documents)",
                       file_name=file_name, line=reader.line_num, error=error,
                       field_size_limit=csv.field_size_limit()) from None
    if not rows:
        raise LabError("{file_name} has a header but no rows", file_name=file_name)

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
    if not table.columns and kind == "field":
        raise LabError("{file_name} has no field holding text; it needs at least one field with string values",
                       file_name=file_name)
    if not table.columns:
        raise LabError("{file_name} has no column holding text; it needs at least one column of text",
                       file_name=file_name)
    column = text_column if text_column is not None else suggest_column(table.columns, table.rows)
    if column not in table.columns and kind == "field":
        raise LabError("{file_name} has no text field {column!r}; available: {columns}",
                       file_name=file_name, column=column, columns=', '.join(table.columns))
    if column not in table.columns:
        raise LabError("{file_name} has no text column {column!r}; available: {columns}",
                       file_name=file_name, column=column, columns=', '.join(table.columns))
    documents = []
    skipped = 0
    for row in table.rows:
        value = row.get(column)
        cleaned = clean_document(value) if isinstance(value, str) else ""
        if cleaned:
            documents.append(cleaned)
        else:
            skipped += 1
    if skipped:
        logger.info("%s: skipped %d rows with an empty or missing %r", file_name, skipped, column)
    return documents, column


@dataclass(frozen=True)
class ExtractedDocuments:
    file_format: str
    columns: tuple[str, ...]
    suggested_column: str | None
    text_column: str | None
    documents: tuple[str, ...]
    size: int


def extract_documents(path, text_column: str | None, max_bytes: int | None) -> ExtractedDocuments:
    """Validate one file and pull its documents out; every problem becomes a ValueError naming the file."""
    path = Path(path)
    if not path.exists():
        raise LabError("{path} does not exist", path=path)
    if not path.is_file():
        raise LabError("{path} is not a file", path=path)
    file_format = _file_format(path)
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise LabError("{name} is {size}, over the upload limit of {max_bytes}; "
                       "pass a larger max_bytes or set {max_upload_env_var} (in MB) to raise the limit",
                       name=path.name, size=_human_size(size), max_bytes=_human_size(max_bytes),
                       max_upload_env_var=MAX_UPLOAD_ENV_VAR)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise LabError("could not read {path}: {reason}", path=path, reason=error.strerror or error) from None
    text = decode_text(data, path.name)
    if file_format in ("txt", "md"):
        if text_column is not None:
            raise LabError("{name} is plain text; a text column only applies to .csv and .jsonl files", name=path.name)
        documents, columns, suggested, chosen = text_documents(text), (), None, None
    else:
        table = _read_jsonl(text, path.name) if file_format == "jsonl" else _read_csv(text, path.name)
        kind = "field" if file_format == "jsonl" else "column"
        documents, chosen = _table_documents(table, text_column, path.name, kind)
        columns, suggested = table.columns, suggest_column(table.columns, table.rows)
    if not documents:
        raise LabError("{name} has no non-empty text{column}", name=path.name,
                       column=Message(" in {column!r}", column=chosen) if chosen else "")
    return ExtractedDocuments(file_format, tuple(columns), suggested, chosen, tuple(documents), size)


def inspect_file(path, *, max_bytes: int | None = None) -> dict:
    """Validate a file as `import_corpus` would and describe it, e.g. for a column picker.

    Example: a csv with header `id,text,label` -> {"format": "csv", "columns": ["text", "label"],
    "suggested_column": "text", "bytes": 123, "documents": 10} (numeric columns such as `id` are not offered).
    """
    extracted = extract_documents(path, None, max_upload_bytes(max_bytes))
    return {
        "format": extracted.file_format,
        "columns": list(extracted.columns),
        "suggested_column": extracted.suggested_column,
        "bytes": extracted.size,
        "documents": len(extracted.documents),
    }

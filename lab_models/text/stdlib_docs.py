"""The "stdlib-docs" corpus's text: English prose from the documentation that ships inside CPython itself, the
`help()` reference topics (`pydoc_data.topics`) and the docstrings of stdlib modules, classes and functions, read with
`ast` (nothing is imported), cleaned into paragraphs (`prose_paragraphs`: no doctests, literal blocks, directives,
tables or code-like lines) and deduplicated exactly.

`lab_models.text.corpora` loads it as the "stdlib-docs" corpus and caches the result under
`<home>/corpora/_builtin/` per Python version.
"""
from __future__ import annotations

import ast
import logging
import os
import re
import sysconfig
from pathlib import Path

logger = logging.getLogger(__name__)


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

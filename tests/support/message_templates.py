"""The English message templates that the code raises: every `raise ValueError(<text>)` in `lab_models/` and `app/`,
with each f-string field (and each `.format` field, and each non-text part of a `+`) written `{}`, the form that
`app/i18n/messages.py`'s catalogue uses as its keys. A message built from a variable elsewhere is not found here.

    python -m tests.support.message_templates lab_models/text/corpora.py ...   # the templates of these files, as JSON
    python -m tests.support.message_templates --missing                        # those with no Chinese yet, by file
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("lab_models", "app")
FIELD = "{}"


def text_template(node: ast.AST) -> str | None:
    """The template of an expression that builds a text, or None when it is not one (a variable, a call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append(FIELD)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = text_template(node.left), text_template(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else FIELD) + (right if right is not None else FIELD)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        return re.sub(r"\{[^{}]*\}", FIELD, node.func.value.value)
    return None


def file_templates(path: Path) -> list[str]:
    """The templates of `raise ValueError(...)` in one file, in order, without repeats."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
            continue
        call = node.exc
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if name not in ("ValueError", "Error") or not call.args:
            continue
        template = text_template(call.args[0])
        if template and template.replace(FIELD, "").strip():
            found.append(template)
    return list(dict.fromkeys(found))


def source_files() -> list[Path]:
    return sorted(path for folder in SOURCES for path in (ROOT / folder).rglob("*.py"))


def all_templates() -> dict[str, list[str]]:
    """{file relative to the repository: its templates} for every source file that raises one."""
    return {str(path.relative_to(ROOT)): templates for path in source_files() if (templates := file_templates(path))}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--missing"]:
        sys.path.insert(0, str(ROOT))
        from app.i18n.messages import catalogue
        known = catalogue("zh")
        missing = {name: [t for t in templates if t not in known] for name, templates in all_templates().items()}
        json.dump({name: t for name, t in missing.items() if t}, sys.stdout, ensure_ascii=False, indent=1)
        return 0
    paths = [ROOT / arg for arg in argv] if argv else source_files()
    json.dump({str(path.relative_to(ROOT)): file_templates(path) for path in paths}, sys.stdout, ensure_ascii=False,
              indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

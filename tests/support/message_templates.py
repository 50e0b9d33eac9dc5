"""The message templates the code builds, found by reading the source: every call of `Message`, `LabError` or a
subclass of either in `lab_models/` and `app/` (`api.Message(...)` included), with its template, the string literal it
takes first. A call whose template is not a literal (a variable, an f-string, a `+`) is found too, with no template, so
that a test can refuse it: nothing escapes the scan. Not template sites: `Joined(...)` (it joins messages made
elsewhere), `LabError.of(message)` (it raises a message made elsewhere), the calls inside lab_models/messages.py that
pass a template along, and the calls of a subclass with an `__init__` of its own (its `super().__init__(...)` is the
site). The settings' help texts are messages too: each is a Settings field's comment (lab_models/objectives/settings.py
`field_comments`), listed by `settings_help_templates`.

    python -m tests.support.message_templates             # every template and where it is built, as JSON
    python -m tests.support.message_templates --missing   # the templates with no Chinese yet
"""
from __future__ import annotations

import ast
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("lab_models", "app")
MACHINERY = Path("lab_models/messages.py")  # defines Message and LabError: its own calls pass a template along
MESSAGE_CLASSES = ("Message", "LabError")
NO_TEMPLATE = ("Joined",)  # message classes whose calls take no template


@dataclass(frozen=True)
class Site:
    """One call that builds a message: where, and its template (None when it is not a string literal)."""

    path: str
    line: int
    template: str | None
    call: str  # the call's source, shortened


def callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def message_classes(trees: dict[str, ast.Module]) -> tuple[set[str], set[str]]:
    """(the names of Message, LabError and their subclasses, the subclasses among them with an `__init__` of their
    own), by class name across the sources."""
    names = set(MESSAGE_CLASSES) | set(NO_TEMPLATE)
    classes = [node for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    bases_of = {id(node): {base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                           for base in node.bases} for node in classes}
    changed = True
    while changed:  # a subclass of a subclass is found on a later pass
        changed = False
        for node in classes:
            if node.name not in names and bases_of[id(node)] & names:
                names.add(node.name)
                changed = True
    own_init = {node.name for node in classes if node.name in names and node.name not in MESSAGE_CLASSES + NO_TEMPLATE
                and any(isinstance(item, ast.FunctionDef) and item.name in ("__init__", "__new__")
                        for item in node.body)}
    return names, own_init


def template_of(node: ast.Call) -> str | None:
    first = node.args[0] if node.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def tree_sites(path: str, tree: ast.Module, names: set[str], own_init: set[str]) -> list[Site]:
    """The message-building calls of one parsed file."""
    sites = []
    machinery = Path(path) == MACHINERY
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in own_init:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and callee(call) == "__init__" and isinstance(
                        call.func, ast.Attribute) and isinstance(call.func.value, ast.Call) and callee(
                        call.func.value) == "super":
                    sites.append(Site(path, call.lineno, template_of(call), ast.unparse(call)[:160]))
            continue
        if not isinstance(node, ast.Call):
            continue
        name = callee(node)
        if name not in names or name in NO_TEMPLATE or name in own_init:
            continue
        template = template_of(node)
        if machinery and template is None:
            continue
        sites.append(Site(path, node.lineno, template, ast.unparse(node)[:160]))
    return sites


def source_trees(root: Path = ROOT) -> dict[str, ast.Module]:
    return {str(path.relative_to(root)): ast.parse(path.read_text(encoding="utf-8"))
            for folder in SOURCES for path in sorted((root / folder).rglob("*.py"))}


def all_sites(root: Path = ROOT) -> tuple[Site, ...]:
    """Every message-building call of lab_models/ and app/."""
    return sites_under(Path(root).resolve())


@functools.cache  # the scan reads every source file; the tests that use it share one reading per run
def sites_under(root: Path) -> tuple[Site, ...]:
    trees = source_trees(root)
    names, own_init = message_classes(trees)
    return tuple(site for path, tree in trees.items() for site in tree_sites(path, tree, names, own_init))


def settings_help_templates() -> dict[str, list[str]]:
    """{template: [where]} of every family's settings help (their add-ons' included)."""
    from lab_models import api

    found: dict[str, list[str]] = {}
    for spec in api.families():
        for key, help_text in api.family_settings_help(spec.name).items():
            found.setdefault(help_text.template, []).append(f"settings help: {spec.name}.{key}")
    return found


def code_templates(root: Path = ROOT) -> dict[str, list[str]]:
    """{template: [where]} of every literal template the code builds, the settings' help included."""
    found: dict[str, list[str]] = {}
    for site in all_sites(root):
        if site.template is not None:
            found.setdefault(site.template, []).append(f"{site.path}:{site.line}")
    for template, where in settings_help_templates().items():
        found.setdefault(template, []).extend(where)
    return found


def main(argv: list[str]) -> int:
    templates = code_templates()
    if argv[:1] == ["--missing"]:
        sys.path.insert(0, str(ROOT))
        from app.i18n.messages import catalogue
        known = catalogue("zh")
        templates = {template: where for template, where in templates.items() if template not in known}
    json.dump(templates, sys.stdout, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

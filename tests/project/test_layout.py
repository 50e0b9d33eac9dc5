"""The layout stays as the README's "Layout" section draws it: `lab_models/` by pipeline stage with every import
pointing down, `app/` by tab, no import circle, no module reaching into another's private names, no module or
package that only re-exports another's names.

Every import is read from the source with `ast`, module-level and inside functions alike, so an import hidden in a
function counts as much as one at the top.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("lab_models", "app")

# lab_models' stages, bottom to top: a module may import from its own stage and from the stages below it. The two
# bottom stages beside each other (text/, nn/) do not import each other.
STAGES = [("families", "batch", "home"), ("text",), ("nn",), ("objectives",), ("models",), ("training",),
          ("inference",), ("interop",), ("experiments",), ("api",), ("__main__",)]
SIDE_BY_SIDE = {"text": 1, "nn": 1}  # same rank: neither may import the other


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))}


MODULES = project_modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def absolute(module: str, node: ast.ImportFrom) -> str | None:
    if node.level == 0:
        return node.module
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str):
    """(target module, imported name or None, line) for every import of a project module in `module`."""
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = absolute(module, node)
            if not source or source.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:
                    yield f"{source}.{alias.name}", None, node.lineno
                elif source in MODULES:
                    yield source, alias.name, node.lineno


def edges() -> dict[str, set[str]]:
    graph = defaultdict(set)
    for module in MODULES:
        for target, _, _ in imports(module):
            if target != module:
                graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(graph) | {target for targets in graph.values() for target in targets}):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_circle_and_a_private_import():
    """The checks below could pass by reading nothing: they must see a planted circle and a planted private name."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse("from lab_models.home import _secret\n")
    node = tree.body[0]
    assert absolute("lab_models.api", node) == "lab_models.home" and node.names[0].name.startswith("_")
    assert ("lab_models.nn.backbone", "Backbone") in {(t, n) for t, n, _ in imports("lab_models.models.family")}


def test_no_import_circle_among_the_projects_modules():
    assert len(MODULES) > 100  # both packages were read
    assert circles(edges()) == []


def test_no_module_imports_another_modules_private_name():
    found = [f"{module}:{line} imports {name} from {target}" for module in MODULES
             for target, name, line in imports(module)
             if name is not None and name.startswith("_") and not name.startswith("__") and target != module]
    assert found == []


def test_no_module_reads_another_modules_private_attribute():
    """`module._name` through an imported module is the same reach into another's privates."""
    found = []
    for module in MODULES:
        aliases = {}
        for node in ast.walk(TREES[module]):
            if isinstance(node, ast.ImportFrom) and (source := absolute(module, node)):
                for alias in node.names:
                    if f"{source}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in MODULES:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(TREES[module]):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and aliases[node.value.id] != module):
                found.append(f"{module}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert found == []


def stage(module: str) -> tuple[int, str] | None:
    parts = module.split(".")
    if parts[0] != "lab_models" or len(parts) == 1:
        return None
    for rank, names in enumerate(STAGES):
        if parts[1] in names:
            return rank, parts[1]
    raise AssertionError(f"{module} is in no stage: add its package to STAGES and to the README's Layout section")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("lab_models.")))
def test_lab_models_imports_point_down_the_stages(module):
    mine = stage(module)
    upward = []
    for target, _, line in imports(module):
        theirs = stage(target)
        if mine is None or theirs is None or theirs[1] == mine[1]:
            continue
        rank, other = SIDE_BY_SIDE.get(mine[1], mine[0]), SIDE_BY_SIDE.get(theirs[1], theirs[0])
        if other >= rank:
            upward.append(f"line {line}: {target} ({theirs[1]} is not below {mine[1]})")
    assert upward == []


def test_the_ui_imports_only_the_api_from_the_backend():
    found = [f"{module}:{line} imports {target}" for module in MODULES if module.split(".")[0] == "app"
             for target, _, line in imports(module) if target.startswith("lab_models") and target != "lab_models.api"]
    assert found == []


def test_packages_hold_no_re_exports():
    """A package's `__init__` says what the package holds; it imports no project name only to pass it on."""
    found = []
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        tree = TREES[module]
        assert ast.get_docstring(tree), f"{module} has no docstring saying what it holds and what it may import"
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (absolute(module, node) or "").split(".")[0] in PACKAGES:
                found += [f"{module} passes on {alias.name}" for alias in node.names
                          if (alias.asname or alias.name) not in used]
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                found.append(f"{module} has an __all__ of names from elsewhere")
    assert found == []


def test_the_top_level_stays_small():
    lab = [p.name for p in (REPO / "lab_models").iterdir()
           if p.name not in ("__init__.py", "__main__.py", "__pycache__") and (p.suffix == ".py" or p.is_dir())]
    ui = [p.name for p in (REPO / "app").iterdir()
          if p.name not in ("locales", "__pycache__") and (p.suffix == ".py" or p.is_dir())]
    assert len(lab) <= 12, sorted(lab)
    assert len(ui) <= 14, sorted(ui)

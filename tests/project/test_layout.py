"""The layout stays as docs/design.md ("The layout") draws it: `lab_models/` by pipeline stage with every import
pointing down, `app/` by tab, no import circle, no module reaching into another's private names, no module or
package that only re-exports another's names.

The one exception to the last rule is the API's face, `lab_models/api/__init__.py`: it imports the public names of the
API's area modules (`lab_models/api/training.py`, `runs.py`, ...) and lists them in `__all__`, and does nothing else
(no function, no class, no other statement), so `from lab_models import api` reaches every name. The area modules
import the stages below and each other, never the face; `app/` imports the face and never an area module.

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

# lab_models' stages, bottom to top: a module may import from its own stage and from the stages below it. The
# modules of the registry stage (families, batch, home) do not import each other, and the two stages beside each other
# (text/, nn/) do not import each other; `messages` (Message, LabError) is below them all, since every stage raises.
STAGES = [("messages",), ("families", "batch", "home"), ("text",), ("nn",), ("objectives",), ("models",),
          ("training",), ("inference",), ("interop",), ("experiments",), ("api",), ("__main__",)]
SIDE_BY_SIDE = {"text": 2, "nn": 2}  # same rank: neither may import the other


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


API_FACE = "lab_models.api"  # the package whose __init__ is the API's face


def imports(module: str, tree: ast.Module | None = None):
    """(target module, imported name or None, line) for every import of a project module in `module` (its source, or
    `tree` in its place)."""
    for node in ast.walk(tree if tree is not None else TREES[module]):
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


def ui_reaches_past_the_face(module: str, tree: ast.Module | None = None) -> list[str]:
    """The imports of the app module `module` of a backend module other than the API's face."""
    return [f"{module}:{line} imports {target}" for target, _, line in imports(module, tree)
            if target.startswith("lab_models") and target != API_FACE]


def test_the_ui_imports_only_the_api_from_the_backend():
    ui = [module for module in MODULES if module.split(".")[0] == "app"]
    assert "app.main" in ui and all(ui_reaches_past_the_face(m) == [] for m in ui), \
        [found for m in ui for found in ui_reaches_past_the_face(m)]


def test_the_ui_check_catches_an_area_module_and_a_stage():
    """An area module of the API is as much out of the UI's reach as a stage: the check must see both."""
    for planted in ("from lab_models.api import training\n", "from lab_models.api.runs import list_runs\n",
                    "import lab_models.api.runs\n", "from lab_models.training import runs\n"):
        assert ui_reaches_past_the_face("app.main", ast.parse(planted)), planted
    assert ui_reaches_past_the_face("app.main", ast.parse("from lab_models import api\n")) == []


def area_modules() -> list[str]:
    return sorted(module for module in MODULES if module.startswith(f"{API_FACE}."))


def declared_names(tree: ast.Module) -> list[str]:
    """The names of a module's `__all__` (a list or tuple of strings); [] without one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "__all__" for target in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def face_problems(tree: ast.Module, areas: dict[str, ast.Module]) -> list[str]:
    """What the face `tree` does beyond its docstring, imports of the area modules `areas` and one `__all__`: any other
    statement (a function, a class, an assignment, an import from elsewhere), a name imported under another name or
    with *, and an `__all__` that is not exactly the names imported, or an area whose `__all__` is not all imported."""
    problems, imported, listed = [], {}, None
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom) and absolute(API_FACE, node) in areas:
            source = absolute(API_FACE, node)
            for alias in node.names:
                if alias.name == "*" or alias.asname:
                    problems.append(f"line {node.lineno}: imports {alias.name} as {alias.asname or '*'}")
                imported.setdefault(source, []).append(alias.name)
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and listed is None
              and getattr(node.targets[0], "id", "") == "__all__"):
            listed = ast.literal_eval(node.value)
        else:
            problems.append(f"line {node.lineno}: {type(node).__name__} (the face only imports and lists names)")
    names = [name for found in imported.values() for name in found]
    if listed is None or sorted(listed) != sorted(names) or len(set(listed)) != len(listed):
        problems.append(f"__all__ is not exactly the imported names: {sorted(set(names) ^ set(listed or []))}")
    for area, tree_of_area in areas.items():
        missing = sorted(set(declared_names(tree_of_area)) - set(imported.get(area, [])))
        if missing or not declared_names(tree_of_area):
            problems.append(f"{area}: the face does not import its public names {missing or '(no __all__)'}")
    return problems


def test_the_api_face_only_imports_its_areas_and_lists_them():
    areas = {module: TREES[module] for module in area_modules()}
    assert {"lab_models.api.training", "lab_models.api.runs", "lab_models.api.checks"} <= set(areas)
    assert MODULES[API_FACE].name == "__init__.py" and ast.get_docstring(TREES[API_FACE])
    assert face_problems(TREES[API_FACE], areas) == []


def test_the_face_check_catches_logic_a_stray_import_and_a_name_left_out():
    areas = {module: TREES[module] for module in area_modules()}
    source = MODULES[API_FACE].read_text(encoding="utf-8")
    planted = {"def helper():\n    return 1\n": "FunctionDef", "TOTAL = 1\n": "Assign",
               "from lab_models.training.runs import list_runs\n": "ImportFrom",
               "from lab_models.api.runs import list_runs as runs_list\n": "as runs_list",
               "__all__ += ['torch_version']\n": "AugAssign", "import os\n": "Import"}
    for line, what in planted.items():
        assert any(what in problem for problem in face_problems(ast.parse(source + line), areas)), line
    left_out = source.replace('"torch_version", ', "", 1)  # a name imported but not in __all__
    assert left_out != source and face_problems(ast.parse(left_out), areas)
    unimported = ast.parse(source.replace("torch_version, ", "", 1).replace('"torch_version", ', "", 1))
    assert any("torch_version" in problem for problem in face_problems(unimported, areas))  # an area's name not here


def test_no_area_module_of_the_api_imports_the_face():
    """The face imports the areas; an area importing the face (or `from lab_models import api`) would be a circle."""
    def reaches_the_face(module, tree=None):
        return [f"{module}:{line}" for target, _, line in imports(module, tree) if target == API_FACE]

    assert reaches_the_face("lab_models.api.runs", ast.parse("from lab_models import api\n"))
    assert reaches_the_face("lab_models.api.runs", ast.parse("from lab_models.api import list_runs\n"))
    assert [found for module in area_modules() for found in reaches_the_face(module)] == []


def re_exports(module: str, tree: ast.Module) -> list[str]:
    """The names the package `__init__` `tree` imports from the project only to pass on, and an `__all__` it keeps."""
    found = []
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (absolute(module, node) or "").split(".")[0] in PACKAGES:
            found += [f"{module} passes on {alias.name}" for alias in node.names
                      if (alias.asname or alias.name) not in used]
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            found.append(f"{module} has an __all__ of names from elsewhere")
    return found


def test_packages_hold_no_re_exports():
    """A package's `__init__` says what the package holds; it imports no project name only to pass it on. The API's
    face is the one package made to pass names on (its own test above says what else it may not do)."""
    found = []
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        tree = TREES[module]
        assert ast.get_docstring(tree), f"{module} has no docstring saying what it holds and what it may import"
        if module != API_FACE:
            found += re_exports(module, tree)
    assert found == []
    assert re_exports(API_FACE, TREES[API_FACE])  # the rule would catch the face: its exemption is real, and alone
    assert re_exports("lab_models.training", ast.parse("from lab_models.training.runs import list_runs\n"))


def test_the_top_level_stays_small():
    lab = [p.name for p in (REPO / "lab_models").iterdir()
           if p.name not in ("__init__.py", "__main__.py", "__pycache__") and (p.suffix == ".py" or p.is_dir())]
    ui = [p.name for p in (REPO / "app").iterdir()
          if p.name not in ("locales", "__pycache__") and (p.suffix == ".py" or p.is_dir())]
    assert len(lab) <= 13, sorted(lab)  # the stages, the registry, batch, home and messages
    assert len(ui) <= 17, sorted(ui)  # main.py, the tabs, the modules they share, tab_parts.py, gradio_fixes.py

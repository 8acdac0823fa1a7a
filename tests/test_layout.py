"""The shape of the package: every module's imports run down the floors and never in a cycle, every package
folder ships in the wheel, and names kept in two places for speed agree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import retrieval
from retrieval.corpus import jsonl
from retrieval.evidence import config as evidence_config
from retrieval.evidence import rank
from retrieval.interfaces import cli

ROOT = Path(retrieval.__file__).resolve().parent
REPO = ROOT.parent

#: The floors, top first: a module may import from its own floor or a lower one, never from a higher one.
FLOORS = [
    ("retrieval.interfaces", "retrieval.__main__"),  # the CLI, HTTP, MCP and what they print
    ("retrieval.commands",),  # build / add / search / ... as library functions
    ("retrieval.eval",),
    ("retrieval.evidence",),
    ("retrieval.search",),
    ("retrieval.store", "retrieval.migrations"),
    ("retrieval.corpus",),
    ("retrieval", "retrieval.text", "retrieval.bm25", "retrieval.config", "retrieval.errors", "retrieval.validate",
     "retrieval._lazy"),
]  # fmt: skip


def _modules() -> dict[str, Path]:
    found = {}
    for base, package in ((ROOT, "retrieval"), (REPO / "migrations", "retrieval.migrations")):
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in the file (inside functions too), except under
    ``if TYPE_CHECKING:``."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target in modules:
                out.add(target)
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    out.add(f"{target}.{alias.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    out.discard(name)
    return out


def _floor(module: str) -> int:
    best = None
    for level, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level)
    assert best is not None, f"{module} has no floor: add it to FLOORS"
    return best[1]


def test_imports_only_run_down_the_floors_and_never_in_a_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    upward = [(m, t) for m, targets in graph.items() for t in targets if _floor(t) < _floor(m)]
    assert upward == [], "imports that run up a floor"
    # Any cycle, within a floor too: depth-first search with colours.
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                walk(target, [*stack, target])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert cycles == []


def test_the_scan_finds_imports_inside_functions_and_upward(tmp_path):
    """The import scan itself can fail: an upward import is found where one is written, even inside a function."""
    fake = tmp_path / "store.py"
    fake.write_text("from ..search.client import RetrievalClient\n\ndef f():\n    from ..eval import runner\n")
    modules = {"retrieval.store.fake": fake, "retrieval.search.client": fake, "retrieval.eval.runner": fake}
    found = _imports("retrieval.store.fake", fake, modules)
    assert found == {"retrieval.search.client", "retrieval.eval.runner"}
    assert all(_floor(t) < _floor("retrieval.store.fake") for t in found)


def test_every_package_folder_ships_in_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = {name for name, path in _modules().items() if path.name == "__init__.py"}
    assert set(setuptools["packages"]) == packages
    assert setuptools["package-dir"]["retrieval.migrations"] == "migrations"
    assert "script.py.mako" in setuptools["package-data"]["retrieval.migrations"]


def test_names_kept_in_two_places_agree():
    assert cli.FORMATS == jsonl.FORMATS
    assert tuple(rank.WALKS) == evidence_config.RANKERS


def test_the_readme_layout_names_every_package_and_only_files_that_exist():
    """The README's layout section (the map a reader starts from) names every package folder, and every module it
    names is there."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Layout") :]
    block = section[section.index("```") + 3 :]
    block = block[: block.index("```")]
    folders = {p.parent.name for p in ROOT.rglob("__init__.py") if p.parent != ROOT}
    assert [f for f in sorted(folders) if f"{f}/" not in block] == []
    files = {p.name for folder in (ROOT, REPO / "tests", REPO / "migrations") for p in folder.rglob("*.py")}
    named = set(re.findall(r"\b(\w+\.py)\b", block))
    assert sorted(named - files) == []


def test_every_lazy_export_resolves():
    """Each package's names imported on first use (``retrieval._lazy``) point at a module that has them: a module
    moved without its export entry fails here, not in a user's first call."""
    import importlib

    for package in ("retrieval", "retrieval.store", "retrieval.search", "retrieval.eval", "retrieval.corpus",
                    "retrieval.evidence"):  # fmt: skip
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            assert getattr(module, name) is not None, f"{package}.{name}"

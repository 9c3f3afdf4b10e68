"""The shape of the code, checked: layers import downward only, no import cycles (function
-local imports count, ``TYPE_CHECKING``-only ones do not), no private name imported from
another module, no product module over 800 lines, the benchmarks in their own room, the
LMDB file name known to ``storage/`` alone, every module named in ``docs/ARCHITECTURE.md``'s
table of modules, and no test module importing another (shared helpers live in
``tests/support/``).

Read from the source with :mod:`ast`, so a violation is reported with its module and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["storage", "pbtree", "betree", "loaders", "tools"]  # each imports only leftwards
MAX_LINES = 800


def _modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The project module that ``name`` (a module or a module's attribute) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for inner in ast.walk(node))
    return hidden


def _imports() -> list[tuple[str, str, str, int]]:
    """(importer, imported module, imported name or "", line) for every runtime import."""
    out = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hidden = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in hidden:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    target = full if full in MODULES else _owner(node.module)
                    if target is not None:
                        out.append((module, target, alias.name, node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = _owner(alias.name)
                    if target is not None:
                        out.append((module, target, "", node.lineno))
    return out


IMPORTS = _imports()


def test_layers_import_downward_only() -> None:
    upward = [
        f"{m}:{line} imports {t}"
        for m, t, _, line in IMPORTS
        if LAYERS.index(t.split(".")[0]) > LAYERS.index(m.split(".")[0])
    ]
    assert upward == []


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, t, _, _ in IMPORTS:
        if t != m and not m.startswith(t + "."):  # a package's own __init__ is not a cycle
            graph[m].add(t)
    cycles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


def test_no_private_names_across_modules() -> None:
    private = [
        f"{m}:{line} imports {name} from {t}"
        for m, t, name, line in IMPORTS
        if name.startswith("_") and not name.startswith("__") and t != m
    ]
    assert private == []


def test_product_modules_stay_small() -> None:
    big = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert big == {}


def test_benchmarks_live_in_their_own_room() -> None:
    loose = [p.name for p in (ROOT / "tools").glob("bench*.py")]
    assert loose == [] and (ROOT / "tools" / "bench" / "harness.py").is_file()


def test_the_lmdb_file_name_is_known_to_storage_alone() -> None:
    outside = [
        f"{m}:{n}"
        for m, p in MODULES.items()
        if not m.startswith("storage")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "data.mdb" in line and not line.lstrip().startswith("#")
    ]
    assert outside == []


def _architecture_table() -> list[str]:
    """The module paths in the first column of ``docs/ARCHITECTURE.md``'s "Modules" table."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/]+\.py)` \|", section, flags=re.MULTILINE)


def test_every_module_is_in_the_architecture_table() -> None:
    named = _architecture_table()
    on_disk = {str(p.relative_to(ROOT)) for p in MODULES.values() if p.name != "__init__.py"}
    assert sorted(on_disk - set(named)) == [], "modules missing from docs/ARCHITECTURE.md"
    assert sorted(set(named) - on_disk) == [], "docs/ARCHITECTURE.md names no such module"
    assert len(named) == len(set(named)), "a module named twice in docs/ARCHITECTURE.md"


def test_imports_between_test_modules() -> None:
    assert _test_module_imports(ROOT) == []


def _test_module_imports(root: Path) -> list[str]:
    """The imports of a test module from another test module, under ``root``: test modules
    import from ``tests.support`` and the packages only, also in the programs they run in
    child processes (string constants holding an import), where a module may import itself."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        own = ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "tests":
                    names = [f"tests.{alias.name}" for alias in node.names]
                else:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = re.findall(r"(?:from|import)\s+(tests(?:\.\w+)+)", node.value)
            for name in names:
                if name.split(".")[0] != "tests" or name == own:
                    continue
                if name != "tests.support" and not name.startswith("tests.support."):
                    line = getattr(node, "lineno", 0)
                    found.append(f"{path.relative_to(root)}:{line} imports {name}")
    return found

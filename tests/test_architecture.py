"""The shape of the code, checked: layers import downward only, no import cycles (function
-local imports count, ``TYPE_CHECKING``-only ones do not), no private name imported from
another module, the rooms of ``betree/`` importing in their order, no product module over
800 lines, the benchmarks in their own room, the LMDB file name known to ``storage/`` alone,
every module named in ``docs/ARCHITECTURE.md``'s table of modules, no test module importing
another (shared helpers live in ``tests/support/``), and the order operators and the test
kinds each listed in one module.

Read from the source with :mod:`ast`, so a violation is reported with its module and line.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["storage", "pbtree", "betree", "loaders", "tools"]  # each imports only leftwards
# The rooms (sub-packages) of a package, each importing only from the rooms before it; ""
# is the package's own modules.  A room on disk must be listed; a listed one may not exist.
ROOMS = {
    "betree": [
        "lang",
        "formats",
        "disk",
        "matching",
        "packed",
        "checking",
        "",
        "stores",
        "streams",
    ],
}
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


@functools.cache
def _imports() -> list[tuple[str, str, str, int]]:
    """(importer, imported module, imported name or "", line) for every runtime import
    (parsed once, by the first test that asks: not at collection in every xdist worker)."""
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


def test_layers_import_downward_only() -> None:
    upward = [
        f"{m}:{line} imports {t}"
        for m, t, _, line in _imports()
        if LAYERS.index(t.split(".")[0]) > LAYERS.index(m.split(".")[0])
    ]
    assert upward == []


def _room(package: str, module: str) -> str:
    """The room of ``module`` (a module of ``package``): its sub-package, or ""."""
    parts = MODULES[module].relative_to(ROOT / package).parts
    return parts[0] if len(parts) > 1 else ""


def test_rooms_import_only_from_the_rooms_before_them() -> None:
    wrong = []
    for package, rooms in ROOMS.items():
        on_disk = {p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").is_file()}
        wrong += [f"{package}/{name}/ is not in ROOMS" for name in sorted(on_disk - set(rooms))]
        for m, t, _, line in _imports():
            if not (m.startswith(package + ".") and t.startswith(package + ".")):
                continue  # a package's __init__ (its facade) may import from any room
            if rooms.index(_room(package, t)) > rooms.index(_room(package, m)):
                wrong.append(f"{m}:{line} imports {t}, a room after its own")
    assert wrong == []


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, t, _, _ in _imports():
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
        for m, t, name, line in _imports()
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


def _name_tables(tree: ast.Module, names: frozenset[str], sequences: bool) -> list[int]:
    """Lines of the literal dicts keyed by two or more of ``names`` alone, of the assignments to
    ``table["name"]``, and (``sequences``) of the literal sets, tuples and lists holding two
    or more of them."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            items: list[ast.expr | None] = list(node.keys)
        elif sequences and isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            items = list(node.elts)
        elif isinstance(node, ast.Assign):
            items = [t.slice for t in node.targets if isinstance(t, ast.Subscript)]
            items *= 2  # one assignment to table["name"] is a table already
        else:
            continue
        listed = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
        if isinstance(node, ast.Dict) and len(listed) < len(items):
            # keyed by other names too (betree.matching.direct's index kinds: "list", "any")
            continue
        if len(listed) >= 2:
            found.append(node.lineno)
    return found


#: Tables keyed by test-kind names outside the registry, each with its reason.
NAME_TABLES_ALLOWED = {
    # the functions' call syntax (argument counts), which the registry's rows name; that
    # they agree is tests/betree/lang/test_lang_testkinds.py's
    "betree.lang.special": "FUNCTIONS",
    # which presence tests one check of a value decides, defined/undefined among them
    # (not a negation on a defined value): the presence index's own pairing
    "betree.matching.directkinds": "_PAIRS",
}


def test_operators_and_test_kinds_are_declared_once() -> None:
    """The order operators are listed in ``pbtree/operators.py`` alone (no other literal
    collection of two or more of them) and the test kinds in ``betree/lang/testkinds.py``
    alone (no other table keyed by them, but the two of :data:`NAME_TABLES_ALLOWED`): every
    other product module reads those tables (docs/ARCHITECTURE.md, "How to add an operator
    or a test kind").  ``tools/bench`` is left out: its baselines re-implement other papers'
    indexes and share no code with what they are measured against."""
    from betree.lang.testkinds import KINDS
    from pbtree.operators import OPS

    homes = {
        "pbtree.operators": (frozenset(OPS), True),
        "betree.lang.testkinds": (frozenset(KINDS), False),
    }
    found = []
    for module, path in MODULES.items():
        if module.startswith("tools."):
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        lines = text.splitlines()
        for home, (names, sequences) in homes.items():
            if module == home:
                continue
            for line in _name_tables(tree, names, sequences):
                allowed = NAME_TABLES_ALLOWED.get(module)
                if allowed is None or not lines[line - 1].startswith(f"{allowed} = "):
                    found.append(f"{module}:{line} lists names of {home}")
    assert found == []


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def _returns(cls: type, name: str) -> object:
    """The return type of ``cls``'s method or property ``name``, resolved."""
    import inspect
    import typing

    found = inspect.getattr_static(cls, name)
    func = found.fget if isinstance(found, property) else getattr(found, "__func__", found)
    return typing.get_type_hints(func).get("return")


def test_the_facade_is_one_protocol_for_plain_and_sharded_stores(tmp_path: Path) -> None:
    """``Index`` and ``ShardedIndex`` have exactly the public names of the ``AnyIndex``
    protocol, plus ``open`` (each class's constructor), with the same return types: what is
    not the user's lives on the objects that own it (``index.engine``,
    ``index.adjustment``; issue 30), so the facade cannot grow again unnoticed.  An opened
    ``Index`` adds only those objects and its store."""
    import contextlib
    import typing
    from collections.abc import Iterator

    from betree.index import Index
    from betree.stores.sharded import AnyIndex, ShardedIndex

    protocol = _public(AnyIndex)
    assert _public(Index) - protocol == {"open"}
    assert protocol - _public(Index) == set()
    assert _public(ShardedIndex) - protocol == {"open"}
    assert protocol - _public(ShardedIndex) == set()
    assert len(protocol) <= 25  # the facade's size when this test was written
    for name in sorted(protocol):
        plain, sharded = _returns(Index, name), _returns(ShardedIndex, name)
        assert plain == sharded, name
        declared = _returns(AnyIndex, name)
        if typing.get_origin(declared) is contextlib.AbstractContextManager:
            declared = Iterator[typing.get_args(declared)[0]]  # (a @contextmanager's)
        assert declared == plain, name
    with Index.open(tmp_path / "s", schema={"attributes": {"i": {"type": "int"}}}) as idx:
        assert {n for n in vars(idx) if not n.startswith("_")} == {"store", "engine", "adjustment"}

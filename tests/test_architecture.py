"""The house rules, checked on the source: pure packages stay pure and layered, the daemon's
folders import downward only, no import cycles, only the daemon's edges import `peers`, channels
are bounded, modules stay small.

The pure packages (rdf, overlay, sparql, matching, wire, and the error hierarchy) decide and
compute; they never touch a socket, trio, the daemon, the CLI or the peer store, and never
read a clock (times are passed in). `rdf`'s file readers are the one input edge: they read
the files they are given, nothing else.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = ("eventcloud.rdf", "eventcloud.overlay", "eventcloud.sparql", "eventcloud.matching", "eventcloud.wire",
        "eventcloud.errors")
#: What a pure module may never import (prefix match on the dotted name).
FORBIDDEN_IN_PURE = ("trio", "socket", "ssl", "asyncio", "selectors", "subprocess", "threading", "multiprocessing",
                     "signal", "time", "peers", "eventcloud.cli", "eventcloud.net", "eventcloud.client",
                     "eventcloud.testing", "hypercorn", "httpx")
#: Reading a clock, spelled any way a pure module could.
CLOCK_READS = re.compile(r"\b(datetime\.(now|utcnow|today)|date\.today|time\.(time|monotonic|perf_counter)\w*)\s*\(")
#: The only modules outside `peers` that may import it: the daemon commands, the demo's local
#: cluster, and the in-process overlay of eventcloud.testing and its fault simulation.
MAY_IMPORT_PEERS = {"eventcloud.cli.daemon", "eventcloud.cli.demo", "eventcloud.testing.overlay",
                    "eventcloud.testing.simulation"}
#: The pure packages bottom to top (docs/architecture.md): each may import only those below it.
PURE_ORDER = ("eventcloud.errors", "eventcloud.rdf", "eventcloud.overlay", "eventcloud.sparql", "eventcloud.matching",
              "eventcloud.wire")
#: The daemon's base modules (imported by any folder, importing no other part of `peers`) and its
#: folders bottom to top: a module may import its own folder and the folders below it, never one
#: above (docs/architecture.md, "The daemon").
PEERS_BASE = ("peers.config", "peers.tasks")
PEERS_FOLDERS = ("store", "net", "authority", "process", "replication", "matching", "publish", "queries", "delivery", "membership",
                 "runtime", "supervisor")
#: A module past this many lines is a warning, not a failure, when it is one concept (LONG_ON_PURPOSE).
MAX_LINES = 620
#: Modules allowed past MAX_LINES, and why.
LONG_ON_PURPOSE: dict[str, str] = {}


def modules() -> dict[str, Path]:
    found = {}
    for package in ("eventcloud", "peers"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(name: str, path: Path) -> set[str]:
    """Every module an import statement of `name` names (module level and inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return found


MODULES = modules()
IMPORTS = {name: imports_of(name, path) for name, path in MODULES.items()}


def _within(name: str, prefixes: tuple[str, ...] | set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _within(n, PURE)))
def test_pure_modules_import_no_io_no_trio_no_daemon(name):
    bad = sorted(i for i in IMPORTS[name] if _within(i, FORBIDDEN_IN_PURE))
    assert not bad, f"{name} is pure but imports {bad}"
    source = MODULES[name].read_text()
    assert not CLOCK_READS.search(source), f"{name} is pure but reads a clock: {CLOCK_READS.search(source).group()}"
    assert "Store(" not in source, f"{name} is pure but opens a store"


def _pure_rank(name: str) -> int | None:
    for rank, package in enumerate(PURE_ORDER):
        if _within(name, (package,)):
            return rank
    return None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _pure_rank(n) is not None))
def test_pure_packages_import_only_the_ones_below(name):
    own = _pure_rank(name)
    above = sorted(i for i in IMPORTS[name] if (rank := _pure_rank(i)) is not None and rank > own)
    assert not above, f"{name} imports {above}, which sit above it ({' < '.join(PURE_ORDER)})"


def peers_folder_rank(name: str) -> int | None:
    """The layer of a `peers` module: -1 for the base modules, its folder's index, None outside."""
    if name in PEERS_BASE:
        return -1
    parts = name.split(".")
    if parts[0] == "peers" and len(parts) > 1 and parts[1] in PEERS_FOLDERS:
        return PEERS_FOLDERS.index(parts[1])
    return None


def upward_imports(name: str, imported: set[str]) -> list[str]:
    """The `peers` modules `name` imports from a folder above its own."""
    own = peers_folder_rank(name)
    return sorted(i for i in imported if (rank := peers_folder_rank(i)) is not None and own is not None and rank > own)


def test_every_daemon_module_sits_in_a_folder():
    loose = sorted(n for n in MODULES if n.startswith("peers.") and peers_folder_rank(n) is None)
    assert not loose, f"{loose}: put each in the folder of its concept ({', '.join(PEERS_FOLDERS)})"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if peers_folder_rank(n) is not None))
def test_daemon_folders_import_downward_only(name):
    above = upward_imports(name, IMPORTS[name])
    assert not above, f"{name} imports {above} from a folder above its own ({' < '.join(PEERS_FOLDERS)})"


def _exported_names(package: str) -> set[str]:
    """The names a package lists in its `__all__`."""
    for node in ast.parse(MODULES[package].read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts}  # type: ignore[attr-defined]
    return set()


def reaches_inside(name: str, imported: set[str]) -> list[str]:
    """Inner modules of another daemon folder that `name` imports, when that folder's package does
    not offer them as modules."""
    folder = name.split(".")[1]
    found = []
    for i in imported:
        parts = i.split(".")
        if (len(parts) > 2 and parts[0] == "peers" and parts[1] in PEERS_FOLDERS and parts[1] != folder
                and ".".join(parts[:3]) in MODULES and parts[2] not in _exported_names(f"peers.{parts[1]}")):
            found.append(i)
    return sorted(found)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if (peers_folder_rank(n) or -1) >= 0))
def test_daemon_folders_use_each_others_public_surface(name):
    """Another folder is reached through its package (`from peers.store import AsyncStore`), which
    lists what it offers in `__all__`; its inner modules stay free to change."""
    inside = reaches_inside(name, IMPORTS[name])
    assert not inside, f"{name} reaches into {inside}: import what it needs from the folder's package"


def test_the_folder_rule_catches_an_import_pointing_up(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from peers.membership import Membership\nfrom peers.store import AsyncStore\nimport peers.config\n")
    imported = imports_of("peers.store.bad", bad)
    assert upward_imports("peers.store.bad", imported) == ["peers.membership", "peers.membership.Membership"]
    assert upward_imports("peers.membership.bad", imported) == []
    inner = tmp_path / "inner.py"
    inner.write_text("from peers.store.wal import WriteAheadLog\nfrom peers.store import mailboxes\n")
    assert reaches_inside("peers.net.inner", imports_of("peers.net.inner", inner)) == [
        "peers.store.wal", "peers.store.wal.WriteAheadLog"]
    assert reaches_inside("peers.store.inner", imports_of("peers.store.inner", inner)) == []


def test_only_the_daemon_edges_import_peers():
    offenders = sorted(n for n in MODULES if n.startswith("eventcloud") and n not in MAY_IMPORT_PEERS
                       and any(_within(i, ("peers",)) for i in IMPORTS[n]))
    assert not offenders, f"these modules import the daemon: {offenders}"


def _internal_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, imported in IMPORTS.items():
        targets = set()
        for i in imported:
            if i in MODULES:
                targets.add(i)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_between_modules():
    graph = _internal_graph()
    # a package's __init__ re-exporting its own modules is not a cycle of concepts
    for name in graph:
        if MODULES[name].name == "__init__.py":
            graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_contract_catches_a_pure_module_importing_trio(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import trio\nfrom eventcloud.net import rpc\n")
    imported = imports_of("eventcloud.matching.bad", bad)
    assert sorted(i for i in imported if _within(i, FORBIDDEN_IN_PURE)) == ["eventcloud.net", "eventcloud.net.rpc",
                                                                            "trio"]
    assert CLOCK_READS.search("stamp = time.time_ns() // 1000")


def unbounded_channels(source: str) -> list[int]:
    """Lines opening a memory channel with an infinite buffer."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.value if isinstance(node.func, ast.Subscript) else node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "open_memory_channel" and node.args and "inf" in ast.unparse(node.args[0]):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _within(n, ("eventcloud", "peers"))))
def test_channels_are_bounded(name):
    lines = unbounded_channels(MODULES[name].read_text())
    assert not lines, f"{name} opens a memory channel with no bound (lines {lines}): give it a size"


def test_the_channel_rule_catches_an_infinite_buffer():
    assert unbounded_channels("s, r = trio.open_memory_channel[int](math.inf)\n") == [1]
    assert unbounded_channels("s, r = trio.open_memory_channel(float('inf'))\n") == [1]
    assert unbounded_channels("s, r = trio.open_memory_channel[int](64)\n") == []


#: What a peer holds (eventcloud/overlay/lifecycle.py): only its zone lifecycle changes these.
HOLDING_FIELDS = frozenset({"zone", "zone_or_none", "neighbours", "replica", "incarnation", "splitting", "joining",
                            "granted", "holding", "phase", "outcome"})
#: The one module that may assign them (on its own objects: `self.holding`, `self.phase`, ...).
LIFECYCLE = "eventcloud.overlay.lifecycle"


def holding_assignments(source: str) -> list[int]:
    """Lines assigning a holding field of some object (`x.zone = ...`, `a.neighbours[k] = ...`,
    `del a.neighbours[k]`), outside a class's own constructor of a same-named attribute."""
    found: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Subscript):
                    part = part.value
                if isinstance(part, ast.Attribute) and part.attr in HOLDING_FIELDS and not (
                        isinstance(part.value, ast.Name) and part.value.id == "self"):
                    found.add(node.lineno)
    return sorted(found)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n != LIFECYCLE))
def test_only_the_zone_lifecycle_changes_what_a_peer_holds(name):
    """Issue 44.3: a zone, a neighbour table, a replica or an epoch changes by stepping the
    peer's zone lifecycle (`PeerState.step`), never by assigning it elsewhere."""
    lines = holding_assignments(MODULES[name].read_text())
    assert not lines, f"{name} assigns what a peer holds (lines {lines}): step its zone lifecycle instead"


def test_the_holding_rule_catches_an_assignment():
    assert holding_assignments("state.zone = z\n") == [1]
    assert holding_assignments("self.state.neighbours[k] = n\n") == [1]
    assert holding_assignments("del peer.state.neighbours[k]\n") == [1]
    assert holding_assignments("state.step(NeighboursLearned(t))\nself.zone = z\n") == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    """A module past MAX_LINES is a warning: split it by concept if it holds two, else list it in
    LONG_ON_PURPOSE with why. Far past it (1.5×) it fails: no concept needs that much."""
    lines = MODULES[name].read_text().count("\n")
    if name in LONG_ON_PURPOSE or lines <= MAX_LINES:
        return
    assert lines <= MAX_LINES * 3 // 2, f"{name} has {lines} lines (over {MAX_LINES * 3 // 2})"
    warnings.warn(f"{name} has {lines} lines (over {MAX_LINES}): one concept? list it in LONG_ON_PURPOSE with why")


def test_test_modules_share_helpers_not_each_other():
    """A test module imports what it shares from helper modules (tests/helpers.py, a package's
    samples or support module), never from another test module or a conftest: importing one
    runs its module-level code and ties two tests' fixtures together."""
    offending = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for imported in imports_of(name, path):
            last = imported.split(".")
            if imported.startswith("tests.") and any(p.startswith("test_") or p == "conftest" for p in last[1:]):
                offending.append(f"{name} imports {imported}")
    assert offending == []


# --- the wiring docs/architecture.md shows ---------------------------------------------------

RUNTIME = ROOT / "peers" / "runtime" / "peer_runtime.py"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
WIRING_LINE = re.compile(r"^(\w+)\s+([\w.]+)\((.*)\)$")


def runtime_wiring(source: str) -> dict[str, tuple[str, frozenset[str]]]:
    """What `PeerRuntime.__init__` builds: each service (the attribute or local it is kept in),
    the class that builds it, and the services among its arguments."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PeerRuntime")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    aliases: dict[str, str] = {}
    wiring: dict[str, tuple[str, frozenset[str]]] = {}

    def refs(node: ast.AST) -> set[str]:
        found = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in aliases:
                found.add(aliases[sub.id])
            elif (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self"
                  and f"self.{sub.attr}" in aliases):
                found.add(aliases[f"self.{sub.attr}"])
        return found

    statements = [n for n in ast.walk(init) if isinstance(n, ast.Assign)]
    statements.sort(key=lambda n: (n.lineno, n.col_offset))
    for node in statements:
        value = node.value
        if isinstance(value, ast.BoolOp):   # `given or Built(...)`
            value = value.values[-1]
        if isinstance(value, ast.DictComp):
            value = value.value
        if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                and value.value.id in aliases):   # a part another service built for itself
            name, value = f"{aliases[value.value.id]}.{value.attr}", value.value
        elif not isinstance(value, ast.Call):
            continue
        else:
            func = value.func
            name = func.id if isinstance(func, ast.Name) else None
            if not name or not name[0].isupper():
                continue
        names = []
        for target in node.targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                names.append(f"self.{target.attr}")
            elif isinstance(target, ast.Name):
                names.append(target.id)
        if not names:
            continue
        service = next((n[5:] for n in names if n.startswith("self.")), names[0])
        deps = refs(value) - {service}
        wiring[service] = (name, frozenset(deps))
        for n in names:
            aliases[n] = service
    return wiring


def documented_wiring(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """The ```wiring block of docs/architecture.md: `service  Class(dep, dep, ...)` per line."""
    block = text.split("```wiring\n", 1)[1].split("```", 1)[0]
    found = {}
    for line in block.strip().splitlines():
        match = WIRING_LINE.match(line.strip())
        assert match, f"docs/architecture.md: a wiring line is not `service  Class(services)`: {line!r}"
        name, built_by, deps = match.groups()
        found[name] = (built_by, frozenset(d.strip() for d in deps.split(",") if d.strip()))
    return found


def test_the_documented_wiring_is_what_the_runtime_builds():
    code = runtime_wiring(RUNTIME.read_text())
    docs = documented_wiring(ARCHITECTURE.read_text())
    assert code.keys() == docs.keys(), (f"services built but not documented: {sorted(code.keys() - docs.keys())}; "
                                        f"documented but not built: {sorted(docs.keys() - code.keys())}")
    wrong = {name: (docs[name], code[name]) for name in code if docs[name] != code[name]}
    assert not wrong, f"docs/architecture.md's wiring differs from peers/runtime/peer_runtime.py: {wrong}"


def test_the_wiring_reader_sees_a_service_and_what_it_receives():
    source = """
class PeerRuntime:
    def __init__(self, config):
        self.state = state = PeerState()
        self.router = router = Router(state, config.x)
        self.store = store_ = Store(router, self.state)
        self.part = store_.part
        guard = Guard()
        self.matcher = Matcher(router, store_, guard, self.part, helper(config))
"""
    assert runtime_wiring(source) == {
        "state": ("PeerState", frozenset()), "router": ("Router", frozenset({"state"})),
        "store": ("Store", frozenset({"router", "state"})), "part": ("store.part", frozenset({"store"})),
        "guard": ("Guard", frozenset()), "matcher": ("Matcher", frozenset({"router", "store", "guard", "part"}))}

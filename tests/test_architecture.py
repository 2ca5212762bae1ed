"""The house rules, checked on the source: pure packages stay pure, no import cycles, only the
daemon's edges import `peers`, modules stay small.

The pure packages (rdf, overlay, sparql, matching, wire, and the error hierarchy) decide and
compute; they never touch a socket, trio, the daemon, the CLI or the peer store, and never
read a clock (times are passed in). `rdf`'s file readers are the one input edge: they read
the files they are given, nothing else.
"""

from __future__ import annotations

import ast
import re
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
#: cluster, and the in-process overlay of eventcloud.testing.
MAY_IMPORT_PEERS = {"eventcloud.cli.daemon", "eventcloud.cli.demo", "eventcloud.testing.overlay"}
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


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES or name in LONG_ON_PURPOSE, f"{name} has {lines} lines (over {MAX_LINES})"


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

"""Subscriptions parsed once per shape: rdflib parses a text's shape, later texts reuse it.

rdflib's SPARQL parser (pyparsing) takes 4–7 ms per subscription, which caps registration at a
few hundred per second per core; applications subscribe many texts of one shape (the same query
with other IRIs, strings or numbers). `shape_of` cuts a text into its *shape* — every absolute
IRI, escape-free string, prefixed name's simple local part and unsigned integer replaced by a
placeholder of the same kind — and its constants. `ShapeCache` parses a shape once, checks
that each placeholder came out exactly once, as the kind of term it stands for, and records
where; a text of a known shape then costs a scan and copying the few tree nodes on the paths
to its constants.

Sound by construction: a placeholder is a token of the same grammar category as the constant
it replaces (an IRIREF, a STRING_LITERAL, a PN_LOCAL, an INTEGER), so rdflib takes the same
path through the grammar for both texts and the trees differ only at those leaves; a shape
whose placeholders do not all come back where expected is not used (the text is parsed
whole). Texts containing the placeholders' marker are never shaped. The differential test
(`tests/sparql/test_shapes.py`) compares both routes on every subscription text of the suite.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from types import MethodType
from typing import Any, Callable

from eventcloud.sparql.lru import MISSING, LruTable

__all__ = ["MARKER", "Shape", "ShapeCache", "placeholder_kinds", "shape_of"]

MARKER = "ecslot"
_INT_MARKER = "9090900"

# One token per match, scanned left to right; the named groups are the constants that vary.
_TOKENS = re.compile(r"""
    (?P<decl>(?i:PREFIX)\s+(?:[A-Za-z][\w.-]*)?:\s*<[^<>"{}|^`\\\x00-\x20]*>|(?i:BASE)\s*<[^<>"{}|^`\\\x00-\x20]*>)
  | \"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\" | '''(?:[^'\\]|\\.|'(?!''))*'''
  | "(?P<dq>[^"\\\n\r]*)" | '(?P<sq>[^'\\\n\r]*)'
  | "(?:[^"\\\n]|\\.)*" | '(?:[^'\\\n]|\\.)*'
  | <(?P<iri>[A-Za-z][\w+.-]*:[^<>"{}|^`\\\x00-\x20]*)> | <[^<>"{}|^`\\\x00-\x20]*>
  | \#[^\n]*
  | [?$]\w+ | _:[\w-]+(?:\.+[\w-]+)*
  | (?P<prefix>(?:[A-Za-z][\w-]*(?:\.+[\w-]+)*)?:)(?P<local>[\w:%\\-]+(?:\.+[\w:%\\-]+)*)?
  | \w+(?:\.\d*)?(?:[eE][+-]?\d+)? | \.\d+(?:[eE][+-]?\d+)?
  | \s+ | [\s\S]
""", re.X)
_SIMPLE_LOCAL = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_INTEGER = re.compile(r"[0-9]+\Z")
_CALLED = re.compile(r"\s*\(")


@dataclass(frozen=True, slots=True)
class Shape:
    """A text's shape and its constants, in order: (kind, placeholder, original) each."""

    text: str
    slots: tuple[tuple[str, str, str], ...]


def shape_of(text: str) -> Shape | None:
    """The shape of `text`, or None when it has no constant to vary, holds the marker, or has
    \\u escapes (rdflib expands those in the whole text before parsing it)."""
    if MARKER in text or _INT_MARKER in text or "\\u" in text or "\\U" in text:
        return None
    out: list[str] = []
    slots: list[tuple[str, str, str]] = []
    done = 0
    for match in _TOKENS.finditer(text):
        group = match.lastgroup
        if group is None or group == "decl":
            # an unsigned INTEGER: ASCII digits only ("²" is a digit to str.isdigit, not to SPARQL)
            if not _INTEGER.match(match.group()) or (match.start() and text[match.start() - 1] in "+-"):
                continue
            kind, group = "integer", 0
        elif group == "local" or group == "prefix":
            if group == "prefix" or not _SIMPLE_LOCAL.match(match.group("local")) or _CALLED.match(text, match.end()):
                continue
            kind = "local"
        elif group == "iri" and _CALLED.match(text, match.end()):
            continue  # a function's IRI stays in the shape: which function is called shapes the tree
        else:
            kind = _KINDS[group]
        n = len(slots)
        start, end = match.span(group)
        out.append(text[done:start])
        out.append(_PLACEHOLDERS[kind].format(n))
        done = end
        slots.append((kind, _PLACEHOLDERS[kind].format(n), text[start:end]))
    if not slots:
        return None
    out.append(text[done:])
    return Shape("".join(out), tuple(slots))


def placeholder_kinds(shape: Shape) -> dict[str, tuple[int, str]]:
    """Each placeholder of `shape` (its text) -> (its slot, its kind)."""
    return {placeholder: (n, kind) for n, (kind, placeholder, _) in enumerate(shape.slots)}


_KINDS = {"iri": "iri", "dq": "string", "sq": "string"}
_PLACEHOLDERS = {"iri": f"urn:{MARKER}~{{}}", "string": f"{MARKER}~{{}}", "local": f"{MARKER}_{{}}",
                 "integer": f"{_INT_MARKER}{{:06d}}"}


class ShapeCache:
    """Parsed shapes (bounded, least recently used out): the tree, its prologue, the paths to
    its placeholders; None for a shape whose placeholders did not come back as expected."""

    def __init__(self, parse: Callable[[str], Any], prologue: Callable[[Any], Any], size: int = 1024) -> None:
        self._parse = parse
        self._prologue = prologue
        self._shapes = LruTable(size)   # shape text -> (tree, prologue, trie, leaves), or None
        self.hits = self.misses = 0

    def tree(self, shape: Shape) -> tuple[Any, Any] | None:
        """(query tree with `shape`'s constants put back, prologue), or None: parse the text whole.

        Raises what parsing the shape raises (the caller then parses the text itself)."""
        entry = self._shapes.get(shape.text)
        if entry is MISSING:
            self.misses += 1
            entry = self._learn(shape)
            self._shapes.put(shape.text, entry)
        else:
            self.hits += 1
        if entry is None:
            return None
        tree, prologue, trie, leaves = entry
        values = [_term(kind, original, leaf) for (kind, _, original), leaf in zip(shape.slots, leaves)]
        return _replaced(tree, trie, values), prologue

    def __contains__(self, text: str) -> bool:
        """Whether the shape of this text (`Shape.text`) was met before."""
        return text in self._shapes

    def placeholder_tree(self, shape: Shape) -> tuple[Any, Any] | None:
        """(query tree of the shape's own text, placeholders in place, prologue) once `tree`
        has learnt the shape; None otherwise (or when the shape is not used)."""
        entry = self._shapes.get(shape.text)
        return None if entry is None or entry is MISSING else (entry[0], entry[1])

    def _learn(self, shape: Shape) -> tuple[Any, Any, dict[Any, Any], tuple[Any, ...]] | None:
        parsed = self._parse(shape.text)
        found: dict[str, list[tuple[Any, ...]]] = {}
        strays = [0]
        _find(parsed[1], (), found, strays)
        paths = []
        for kind, placeholder, _ in shape.slots:
            where = found.get(placeholder, [])
            if len(where) != 1 or not _is_kind(kind, _leaf(parsed[1], where[0]), where[0]):
                return None
            paths.append(where[0])
        if strays[0] or sum(len(v) for v in found.values()) != len(shape.slots):
            return None
        trie: dict[Any, Any] = {}
        for n, path in enumerate(paths):
            node = trie
            for step in path[:-1]:
                node = node.setdefault(step, {})
            node[path[-1]] = n  # a leaf: the slot whose value goes there
        return parsed[1], self._prologue(parsed[0]), trie, tuple(_leaf(parsed[1], p) for p in paths)


def _find(node: Any, path: tuple[Any, ...], found: dict[str, list[tuple[Any, ...]]], strays: list[int]) -> None:
    """Where the placeholders are (by their text), and whether the marker shows anywhere else."""
    if isinstance(node, dict):
        for key, value in OrderedDict.items(node) if isinstance(node, OrderedDict) else node.items():
            _find(value, path + (key,), found, strays)
    elif isinstance(node, (list, tuple)) or type(node).__name__ == "ParseResults":
        for index, value in enumerate(node):
            _find(value, path + (index,), found, strays)
    elif isinstance(node, str):
        text = str(node)
        if MARKER in text or _INT_MARKER in text:
            found.setdefault(text, []).append(path)
    elif MARKER in repr(node):
        strays[0] += 1


def _leaf(tree: Any, path: tuple[Any, ...]) -> Any:
    node = tree
    for step in path:
        node = OrderedDict.__getitem__(node, step) if isinstance(node, OrderedDict) else node[step]
    return node


def _is_kind(kind: str, leaf: Any, path: tuple[Any, ...]) -> bool:
    from rdflib import Literal, URIRef
    from rdflib.namespace import XSD

    if kind == "iri":
        return type(leaf) is URIRef
    if kind == "string":
        return type(leaf) is Literal and leaf.datatype is None and not leaf.language and path[-1] == "string"
    if kind == "integer":
        return type(leaf) is Literal and leaf.datatype == XSD.integer
    return type(leaf) is str and path[-1] == "localname"


def _term(kind: str, original: str, placeholder_leaf: Any) -> Any:
    from rdflib import Literal, URIRef

    if kind == "iri":
        return URIRef(original)
    if kind == "string":
        return Literal(original)
    if kind == "integer":
        return Literal(original, datatype=placeholder_leaf.datatype)
    return original


def _replaced(node: Any, trie: dict[Any, Any], values: list[Any]) -> Any:
    """A copy of `node` with the slots' leaves replaced; only the nodes on their paths are copied."""
    if isinstance(node, OrderedDict):  # rdflib's CompValue / Expr
        copy = node.__class__.__new__(node.__class__)
        OrderedDict.__init__(copy)
        copy.__dict__.update(node.__dict__)
        evalfn = node.__dict__.get("_evalfn")
        if isinstance(evalfn, MethodType):
            copy.__dict__["_evalfn"] = MethodType(evalfn.__func__, copy)
        for key, child in OrderedDict.items(node):
            below = trie.get(key)
            OrderedDict.__setitem__(copy, key, child if below is None else _below(child, below, values))
        return copy
    copy = list(node) if isinstance(node, list) else node.copy()  # pyparsing's ParseResults keeps its names
    for step, below in trie.items():
        copy[step] = _below(node[step], below, values)
    return copy


def _below(child: Any, below: Any, values: list[Any]) -> Any:
    return values[below] if isinstance(below, int) else _replaced(child, below, values)

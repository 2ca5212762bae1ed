"""An RDFS class taxonomy (after G-ToPSS): `rdfs:subClassOf` edges and their precomputed closure.

Is-a constraints are answered per event from tables computed once per taxonomy: for each class,
its ancestors and its descendants (both reflexive: a class is its own ancestor and descendant,
as the zero-length step of `rdfs:subClassOf*` says), its parents and its children. A class the
taxonomy does not mention is its own only ancestor and descendant. Multiple inheritance is
allowed; a cycle is refused, naming its classes (`C rdfs:subClassOf C` alone is dropped: it
states nothing `*` does not already say).

A taxonomy is an immutable value with a `version` (given by whoever loads it: the overlay keeps
one current version) and a `digest` of its edges; two taxonomies are equal when both are. It
travels as `to_wire()` (msgpack-able) and comes back with `from_wire`. Matching never reads a
global taxonomy: it is passed to `parse_subscription`, `Subscription.with_taxonomy` and
`SubscriptionIndex`.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping

from eventcloud.errors import ErrorCode, InputError
from eventcloud.rdf.model import SKOLEM_BASE, IRI, Literal, ModelError

__all__ = ["Taxonomy", "TaxonomyError", "RDFS_SUBCLASSOF", "RDF_TYPE", "RDFS"]

RDFS = "http://www.w3.org/2000/01/rdf-schema#"
RDFS_SUBCLASSOF = RDFS + "subClassOf"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

_EMPTY: frozenset[str] = frozenset()
#: (class, ancestor) pairs a taxonomy may have: every peer holds the closure twice (up and down).
MAX_CLOSURE = 2_000_000


class TaxonomyError(InputError):
    """A taxonomy that cannot be loaded: a cycle (its classes named), bad RDF, or a bad wire form."""

    default_code = ErrorCode.BAD_RDF


class Taxonomy:
    """Immutable: `rdfs:subClassOf` edges (subclass, superclass) of IRIs, with their closure."""

    __slots__ = ("version", "edges", "digest", "_parents", "_children", "_ancestors", "_descendants")

    def __init__(self, edges: Iterable[tuple[str, str]] = (), version: int = 0) -> None:
        if type(version) is not int or version < 0:
            raise TaxonomyError(f"a taxonomy version is a non-negative integer, got {version!r}")
        clean = set()
        for sub, sup in edges:
            try:
                IRI(sub), IRI(sup)
            except ModelError:
                raise TaxonomyError(f"a subclass edge links two IRIs, got ({sub!r}, {sup!r})") from None
            if sub != sup:
                clean.add((sub, sup))
        self.version = version
        self.edges: frozenset[tuple[str, str]] = frozenset(clean)
        self.digest = hashlib.sha256("".join(f"{a}\n{b}\n" for a, b in sorted(clean)).encode()).hexdigest()[:16]
        parents: dict[str, set[str]] = {}
        children: dict[str, set[str]] = {}
        for sub, sup in clean:
            parents.setdefault(sub, set()).add(sup)
            children.setdefault(sup, set()).add(sub)
        order = _topological(parents, children)
        self._parents = {c: frozenset(p) for c, p in parents.items()}
        self._children = {c: frozenset(k) for c, k in children.items()}
        ancestors: dict[str, frozenset[str]] = {}
        size = 0
        for cls in order:  # parents first
            found = {cls}
            for parent in parents.get(cls, ()):
                found |= ancestors[parent]
            ancestors[cls] = frozenset(found)
            size += len(found)
            if size > MAX_CLOSURE:
                raise TaxonomyError(f"the taxonomy's closure has over {MAX_CLOSURE:,} (class, ancestor) pairs: "
                                    f"too deep or too large to hold on every peer")
        descendants: dict[str, frozenset[str]] = {}
        for cls in reversed(order):  # children first
            found = {cls}
            for child in children.get(cls, ()):
                found |= descendants[child]
            descendants[cls] = frozenset(found)
        self._ancestors = ancestors
        self._descendants = descendants

    # --- loading and the wire ----------------------------------------------------------------

    @classmethod
    def empty(cls) -> "Taxonomy":
        """No classes: every is-a test reduces to equality (version 0)."""
        return cls((), 0)

    @classmethod
    def from_rdf(cls, data: bytes | str, format: str, version: int = 1, *, name: str = "<taxonomy>") -> "Taxonomy":
        """The `rdfs:subClassOf` triples of an RDF document (any format `eventcloud.rdf.files` reads).

        Other triples (labels, `a owl:Class`, …) are ignored, and so are axioms whose class is a
        blank node (OWL restrictions). A document without any subclass triple is refused.
        """
        from eventcloud.rdf.files import parse_events

        edges = []
        for event in parse_events(data, format, name=name, timestamp_ms=0):
            for quad in event.quads:
                if quad.p.value != RDFS_SUBCLASSOF:
                    continue
                if isinstance(quad.o, Literal):
                    raise TaxonomyError(f"{name}: {quad.s.n3()} rdfs:subClassOf a literal ({quad.o.n3()})")
                if quad.s.value.startswith(SKOLEM_BASE) or quad.o.value.startswith(SKOLEM_BASE):  # type: ignore[union-attr]
                    continue
                edges.append((quad.s.value, quad.o.value))  # type: ignore[union-attr]
        if not edges:
            raise TaxonomyError(f"{name}: no rdfs:subClassOf triple between two IRIs")
        return cls(edges, version)

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-able form: {"version": int, "edges": [[subclass, superclass], …]} (sorted)."""
        return {"version": self.version, "edges": [list(edge) for edge in sorted(self.edges)]}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> "Taxonomy":
        if not isinstance(data, Mapping) or not isinstance(data.get("edges"), (list, tuple)):
            raise TaxonomyError("a taxonomy's wire form is a map with a list of edges")
        edges = []
        for edge in data["edges"]:
            if not isinstance(edge, (list, tuple)) or len(edge) != 2:
                raise TaxonomyError(f"a taxonomy edge is a pair of IRIs, got {edge!r}")
            edges.append((edge[0], edge[1]))
        return cls(edges, data.get("version", 0))

    def with_version(self, version: int) -> "Taxonomy":
        return Taxonomy(self.edges, version)

    def to_turtle(self) -> str:
        """The edges as Turtle (what `eventcloud schema show` can print)."""
        lines = [f"@prefix rdfs: <{RDFS}> .", f"# taxonomy version {self.version}, digest {self.digest}"]
        lines += [f"<{a}> rdfs:subClassOf <{b}> ." for a, b in sorted(self.edges)]
        return "\n".join(lines) + "\n"

    # --- the closure ---------------------------------------------------------------------------

    def ancestors(self, cls: str) -> frozenset[str]:
        """`cls` and every class above it."""
        found = self._ancestors.get(cls)
        return frozenset((cls,)) if found is None else found

    def descendants(self, cls: str) -> frozenset[str]:
        """`cls` and every class below it."""
        found = self._descendants.get(cls)
        return frozenset((cls,)) if found is None else found

    def parents(self, cls: str) -> frozenset[str]:
        return self._parents.get(cls, _EMPTY)

    def children(self, cls: str) -> frozenset[str]:
        return self._children.get(cls, _EMPTY)

    def is_descendant(self, cls: str, of: str) -> bool:
        """`cls` is `of` or below it (G-ToPSS's descendant relation, `of` included)."""
        return of in self.ancestors(cls)

    def is_ancestor(self, cls: str, of: str) -> bool:
        """`cls` is `of` or above it."""
        return cls in self.ancestors(of)

    def is_child(self, cls: str, of: str) -> bool:
        """`cls` is directly below `of` (G-ToPSS's direct instance: a child of `of`)."""
        return of in self.parents(cls)

    @property
    def classes(self) -> frozenset[str]:
        return frozenset(self._ancestors)

    def __len__(self) -> int:
        return len(self._ancestors)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Taxonomy) and (self.version, self.digest) == (other.version, other.digest)

    def __hash__(self) -> int:
        return hash((self.version, self.digest))

    def __repr__(self) -> str:
        return f"Taxonomy(version={self.version}, classes={len(self)}, edges={len(self.edges)}, digest={self.digest})"


def _topological(parents: dict[str, set[str]], children: dict[str, set[str]]) -> list[str]:
    """Every class, parents before children; a cycle raises TaxonomyError naming its classes."""
    classes = set(parents) | set(children)
    waiting = {c: len(parents.get(c, ())) for c in classes}
    ready = sorted(c for c, n in waiting.items() if n == 0)
    order: list[str] = []
    while ready:
        cls = ready.pop()
        order.append(cls)
        for child in children.get(cls, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(order) < len(classes):
        raise TaxonomyError("rdfs:subClassOf cycle: " + " → ".join(
            IRI(c).n3() for c in _cycle({c for c in classes if waiting[c] > 0}, parents)))
    return order


def _cycle(stuck: set[str], parents: dict[str, set[str]]) -> list[str]:
    """One cycle among the classes left over by the topological sort (each has a stuck parent)."""
    cls = min(stuck)
    path: list[str] = []
    seen: dict[str, int] = {}
    while cls not in seen:
        seen[cls] = len(path)
        path.append(cls)
        cls = min(p for p in parents[cls] if p in stuck)
    return path[seen[cls]:] + [cls]

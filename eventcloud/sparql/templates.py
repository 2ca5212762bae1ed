"""Subscriptions of a known shape built from a template, with no parse tree at all.

`sparql.shapes` lets rdflib parse each *shape* once, but every text of that shape still walks
a copy of rdflib's tree through the builder, most of an entry peer's ~200 µs per subscribe.
The builder's output, though, depends on a shape's constants only through the terms they
become: it puts each constant, resolved (prefix, BASE) and canonicalised, as one term of a
pattern or one `("const", term)` leaf of a FILTER tree, and everything else (the patterns'
structure, projection, FILTER trees, what is refused) is decided by the shape.

A `Template` is the parts of the subscription built from the shape's own text (placeholders in
place of constants: `Subscription` parts, FILTERs as expression trees) with where each
placeholder's term sits. A later text of that shape becomes its parts with those terms
replaced by its own constants' terms, made by the same functions the builder uses, and is
assembled as peers assemble a parsed subscription off the wire (`assemble`: FILTERs checked
and compiled). A template is kept only when every placeholder comes back exactly once, as a
whole term of its kind, with the marker nowhere else, and when the text that taught it comes
out equal to what the builder made of it; any failure to instantiate falls back to the builder,
so errors keep naming the text's own terms. Shapes whose structure could depend on a constant's
value (the is-a path `rdf:type/rdfs:subClassOf*`, a function's IRI) never make a template: with
placeholders in those places the builder refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from eventcloud.errors import InputError
from eventcloud.rdf.model import IRI, XSD, Literal, Term
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.sparql.lru import MISSING, LruTable
from eventcloud.sparql.shapes import MARKER, Shape, placeholder_kinds

__all__ = ["Parts", "Template", "Templates", "instantiate", "learn", "parts_of", "parts_of_subscription"]

#: (graph, patterns as (s, p, o) tuples, FILTER expression trees, projection, distinct, base)
Parts = tuple[Any, tuple[tuple[Any, Any, Any], ...], tuple[Any, ...], tuple[str, ...], bool, "str | None"]


@dataclass(frozen=True, slots=True)
class Template:
    parts: Parts
    #: per slot of the shape: (kind, extra) — a local name's namespace, a string's (datatype, language)
    slots: tuple[tuple[str, Any], ...]
    placeholders: dict[Term, int]   # placeholder term -> slot
    dirty_patterns: frozenset[int]  # patterns holding a placeholder
    dirty_filters: frozenset[int]   # FILTER trees holding one
    context: Any                    # what the caller needs to make a slot's term (the prologue)


def parts_of(graph: Any, patterns: Any, exprs: Any, projection: Any, distinct: bool, base: str | None) -> Parts:
    return (graph, tuple(tuple(p) for p in patterns), tuple(exprs), tuple(projection), distinct, base)


def learn(shape: Shape, parts: Parts, context: Any) -> Template | None:
    """The template of `shape` from the parts built from its own text; None if any placeholder
    is missing, repeated, of another kind, or the marker shows anywhere else."""
    kinds = placeholder_kinds(shape)
    found: dict[Term, int] = {}
    slots: list[tuple[str, Any] | None] = [None] * len(shape.slots)
    strays = [0]

    def visit(node: Any) -> None:
        if isinstance(node, tuple):
            for item in node:
                visit(item)
        elif isinstance(node, (IRI, Literal)):
            slot = _slot_of(node, kinds)
            if slot is None:
                if _marked(node):
                    strays[0] += 1
                return
            n, kind, extra = slot
            if node in found or slots[n] is not None:
                strays[0] += 1
                return
            found[node] = n
            slots[n] = (kind, extra)
        elif isinstance(node, str) and (MARKER in node or _INT in node):
            strays[0] += 1
        elif node is not None and not isinstance(node, (bool, int, float, str)) and _marked_other(node):
            strays[0] += 1

    graph, patterns, exprs, projection, _, base = parts
    visit(graph)
    for pattern in patterns:
        visit(pattern)
    for expr in exprs:
        visit(expr)
    for name in (*projection, base or ""):
        visit(name)
    if strays[0] or any(s is None for s in slots):
        return None
    dirty_patterns = frozenset(i for i, p in enumerate(patterns) if any(t in found for t in p if _term(t)))
    dirty_filters = frozenset(i for i, e in enumerate(exprs) if _holds(e, found))
    return Template(parts, tuple(slots), found, dirty_patterns, dirty_filters, context)  # type: ignore[arg-type]


def instantiate(template: Template, values: list[Term]) -> Parts:
    """The template's parts with slot n's placeholder term replaced by `values[n]`."""
    swap = template.placeholders

    def put(node: Any) -> Any:
        if isinstance(node, tuple):
            return tuple(put(item) for item in node)
        if _term(node):
            n = swap.get(node)
            return node if n is None else values[n]
        return node

    graph, patterns, exprs, projection, distinct, base = template.parts
    return (put(graph),
            tuple(put(p) if i in template.dirty_patterns else p for i, p in enumerate(patterns)),
            tuple(put(e) if i in template.dirty_filters else e for i, e in enumerate(exprs)),
            projection, distinct, base)


class Templates:
    """The template route of `parse_subscription`: templates by shape (and operator set),
    bounded, least recently used out; None is kept for a shape that makes none, so that it is
    not learnt again. The builder's parts come in as callables (`build` a placeholder text's
    tree, `resolve` a constant as the builder does, `assemble` parts, make a `pattern`), so
    that this module needs nothing of the parser's."""

    def __init__(self, size: int, *, build: Callable[[str, Any, Any, Any], Any], resolve: Callable[[Any, Any], Term],
                 assemble: Callable[..., Any], pattern: Callable[[Any, Any, Any], Any]) -> None:
        self._known = LruTable(size)   # (shape text, operators) -> Template, or None: none
        self._build = build
        self._resolve = resolve
        self._assemble = assemble
        self._pattern = pattern
        self.hits = 0

    def get(self, key: Any) -> Template | None | bool:
        """The template, None (the shape makes none), or False (not learnt yet)."""
        found = self._known.get(key)
        return False if found is MISSING else found

    def made(self, shape: Shape, text: str, taxonomy: Any, operators: Any) -> Any:
        """`text`'s subscription built from its shape's template, or None: no template, or its
        constants do not make terms (the builder then says why, naming them)."""
        template = self.get((shape.text, operators))
        if not isinstance(template, Template):
            return None
        try:
            graph, patterns, exprs, projection, distinct, base = instantiate(template, self._values(shape, template))
            made = self._assemble(text, graph, tuple(self._pattern(*p) for p in patterns), exprs, projection,
                                  distinct, base, taxonomy=taxonomy, operators=operators)
        except (InputError, RecursionError):
            return None
        self.hits += 1
        return made

    def learn(self, shape: Shape, sub: Any, operators: Any, placeholder_tree: tuple[Any, Any] | None) -> None:
        """Learn `shape`'s template once, from what its placeholder text builds into (its tree and
        prologue: `ShapeCache.placeholder_tree`); kept only if `sub`, the subscription of the text
        that taught it, comes out of it unchanged."""
        key = (shape.text, operators)
        if self.get(key) is not False:
            return
        template = None
        if placeholder_tree is not None:
            tree, prologue = placeholder_tree
            try:
                template = learn(shape, parts_of_subscription(self._build(shape.text, tree, prologue, operators)), prologue)
                if template is not None and instantiate(template, self._values(shape, template)) != parts_of_subscription(sub):
                    template = None
            except (InputError, RecursionError):
                template = None
        self._known.put(key, template)

    def _values(self, shape: Shape, template: Template) -> list[Term]:
        """Each slot's term for `shape`'s own constants, made as the builder makes it (resolved
        against the prologue, then canonical)."""
        return [self._value(kind, original, extra, template.context)
                for (kind, _, original), (_, extra) in zip(shape.slots, template.slots)]

    def _value(self, kind: str, original: str, extra: Any, prologue: Any) -> Term:
        if kind == "local":       # prefix + local name, as rdflib's resolvePName concatenates them
            return canonical_term(IRI(extra + original))
        if kind == "string":
            datatype, language = extra
            return canonical_term(Literal(original, language=language) if language else Literal(original, datatype))
        from rdflib import Literal as RdfLiteral, URIRef
        from rdflib.namespace import XSD as RDFLIB_XSD

        node = URIRef(original) if kind == "iri" else RdfLiteral(original, datatype=RDFLIB_XSD.integer)
        return canonical_term(self._resolve(node, prologue))


def parts_of_subscription(sub: Any) -> Parts:
    """A subscription's parts, as `parse_subscription` built them (what `assemble` takes)."""
    return parts_of(sub.graph, [p.terms() for p in sub.patterns], [f.expr for f in sub.filters], sub.projection,
                    sub.distinct, sub.filters[0].base if sub.filters else None)


_INT = "9090900"
XSD_INTEGER = XSD + "integer"


def _slot_of(term: Term, kinds: dict[str, tuple[int, str]]) -> tuple[int, str, Any] | None:
    if type(term) is IRI:
        hit = kinds.get(term.value)
        if hit is not None and hit[1] == "iri":
            return hit[0], "iri", None
        at = term.value.rfind(MARKER + "_")
        if at > 0:
            hit = kinds.get(term.value[at:])
            if hit is not None and hit[1] == "local" and term.value.count(MARKER) == 1:
                return hit[0], "local", term.value[:at]
        return None
    hit = kinds.get(term.lexical)  # type: ignore[union-attr]
    if hit is None:
        return None
    if hit[1] == "string" and MARKER not in term.datatype + (term.language or ""):  # type: ignore[union-attr]
        return hit[0], "string", (term.datatype, term.language)  # type: ignore[union-attr]
    if hit[1] == "integer" and term.datatype == XSD_INTEGER and term.language is None:  # type: ignore[union-attr]
        return hit[0], "integer", None
    return None


def _marked(term: Term) -> bool:
    text = term.value if type(term) is IRI else term.lexical + term.datatype + (term.language or "")  # type: ignore[union-attr]
    return MARKER in text or _INT in text


def _marked_other(node: Any) -> bool:
    """A value of a kind the parts should not hold (a Var's name is checked through repr)."""
    text = repr(node)
    return MARKER in text or _INT in text


def _term(node: Any) -> bool:
    return type(node) is IRI or type(node) is Literal


def _holds(node: Any, found: dict[Term, int]) -> bool:
    if isinstance(node, tuple):
        return any(_holds(item, found) for item in node)
    return _term(node) and node in found

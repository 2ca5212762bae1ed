"""A parsed subscription on the wire: what the entry peer sends the peers of its box, so that
they build it without parsing SPARQL (and persist it, so a restart parses nothing either).

    [graph, [[s, p, o], ...], [filter, ...], [projected name, ...], distinct, base]

A pattern term is a term (`codec.term_to_wire`) or `["?", name]` for a variable. A FILTER is its
expression tree (`sparql.filters.compiler`) as nested lists: `["var", name]`, `["const", term]`,
`["and", [e, ...]]`, `[op, e, e]`, `["call", NAME, [e, ...]]`, … Decoding checks every node's
shape, bounds the nesting, then compiles the FILTERs as parsing would (unknown functions and
operators, arities and constant regexes are refused); anything else is a BadRequest naming it.
"""

from __future__ import annotations

import sys
from typing import Any

from eventcloud.errors import BadRequest
from eventcloud.rdf.model import RDF_LANGSTRING, XSD, XSD_STRING, Literal
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.lru import MISSING, LruTable
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.sparql.subscription import Subscription, SubscriptionError, TriplePattern, Var, assemble
from eventcloud.sparql.shared import shared
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.codec import term_from_wire, term_to_wire

__all__ = ["subscription_to_wire", "subscription_from_wire", "MAX_DEPTH"]

#: Deepest FILTER expression accepted (SPARQL text nested deeper is refused by the parser too).
MAX_DEPTH = 200
_BINARY = frozenset({"=", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/"})
_LISTS = frozenset({"or", "and", "coalesce"})
_UNARY = frozenset({"not", "neg", "pos"})
_NAMED = frozenset({"var", "bound"})
_CALLS = frozenset({"call", "ext", "op"})


def subscription_to_wire(sub: Subscription) -> list[Any]:
    base = sub.filters[0].base if sub.filters else None
    return [_pattern_term(sub.graph), [[_pattern_term(t) for t in p.terms()] for p in sub.patterns],
            [_expr_to_wire(f.expr) for f in sub.filters], list(sub.projection), sub.distinct, base]


def subscription_from_wire(data: Any, sparql: str, *, taxonomy: Taxonomy | None = None,
                           operators: OperatorSet = NO_OPERATORS) -> Subscription:
    """The subscription `data` encodes (its text is `sparql`, kept for display only)."""
    if not isinstance(data, list) or len(data) != 6:
        raise BadRequest("a parsed subscription is [graph, patterns, filters, projection, distinct, base]")
    graph, patterns, filters, projection, distinct, base = data
    if not isinstance(patterns, list) or not patterns or not all(isinstance(p, list) and len(p) == 3 for p in patterns):
        raise BadRequest("a parsed subscription's patterns are a non-empty list of [s, p, o]")
    if not isinstance(filters, list) or not isinstance(projection, list) or not all(
            isinstance(n, str) and n for n in projection):
        raise BadRequest("a parsed subscription's filters and projection are lists (of expressions, of names)")
    if not isinstance(distinct, bool) or not (base is None or isinstance(base, str)):
        raise BadRequest("a parsed subscription's distinct flag is a boolean and its base a string or null")
    try:
        return assemble(sparql, _pattern_term_from(graph, True),
                        tuple(TriplePattern(_pattern_term_from(s), _pattern_term_from(p, True), _pattern_term_from(o))
                              for s, p, o in patterns),
                        tuple(_expr_from_wire(f, 0) for f in filters), tuple(projection), distinct, base,
                        taxonomy=taxonomy, operators=operators)
    except SubscriptionError as exc:
        raise BadRequest(f"parsed subscription refused: {exc.reason}") from None


def _pattern_term(term: Any) -> Any:
    return ["?", term.name] if isinstance(term, Var) else _term(term)


def _pattern_term_from(data: Any, vocabulary: bool = False) -> Any:
    """A pattern term; `vocabulary` for graph and predicate positions, whose IRIs recur across the
    subscriptions a peer holds (one string per process for them, not one per subscription)."""
    if isinstance(data, list) and len(data) == 2 and data[0] == "?":
        if not isinstance(data[1], str) or not data[1]:
            raise BadRequest("a variable's name is a non-empty string")
        return shared(Var(sys.intern(data[1])))
    if vocabulary and type(data) is str:
        data = _recurring(data)
    return _term_from(data)


#: Graph and predicate IRIs seen lately, most recent last (bounded: `_recurring`).
SEEN_KEPT = 1024
_SEEN = LruTable(SEEN_KEPT)


def _recurring(text: str) -> str:
    """One string per process for a graph or predicate IRI that recurs (sensor-style
    subscriptions share a few), interned once it is seen a second time among the last
    SEEN_KEPT. Not every one: each interned string takes a slot in the interpreter's table
    (it grows, never shrinks), and a chain's predicates are all distinct: interning them all
    cost ~240 B per stored chain (docs/pubsub.md). Not a table of IRI objects either: unique
    ones would stay in it."""
    if _SEEN.get(text) is not MISSING:
        return sys.intern(text)
    _SEEN.put(text, None)
    return text


def _term(term: Any) -> Any:
    """Literals shorter than the codec's: ["'", lexical] (xsd:string), ["@", lexical, language],
    ["^", lexical, xsd local name]; IRIs and other literals as `codec.term_to_wire`."""
    if isinstance(term, Literal):
        if term.language is not None:
            return ["@", term.lexical, term.language]
        if term.datatype == XSD_STRING:
            return ["'", term.lexical]
        if term.datatype.startswith(XSD):
            return ["^", term.lexical, term.datatype[len(XSD):]]
    return term_to_wire(term)


def _term_from(data: Any) -> Any:
    if isinstance(data, list) and data and data[0] in ("'", "@", "^"):
        if not all(isinstance(x, str) for x in data) or len(data) != (2 if data[0] == "'" else 3):
            raise BadRequest(f"invalid literal encoding {str(data)[:80]}")
        tag = data[0]
        data = ([data[1], XSD_STRING] if tag == "'" else [data[1], RDF_LANGSTRING, sys.intern(data[2])] if tag == "@"
                else [data[1], sys.intern(XSD + data[2])])
    term = term_from_wire(data)
    if type(term) is not Literal:
        return term
    canonical = canonical_term(term)
    return term if canonical == term else canonical  # a sender's constants are canonical already


def _expr_to_wire(expr: tuple) -> list[Any]:
    kind = expr[0]
    if kind == "const":
        return ["const", _term(expr[1])]
    if kind in _NAMED:
        return [kind, expr[1]]
    if kind in _LISTS:
        return [kind, [_expr_to_wire(e) for e in expr[1]]]
    if kind in _CALLS:
        return [kind, expr[1], [_expr_to_wire(e) for e in expr[2]]]
    if kind in ("in", "notin"):
        return [kind, _expr_to_wire(expr[1]), [_expr_to_wire(e) for e in expr[2]]]
    if kind == "cast":
        return [kind, expr[1], _expr_to_wire(expr[2])]
    return [kind, *(_expr_to_wire(e) for e in expr[1:])]  # unary, binary, if


def _expr_from_wire(data: Any, depth: int) -> tuple:
    if depth > MAX_DEPTH:
        raise BadRequest(f"a FILTER expression nested deeper than {MAX_DEPTH}")
    if not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise BadRequest("a FILTER expression is a list starting with its kind")
    kind, args, down = data[0], data[1:], depth + 1
    if kind == "const" and len(args) == 1:
        return ("const", _term_from(args[0]))
    if kind in _NAMED and len(args) == 1 and isinstance(args[0], str):
        return shared((kind, sys.intern(args[0])))
    if kind in _LISTS and len(args) == 1:
        return (kind, _exprs(args[0], down))
    if kind in _CALLS and len(args) == 2 and isinstance(args[0], str):
        return (kind, args[0], _exprs(args[1], down))
    if kind in ("in", "notin") and len(args) == 2:
        return (kind, _expr_from_wire(args[0], down), _exprs(args[1], down))
    if kind == "cast" and len(args) == 2 and isinstance(args[0], str):
        return (kind, args[0], _expr_from_wire(args[1], down))
    if (kind in _UNARY and len(args) == 1) or (kind in _BINARY and len(args) == 2) or (kind == "if" and len(args) == 3):
        return (kind, *(_expr_from_wire(a, down) for a in args))
    raise BadRequest(f"malformed FILTER expression of kind {kind[:40]!r} ({len(args)} arguments)")


def _exprs(data: Any, depth: int) -> tuple:
    if not isinstance(data, list):
        raise BadRequest("expected a list of FILTER expressions")
    return tuple(_expr_from_wire(e, depth) for e in data)

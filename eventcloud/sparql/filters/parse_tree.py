"""rdflib's SPARQL parse tree of a FILTER expression -> an `Expr` tree (`filters.compiler`).

Only the subscription parser reads rdflib's tree; everything after it (checking, compiling,
the wire's parsed form) works on `Expr` tuples.
"""

from __future__ import annotations

from typing import Any, Callable

from eventcloud.rdf.model import IRI, XSD_STRING, Literal, ModelError, Term
from eventcloud.sparql.filters.compiler import RDF_NIL, Expr, FilterError, check
from eventcloud.sparql.filters.extensions import EXTENSIONS
from eventcloud.sparql.filters.functions import CASTS
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.filters.values import canonical_term

__all__ = ["from_parse_tree", "default_resolve"]

_REFUSED_BUILTINS = {
    "Builtin_EXISTS": "EXISTS", "Builtin_NOTEXISTS": "NOT EXISTS", "Builtin_BNODE": "BNODE",
    "Builtin_RAND": "RAND", "Builtin_NOW": "NOW", "Builtin_UUID": "UUID", "Builtin_STRUUID": "STRUUID",
}
_SPECIAL = {"Builtin_STR": "STR", "Builtin_sameTerm": "sameTerm", "Builtin_REGEX": "REGEX",
            "Builtin_REPLACE": "REPLACE", "Builtin_IRI": "IRI", "Builtin_URI": "IRI"}
_ARG_KEYS = ("arg", "arg1", "arg2", "arg3", "text", "pattern", "replacement", "start", "length", "flags")


def default_resolve(node: Any) -> Term:
    """Turn an rdflib term (URIRef or Literal) into a model term."""
    from rdflib import Literal as RdfLiteral, URIRef

    if isinstance(node, URIRef):
        return IRI(str(node))
    if isinstance(node, RdfLiteral):
        if node.language:
            return Literal(str(node), language=node.language)
        return Literal(str(node), str(node.datatype) if node.datatype else XSD_STRING)
    raise FilterError(f"unexpected term in expression: {node!r}")


def from_parse_tree(node: Any, resolve: Callable[[Any], Term], operators: OperatorSet = NO_OPERATORS) -> Expr:
    """Convert an rdflib SPARQL parser expression into an `Expr` tree."""
    from rdflib import Variable
    from rdflib.plugins.sparql.parserutils import CompValue

    def conv(n: Any) -> Expr:
        if isinstance(n, Variable):
            return ("var", str(n))
        if not isinstance(n, CompValue):
            return ("const", canonical_term(_term(n)))
        name = n.name
        if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
            others = _list(_get(n, "other"))
            if not others:
                return conv(n["expr"])
            return ("or" if name.startswith("ConditionalOr") else "and", tuple(conv(e) for e in [n["expr"], *others]))
        if name == "RelationalExpression":
            op = _get(n, "op")
            if op is None:
                return conv(n["expr"])
            left = conv(n["expr"])
            if op in ("IN", "NOT IN"):
                return ("in" if op == "IN" else "notin", left, tuple(conv(e) for e in _list(_get(n, "other"))))
            return (str(op), left, conv(n["other"]))
        if name in ("AdditiveExpression", "MultiplicativeExpression"):
            result = conv(n["expr"])
            for op, other in zip(_list(_get(n, "op")), _list(_get(n, "other"))):
                result = (str(op), result, conv(other))
            return result
        if name in ("UnaryNot", "UnaryMinus", "UnaryPlus"):
            return ({"UnaryNot": "not", "UnaryMinus": "neg", "UnaryPlus": "pos"}[name], conv(n["expr"]))
        if name == "literal" or name == "pname":
            return ("const", canonical_term(_term(n)))
        if name.startswith("Aggregate_"):
            raise FilterError("aggregates are not supported in subscriptions", "aggregates")
        if name in _REFUSED_BUILTINS:
            construct = _REFUSED_BUILTINS[name]
            raise FilterError(f"{construct} is not supported in subscriptions", construct)
        if name == "Builtin_BOUND":
            return ("bound", str(n["arg"]))
        if name == "Builtin_IF":
            return ("if", conv(n["arg1"]), conv(n["arg2"]), conv(n["arg3"]))
        if name == "Builtin_COALESCE":
            return ("coalesce", tuple(conv(e) for e in _list(_get(n, "arg"))))
        if name == "Builtin_CONCAT":
            return ("call", "CONCAT", tuple(conv(e) for e in _list(_get(n, "arg"))))
        if name == "Function":
            iri = _term(n["iri"])
            args = tuple(conv(e) for e in _list(_get(n, "expr")))
            if _get(n, "distinct"):
                raise FilterError("DISTINCT in a function call is not supported", "aggregates")
            if isinstance(iri, IRI) and iri.value in EXTENSIONS:
                return ("ext", iri.value, args)
            if isinstance(iri, IRI) and iri.value in operators:
                return ("op", iri.value, args)
            if not isinstance(iri, IRI) or iri.value not in CASTS:
                raise FilterError(f"function {iri} is not supported in subscriptions (not a SPARQL cast, an "
                                  f"EventCloud extension or an operator registered on this overlay)", "function call")
            if len(args) != 1:
                raise FilterError(f"the cast {iri} takes exactly one argument", "function call")
            return ("cast", iri.value, args[0])
        if name.startswith("Builtin_"):
            builtin = _SPECIAL.get(name, name[len("Builtin_"):])
            args = tuple(conv(n[key]) for key in _ARG_KEYS if _get(n, key) is not None)
            return ("call", builtin, args)
        raise FilterError(f"{name} is not supported in FILTER expressions", name)

    def _term(n: Any) -> Term:
        try:
            return resolve(n)
        except ModelError as exc:
            raise FilterError(str(exc), "term") from None

    expr = conv(node)
    check(expr, operators)
    return expr


def _get(node: Any, key: str) -> Any:
    """A parse-tree node's field, or None (rdflib's CompValue.get returns the key when missing)."""
    return node[key] if key in node else None


def _list(value: Any) -> list:
    if value is None or (not isinstance(value, (list, tuple)) and str(value) == RDF_NIL):
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    try:
        return list(value)  # pyparsing ParseResults
    except TypeError:
        return [value]

"""Property paths in subscriptions: the one accepted form, `rdf:type/rdfs:subClassOf*`, and the names of the others.

`?x rdf:type/rdfs:subClassOf* ex:C` (an is-a constraint on the class taxonomy) means, as if the taxonomy's
triples were in the event: ?x has a type that is ex:C or a class below it. A subscription holds
it as the triple pattern `?x rdf:type ?_:isaN` (a hidden variable, never projected) and the FILTER
`ec:descendantOf(?_:isaN, ex:C)`, answered from the taxonomy's precomputed closure. Every other
path is refused with its text, so the user sees which one.

rdflib's parse tree wraps even a plain predicate in PathAlternative/PathSequence/PathElt nodes;
`plain_predicate` unwraps those, `isa_path` recognises the accepted path (also spelled with `a`,
full IRIs or parentheses) and `path_text` renders any path for a refusal.
"""

from __future__ import annotations

from typing import Any, Callable

from eventcloud.rdf.model import IRI, Term
from eventcloud.sparql.taxonomy import RDF_TYPE, RDFS_SUBCLASSOF

__all__ = ["ISA_PATH", "isa_path", "path_text", "plain_predicate"]

#: How refusals and docs write the accepted path.
ISA_PATH = "rdf:type/rdfs:subClassOf*"


def _name(node: Any) -> str:
    return getattr(node, "name", "")


def _unwrap(node: Any) -> Any:
    """Drop one-part alternatives and sequences, and PathElt nodes without a modifier."""
    while True:
        name = _name(node)
        if name in ("PathAlternative", "PathSequence") and len(node["part"]) == 1:
            node = node["part"][0]
        elif name == "PathElt" and "mod" not in node:
            node = node["part"]
        else:
            return node


def plain_predicate(node: Any) -> Any | None:
    """The predicate node (IRI, prefixed name or variable) when `node` is no real path, else None."""
    node = _unwrap(node)
    return None if _name(node) not in ("", "pname") else node


def isa_path(node: Any, resolve: Callable[[Any], Term]) -> bool:
    """Is `node` the path rdf:type/rdfs:subClassOf* (however written)?"""
    node = _unwrap(node)
    if _name(node) != "PathSequence" or len(node["part"]) != 2:
        return False
    first, second = (_unwrap(part) for part in node["part"])
    if _name(second) != "PathElt" or _get(second, "mod") != "*":
        return False
    inner = _unwrap(second["part"])
    return _is(first, RDF_TYPE, resolve) and _is(inner, RDFS_SUBCLASSOF, resolve)


def _is(node: Any, iri: str, resolve: Callable[[Any], Term]) -> bool:
    if _name(node) not in ("", "pname"):
        return False
    try:
        term = resolve(node)
    except Exception:
        return False
    return isinstance(term, IRI) and term.value == iri


def path_text(node: Any) -> str:
    """A path as SPARQL-like text, for the refusal (`^<a>`, `<a>/<b>*`, `!(<a>|<b>)`)."""
    name = _name(node)
    if name == "PathAlternative":
        return "|".join(path_text(part) for part in node["part"])
    if name == "PathSequence":
        return "/".join(_grouped(part, ("PathAlternative",)) for part in node["part"])
    if name == "PathElt":
        return _grouped(node["part"], ("PathAlternative", "PathSequence")) + (_get(node, "mod") or "")
    if name == "PathEltOrInverse":
        return "^" + path_text(node["part"])
    if name == "PathNegatedPropertySet":
        parts = [path_text(part) for part in node["part"] if _name(part) != "InversePath"]
        return "!" + (parts[0] if len(parts) == 1 else "(" + "|".join(parts) + ")")
    if name == "pname":
        return f"{_get(node, 'prefix') or ''}:{_get(node, 'localname') or ''}"
    return f"<{node}>"


def _grouped(node: Any, looser: tuple[str, ...]) -> str:
    """A part's text, in parentheses when its operator binds looser than the one around it."""
    node = _unwrap(node)
    text = path_text(node)
    return f"({text})" if _name(node) in looser else text


def _get(node: Any, key: str) -> Any:
    return node[key] if key in node else None  # CompValue.get does not return None for a missing key

"""The subscription language: SPARQL SELECT text -> a `Subscription`, or a refusal that names why.

A subscription is a SELECT whose WHERE clause is exactly one `GRAPH ?g { … }` (or `GRAPH <iri>`)
block of triple patterns, with FILTERs inside or outside it. The text is parsed once with rdflib;
the result keeps the patterns in query order (patterns[0] is the indexing pattern), the FILTERs
compiled to closures, the resolved projection, and a join plan the local matcher follows, so
nothing is parsed again per event. Everything else SPARQL offers is refused with a
`SubscriptionError` naming the construct and, when it can be found, its position.

Semantics follow the oracle engine (Oxigraph): FILTERs inside the GRAPH block see the graph
variable, so a FILTER's place (inside or outside the block) does not change its meaning.

Two extensions (docs/subscriptions.md): full-text FILTERs, `ec:ftcontains(?v, "expr")` or the bare
`ftcontains` (rewritten to the IRI before rdflib sees the text), and is-a constraints over a class
taxonomy, as the path `?x rdf:type/rdfs:subClassOf* ex:C` (sparql.paths) or FILTER functions.
A subscription using the taxonomy is compiled against the one given to `parse_subscription`
(none: the empty taxonomy) and re-bound to another with `with_taxonomy`, without parsing again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Union

from eventcloud.errors import ErrorCode, InputError
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.sparql.filters.compiler import CompiledFilter, FilterError, compile_filter
from eventcloud.sparql.filters.parse_tree import from_parse_tree
from eventcloud.sparql.filters.extensions import DESCENDANT_OF, rewrite_bare_names
from eventcloud.sparql.hints import locate, too_deep
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.paths import ISA_PATH, isa_path, path_text, plain_predicate
from eventcloud.sparql.shapes import ShapeCache, shape_of
from eventcloud.sparql.templates import Templates
from eventcloud.sparql.shared import shared
from eventcloud.sparql.taxonomy import RDF_TYPE, Taxonomy
from eventcloud.rdf.model import IRI, XSD_STRING, Literal, ModelError, Term

__all__ = [
    "Var", "PatternTerm", "TriplePattern", "Subscription", "SubscriptionError", "JoinPlan",
    "parse_subscription", "assemble",
]


@dataclass(frozen=True, slots=True)
class Var:
    """A query variable (`name` without '?'); blank nodes in patterns become `_:b0`, `_:b1`, …"""

    name: str

    def n3(self) -> str:
        return self.name if self.name.startswith("_:") else "?" + self.name

    def __str__(self) -> str:
        return self.n3()


PatternTerm = Union[Var, IRI, Literal]


@dataclass(frozen=True, slots=True)
class TriplePattern:
    subject: PatternTerm
    predicate: PatternTerm
    object: PatternTerm

    def variables(self) -> frozenset[str]:
        return frozenset(t.name for t in (self.subject, self.predicate, self.object) if isinstance(t, Var))

    def terms(self) -> tuple[PatternTerm, PatternTerm, PatternTerm]:
        return (self.subject, self.predicate, self.object)

    def n3(self) -> str:
        return " ".join(t.n3() for t in self.terms())


class SubscriptionError(InputError):
    """A subscription text that is not valid SPARQL, or uses a construct subscriptions refuse."""

    default_code = ErrorCode.BAD_SUBSCRIPTION

    def __init__(self, message: str, construct: str | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        self.construct = construct
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None and column is not None else ""
        super().__init__(message + where)
        self.reason = message

    def __reduce__(self) -> tuple:
        return (type(self), (self.reason, self.construct, self.line, self.column))


@dataclass(frozen=True)
class JoinPlan:
    """The order a matcher joins the patterns in, and the FILTERs to run after each step.

    `order[k]` is a pattern index; `checks[k]` are the filters whose bindable variables are all
    bound once `order[0..k]` matched (filters on no bindable variable run in `before`).
    `extractors[k]` fits a quad to pattern `order[k]`: the (variable, term) pairs it binds, or None.
    `predicates[k]` is the pattern's constant predicate IRI string (to use an index), or None.
    """

    order: tuple[int, ...]
    before: tuple[CompiledFilter, ...]
    checks: tuple[tuple[CompiledFilter, ...], ...]
    extractors: tuple[Callable[[Any], Any], ...] = ()
    predicates: tuple[str | None, ...] = ()


def extractor(pattern: TriplePattern) -> Callable[[Any], tuple[tuple[str, Term], ...] | None]:
    """A function fitting a quad (g, s, p, o) to the pattern's constants and repeated variables."""
    consts: list[tuple[int, Term]] = []
    binds: list[tuple[str, int]] = []
    same: list[tuple[int, int]] = []
    first: dict[str, int] = {}
    for position, term in ((1, pattern.subject), (2, pattern.predicate), (3, pattern.object)):
        if isinstance(term, Var):
            if term.name in first:
                same.append((first[term.name], position))
            else:
                first[term.name] = position
                binds.append((term.name, position))
        else:
            consts.append((position, term))
    names = tuple(name for name, _ in binds)
    positions = tuple(position for _, position in binds)
    checks, equal = tuple(consts), tuple(same)

    if len(binds) == 2 and not equal:
        (n0, i0), (n1, i1) = binds

        def fit2(q: Any) -> Any:
            for i, t in checks:
                if q[i] != t:
                    return None
            return ((n0, q[i0]), (n1, q[i1]))
        return fit2

    def fit(q: Any) -> Any:
        for i, t in checks:
            if q[i] != t:
                return None
        for i, j in equal:
            if q[i] != q[j]:
                return None
        return tuple(zip(names, [q[i] for i in positions]))
    return fit


@dataclass(frozen=True, slots=True)
class Subscription:
    sparql: str
    graph: Union[Var, IRI]
    patterns: tuple[TriplePattern, ...]
    filters: tuple[CompiledFilter, ...]
    projection: tuple[str, ...]
    distinct: bool
    #: per filter (same order as `filters`), the variables of it that patterns or the graph can bind
    filter_needs: tuple[frozenset[str], ...] = field(init=False, compare=False, repr=False)
    _variables: frozenset[str] = field(init=False, compare=False, repr=False)
    # join orders, made on first use (slots rather than a __dict__: a peer holds many subscriptions)
    _plan: Any = field(init=False, compare=False, repr=False, default=None)
    _indexed_plan: Any = field(init=False, compare=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not self.patterns:
            raise SubscriptionError("a subscription needs at least one triple pattern", "empty GRAPH block")
        names = {name for pattern in self.patterns for name in pattern.variables()}
        if isinstance(self.graph, Var):
            names.add(self.graph.name)
        object.__setattr__(self, "_variables", shared(frozenset(names)))
        object.__setattr__(self, "filter_needs", shared(tuple(shared(f.variables & self._variables)
                                                              for f in self.filters)))

    @property
    def plan(self) -> JoinPlan:
        """The cheapest join order (made on first use: a peer evaluates few of the subscriptions it holds)."""
        plan = self._plan
        if plan is None:
            plan = _join_plan(self, None)
            object.__setattr__(self, "_plan", plan)
        return plan

    @property
    def chain_key(self) -> tuple:
        """Equal for subscriptions whose CSMA chains are the same (graph term, patterns in order,
        FILTERs, which compare by expression, base and taxonomy): the projection, DISTINCT and
        text may differ."""
        return (self.graph, self.patterns, self.filters)

    @property
    def indexed_plan(self) -> JoinPlan:
        """A join order starting with the indexing pattern (for OSMA's rule), made on first use."""
        plan = self._indexed_plan
        if plan is None:
            plan = _join_plan(self, 0)
            object.__setattr__(self, "_indexed_plan", plan)
        return plan

    def variables(self) -> frozenset[str]:
        """Every variable patterns or the graph can bind (blank-node variables included)."""
        return self._variables

    def pattern_terms(self, index: int, bindings: Mapping[str, Term] = {}) -> tuple[Term | None, Term | None, Term | None, Term | None]:
        """(g, s, p, o) of pattern `index`, variables replaced by their binding, None where unbound."""
        pattern = self.patterns[index]
        return tuple(  # type: ignore[return-value]
            bindings.get(t.name) if isinstance(t, Var) else t
            for t in (self.graph, pattern.subject, pattern.predicate, pattern.object)
        )

    def bindable(self, compiled: CompiledFilter) -> frozenset[str]:
        """The variables of a filter that some pattern (or the graph) can bind."""
        return compiled.variables & self._variables

    @property
    def uses_taxonomy(self) -> bool:
        """Does matching it read the taxonomy (an rdf:type/rdfs:subClassOf* path or an is-a FILTER)?"""
        return any(f.uses_taxonomy for f in self.filters)

    @property
    def uses_operators(self) -> bool:
        """Does a FILTER call a registered operator (sparql.filters.operators)?"""
        return any(f.calls for f in self.filters)

    @property
    def taxonomy(self) -> Taxonomy | None:
        """The taxonomy its is-a tests read (None when it uses none)."""
        return next((f.taxonomy for f in self.filters if f.uses_taxonomy), None)

    def with_taxonomy(self, taxonomy: Taxonomy) -> "Subscription":
        """The same subscription reading `taxonomy` (itself when it uses none or already reads it)."""
        if not self.uses_taxonomy or self.taxonomy == taxonomy:
            return self
        return replace(self, filters=tuple(f.with_taxonomy(taxonomy) for f in self.filters))


def _join_plan(sub: Subscription, first: int | None) -> JoinPlan:
    """Greedy order: most selective pattern first, then the pattern with most positions fixed."""
    bound: set[str] = {sub.graph.name} if isinstance(sub.graph, Var) else set()
    remaining = list(range(len(sub.patterns)))
    order: list[int] = []
    while remaining:
        if first is not None and not order:
            choice = first
        else:
            choice = max(remaining, key=lambda i: (_fixed(sub.patterns[i], bound), -i))
        remaining.remove(choice)
        order.append(choice)
        bound |= sub.patterns[choice].variables()
    pending = list(sub.filters)
    before = tuple(f for f in pending if not sub.bindable(f))
    pending = [f for f in pending if sub.bindable(f)]
    checks = []
    seen: set[str] = {sub.graph.name} if isinstance(sub.graph, Var) else set()
    for index in order:
        seen |= sub.patterns[index].variables()
        now = tuple(f for f in pending if sub.bindable(f) <= seen)
        pending = [f for f in pending if f not in now]
        checks.append(now)
    patterns = [sub.patterns[i] for i in order]
    return JoinPlan(tuple(order), before, tuple(checks), tuple(extractor(p) for p in patterns),
                    tuple(None if isinstance(p.predicate, Var) else p.predicate.value for p in patterns))  # type: ignore[union-attr]


def _fixed(pattern: TriplePattern, bound: set[str]) -> int:
    return sum(1 for t in pattern.terms() if not isinstance(t, Var) or t.name in bound)


def assemble(sparql: str, graph: Union[Var, IRI], patterns: tuple[TriplePattern, ...], exprs: tuple[Any, ...],
             projection: tuple[str, ...], distinct: bool, base: str | None = None, *,
             taxonomy: Taxonomy | None = None, operators: OperatorSet = NO_OPERATORS) -> Subscription:
    """A subscription from its parsed parts (what peers send each other instead of the text):
    the FILTER trees are checked and compiled, nothing is parsed. SubscriptionError if the parts
    are not a subscription `parse_subscription` could have made."""
    if isinstance(graph, Literal):
        raise SubscriptionError("the GRAPH term must be a variable or an IRI", "GRAPH literal")
    if any(isinstance(p.predicate, Literal) for p in patterns):
        raise SubscriptionError("a literal cannot be a predicate", "literal predicate")
    try:
        filters = tuple(compile_filter(expr, base=base, taxonomy=taxonomy, operators=operators) for expr in exprs)
    except FilterError as exc:
        raise SubscriptionError(str(exc), exc.construct or "FILTER") from None
    return Subscription(sparql, graph, tuple(patterns), filters, shared(tuple(map(sys.intern, projection))), distinct)


# --- parsing -------------------------------------------------------------------------------------

#: Parsed shapes kept per process (a parse tree is a few tens of KB).
SHAPES_KEPT = 256
_PLURAL = frozenset({"property paths", "sub-queries", "aggregates", "SELECT expressions"})
_QUERY_FORMS = {"AskQuery": "ASK", "ConstructQuery": "CONSTRUCT", "DescribeQuery": "DESCRIBE"}
_PATTERN_CONSTRUCTS = {
    "OptionalGraphPattern": ("OPTIONAL", r"OPTIONAL"),
    "MinusGraphPattern": ("MINUS", r"MINUS"),
    "ServiceGraphPattern": ("SERVICE", r"SERVICE"),
    "Bind": ("BIND", r"BIND"),
    "InlineData": ("VALUES", r"VALUES"),
}


def parse_subscription(text: str, taxonomy: Taxonomy | None = None,
                       operators: OperatorSet = NO_OPERATORS) -> Subscription:
    """Parse and check a subscription; raise SubscriptionError naming any refused construct.

    Is-a tests read `taxonomy` (None: the empty taxonomy, where a class has no other descendant).
    FILTERs may call the registered `operators` (sparql.filters.operators) by IRI.
    """
    from pyparsing import ParseBaseException
    from rdflib.plugins.sparql.algebra import translatePrologue
    from rdflib.plugins.sparql.parser import parseQuery

    if not isinstance(text, str):
        raise SubscriptionError("a subscription must be SPARQL text", "syntax error")
    rewritten, shifts = rewrite_bare_names(text)
    shape = shape_of(rewritten)
    if shape is not None:
        made = _TEMPLATES.made(shape, text, taxonomy, operators)
        if made is not None:
            return made
        seen = shape.text in _shapes()   # a template pays off only for a shape that recurs
        try:
            parsed = _shapes().tree(shape)
        except Exception:  # the shape does not parse: the text's own parse below says why, where
            parsed = None
        if parsed is not None:
            try:
                sub = _Builder(text, parsed[1], taxonomy, operators).build(parsed[0])
            except (SubscriptionError, RecursionError):
                pass  # refused: parsed whole below, so the error names the text's own terms
            else:
                if seen:
                    _TEMPLATES.learn(shape, sub, operators, _shapes().placeholder_tree(shape))
                return sub
    try:
        tree = parseQuery(rewritten)
    except RecursionError:
        raise SubscriptionError(too_deep(text), "nesting") from None
    except ParseBaseException as exc:
        line_text = text.split("\n")[exc.lineno - 1] if 0 < exc.lineno <= text.count("\n") + 1 else exc.line
        near = f" near {line_text.strip()[:60]!r}" if line_text.strip() else ""
        line, column = shifts.original(exc.lineno, exc.col)
        from eventcloud.sparql.hints import hint

        named = hint(text)
        if named:
            raise SubscriptionError(f"syntax error: {named} ({exc.msg}{near})", "syntax error", line, column) from None
        raise SubscriptionError(f"syntax error: {exc.msg}{near}", "syntax error", line, column) from None
    except Exception as exc:  # rdflib raises plain exceptions for some lexical errors
        raise SubscriptionError(f"syntax error: {exc}", "syntax error") from None
    try:
        prologue = translatePrologue(tree[0], None)
    except Exception as exc:
        raise SubscriptionError(f"invalid prologue: {exc}", "prologue") from None
    try:
        return _Builder(text, prologue, taxonomy, operators).build(tree[1])
    except RecursionError:
        raise SubscriptionError(too_deep(text), "nesting") from None


_SHAPE_CACHE: list[ShapeCache] = []


def _shapes() -> ShapeCache:
    """The process's cache of parsed shapes (made on first use: rdflib is imported lazily)."""
    if not _SHAPE_CACHE:
        from rdflib.plugins.sparql.algebra import translatePrologue
        from rdflib.plugins.sparql.parser import parseQuery

        _SHAPE_CACHE.append(ShapeCache(parseQuery, lambda prologue: translatePrologue(prologue, None), SHAPES_KEPT))
    return _SHAPE_CACHE[0]


class _Builder:
    """Walks rdflib's parse tree, refusing what subscriptions do not support."""

    def __init__(self, text: str, prologue: Any, taxonomy: Taxonomy | None,
                 operators: OperatorSet = NO_OPERATORS) -> None:
        self.text = text
        self.prologue = prologue
        self.taxonomy = taxonomy
        self.operators = operators
        self.blank_nodes: dict[str, str] = {}
        self.isa: list[tuple] = []  # is-a FILTER expressions of rdf:type/rdfs:subClassOf* paths
        base = getattr(prologue, "base", None)
        self.base = str(base) if base else None

    def refuse(self, message: str, construct: str, keyword: str | None = None, occurrence: int = 1) -> SubscriptionError:
        line, column = locate(self.text, keyword, occurrence) if keyword else (None, None)
        return SubscriptionError(message, construct, line, column)

    def unsupported(self, construct: str, keyword: str | None = None, occurrence: int = 1) -> SubscriptionError:
        verb = "are" if construct in _PLURAL else "is"
        return self.refuse(f"{construct} {verb} not supported in subscriptions", construct, keyword, occurrence)

    def build(self, query: Any) -> Subscription:
        if query.name in _QUERY_FORMS:
            form = _QUERY_FORMS[query.name]
            raise self.refuse(f"{form} queries are not supported: a subscription is a SELECT query", form, form)
        if query.name != "SelectQuery":
            raise self.refuse(f"{query.name} is not supported: a subscription is a SELECT query", query.name)
        for key, construct, keyword in (
            ("groupby", "GROUP BY", r"GROUP\s+BY"), ("having", "HAVING", "HAVING"),
            ("orderby", "ORDER BY", r"ORDER\s+BY"), ("valuesClause", "VALUES", "VALUES"),
        ):
            if _get(query, key) is not None:
                raise self.unsupported(construct, keyword)
        if _get(query, "limitoffset") is not None:
            clause = query["limitoffset"]
            construct = "LIMIT" if _get(clause, "limit") is not None else "OFFSET"
            raise self.unsupported(construct, construct)
        for clause in _get(query, "datasetClause") or []:
            construct = "FROM NAMED" if _get(clause, "named") is not None else "FROM"
            raise self.unsupported(construct, r"FROM\s+NAMED" if construct == "FROM NAMED" else "FROM")
        projection_nodes = _get(query, "projection")
        for item in projection_nodes or []:
            if _get(item, "evar") is not None:
                if _contains_aggregate(_get(item, "expr")):
                    raise self.unsupported("aggregates", r"COUNT|SUM|MIN|MAX|AVG|SAMPLE|GROUP_CONCAT")
                raise self.refuse("SELECT expressions (expr AS ?var) are not supported in subscriptions",
                                  "SELECT expressions", r"\bAS\b")
        graph, patterns, filter_nodes = self.where(query["where"])
        filters = tuple(self.compile(node) for node in filter_nodes)
        filters += tuple(compile_filter(expr, base=self.base, taxonomy=self.taxonomy) for expr in self.isa)
        in_scope = ([graph.name] if isinstance(graph, Var) else []) + [
            t.name for p in patterns for t in p.terms() if isinstance(t, Var) and not t.name.startswith("_:")
        ]
        if projection_nodes:
            projection = tuple(dict.fromkeys(sys.intern(str(item["var"])) for item in projection_nodes))
        else:
            projection = tuple(dict.fromkeys(in_scope))
        projection = shared(projection)
        modifier = _get(query, "modifier")
        return Subscription(self.text, graph, tuple(patterns), filters, projection, modifier is not None)

    def where(self, where: Any) -> tuple[Union[Var, IRI], list[TriplePattern], list[Any]]:
        filters: list[Any] = []
        graph_block = None
        parts = self.parts(where)
        if not any(part.name == "GraphGraphPattern" for part in parts):
            raise self.refuse("no GRAPH block: a subscription needs exactly one GRAPH ?g { … } block", "no GRAPH block")
        if any(part.name == "TriplesBlock" for part in parts):
            raise self.refuse("triple patterns outside the GRAPH block are not supported: "
                              "a subscription matches one event graph", "patterns outside the GRAPH block")
        for part in parts:
            if part.name == "Filter":
                filters.append(part["expr"])
            elif part.name == "GraphGraphPattern":
                if graph_block is not None:
                    raise self.refuse("a second GRAPH block is not supported: a subscription has exactly one",
                                      "second GRAPH block", r"GRAPH", 2)
                graph_block = part
        graph = self.term(graph_block["term"])
        if isinstance(graph, Literal):
            raise self.refuse("the GRAPH term must be a variable or an IRI", "GRAPH literal", r"GRAPH")
        patterns: list[TriplePattern] = []
        for part in self.parts(graph_block["graph"]):
            if part.name == "Filter":
                filters.append(part["expr"])
            elif part.name == "TriplesBlock":
                patterns.extend(self.triples(part))
            elif part.name == "GraphGraphPattern":
                raise self.refuse("nested GRAPH blocks are not supported in subscriptions", "nested GRAPH block", r"GRAPH", 2)
        if not patterns:
            raise self.refuse("empty GRAPH block: a subscription needs at least one triple pattern", "empty GRAPH block", r"GRAPH")
        return graph, patterns, filters  # type: ignore[return-value]

    def parts(self, group: Any) -> list[Any]:
        """The parts of a group pattern, refusing every kind of part subscriptions do not support."""
        if group.name == "SubSelect":
            raise self.unsupported("sub-queries", r"SELECT", 2)
        parts = list(_get(group, "part") or [])
        for part in parts:
            name = part.name
            if name in _PATTERN_CONSTRUCTS:
                construct, keyword = _PATTERN_CONSTRUCTS[name]
                raise self.unsupported(construct, keyword)
            if name == "GroupOrUnionGraphPattern":
                groups = list(part["graph"])
                if len(groups) > 1:
                    raise self.unsupported("UNION", "UNION")
                if groups[0].name == "SubSelect":
                    raise self.unsupported("sub-queries", r"SELECT", 2)
                raise self.refuse("nested group patterns { … } are not supported in subscriptions",
                                  "nested group pattern")
            if name not in ("Filter", "GraphGraphPattern", "TriplesBlock"):
                raise self.unsupported(name)
        return parts

    def triples(self, block: Any) -> list[TriplePattern]:
        result = []
        for chunk in block["triples"]:
            items = list(chunk)
            if len(items) % 3:
                raise self.refuse("malformed triple pattern", "syntax error")
            for k in range(0, len(items), 3):
                s, p, o = items[k:k + 3]
                if isa_path(p, self.resolve):
                    result.append(self.isa_pattern(s, o))
                else:
                    result.append(TriplePattern(self.term(s), self.predicate(p), self.term(o)))
        return result

    def isa_pattern(self, subject: Any, cls: Any) -> TriplePattern:
        """`?x rdf:type/rdfs:subClassOf* ex:C`: `?x rdf:type ?_:isaN` and descendantOf(?_:isaN, ex:C)."""
        target = self.term(cls)
        if not isinstance(target, IRI):
            raise self.refuse(f"{ISA_PATH} needs a class IRI as its object, not {target}", "property paths")
        hidden = Var(f"_:isa{len(self.isa)}")
        self.isa.append(("ext", DESCENDANT_OF, (("var", hidden.name), ("const", target))))
        return TriplePattern(self.term(subject), IRI(RDF_TYPE), hidden)

    def predicate(self, node: Any) -> PatternTerm:
        plain = plain_predicate(node)
        if plain is None:
            raise self.refuse(f"property paths are not supported in subscriptions (here: {path_text(node)}); "
                              f"the one path accepted is ?x {ISA_PATH} <class>", "property paths")
        term = self.term(plain)
        if isinstance(term, Literal):
            raise self.refuse("a literal cannot be a predicate", "literal predicate")
        return term

    def term(self, node: Any) -> PatternTerm:
        from rdflib import BNode, Variable

        if isinstance(node, Variable):
            return shared(Var(sys.intern(str(node))))
        if isinstance(node, BNode):
            label = self.blank_nodes.setdefault(str(node), f"_:b{len(self.blank_nodes)}")
            return shared(Var(sys.intern(label)))
        try:
            return canonical_term(self.resolve(node))
        except (ModelError, FilterError) as exc:
            raise self.refuse(f"invalid term: {exc}", "term") from None

    def resolve(self, node: Any) -> Term:
        """A constant of the query (IRI, prefixed name, literal) as a model term."""
        from rdflib import Literal as RdfLiteral, URIRef
        from rdflib.plugins.sparql.parserutils import CompValue

        if isinstance(node, CompValue) and node.name == "pname":
            try:
                iri = self.prologue.resolvePName(_get(node, "prefix"), _get(node, "localname"))
            except Exception as exc:
                raise self.refuse(f"unknown prefix: {exc}", "prefix") from None
            return IRI(str(iri))
        if isinstance(node, CompValue) and node.name == "literal":
            lexical = str(node["string"])
            if _get(node, "lang"):
                return Literal(lexical, language=str(node["lang"]))
            datatype = _get(node, "datatype")
            return Literal(lexical, str(self.resolve(datatype).value) if datatype is not None else XSD_STRING)  # type: ignore[union-attr]
        if isinstance(node, URIRef):
            return IRI(str(self.prologue.absolutize(node)))
        if isinstance(node, RdfLiteral):
            if node.language:
                return Literal(str(node), language=node.language)
            return Literal(str(node), str(node.datatype) if node.datatype else XSD_STRING)
        raise FilterError(f"unsupported term {node!r}")

    def compile(self, node: Any) -> CompiledFilter:
        try:
            return compile_filter(from_parse_tree(node, self.resolve, self.operators), base=self.base,
                                  taxonomy=self.taxonomy, operators=self.operators)
        except SubscriptionError:
            raise
        except FilterError as exc:
            keyword = {"EXISTS": r"EXISTS", "NOT EXISTS": r"NOT\s+EXISTS", "aggregates": r"COUNT|SUM|MIN|MAX|AVG|SAMPLE|GROUP_CONCAT"}.get(exc.construct or "")
            if exc.construct in ("BNODE", "RAND", "NOW", "UUID", "STRUUID"):
                keyword = exc.construct
            raise self.refuse(str(exc), exc.construct or "FILTER", keyword) from None



#: Subscriptions built from their shape's template (sparql.templates) with the builder's own
#: ways of making terms and of building a shape's placeholder text.
_TEMPLATES = Templates(
    SHAPES_KEPT, assemble=assemble, pattern=TriplePattern,
    build=lambda text, tree, prologue, operators: _Builder(text, prologue, None, operators).build(tree),
    resolve=lambda node, prologue: _Builder("", prologue, None).resolve(node))


def _get(node: Any, key: str) -> Any:
    """A parse-tree node's field, or None (rdflib's CompValue.get returns the key when missing)."""
    return node[key] if key in node else None


def _contains_aggregate(node: Any) -> bool:
    from rdflib.plugins.sparql.parserutils import CompValue

    if isinstance(node, CompValue):
        if node.name.startswith("Aggregate_"):
            return True
        return any(_contains_aggregate(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(_contains_aggregate(v) for v in node)
    return False

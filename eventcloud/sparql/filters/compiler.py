"""FILTER expressions compiled once into Python closures with SPARQL 1.1 semantics.

A subscription's FILTERs are evaluated for every candidate solution of every event a peer sees,
so no SPARQL engine runs per event: the expression is turned into a small tree (`Expr`, plain
tuples) when the subscription is parsed, then into nested closures over `filter_values` and
`filter_functions`. A compiled filter returns the SPARQL FILTER result: the effective boolean
value of the expression, where any error (type error, unbound variable, overflow) means false.

Expression trees (`Expr`) are tuples:
    ("var", name) ("const", term) ("or", (e, ...)) ("and", (e, ...)) ("not", e)
    (op, a, b) for op in = != < > <= >= + - * /     ("neg", e) ("pos", e)
    ("in", e, (e, ...)) ("notin", e, (e, ...))      ("bound", name) ("if", c, a, b)
    ("coalesce", (e, ...))  ("call", NAME, (e, ...)) for built-ins  ("cast", datatype, e)
    ("ext", IRI, (e, ...)) for EventCloud's functions (full text, is-a: sparql.filters.extensions)
    ("op", IRI, (e, ...)) for registered operators (sparql.filters.operators), given at compile time
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from eventcloud.errors import ErrorCode, InputError
from eventcloud.sparql.filters.extensions import ISA_FUNCTIONS, ExtensionError, check_extension, compile_extension
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet, compile_call
from eventcloud.sparql.filters.functions import BUILTINS, CASTS, compile_regex, make_fn_iri, plain, string_and_lang
from eventcloud.sparql.filters.regex import BoundedRegex, RegexError, replace_all, translate_regex
from eventcloud.sparql.filters.values import (
    ExprError, Value, arithmetic, compare, ebv, equals, negate, plus, to_term, to_value,
)
from eventcloud.rdf.model import IRI, XSD, XSD_STRING, Literal, Term
from eventcloud.sparql.shared import shared
from eventcloud.sparql.taxonomy import Taxonomy

Expr = tuple
Evaluator = Callable[[Mapping[str, Term]], Value]

#: Exceptions that mean "the expression has no value" (an error in SPARQL terms).
ERRORS = (ExprError, ArithmeticError, ValueError)
RDF_NIL = "http://www.w3.org/1999/02/22-rdf-syntax-ns#nil"


class FilterError(InputError):
    """A FILTER that cannot be compiled: an unsupported construct or function, or a bad regex."""

    default_code = ErrorCode.BAD_SUBSCRIPTION

    def __init__(self, message: str, construct: str | None = None) -> None:
        super().__init__(message)
        self.construct = construct

    def __reduce__(self) -> tuple:
        return (type(self), (self.message, self.construct))


class CompiledFilter:
    """One FILTER, compiled; calling it with bindings gives the FILTER's boolean result.

    A FILTER calling an is-a function reads `taxonomy` (None: the empty one); `with_taxonomy`
    compiles it again against another, and the taxonomy's version is part of its equality.
    Calls of registered operators are compiled against `operators` (`calls`: their IRIs).
    """

    __slots__ = ("expr", "_text", "variables", "base", "regexes", "taxonomy", "uses_taxonomy", "operators", "calls",
                 "_evaluate")

    def __init__(self, expr: Expr, base: str | None = None, taxonomy: Taxonomy | None = None,
                 operators: OperatorSet = NO_OPERATORS) -> None:
        self.expr = expr
        self.base = base
        self._text: str | None = None
        self.variables = shared(frozenset(_variables(expr)))
        self.uses_taxonomy = _uses_taxonomy(expr)
        self.taxonomy = (taxonomy or _EMPTY) if self.uses_taxonomy else None
        self.calls = shared(frozenset(operator_calls(expr)))
        self.operators = operators if self.calls else NO_OPERATORS
        # compiled on first use: a peer holds many filters its constraint tables decide alone, and
        # the closures are most of a filter's memory (`check` has refused whatever would not compile)
        self._evaluate: Evaluator | None = None
        #: the constant REGEX/REPLACE patterns it runs, once compiled (each counts the times it ran
        #: past its budget)
        self.regexes: tuple[BoundedRegex, ...] = ()

    def _evaluator(self) -> Evaluator:
        evaluate = self._evaluate
        if evaluate is None:  # two threads may both compile: the same closures, either is kept
            ctx = _Context(self.base, self.taxonomy, self.operators)
            evaluate = _compile(self.expr, ctx)
            self.regexes = tuple(ctx.regexes)
            self._evaluate = evaluate
        return evaluate

    @property
    def text(self) -> str:
        """The FILTER as SPARQL text (rendered when first asked: most filters never are)."""
        if self._text is None:
            self._text = render(self.expr)
        return self._text

    def __call__(self, bindings: Mapping[str, Term]) -> bool:
        try:
            return ebv((self._evaluate or self._evaluator())(bindings))
        except ERRORS:
            return False

    def with_taxonomy(self, taxonomy: Taxonomy) -> "CompiledFilter":
        if not self.uses_taxonomy or self.taxonomy == taxonomy:
            return self
        return CompiledFilter(self.expr, self.base, taxonomy, self.operators)

    def value(self, bindings: Mapping[str, Term]) -> Term:
        """The expression's value as an RDF term (raises ExprError on an error); for tests and tools."""
        return to_term(self._evaluator()(bindings))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompiledFilter) and (self.expr, self.base, self.taxonomy) == (
            other.expr, other.base, other.taxonomy)

    def __hash__(self) -> int:
        return hash((self.expr, self.base, self.taxonomy))

    def __repr__(self) -> str:
        return f"CompiledFilter({self.text!r})"


def compile_filter(expr: Expr, base: str | None = None, taxonomy: Taxonomy | None = None,
                   operators: OperatorSet = NO_OPERATORS) -> CompiledFilter:
    """Compile an `Expr` tree (from SPARQL text: `filters.parse_tree.from_parse_tree`), checked first."""
    check(expr, operators)
    return CompiledFilter(expr, base, taxonomy, operators)


_EMPTY = Taxonomy.empty()


def check(expr: Expr, operators: OperatorSet = NO_OPERATORS) -> None:
    """Reject unknown expression kinds, functions and casts, wrong arities and invalid constant
    regexes: what passes compiles (CompiledFilter compiles on first use)."""
    kind = expr[0]
    if kind not in _KINDS:
        raise FilterError(f"unknown expression node {str(kind)[:40]!r}")
    if kind == "cast" and expr[1] not in CASTS:
        raise FilterError(f"cast to {str(expr[1])[:80]} is not supported", "cast")
    if kind == "op":
        op = operators.get(expr[1])
        if op is None:
            raise FilterError(f"operator {expr[1]} is not registered on this peer", "function call")
        low, high = op.arity
        if not low <= len(expr[2]) <= high:
            raise FilterError(f"operator {op.name} takes {low}..{high} arguments, got {len(expr[2])}", "function call")
    if kind == "ext":
        try:
            check_extension(expr)
        except ExtensionError as exc:
            raise FilterError(exc.message, exc.construct) from None
    if kind == "call":
        name, args = expr[1], expr[2]
        arity = {"STR": (1, 1), "sameTerm": (2, 2), "REGEX": (2, 3), "REPLACE": (3, 4), "IRI": (1, 1)}
        low, high = arity.get(name, BUILTINS.get(name, (None, None, None))[:2])
        if low is None:
            raise FilterError(f"function {name} is not supported in subscriptions", "function call")
        if not low <= len(args) <= high:
            raise FilterError(f"{name} takes {low}..{high} arguments, got {len(args)}", "function call")
        if name in ("REGEX", "REPLACE"):
            pattern = args[1]
            flags = args[3 if name == "REPLACE" else 2] if len(args) > (3 if name == "REPLACE" else 2) else None
            static = _static_string(pattern), (None if flags is None else _static_string(flags))
            if static[0] is not None and (flags is None or static[1] is not None):
                try:
                    translate_regex(static[0], static[1] or "")
                except RegexError as exc:
                    raise FilterError(f"invalid REGEX pattern {static[0]!r}: {exc}", "regex") from None
    for child in _children(expr):
        check(child, operators)


def _children(expr: Expr) -> tuple[Expr, ...]:
    kind = expr[0]
    if kind in ("var", "const", "bound"):
        return ()
    if kind in ("or", "and", "coalesce"):
        return expr[1]
    if kind in ("call", "ext", "op"):
        return expr[2]
    if kind in ("in", "notin"):
        return (expr[1], *expr[2])
    if kind == "cast":
        return (expr[2],)
    return tuple(expr[1:])


def _uses_taxonomy(expr: Expr) -> bool:
    if expr[0] == "ext" and expr[1] in ISA_FUNCTIONS:
        return True
    return any(_uses_taxonomy(child) for child in _children(expr))


def operator_calls(expr: Expr) -> set[str]:
    """IRIs of the registered operators an expression calls."""
    found = {expr[1]} if expr[0] == "op" else set()
    for child in _children(expr):
        found |= operator_calls(child)
    return found


def _variables(expr: Expr) -> set[str]:
    if expr[0] in ("var", "bound"):
        return {expr[1]}
    names: set[str] = set()
    for child in _children(expr):
        names |= _variables(child)
    return names


def _static_string(expr: Expr) -> str | None:
    if expr[0] == "const" and isinstance(expr[1], Literal) and expr[1].datatype == XSD_STRING:
        return expr[1].lexical
    return None


# --- Expr -> closures ---------------------------------------------------------------------

class _Context:
    """What compiling one FILTER carries along: the base IRI, the taxonomy, the constant regexes met."""

    __slots__ = ("base", "taxonomy", "regexes", "operators")

    def __init__(self, base: str | None, taxonomy: Taxonomy | None = None,
                 operators: OperatorSet = NO_OPERATORS) -> None:
        self.base = base
        self.taxonomy = taxonomy
        self.operators = operators
        self.regexes: list[BoundedRegex] = []


def _compile(expr: Expr, ctx: "_Context") -> Evaluator:
    kind = expr[0]
    if kind == "var":
        name = expr[1]

        def variable(b: Mapping[str, Term]) -> Value:
            term = b.get(name)
            if term is None:
                raise ExprError(f"?{name} is unbound")
            return to_value(term)
        return variable
    if kind == "const":
        value = to_value(expr[1])
        return lambda b: value
    if kind == "bound":
        name = expr[1]
        return lambda b: name in b
    if kind in ("or", "and"):
        return _logical(kind == "or", [_compile(e, ctx) for e in expr[1]])
    if kind == "not":
        inner = _compile(expr[1], ctx)
        return lambda b: not ebv(inner(b))
    if kind in ("in", "notin"):
        return _membership(kind == "in", _compile(expr[1], ctx), [_compile(e, ctx) for e in expr[2]])
    if kind in _COMPARISONS:
        if expr[1][0] == "var" and expr[2][0] == "const" and kind not in ("=", "!="):
            return _variable_order(kind, expr[1][1], to_value(expr[2][1]))
        return _comparison(kind, _compile(expr[1], ctx), _compile(expr[2], ctx))
    if kind in ("+", "-", "*", "/"):
        left, right = _compile(expr[1], ctx), _compile(expr[2], ctx)
        return lambda b: arithmetic(kind, left(b), right(b))
    if kind in ("neg", "pos"):
        inner, op = _compile(expr[1], ctx), negate if kind == "neg" else plus
        return lambda b: op(inner(b))
    if kind == "if":
        cond, then, other = (_compile(e, ctx) for e in expr[1:])
        return lambda b: then(b) if ebv(cond(b)) else other(b)
    if kind == "coalesce":
        return _coalesce([_compile(e, ctx) for e in expr[1]])
    if kind == "cast":
        cast, inner = CASTS[expr[1]], _compile(expr[2], ctx)
        return lambda b: cast(inner(b))
    if kind == "call":
        return _call(expr[1], expr[2], ctx)
    if kind == "ext":
        return compile_extension(expr, [_compile(e, ctx) for e in expr[2]], ctx.taxonomy or _EMPTY)
    if kind == "op":
        op = ctx.operators.get(expr[1])
        if op is None:
            raise FilterError(f"operator {expr[1]} is not registered on this peer", "function call")
        return compile_call(op, [_compile(e, ctx) for e in expr[2]])
    raise FilterError(f"unknown expression node {kind!r}")


_COMPARISONS = frozenset(("=", "!=", "<", ">", "<=", ">="))
#: Every kind of expression node _compile knows.
_KINDS = _COMPARISONS | {"var", "const", "bound", "or", "and", "not", "in", "notin", "+", "-", "*", "/", "neg", "pos",
                         "if", "coalesce", "cast", "call", "ext", "op"}


_SIMPLE = frozenset((int, str, IRI))  # types whose SPARQL = and < are Python's (no NaN, no promotion)


def _comparison(op: str, left: Evaluator, right: Evaluator) -> Evaluator:
    """Comparison operators, with a fast path when both sides are integers or simple strings."""
    if op in ("=", "!="):
        negated = op == "!="

        def equal(b: Mapping[str, Term]) -> Value:
            x, y = left(b), right(b)
            if type(x) is type(y) and type(x) in _SIMPLE:
                return (x == y) is not negated
            return equals(x, y) is not negated
        return equal
    test = _ORDER_TESTS[op]

    def order(b: Mapping[str, Term]) -> Value:
        x, y = left(b), right(b)
        tx = type(x)
        if tx is type(y) and (tx is int or tx is str):
            return test((x > y) - (x < y))  # type: ignore[operator]
        return test(compare(x, y))
    return order


def _variable_order(op: str, name: str, y: Value) -> Evaluator:
    """`?v < constant` (the commonest FILTER) as one closure: what `_comparison` of a variable
    and a constant computes, without their two closures (memory per stored subscription)."""
    test = _ORDER_TESTS[op]
    ty = type(y)
    simple = ty is int or ty is str

    def order(b: Mapping[str, Term]) -> Value:
        term = b.get(name)
        if term is None:
            raise ExprError(f"?{name} is unbound")
        x = to_value(term)
        if simple and type(x) is ty:
            return test((x > y) - (x < y))  # type: ignore[operator]
        return test(compare(x, y))
    return order


_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    "<": lambda c: c < 0, ">": lambda c: c > 0, "<=": lambda c: c <= 0, ">=": lambda c: c >= 0,
}


def _logical(is_or: bool, children: list[Evaluator]) -> Evaluator:
    """|| and && with SPARQL's three-valued logic: an error only matters if no operand decides."""
    def evaluate(b: Mapping[str, Term]) -> Value:
        error = False
        for child in children:
            try:
                if ebv(child(b)) is is_or:
                    return is_or
            except ERRORS:
                error = True
        if error:
            raise ExprError("error in a logical operand")
        return not is_or
    return evaluate


def _membership(positive: bool, needle: Evaluator, items: list[Evaluator]) -> Evaluator:
    def evaluate(b: Mapping[str, Term]) -> Value:
        value = needle(b)
        if not items:
            ebv(value)  # the oracle raises an error for `x IN ()` when x has no boolean value
            return not positive
        error = False
        for item in items:
            try:
                if equals(value, item(b)):
                    return positive
            except ERRORS:
                error = True
        if error:
            raise ExprError("error in IN")
        return not positive
    return evaluate


def _coalesce(children: list[Evaluator]) -> Evaluator:
    def evaluate(b: Mapping[str, Term]) -> Value:
        for child in children:
            try:
                return child(b)
            except ERRORS:
                pass
        raise ExprError("COALESCE: no argument has a value")
    return evaluate


def _term_of(expr: Expr, ctx: "_Context") -> Callable[[Mapping[str, Term]], Term]:
    """Term-level access for STR and sameTerm: variables and constants keep their exact lexical form."""
    if expr[0] == "var":
        name = expr[1]

        def variable(b: Mapping[str, Term]) -> Term:
            term = b.get(name)
            if term is None:
                raise ExprError(f"?{name} is unbound")
            return term
        return variable
    if expr[0] == "const":
        term = expr[1]
        return lambda b: term
    inner = _compile(expr, ctx)
    return lambda b: to_term(inner(b))


def _call(name: str, args: tuple[Expr, ...], ctx: "_Context") -> Evaluator:
    if name == "STR":
        term = _term_of(args[0], ctx)

        def str_(b: Mapping[str, Term]) -> Value:
            t = term(b)
            return t.value if type(t) is IRI else t.lexical  # type: ignore[union-attr]
        return str_
    if name == "sameTerm":
        left, right = _term_of(args[0], ctx), _term_of(args[1], ctx)
        return lambda b: left(b) == right(b)
    if name in ("REGEX", "REPLACE"):
        return _regex_call(name, args, ctx)
    if name == "IRI":
        fn, inner = make_fn_iri(ctx.base), _compile(args[0], ctx)
        return lambda b: fn(inner(b))
    fn = BUILTINS[name][2]
    compiled = [_compile(e, ctx) for e in args]
    if len(compiled) == 1:
        only = compiled[0]
        return lambda b: fn(only(b))
    if len(compiled) == 2:
        first, second = compiled
        return lambda b: fn(first(b), second(b))
    return lambda b: fn(*[c(b) for c in compiled])


def _regex_call(name: str, args: tuple[Expr, ...], ctx: "_Context") -> Evaluator:
    flag_index = 3 if name == "REPLACE" else 2
    text = _compile(args[0], ctx)
    flags_expr = args[flag_index] if len(args) > flag_index else None
    pattern_s = _static_string(args[1])
    flags_s = "" if flags_expr is None else _static_string(flags_expr)
    if pattern_s is not None and flags_s is not None:
        static = translate_regex(pattern_s, flags_s)
        ctx.regexes.append(static)
        regex_of: Callable[[Mapping[str, Term]], BoundedRegex] = lambda b: static
    else:
        pattern, flags = _compile(args[1], ctx), None if flags_expr is None else _compile(flags_expr, ctx)
        regex_of = lambda b: compile_regex(pattern(b), None if flags is None else flags(b))
    if name == "REGEX":
        def regex(b: Mapping[str, Term]) -> Value:
            value = text(b)
            return regex_of(b).search(string_and_lang(value)[0]) is not None
        return regex
    replacement = _compile(args[2], ctx)

    def replace(b: Mapping[str, Term]) -> Value:
        regex = regex_of(b)
        source, lang = string_and_lang(text(b))
        with_ = replacement(b)
        if type(with_) is not str:
            raise ExprError("REPLACE replacement must be a simple literal")
        return plain(replace_all(regex, source, with_), lang)  # type: ignore[arg-type]
    return replace


# --- Expr -> SPARQL text --------------------------------------------------------------------

_PRECEDENCE = {"or": 1, "and": 2, "=": 3, "!=": 3, "<": 3, ">": 3, "<=": 3, ">=": 3, "in": 3, "notin": 3,
               "+": 4, "-": 4, "*": 5, "/": 5}


def render(expr: Expr) -> str:
    """SPARQL syntax for an expression (readable; re-parses to the same tree)."""
    kind = expr[0]
    if kind == "var":
        return "?" + expr[1]
    if kind == "const":
        term = expr[1]
        if isinstance(term, Literal) and _BARE.get(term.datatype, _NEVER).fullmatch(term.lexical):
            return term.lexical  # 25, 2.5, true: SPARQL's short forms
        return term.n3() if isinstance(term, (IRI, Literal)) else str(term)
    if kind == "bound":
        return f"BOUND(?{expr[1]})"
    if kind in ("or", "and"):
        joiner = " || " if kind == "or" else " && "
        return joiner.join(_wrap(e, _PRECEDENCE[kind]) for e in expr[1])
    if kind == "not":
        return "!" + _wrap(expr[1], 9)
    if kind == "neg":
        return "-" + _wrap(expr[1], 9)
    if kind == "pos":
        return "+" + _wrap(expr[1], 9)
    if kind in ("in", "notin"):
        items = ", ".join(render(e) for e in expr[2])
        return f"{_wrap(expr[1], 4)} {'IN' if kind == 'in' else 'NOT IN'} ({items})"
    if kind in _PRECEDENCE:
        level = _PRECEDENCE[kind]
        return f"{_wrap(expr[1], level)} {kind} {_wrap(expr[2], level + 1)}"
    if kind == "if":
        return "IF(" + ", ".join(render(e) for e in expr[1:]) + ")"
    if kind == "coalesce":
        return "COALESCE(" + ", ".join(render(e) for e in expr[1]) + ")"
    if kind == "cast":
        return f"<{expr[1]}>({render(expr[2])})"
    if kind == "call":
        return f"{expr[1]}(" + ", ".join(render(e) for e in expr[2]) + ")"
    if kind in ("ext", "op"):
        return f"<{expr[1]}>(" + ", ".join(render(e) for e in expr[2]) + ")"
    return repr(expr)


_NEVER = re.compile(r"(?!)")
_BARE = {XSD + "integer": re.compile(r"[0-9]+"), XSD + "decimal": re.compile(r"[0-9]+\.[0-9]+"),
         XSD + "boolean": re.compile(r"true|false")}


def _wrap(expr: Expr, level: int) -> str:
    text = render(expr)
    own = _PRECEDENCE.get(expr[0])
    return f"({text})" if own is not None and own < level else text

"""EventCloud's FILTER functions beyond SPARQL 1.1: full text (`ftcontains`) and class is-a tests.

They live under one namespace, written `ec:` in the docs:

    PREFIX ec: <http://eventcloud.io/ns/ext#>
    ec:ftcontains(?v, "expression")   full-text search in a string literal (sparql.filters.fulltext)
    ec:descendantOf(?c, ex:C)         ?c is ex:C or a class below it in the taxonomy
    ec:ancestorOf(?c, ex:C)           ?c is ex:C or a class above it
    ec:childOf(?c, ex:C)              ?c is directly below ex:C (G-ToPSS's "direct instance")

The bare `ftcontains(…)` of the RTF paper is accepted too: rdflib refuses an unknown bare
function name, so `rewrite_bare_names` replaces it by the IRI before parsing (outside strings,
IRIs and comments), and `Shifts` maps rdflib's error columns back to the user's text.

In expression trees a call is ("ext", iri, (arg, …)). The full-text expression must be a string
constant: it is parsed once, at subscribe time, and a malformed one is refused with its position.
The is-a functions take any expressions; arguments that are not IRIs are an error (false). They
read the taxonomy the filter was compiled with (`CompiledFilter(…, taxonomy=…)`).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from eventcloud.errors import InputError
from eventcloud.rdf.model import IRI, XSD_STRING, Literal
from eventcloud.sparql.filters.fulltext import FtQuery, FtSyntaxError, parse_fulltext
from eventcloud.sparql.filters.values import ExprError
from eventcloud.sparql.taxonomy import Taxonomy

__all__ = [
    "EXT", "FTCONTAINS", "DESCENDANT_OF", "ANCESTOR_OF", "CHILD_OF", "ISA_FUNCTIONS", "EXTENSIONS",
    "ExtensionError", "check_extension", "compile_extension", "fulltext_query", "rewrite_bare_names", "Shifts", "PROTECTED",
]

EXT = "http://eventcloud.io/ns/ext#"
FTCONTAINS = EXT + "ftcontains"
DESCENDANT_OF = EXT + "descendantOf"
ANCESTOR_OF = EXT + "ancestorOf"
CHILD_OF = EXT + "childOf"
#: is-a function -> the Taxonomy method testing it
ISA_FUNCTIONS = {DESCENDANT_OF: "is_descendant", ANCESTOR_OF: "is_ancestor", CHILD_OF: "is_child"}
EXTENSIONS = frozenset({FTCONTAINS, *ISA_FUNCTIONS})
_NAMES = {FTCONTAINS: "ftcontains", DESCENDANT_OF: "descendantOf", ANCESTOR_OF: "ancestorOf", CHILD_OF: "childOf"}

Evaluator = Callable[[Mapping[str, Any]], Any]


class ExtensionError(InputError):
    """A call of an extension function that cannot be compiled (the compiler reports it as a FilterError)."""

    def __init__(self, message: str, construct: str) -> None:
        super().__init__(message)
        self.construct = construct


def _error(message: str, construct: str) -> ExtensionError:
    return ExtensionError(message, construct)


def fulltext_query(args: tuple) -> FtQuery:
    """The parsed expression of an ftcontains call's arguments (FilterError when it is not one)."""
    expression = args[1]
    term = expression[1] if expression[0] == "const" else None
    if not (isinstance(term, Literal) and term.datatype == XSD_STRING):
        raise _error("the second argument of ftcontains must be a string constant (the full-text expression)",
                     "ftcontains")
    try:
        return parse_fulltext(term.lexical)
    except FtSyntaxError as exc:
        raise _error(f"ftcontains: {exc}", "ftcontains") from None


def check_extension(expr: tuple) -> None:
    """Arity, and for ftcontains a well-formed constant expression, at subscribe time."""
    iri, args = expr[1], expr[2]
    name = _NAMES.get(iri)
    if name is None:
        raise _error(f"extension function {str(iri)[:80]} is not supported", "function call")
    if len(args) != 2:
        raise _error(f"{name} takes 2 arguments, got {len(args)}", name)
    if iri == FTCONTAINS:
        fulltext_query(args)


def compile_extension(expr: tuple, arguments: list[Evaluator], taxonomy: Taxonomy) -> Evaluator:
    """A closure evaluating one extension call (its arguments already compiled)."""
    iri, args = expr[1], expr[2]
    subject, other = arguments
    if iri == FTCONTAINS:
        matches = fulltext_query(args).matches
        return lambda b: matches(subject(b))
    test = getattr(taxonomy, ISA_FUNCTIONS[iri])

    def isa(b: Mapping[str, Any]) -> Any:
        cls, of = subject(b), other(b)
        if type(cls) is not IRI or type(of) is not IRI:
            raise ExprError("is-a tests need two class IRIs")
        return test(cls.value, of.value)
    return isa


# --- the bare ftcontains of the paper -----------------------------------------------------------

#: Strings, IRIs and comments of a SPARQL text: where keywords and names are not looked for.
PROTECTED = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*\'\'\'|"(?:[^"\\\n]|\\.)*"'
                        r"|'(?:[^'\\\n]|\\.)*'|<[^<>\"{}|^`\\\x00-\x20]*>|#[^\n]*", re.S)
_BARE = re.compile(r"(?<![\w.\-:?$<])ftcontains(?=\s*\()", re.I)
_REPLACEMENT = f"<{FTCONTAINS}>"


class Shifts:
    """Where the rewrite lengthened lines: maps a (line, column) of the rewritten text to the user's."""

    def __init__(self) -> None:
        #: line -> [(column in the rewritten text, column in the original)] of each rewrite, left to right
        self.by_line: dict[int, list[tuple[int, int]]] = {}

    def original(self, line: int, column: int) -> tuple[int, int]:
        mapped = column
        for rewritten, original in self.by_line.get(line, ()):
            if column < rewritten:
                break
            if column < rewritten + len(_REPLACEMENT):
                return line, original  # inside the replacement: the bare name's position
            mapped = original + len("ftcontains") + (column - rewritten - len(_REPLACEMENT))
        return line, mapped


def rewrite_bare_names(text: str) -> tuple[str, Shifts]:
    """`ftcontains(` outside strings, IRIs and comments becomes `<…#ftcontains>(`."""
    shifts = Shifts()
    out: list[str] = []
    length = 0  # characters written to `out`
    done = 0
    for protected in (*PROTECTED.finditer(text), None):
        end = protected.start() if protected is not None else len(text)
        for match in _BARE.finditer(text, done, end):
            out.append(text[done:match.start()])
            length += match.start() - done
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - text.rfind("\n", 0, match.start())
            earlier = shifts.by_line.setdefault(line, [])
            earlier.append((column + len(earlier) * (len(_REPLACEMENT) - len("ftcontains")), column))
            out.append(_REPLACEMENT)
            length += len(_REPLACEMENT)
            done = match.end()
        out.append(text[done:end])
        length += end - done
        done = end
        if protected is not None:
            out.append(protected.group())
            length += len(protected.group())
            done = protected.end()
    return "".join(out), shifts

"""Better words for a SPARQL syntax error: which name the parser tripped on.

rdflib's grammar reports a call of an unknown bare function, such as `contians(?x, "a")`,
as "Expected SelectQuery" at the start of the enclosing clause. Before showing that, the
query is scanned (outside IRIs, strings and comments) for a bare name called like a
function that SPARQL 1.1 does not define; the error then names it and, when one is close,
the built-in it was probably meant to be.
"""

from __future__ import annotations

import difflib
import re

from eventcloud.sparql.filters.extensions import PROTECTED

__all__ = ["unknown_function", "hint", "locate", "too_deep"]

#: Names SPARQL 1.1 calls with parentheses: built-in functions, aggregates, and keywords
#: followed by "(" (FILTER(…), IN (…), ORDER BY ASC(…), …); plus the bare ftcontains extension.
KNOWN = frozenset(name.lower() for name in """
    STR LANG LANGMATCHES DATATYPE BOUND IRI URI BNODE RAND ABS CEIL FLOOR ROUND CONCAT STRLEN UCASE
    LCASE ENCODE_FOR_URI CONTAINS STRSTARTS STRENDS STRBEFORE STRAFTER YEAR MONTH DAY HOURS MINUTES
    SECONDS TIMEZONE TZ NOW UUID STRUUID MD5 SHA1 SHA256 SHA384 SHA512 COALESCE IF STRLANG STRDT
    sameTerm isIRI isURI isBLANK isLITERAL isNUMERIC REGEX SUBSTR REPLACE EXISTS COUNT SUM MIN MAX AVG
    SAMPLE GROUP_CONCAT FILTER BIND VALUES IN ASC DESC HAVING BY SELECT WHERE AS OPTIONAL MINUS UNION
    GRAPH SERVICE SILENT NOT DISTINCT REDUCED CONSTRUCT DESCRIBE ASK FROM NAMED LIMIT OFFSET ORDER
    GROUP SEPARATOR UNDEF a ftcontains TRIPLE SUBJECT PREDICATE OBJECT isTRIPLE
""".split())
_CALL = re.compile(r"(?<![\w.\-:?$<@^])([A-Za-z_][A-Za-z0-9_]*)(?=\s*\()")


def unknown_function(text: str) -> str | None:
    """The first bare name called like a function that SPARQL does not know, else None."""
    done = 0
    for protected in (*PROTECTED.finditer(text), None):
        end = protected.start() if protected is not None else len(text)
        for match in _CALL.finditer(text, done, end):
            if match.group(1).lower() not in KNOWN:
                return match.group(1)
        done = protected.end() if protected is not None else end
    return None


def hint(text: str) -> str:
    """' (unknown function `x`; did you mean CONTAINS?)', or '' when no name is to blame."""
    name = unknown_function(text)
    if name is None:
        return ""
    close = difflib.get_close_matches(name.lower(), sorted(KNOWN), n=1, cutoff=0.7)
    suggestion = f"; did you mean {close[0].upper()}?" if close else "; extension functions are called by IRI"
    return f"unknown function `{name}`{suggestion}"


_STRINGS_AND_IRIS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|<[^<>\s]*>|#[^\n]*')


def too_deep(text: str) -> str:
    """Why the parser ran out of recursion: deep brackets, or (its grammar recurses once per
    triple pattern of a group) too many patterns in one group. Said in the user's terms."""
    bare = _STRINGS_AND_IRIS.sub(" ", text)
    depth = deepest = 0
    for char in bare:
        if char in "({[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")}]":
            depth -= 1
    if deepest >= 20:
        return f"the subscription is nested too deeply ({deepest} levels of brackets, more than the parser takes)"
    separators = bare.count(" .") + bare.count(";") + bare.count(",") + 1
    return (f"the subscription is too long for the parser: about {separators} triple patterns in one "
            f"group, more than it takes (50 to 80); split it into several subscriptions")


def locate(text: str, keyword: str, occurrence: int = 1) -> tuple[int | None, int | None]:
    """Line and column (1-based) of the n-th `keyword` outside strings, IRIs and comments."""
    pattern = re.compile(r"(?<![\w?$:])(?:" + keyword + r")(?![\w:])", re.I)
    masked = PROTECTED.sub(lambda m: " " * len(m.group()), text)
    for count, match in enumerate(pattern.finditer(masked), start=1):
        if count == occurrence:
            before = text[:match.start()]
            return before.count("\n") + 1, match.start() - (before.rfind("\n") + 1) + 1
    return None, None

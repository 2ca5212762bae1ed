"""REGEX and REPLACE patterns: the oracle's regex syntax translated to Python's `re`.

The oracle engine (Oxigraph) compiles SPARQL patterns with Rust's regex crate; its syntax is
a superset of XPath's for the common cases. The translation keeps its meaning: `$` matches
only at the very end unless the m flag is set, `\\p{..}` and POSIX classes are expanded, inline
flags are scoped as Rust scopes them, x mode also ignores whitespace inside classes, and what
Rust refuses (look-around, back-references, possessive quantifiers) raises RegexError.
REPLACE follows Rust's `replace_all`: `$1`, `${name}`, `$$`, and no empty match right after a match.

Patterns are validated with Python's `re` and run by the `regex` engine under a time budget
(`BoundedRegex`): the oracle's engine never backtracks, ours may, so a pattern that would run
away on some literal (`(a|a)*b`) stops after `TIME_BUDGET` seconds and that REGEX is an error
(the FILTER is false) for that value. The text is remembered, so an event binding it in many
solutions pays the budget once, and the timeouts are counted.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

import regex as _engine

from eventcloud.errors import ErrorCode, InputError

_FLAG_BITS = {"s": re.DOTALL, "m": re.MULTILINE, "i": re.IGNORECASE}
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_CATEGORY_NAMES = {
    "letter": "L", "uppercase_letter": "Lu", "lowercase_letter": "Ll", "titlecase_letter": "Lt",
    "modifier_letter": "Lm", "other_letter": "Lo", "mark": "M", "number": "N", "decimal_number": "Nd",
    "letter_number": "Nl", "other_number": "No", "punctuation": "P", "symbol": "S", "separator": "Z",
    "other": "C", "control": "Cc", "format": "Cf", "space_separator": "Zs",
}


class RegexError(InputError):
    """A pattern the oracle engine would reject (or that we cannot translate)."""

    default_code = ErrorCode.BAD_SUBSCRIPTION


@functools.lru_cache(maxsize=None)
def _category_ranges(category: str) -> str:
    """Character-class body for a Unicode general category (one- or two-letter name)."""
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        cat = unicodedata.category(chr(code))
        if cat == category or cat[0] == category:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(f"\\U{lo:08x}" + (f"-\\U{hi:08x}" if hi > lo else "") for lo, hi in ranges)


def _property(name: str) -> str:
    key = name.replace(" ", "").replace("-", "_").lower()
    category = _CATEGORY_NAMES.get(key, name if re.fullmatch(r"[A-Z][a-z]?", name) else None)
    if category is None or category in ("Cn", "Cs", "Co") or category not in _KNOWN_CATEGORIES:
        raise RegexError(f"unsupported Unicode property \\p{{{name}}}")
    return _category_ranges(category)


_KNOWN_CATEGORIES = frozenset(
    "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf".split()
)


def _escape(p: str, i: int, in_class: bool) -> tuple[str, int, bool]:
    """Translate the escape at p[i] == '\\'; returns (text, next index, is a class body)."""
    if i + 1 >= len(p):
        raise RegexError("pattern ends with a backslash")
    c = p[i + 1]
    if c in "pP":
        if p.startswith("{", i + 2):
            end = p.find("}", i + 2)
            if end < 0:
                raise RegexError("unterminated \\p{")
            name, nxt = p[i + 3:end], end + 1
        else:
            name, nxt = p[i + 2:i + 3], i + 3
        negated = c == "P" or name.startswith("^")
        body = _property(name.lstrip("^"))
        if negated and in_class:
            raise RegexError("negated Unicode classes inside [] are not supported")
        return (body if in_class else ("[^" if negated else "[") + body + "]"), nxt, in_class
    if c in "xuU":
        match = re.compile(r"\{([0-9A-Fa-f]{1,8})\}|([0-9A-Fa-f]{%d})" % {"x": 2, "u": 4, "U": 8}[c]).match(p, i + 2)
        if match is None:
            raise RegexError(f"invalid \\{c} escape")
        code = int(match.group(1) or match.group(2), 16)
        if code > sys.maxunicode:
            raise RegexError("invalid code point")
        return f"\\U{code:08x}", match.end(), False
    if c in "dDwWsS":
        return "\\" + c, i + 2, False
    if not in_class and c in "bBA":
        return "\\" + c, i + 2, False
    if not in_class and c == "z":
        return "\\Z", i + 2, False
    if c in "ntrfva":
        return "\\" + c, i + 2, False
    if c.isascii() and c.isalnum():
        raise RegexError(f"unsupported escape \\{c}")
    return "\\" + c, i + 2, False


def _class(p: str, i: int, verbose: bool) -> tuple[str, int]:
    """Translate the bracket class starting at p[i] == '['."""
    out = ["["]
    i += 1
    if p.startswith("^", i):
        out.append("^")
        i += 1
    first = True
    while True:
        if i >= len(p):
            raise RegexError("unterminated character class")
        c = p[i]
        if c == "]" and not first:
            return "".join(out) + "]", i + 1
        first = False
        if verbose and c.isspace():
            i += 1
            continue
        if c == "\\":
            text, i, _ = _escape(p, i, in_class=True)
            out.append(text)
            continue
        if c == "[":
            match = re.compile(r"\[:(\^?)([a-z]+):\]").match(p, i)
            if match is None or match.group(2) not in _POSIX or match.group(1):
                raise RegexError("nested character classes are not supported")
            out.append(_POSIX[match.group(2)])
            i = match.end()
            continue
        if p.startswith(("&&", "--", "~~"), i):
            raise RegexError("character class set operations are not supported")
        out.append("\\" + c if c in "&~|" else c)
        i += 1


_REPETITION = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


class _Scope:
    """An open group: inline flag groups to close at its end, and the x and m modes inside it."""

    __slots__ = ("pending", "verbose", "multiline")

    def __init__(self, verbose: bool, multiline: bool) -> None:
        self.pending: list[str] = []
        self.verbose = verbose
        self.multiline = multiline


def _flag_switch(letters: str, scope: _Scope) -> tuple[str, bool, bool]:
    """Inline flags `on-off`: the letters Python applies, and the new x and m modes."""
    if set(letters) - set("imsxu-") or letters.count("-") > 1:
        raise RegexError(f"unsupported inline flags {letters!r}")
    on, _, off = letters.partition("-")
    verbose = ("x" in on or scope.verbose) and "x" not in off
    multiline = ("m" in on or scope.multiline) and "m" not in off
    python = on.replace("u", "").replace("x", "") + ("-" + off.replace("u", "").replace("x", "") if off else "")
    return ("" if python.strip("-") == "" else python.rstrip("-")), verbose, multiline


#: Longest one REGEX or REPLACE evaluation may run, in seconds.
TIME_BUDGET = 0.005
_REMEMBERED = 64


class RegexTimeout(ValueError):
    """A pattern ran past its time budget on one text (a FILTER error, like any other)."""


class BoundedRegex:
    """A translated pattern, run by the `regex` engine with a time budget per evaluation."""

    __slots__ = ("pattern", "_compiled", "timeouts", "_slow")

    def __init__(self, compiled: re.Pattern[str]) -> None:
        self.pattern = compiled.pattern
        flags = compiled.flags & (re.IGNORECASE | re.DOTALL | re.MULTILINE)
        self._compiled = _engine.compile(compiled.pattern, flags | _engine.V0)
        self.timeouts = 0
        self._slow: dict[str, None] = {}  # texts it timed out on (bounded)

    def _guard(self, text: str) -> None:
        if text in self._slow:
            self.timeouts += 1
            raise RegexTimeout(f"REGEX {self.pattern!r} ran past its {TIME_BUDGET:g} s budget")

    def _timed_out(self, text: str) -> RegexTimeout:
        self.timeouts += 1
        self._slow[text] = None
        if len(self._slow) > _REMEMBERED:
            del self._slow[next(iter(self._slow))]
        return RegexTimeout(f"REGEX {self.pattern!r} ran past its {TIME_BUDGET:g} s budget")

    def search(self, text: str) -> "_engine.Match[str] | None":
        self._guard(text)
        try:
            return self._compiled.search(text, timeout=TIME_BUDGET)
        except TimeoutError:
            raise self._timed_out(text) from None

    def finditer(self, text: str) -> "list[_engine.Match[str]]":
        self._guard(text)
        try:
            return list(self._compiled.finditer(text, timeout=TIME_BUDGET))
        except TimeoutError:
            raise self._timed_out(text) from None


def translate_regex(pattern: str, flags: str = "") -> BoundedRegex:
    """Compile a SPARQL REGEX pattern with its flags (s, m, i, x, q) into a bounded pattern."""
    return BoundedRegex(_translate(pattern, flags))


def _translate(pattern: str, flags: str) -> re.Pattern[str]:
    """The Python pattern (validated by `re`) of a SPARQL REGEX pattern with its flags."""
    bits = 0
    for flag in flags:
        if flag in _FLAG_BITS:
            bits |= _FLAG_BITS[flag]
        elif flag not in "xq":
            raise RegexError(f"unknown regex flag {flag!r}")
    if "q" in flags:
        return re.compile(re.escape(pattern), bits)
    out: list[str] = []
    stack = [_Scope("x" in flags, "m" in flags)]
    p, i, quantified = pattern, 0, 0
    while i < len(p):
        c, scope = p[i], stack[-1]
        if scope.verbose and c.isspace():
            i += 1
            continue
        if scope.verbose and c == "#":
            end = p.find("\n", i)
            i = len(p) if end < 0 else end + 1
            continue
        is_quantifier = False
        if c == "\\":
            text, i, _ = _escape(p, i, in_class=False)
            out.append(text)
        elif c == "[":
            text, i = _class(p, i, scope.verbose)
            out.append(text)
        elif c == "(":
            named = _NAMED_GROUP.match(p, i)
            inline = _INLINE_FLAGS.match(p, i)
            if named:
                out.append(f"(?P<{named.group(1)}>")
                stack.append(_Scope(scope.verbose, scope.multiline))
                i = named.end()
            elif p.startswith("(?", i) and inline is None:
                raise RegexError("look-around, back-references and conditionals are not supported")
            elif inline:
                letters, verbose, multiline = _flag_switch(inline.group(1), scope)
                if inline.group(2) == ":":
                    out.append(f"(?{letters}:")
                    stack.append(_Scope(verbose, multiline))
                else:  # applies to the rest of the enclosing group, as in Rust
                    scope.verbose, scope.multiline = verbose, multiline
                    if letters:
                        out.append(f"(?{letters}:")
                        scope.pending.append(f"(?{letters}:")
                i = inline.end()
            else:
                out.append("(")
                stack.append(_Scope(scope.verbose, scope.multiline))
                i += 1
        elif c == ")":
            if len(stack) == 1:
                raise RegexError("unbalanced parenthesis")
            closed = stack.pop()
            out.append(")" * len(closed.pending) + ")")
            i += 1
        elif c == "|":
            out.append(")" * len(scope.pending) + "|" + "".join(scope.pending))
            i += 1
        elif c == "$":
            out.append("$" if scope.multiline else "\\Z")
            i += 1
        elif c in "*+?" or (c == "{" and _REPETITION.match(p, i)):
            if quantified == 1 and c == "?":
                quantified = 2  # lazy marker
                out.append("?")
                i += 1
                continue
            if quantified:
                raise RegexError("repeated quantifier")
            end = p.index("}", i) + 1 if c == "{" else i + 1
            out.append(p[i:end])
            i = end
            is_quantifier = True
        else:
            out.append("\\" + c if c in "{}" else c)
            i += 1
        quantified = 1 if is_quantifier else 0
    if len(stack) != 1:
        raise RegexError("unbalanced parenthesis")
    out.append(")" * len(stack[0].pending))
    try:
        return re.compile("".join(out), bits)
    except (re.error, OverflowError, RecursionError) as exc:
        raise RegexError(str(exc)) from None


_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z]*(?:-[a-zA-Z]*)?)([:)])")


_GROUP_REF = re.compile(r"\$(?:\$|\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def replace_all(regex: BoundedRegex, text: str, replacement: str) -> str:
    """Rust regex `replace_all`: `$n`/`${name}` references, `$$`, no empty match right after a match."""
    out, last, previous_end = [], 0, -1
    for match in regex.finditer(text):
        start, end = match.span()
        if start == end and start == previous_end:
            continue
        out.append(text[last:start])
        out.append(_GROUP_REF.sub(lambda ref: _group(match, ref), replacement))
        last = previous_end = end
    out.append(text[last:])
    return "".join(out)


def _group(match: "_engine.Match[str]", ref: re.Match[str]) -> str:
    name = ref.group(1) or ref.group(2)
    if name is None:
        return "$"
    try:
        value = match.group(int(name) if name.isdigit() else name)
    except IndexError:
        return ""
    return value or ""

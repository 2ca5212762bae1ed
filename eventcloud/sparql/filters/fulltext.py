"""Full-text expressions of `ftcontains(?v, "expression")` (after RTF): tokens, grammar, evaluation.

A text is cut into *words*: maximal runs of Unicode letters, combining marks and digits
(`[\\p{L}\\p{M}\\p{N}]+`), each compared after `str.casefold()` (accents are kept: "café" is not
"cafe"). Everything else separates words. The expression language:

    expression := or
    or         := and ("OR" and)*
    and        := not ("AND"? not)*              juxtaposition means AND
    not        := "NOT" not | near
    near       := primary ("NEAR/" n primary)*   each operand a word, a prefix or a phrase
    primary    := word | word"*" | '"' words '"' | "(" or ")"

`AND`, `OR`, `NOT` and `NEAR/n` are operators only in capitals (`and` is a word). A phrase holds
consecutive words in order (a word in it may end with `*`); `a NEAR/n b` holds when an occurrence
of b starts after an occurrence of a ends, with at most n words between them (NEAR/0: adjacent);
a chain `a NEAR/1 b NEAR/2 c` needs one occurrence of each, in that order, each gap within its
bound. A malformed expression raises `FtSyntaxError` with its 1-based position.

Only the lexical form of a string literal (simple, xsd:string, language-tagged) is searched;
any other value is an error (the FILTER is false), as for SPARQL's string functions.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from typing import Union

import regex

from eventcloud.errors import InputError
from eventcloud.sparql.filters.values import ExprError, LangStr

__all__ = [
    "Word", "Phrase", "Near", "And", "Or", "Not", "Node", "Atom", "FtQuery", "FtSyntaxError", "Tokens",
    "tokenize", "parse_fulltext", "text_of", "MAX_LENGTH",
]

#: Longest expression accepted, deepest nesting of parentheses, largest NEAR distance.
MAX_LENGTH = 2000
MAX_DEPTH = 32
MAX_DISTANCE = 10_000

_WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_PHRASE_WORD = regex.compile(r"([\p{L}\p{M}\p{N}]+)(\*?)")
_LEX = regex.compile(r"\s*(?P<lexeme>(?P<word>[\p{L}\p{M}\p{N}]+)(?P<star>\*)?(?:/(?P<n>[0-9]+))?"
                     r"|(?P<quote>\")|(?P<open>\()|(?P<close>\))|(?P<other>\S))")


class FtSyntaxError(InputError):
    """A malformed full-text expression; `position` is the 1-based character where it goes wrong."""

    def __init__(self, reason: str, expression: str, position: int) -> None:
        self.reason = reason
        self.expression = expression
        self.position = position
        super().__init__(f"malformed full-text expression {expression!r}: {reason} at position {position}")

    def __reduce__(self) -> tuple:
        return (type(self), (self.reason, self.expression, self.position))


# --- the expression tree ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Word:
    """A word (casefolded), or a word prefix when `prefix` (written `olymp*`)."""

    text: str
    prefix: bool = False

    @property
    def key(self) -> str:
        """Its key in a word index: the word, or the prefix followed by `*` (no word holds a `*`)."""
        return self.text + "*" if self.prefix else self.text

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class Phrase:
    """Two or more words, consecutive and in this order."""

    words: tuple[Word, ...]

    def __str__(self) -> str:
        return '"' + " ".join(map(str, self.words)) + '"'


@dataclass(frozen=True, slots=True)
class Near:
    """`parts[0] NEAR/gaps[0] parts[1] …`: each part after the previous one, within its gap."""

    parts: tuple[Union[Word, Phrase], ...]
    gaps: tuple[int, ...]

    def __str__(self) -> str:
        text = str(self.parts[0])
        for gap, part in zip(self.gaps, self.parts[1:]):
            text += f" NEAR/{gap} {part}"
        return text


@dataclass(frozen=True, slots=True)
class And:
    items: tuple["Node", ...]

    def __str__(self) -> str:
        return "(" + " AND ".join(map(str, self.items)) + ")"


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple["Node", ...]

    def __str__(self) -> str:
        return "(" + " OR ".join(map(str, self.items)) + ")"


@dataclass(frozen=True, slots=True)
class Not:
    item: "Node"

    def __str__(self) -> str:
        return f"NOT {self.item}"


Atom = Union[Word, Phrase, Near]
Node = Union[Word, Phrase, Near, And, Or, Not]


# --- tokens of a text --------------------------------------------------------------------------

class Tokens:
    """The words of one text, in order, with the positions of each distinct word."""

    __slots__ = ("words", "positions", "_prefixed")

    def __init__(self, text: str) -> None:
        self.words: tuple[str, ...] = tuple(w.casefold() for w in _WORD.findall(text))
        positions: dict[str, list[int]] = {}
        for i, word in enumerate(self.words):
            found = positions.get(word)
            if found is None:
                positions[word] = [i]
            else:
                found.append(i)
        self.positions = positions
        self._prefixed: dict[str, list[int]] = {}

    def where(self, word: Word) -> list[int]:
        """Sorted positions where `word` occurs (for a prefix: where a word starting with it occurs)."""
        if not word.prefix:
            return self.positions.get(word.text, [])
        known = self._prefixed.get(word.text)
        if known is None:
            stem = word.text
            known = sorted(i for w, at in self.positions.items() if w.startswith(stem) for i in at)
            self._prefixed[word.text] = known
        return known

    def fits(self, word: Word, i: int) -> bool:
        w = self.words[i]
        return w.startswith(word.text) if word.prefix else w == word.text


@lru_cache(maxsize=4096)
def tokenize(text: str) -> Tokens:
    """The tokens of a text; memoised (a pure function), so a literal is cut into words once
    however many subscriptions, tables and FILTERs look at it."""
    return Tokens(text)


def text_of(value: object) -> str:
    """The searchable text of a FILTER value: a string literal's lexical form, else an error."""
    if type(value) is str:
        return value  # type: ignore[return-value]
    if type(value) is LangStr:
        return value.value  # type: ignore[attr-defined]
    raise ExprError("ftcontains needs a string literal")


# --- evaluation ----------------------------------------------------------------------------------

def spans(atom: Atom, tokens: Tokens) -> list[tuple[int, int]]:
    """Every occurrence of an atom as (first word, last word) positions, by increasing end."""
    if type(atom) is Word:
        return [(i, i) for i in tokens.where(atom)]
    if type(atom) is Phrase:
        first, rest = atom.words[0], atom.words[1:]
        last = len(tokens.words) - len(rest)
        return [(i, i + len(rest)) for i in tokens.where(first)
                if i < last and all(tokens.fits(w, i + 1 + k) for k, w in enumerate(rest))]
    ends = sorted(end for _, end in spans(atom.parts[0], tokens))  # type: ignore[union-attr]
    for gap, part in zip(atom.gaps, atom.parts[1:]):  # type: ignore[union-attr]
        reached = []
        for start, end in spans(part, tokens):
            # some previous end e with e < start <= e + gap + 1
            k = bisect_left(ends, start - gap - 1)
            if k < len(ends) and ends[k] < start:
                reached.append(end)
        if not reached:
            return []
        ends = sorted(reached)
    return [(e, e) for e in ends]  # only the ends matter to a caller


def holds(node: Node, tokens: Tokens) -> bool:
    """Does the expression hold on the text's tokens?"""
    kind = type(node)
    if kind is Word:
        return bool(tokens.where(node))  # type: ignore[arg-type]
    if kind is Phrase or kind is Near:
        return bool(spans(node, tokens))  # type: ignore[arg-type]
    if kind is And:
        return all(holds(item, tokens) for item in node.items)  # type: ignore[union-attr]
    if kind is Or:
        return any(holds(item, tokens) for item in node.items)  # type: ignore[union-attr]
    return not holds(node.item, tokens)  # type: ignore[union-attr]


@dataclass(frozen=True, slots=True)
class FtQuery:
    """A parsed expression: `matches(value)` is the value of `ftcontains(value, source)`."""

    source: str
    root: Node

    def matches(self, value: object) -> bool:
        return holds(self.root, tokenize(text_of(value)))

    def on_text(self, text: str) -> bool:
        return holds(self.root, tokenize(text))


# --- parsing ---------------------------------------------------------------------------------

class _Lexeme:
    __slots__ = ("kind", "text", "position", "star", "distance")

    def __init__(self, kind: str, text: str, position: int, star: bool = False, distance: int = 0) -> None:
        self.kind = kind          # word, AND, OR, NOT, NEAR, phrase, (, ), end
        self.text = text
        self.position = position  # 1-based
        self.star = star
        self.distance = distance


def _lex(source: str) -> list[_Lexeme]:
    out: list[_Lexeme] = []
    at = 0
    while True:
        m = _LEX.match(source, at)
        if m is None:  # only blanks are left
            out.append(_Lexeme("end", "", len(source) + 1))
            return out
        start = m.start("lexeme") + 1
        at = m.end()
        if m.group("word") is not None:
            word, star, n = m.group("word"), m.group("star") is not None, m.group("n")
            if star and _WORD.match(source, at):
                raise FtSyntaxError("a '*' must end a word", source, m.start("star") + 1)
            if n is not None:
                if word != "NEAR" or star:
                    raise FtSyntaxError("'/' is only allowed in NEAR/n", source, m.start("n"))
                distance = int(n)
                if distance > MAX_DISTANCE:
                    raise FtSyntaxError(f"NEAR distance over {MAX_DISTANCE}", source, m.start("n") + 1)
                out.append(_Lexeme("NEAR", word, start, distance=distance))
            elif word in ("AND", "OR", "NOT") and not star:
                out.append(_Lexeme(word, word, start))
            elif word == "NEAR" and not star:
                raise FtSyntaxError("NEAR needs a distance, as in NEAR/3", source, start)
            else:
                out.append(_Lexeme("word", word, start, star=star))
        elif m.group("quote") is not None:
            close = source.find('"', at)
            if close < 0:
                raise FtSyntaxError("unterminated phrase", source, start)
            out.append(_Lexeme("phrase", source[at:close], start))
            at = close + 1
        elif m.group("open") is not None:
            out.append(_Lexeme("(", "(", start))
        elif m.group("close") is not None:
            out.append(_Lexeme(")", ")", start))
        else:
            char = m.group("other")
            what = "a '*' must end a word" if char == "*" else f"unexpected character {char!r}"
            raise FtSyntaxError(what, source, start)


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.lexemes = _lex(source)
        self.at = 0
        self.depth = 0

    def peek(self) -> _Lexeme:
        return self.lexemes[self.at]

    def take(self) -> _Lexeme:
        lexeme = self.lexemes[self.at]
        self.at += 1
        return lexeme

    def fail(self, reason: str, lexeme: _Lexeme) -> FtSyntaxError:
        return FtSyntaxError(reason, self.source, lexeme.position)

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise self.fail("empty expression", self.peek())
        node = self.or_()
        extra = self.peek()
        if extra.kind == ")":
            raise self.fail("')' without '('", extra)
        if extra.kind != "end":  # pragma: no cover - every other lexeme starts an operand
            raise self.fail(f"unexpected {extra.text!r}", extra)
        return node

    def or_(self) -> Node:
        items = [self.and_()]
        while self.peek().kind == "OR":
            self.take()
            items.append(self.and_())
        return items[0] if len(items) == 1 else Or(_flatten(Or, items))

    def and_(self) -> Node:
        items = [self.not_()]
        while True:
            kind = self.peek().kind
            if kind == "AND":
                self.take()
            elif kind not in ("word", "phrase", "(", "NOT"):
                break
            items.append(self.not_())
        return items[0] if len(items) == 1 else And(_flatten(And, items))

    def not_(self) -> Node:
        if self.peek().kind == "NOT":
            self.take()
            return Not(self.not_())
        return self.near()

    def near(self) -> Node:
        first_lexeme = self.peek()
        first = self.primary()
        if self.peek().kind != "NEAR":
            return first
        parts, gaps = [self.operand(first, first_lexeme)], []
        while self.peek().kind == "NEAR":
            gaps.append(self.take().distance)
            lexeme = self.peek()
            parts.append(self.operand(self.primary(), lexeme))
        return Near(tuple(parts), tuple(gaps))

    def operand(self, node: Node, lexeme: _Lexeme) -> Union[Word, Phrase]:
        if type(node) not in (Word, Phrase):
            raise self.fail("NEAR/n needs a word, a prefix or a phrase on each side", lexeme)
        return node  # type: ignore[return-value]

    def primary(self) -> Node:
        lexeme = self.take()
        if lexeme.kind == "word":
            return Word(lexeme.text.casefold(), lexeme.star)
        if lexeme.kind == "phrase":
            words = tuple(Word(w.casefold(), bool(star)) for w, star in _PHRASE_WORD.findall(lexeme.text))
            if not words:
                raise self.fail("a phrase needs at least one word", lexeme)
            return words[0] if len(words) == 1 else Phrase(words)
        if lexeme.kind == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"parentheses nested deeper than {MAX_DEPTH}", lexeme)
            if self.peek().kind == ")":
                raise self.fail("empty parentheses", self.peek())
            node = self.or_()
            if self.peek().kind != ")":
                raise self.fail("missing ')' for this '('", lexeme)
            self.take()
            self.depth -= 1
            return node
        if lexeme.kind == "end":
            raise self.fail("the expression ends where a word, a phrase or '(' is expected", lexeme)
        raise self.fail(f"a word, a phrase or '(' is expected, not {lexeme.text!r}", lexeme)


def _flatten(kind: type, items: list[Node]) -> tuple[Node, ...]:
    flat: list[Node] = []
    for item in items:
        flat.extend(item.items if type(item) is kind else (item,))  # type: ignore[union-attr]
    return tuple(flat)


def parse_fulltext(source: str) -> FtQuery:
    """Parse an expression; raise FtSyntaxError (with the position) when it is malformed."""
    if len(source) > MAX_LENGTH:
        raise FtSyntaxError(f"longer than {MAX_LENGTH} characters", source[:40] + "…", MAX_LENGTH + 1)
    return FtQuery(source, _Parser(source).parse())

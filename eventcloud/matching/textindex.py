"""RTF's trie of full-text constraints, shared by subscriptions: which `ftcontains` conjuncts can hold on a literal?

An expression is turned into alternatives (its disjunctive normal form: RTF handles OR by
splitting a query into several): each alternative is a conjunction of positive atoms (words,
prefixes, phrases, NEAR chains) and negated ones. The keys of an alternative are the words and
prefixes (`olymp*`) its positive atoms need, sorted; it is stored at the end of that path in a
word trie. For a literal, the trie is walked only along keys the literal has (its distinct
words, and the stored prefixes some word starts with), so the alternatives reached are exactly
those whose every key occurs. Phrase order, NEAR distances and negations are checked after the
walk, on the literal's tokens. An alternative without positive atoms (`NOT spam`) cannot be
reached by any word: it is kept aside and checked on every literal.

Two layouts (docs/matching.md compares them):
* RTFm (`SharedText` absent): one trie per table, i.e. per pattern node and variable position
  (RTF's "per structural prefix"); the structural index decides first which tries to walk.
* RTFs (`SharedText`): one trie for every text constraint of the index, walked once per literal
  and event; each table then reads its part of that walk.

The answer is exact: `TextTable.split` returns the entries whose constraint holds on the value
(the FILTER conjunct `ftcontains(?v, …)` is true), and as undecided only those whose expression
has too many alternatives to index (over `MAX_ALTERNATIVES`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from eventcloud.sparql.filters.fulltext import And, Atom, Near, Node, Not, Or, Phrase, Tokens, Word, holds, spans, tokenize
from eventcloud.sparql.filters.values import LangStr

__all__ = ["MAX_ALTERNATIVES", "Alternative", "alternatives", "WordTrie", "SharedText", "TextTable"]

#: Past this many alternatives an expression is not put in the trie (its entries are undecided).
MAX_ALTERNATIVES = 64

Check = Callable[[Tokens], bool]


class Alternative:
    """One conjunction: the keys its positive atoms need, and what to check once they all occur."""

    __slots__ = ("keys", "check")

    def __init__(self, positive: list[Atom], negative: list[Atom]) -> None:
        keys = {word.key for atom in positive for word in _words(atom)}
        self.keys: tuple[str, ...] = tuple(sorted(keys))
        complex_ = tuple(a for a in positive if type(a) is not Word)
        self.check: Check | None = _checker(complex_, tuple(negative)) if complex_ or negative else None


def _words(atom: Atom) -> Iterable[Word]:
    if type(atom) is Word:
        return (atom,)  # type: ignore[return-value]
    if type(atom) is Phrase:
        return atom.words  # type: ignore[union-attr]
    return (word for part in atom.parts for word in _words(part))  # type: ignore[union-attr]


def _checker(positive: tuple[Atom, ...], negative: tuple[Atom, ...]) -> Check:
    def check(tokens: Tokens) -> bool:
        for atom in positive:
            if not spans(atom, tokens):
                return False
        for atom in negative:
            if holds(atom, tokens):
                return False
        return True
    return check


def alternatives(root: Node, cap: int = MAX_ALTERNATIVES) -> list[Alternative] | None:
    """The expression as alternatives (None when there would be more than `cap`)."""
    try:
        conjunctions = _dnf(root, False, cap)
    except _TooMany:
        return None
    return [Alternative(positive, negative) for positive, negative in conjunctions]


class _TooMany(Exception):
    pass


def _dnf(node: Node, negated: bool, cap: int) -> list[tuple[list[Atom], list[Atom]]]:
    kind = type(node)
    if kind is Not:
        return _dnf(node.item, not negated, cap)  # type: ignore[union-attr]
    if kind is And or kind is Or:
        parts = [_dnf(item, negated, cap) for item in node.items]  # type: ignore[union-attr]
        if (kind is Or) != negated:  # a disjunction (De Morgan for a negated conjunction)
            result = [conj for part in parts for conj in part]
        else:
            result = [([], [])]
            for part in parts:
                result = [(p1 + p2, n1 + n2) for p1, n1 in result for p2, n2 in part]
                if len(result) > cap:
                    raise _TooMany
        if len(result) > cap:
            raise _TooMany
        return result
    return [([], [node])] if negated else [([node], [])]  # type: ignore[list-item]


# --- the word trie ---------------------------------------------------------------------------

class _TrieNode:
    __slots__ = ("children", "leaves")

    def __init__(self) -> None:
        self.children: dict[str, _TrieNode] = {}
        self.leaves: list[tuple] = []


class WordTrie:
    """Leaves stored along sorted key paths; `walk` yields the leaves whose whole path occurs."""

    __slots__ = ("root", "prefixes", "lengths", "size")

    def __init__(self) -> None:
        self.root = _TrieNode()
        self.prefixes: dict[str, int] = {}  # stored prefix stems (key without '*') -> uses
        self.lengths: dict[int, int] = {}   # their lengths -> uses
        self.size = 0

    def add(self, keys: tuple[str, ...], leaf: tuple) -> None:
        node = self.root
        for key in keys:
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _TrieNode()
            node = child
            if key[-1] == "*":
                self._count(key[:-1], 1)
        node.leaves.append(leaf)
        self.size += 1

    def _count(self, stem: str, delta: int) -> None:
        for table, key in ((self.prefixes, stem), (self.lengths, len(stem))):
            uses = table.get(key, 0) + delta  # type: ignore[attr-defined]
            if uses:
                table[key] = uses  # type: ignore[index]
            else:
                del table[key]  # type: ignore[attr-defined]

    def remove(self, keys: tuple[str, ...], item: Any, owner: Any = None) -> int:
        """Drop the leaves at `keys` of `item` (and, in a shared trie, of `owner`); how many were dropped."""
        path = [self.root]
        for key in keys:
            child = path[-1].children.get(key)
            if child is None:
                return 0
            path.append(child)
        node = path[-1]
        kept = [leaf for leaf in node.leaves if leaf[-1] is not item or (owner is not None and leaf[0] is not owner)]
        dropped = len(node.leaves) - len(kept)
        if not dropped:
            return 0
        node.leaves = kept
        self.size -= dropped
        for key in keys:
            if key[-1] == "*":
                self._count(key[:-1], -dropped)
        for depth in range(len(keys), 0, -1):  # prune empty nodes
            node = path[depth]
            if node.leaves or node.children:
                break
            del path[depth - 1].children[keys[depth - 1]]
        return dropped

    def present(self, tokens: Tokens) -> Any:
        """The keys a literal has: its words, and the stored prefixes one of its words starts with."""
        words = tokens.positions
        if not self.prefixes:
            return words
        found = set(words)
        stems = self.prefixes
        lengths = self.lengths
        for word in words:
            for end in lengths:
                if end <= len(word) and word[:end] in stems:
                    found.add(word[:end] + "*")
        return found

    def walk(self, present: Any) -> list[tuple]:
        """Every leaf whose path's keys are all in `present`."""
        out: list[tuple] = []
        todo = [self.root]
        count = len(present)
        while todo:
            children = todo.pop().children
            if len(children) <= count:
                for key, child in children.items():
                    if key in present:
                        if child.leaves:
                            out.extend(child.leaves)
                        if child.children:
                            todo.append(child)
            else:
                for key in present:
                    child = children.get(key)
                    if child is not None:
                        if child.leaves:
                            out.extend(child.leaves)
                        if child.children:
                            todo.append(child)
        return out


class SharedText:
    """RTFs: one trie for every text table of an index, walked once per literal and event."""

    __slots__ = ("trie", "_memo")

    def __init__(self) -> None:
        self.trie = WordTrie()
        self._memo: dict[str, dict[Any, list[tuple]]] = {}

    def begin(self) -> None:
        """A new event: forget the walks of the last one."""
        self._memo.clear()

    def reached(self, text: str, tokens: Tokens) -> dict[Any, list[tuple]]:
        known = self._memo.get(text)
        if known is None:
            known = {}
            for leaf in self.trie.walk(self.trie.present(tokens)):
                found = known.get(leaf[0])
                if found is None:
                    known[leaf[0]] = [leaf]
                else:
                    found.append(leaf)
            if len(self._memo) > 256:
                self._memo.clear()
            self._memo[text] = known
        return known


class TextTable:
    """The entries whose FILTER has the conjunct `ftcontains(?v, expression)` on one variable position."""

    __slots__ = ("op", "shared", "trie", "negative", "unindexed", "size")

    def __init__(self, shared: SharedText | None = None) -> None:
        self.op = "ft"
        self.shared = shared
        self.trie = shared.trie if shared is not None else WordTrie()
        self.negative: list[tuple[Check, Any]] = []   # alternatives without a positive atom
        self.unindexed: dict[Any, None] = {}          # expressions with too many alternatives
        self.size = 0

    def add(self, constraint: Any, item: Any) -> None:
        alts = alternatives(constraint.value.root)
        if alts is None:
            self.unindexed[item] = None
        else:
            for alt in alts:
                if not alt.keys:
                    self.negative.append((alt.check, item))  # type: ignore[arg-type]
                elif self.shared is not None:
                    self.trie.add(alt.keys, (self, alt.check, item))
                else:
                    self.trie.add(alt.keys, (alt.check, item))
        self.size += 1

    def remove(self, constraint: Any, item: Any) -> bool:
        found = self.unindexed.pop(item, False) is None
        alts = alternatives(constraint.value.root) or []
        for keys in dict.fromkeys(alt.keys for alt in alts if alt.keys):
            found = bool(self.trie.remove(keys, item, self if self.shared is not None else None)) or found
        kept = [pair for pair in self.negative if pair[1] is not item]
        found = found or len(kept) < len(self.negative)
        self.negative = kept
        if found:
            self.size -= 1
        return found

    def split(self, value: Any, probed: Any = None) -> tuple[list[Any], list[Any]]:
        """(entries whose constraint holds on `value`, entries it cannot decide)."""
        kind = type(value)
        if kind is str:
            text = value
        elif kind is LangStr:
            text = value.value
        else:  # not a string literal: ftcontains is an error, the FILTER false
            return [], []
        tokens = tokenize(text)
        if self.shared is not None:
            leaves = self.shared.reached(text, tokens).get(self, ())
            found = {leaf[2]: None for leaf in leaves if leaf[1] is None or leaf[1](tokens)}
        else:
            leaves = self.trie.walk(self.trie.present(tokens))
            found = {leaf[1]: None for leaf in leaves if leaf[0] is None or leaf[0](tokens)}
        for check, item in self.negative:
            if item not in found and check(tokens):
                found[item] = None
        return list(found), list(self.unindexed)

    def select(self, value: Any, probed: Any = None) -> list[Any]:
        exact, maybe = self.split(value, probed)
        return exact + maybe if maybe else exact

    def entries(self) -> list[Any]:
        """Every entry of the table (for a caller that stops pruning)."""
        found: dict[Any, None] = dict.fromkeys(item for _, item in self.negative)
        found.update(self.unindexed)
        todo = [self.trie.root]
        while todo:
            node = todo.pop()
            for leaf in node.leaves:
                if self.shared is None or leaf[0] is self:
                    found[leaf[-1]] = None
            todo.extend(node.children.values())
        return list(found)

    def __len__(self) -> int:
        return self.size

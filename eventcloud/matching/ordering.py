"""The order residual predicates are evaluated in: naive, and Liu et al.'s Sequential and Sub-Order.

After the shared index has found which subscriptions could match an event, what is left of
some of them is a set of *predicates* whose evaluation costs something (a FILTER conjunct that
calls a registered operator, with its arguments bound). A subscription (an *owner*) matches
iff one of its *clauses* (one per distinct binding of the variables its predicates read) has
every predicate true. A predicate is identified by a hashable key, shared by every clause that
contains it, and evaluated at most once per event.

A `ResidualPlan` is sans-I/O: `next()` names the next predicate to evaluate, the caller
evaluates it however it must (off the event loop, under a budget) and says `record(key, value)`;
`matched()` lists the owners decided true. The three orders (`ORDERS`):

* ``naive`` — the paper's baseline: owners one by one, each clause's predicates in their
  written order until one is false; a result already known is reused only when the walk
  reaches it (nothing is decided early by a predicate shared with another owner).
* ``sequential`` — Algorithm 1 (a d-approximation; with unequal costs d·Cmax/Cmin): pick an
  undecided owner, evaluate its clause's unknown predicates; after every evaluation all
  clauses containing that predicate are updated at once (false kills them, an owner with no
  clause left is decided false without evaluating anything of its own).
* ``suborder`` — the linked-chains heuristic: each clause is a chain of its predicates sorted by
  rank cost/(1-p) (ascending selectivity when costs are equal), and the chains are ordered by
  the paper's pairwise cost difference over their shared nodes,
  C1 - C2 = Σ_links (1 - p)(P2·C'1 - P1·C'2), with P the probability of reaching the shared
  node and C' the expected cost of the nodes above it (costs multiply in: the cost-aware
  extension). Up to GREEDY_LIMIT chains the order is the paper's greedy path over the pairwise
  differences (Kruskal-like: cheapest edge first, no vertex of degree three, no cycle); past it,
  chains are sorted by their summed P/C' ratios of shared nodes (the same criterion, one chain at
  a time) so the work stays linear in the number of predicate occurrences.

`estimate(key) -> (cost, selectivity)` gives the statistics (eventcloud.matching.statistics).
Owners may name a *parent* (a subscription that contains them, eventcloud.matching.containment):
once a parent is decided false its descendants are false with nothing evaluated (all orders but
naive); parents are always walked before their children.

`merge(members)` adds the *merger* of owners often matched together (as RSS filtering on a
cluster merges subscriptions): a synthetic owner
whose one clause is the predicates every clause of every member shares, made the parent of
the members that have none; it is never reported as matched. (Measured in
experiments/operators_bench.py: it does not pay here, see docs/matching.md.)
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Iterator

__all__ = ["ORDERS", "NAIVE", "SEQUENTIAL", "SUBORDER", "ResidualPlan", "GREEDY_LIMIT"]

NAIVE, SEQUENTIAL, SUBORDER = "naive", "sequential", "suborder"
ORDERS = (NAIVE, SEQUENTIAL, SUBORDER)
#: Chains ordered by the exact pairwise greedy up to this many; past it, by the ratio sort.
GREEDY_LIMIT = 48

Estimate = Callable[[Hashable], tuple[float, float]]


class _Pred:
    __slots__ = ("key", "value", "clauses", "cost", "p")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.value: bool | None = None
        self.clauses: list[_Clause] = []
        self.cost = 1.0
        self.p = 0.5


class _Clause:
    __slots__ = ("owner", "preds", "left", "dead")

    def __init__(self, owner: "_Owner", preds: list[_Pred]) -> None:
        self.owner = owner
        self.preds = preds
        self.left = len(preds)
        self.dead = False


class _Owner:
    __slots__ = ("ident", "seq", "clauses", "alive", "state", "parent", "children", "depth", "synthetic")

    def __init__(self, ident: Any, seq: int) -> None:
        self.ident = ident
        self.seq = seq
        self.clauses: list[_Clause] = []
        self.alive = 0
        self.state: bool | None = None
        self.parent: _Owner | None = None
        self.children: list[_Owner] = []
        self.depth = 0
        self.synthetic = False


class ResidualPlan:
    """The residual predicates of one event's candidate owners, and the order to evaluate them in."""

    def __init__(self, order: str = SUBORDER, estimate: Estimate | None = None) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown evaluation order {order!r}: use one of {', '.join(ORDERS)}")
        self.order = order
        self.estimate = estimate or (lambda key: (1.0, 0.5))
        self._preds: dict[Hashable, _Pred] = {}
        self._owners: dict[Any, _Owner] = {}
        self._driver: Iterator[_Pred] | None = None
        self.evaluations = 0
        self.cost = 0.0          # declared/estimated cost of the evaluations made
        self.pruned = 0          # owners decided false through a parent, nothing of their own evaluated

    # --- building ------------------------------------------------------------------------------

    def add(self, ident: Any, seq: int, clauses: Iterable[Iterable[Hashable]], parent: Any = None) -> None:
        """An owner and its clauses (each a collection of predicate keys); an owner with no clause
        is decided false. `parent`: an owner added before that contains this one."""
        if self._driver is not None:
            raise RuntimeError("the plan has started: add every owner first")
        owner = self._owners[ident] = _Owner(ident, seq)
        for keys in clauses:
            preds = []
            for key in dict.fromkeys(keys):
                pred = self._preds.get(key)
                if pred is None:
                    pred = self._preds[key] = _Pred(key)
                preds.append(pred)
            clause = _Clause(owner, preds)
            owner.clauses.append(clause)
            for pred in preds:
                pred.clauses.append(clause)
            if not preds:
                owner.state = True
        owner.alive = len(owner.clauses)
        if owner.state is None and not owner.clauses:
            owner.state = False
        if parent is not None and parent in self._owners:
            owner.parent = self._owners[parent]
            owner.parent.children.append(owner)
            owner.depth = owner.parent.depth + 1

    def merge(self, ident: Any, members: Iterable[Any]) -> bool:
        """A merger of `members` (owners already added); False when they share no predicate."""
        owners = [self._owners[m] for m in members if m in self._owners]
        owners = [o for o in owners if o.parent is None and o.state is None and o.clauses]
        if len(owners) < 2:
            return False
        common = None
        for owner in owners:
            for clause in owner.clauses:
                keys = {id(p) for p in clause.preds}
                common = keys if common is None else common & keys
        if not common:
            return False
        preds = [p for p in owners[0].clauses[0].preds if id(p) in common]
        self.add(ident, -1, [[p.key for p in preds]])
        merger = self._owners[ident]
        merger.synthetic = True
        for owner in owners:
            owner.parent = merger
            owner.depth = 1
            merger.children.append(owner)
        return True

    def __len__(self) -> int:
        return sum(1 for o in self._owners.values() if not o.synthetic)

    # --- running -------------------------------------------------------------------------------

    def next(self) -> Hashable | None:
        """The key of the next predicate to evaluate, or None when every owner is decided."""
        if self._driver is None:
            for pred in self._preds.values():
                pred.cost, pred.p = self.estimate(pred.key)
            self._driver = {NAIVE: self._naive, SEQUENTIAL: self._sequential, SUBORDER: self._suborder}[self.order]()
        pred = next(self._driver, None)
        if pred is None:
            return None
        self.evaluations += 1
        self.cost += pred.cost
        return pred.key

    def record(self, key: Hashable, value: bool) -> None:
        """The value of a predicate `next()` named; every clause containing it is updated."""
        pred = self._preds[key]
        pred.value = bool(value)
        for clause in pred.clauses:
            owner = clause.owner
            if clause.dead or owner.state is not None:
                continue
            if not value:
                clause.dead = True
                owner.alive -= 1
                if owner.alive == 0:
                    self._decide(owner, False)
            else:
                clause.left -= 1
                if clause.left == 0:
                    self._decide(owner, True)

    def matched(self) -> list[Any]:
        """Owners decided true, by `seq` (call once `next()` returned None)."""
        if self.order == NAIVE:
            won = [o for o in self._owners.values() if any(all(p.value for p in c.preds) for c in o.clauses)]
        else:
            won = [o for o in self._owners.values() if o.state]
        won = [o for o in won if not o.synthetic]
        return [o.ident for o in sorted(won, key=lambda o: o.seq)]

    def values(self) -> Iterator[tuple[Hashable, bool]]:
        """Every predicate evaluated, with its value (what online statistics learn from)."""
        return ((p.key, p.value) for p in self._preds.values() if p.value is not None)

    def _decide(self, owner: _Owner, value: bool) -> None:
        owner.state = value
        if not value:
            for child in owner.children:
                if child.state is None:
                    self.pruned += 1
                    self._decide(child, False)

    def _walk_order(self) -> list[_Owner]:
        return sorted(self._owners.values(), key=lambda o: (o.depth, o.seq))

    # --- the three orders ----------------------------------------------------------------------

    def _naive(self) -> Iterator[_Pred]:
        for owner in sorted(self._owners.values(), key=lambda o: o.seq):
            for clause in owner.clauses:
                for pred in clause.preds:
                    if pred.value is None:
                        yield pred
                    if not pred.value:
                        break
                else:
                    break  # this clause holds: the owner matches

    def _sequential(self) -> Iterator[_Pred]:
        for owner in self._walk_order():
            for clause in owner.clauses:
                if owner.state is not None:
                    break
                for pred in clause.preds:
                    if clause.dead or owner.state is not None:
                        break
                    if pred.value is None:
                        yield pred

    def _suborder(self) -> Iterator[_Pred]:
        chains = [c for o in self._owners.values() if o.state is None for c in o.clauses]
        for clause in chains:
            clause.preds.sort(key=_rank)
        by_depth: dict[int, list[_Clause]] = {}
        for clause in chains:
            by_depth.setdefault(clause.owner.depth, []).append(clause)
        for depth in sorted(by_depth):
            for clause in _order_chains(by_depth[depth]):
                owner = clause.owner
                for pred in clause.preds:
                    if clause.dead or owner.state is not None:
                        break
                    if pred.value is None:
                        yield pred


def _rank(pred: _Pred) -> float:
    """A chain's node order: cost / (1 - p) ascending (optimal for one conjunctive chain)."""
    return pred.cost / max(1e-9, 1.0 - pred.p)


def _profile(clause: _Clause) -> list[tuple[_Pred, float, float]]:
    """(node, P = probability of reaching it, C' = expected cost of the nodes above it) down the chain."""
    out = []
    reach, above = 1.0, 0.0
    for pred in clause.preds:
        out.append((pred, reach, above))
        above += reach * pred.cost
        reach *= pred.p
    return out


def _order_chains(chains: list[_Clause]) -> list[_Clause]:
    profiles = {id(c): _profile(c) for c in chains}
    live = {id(c) for c in chains}
    users: dict[int, int] = {}
    for clause in chains:
        for pred in clause.preds:
            users[id(pred)] = users.get(id(pred), 0) + 1
    shared = [c for c in chains if any(users[id(p)] > 1 for p in c.preds)]
    alone = [c for c in chains if all(users[id(p)] == 1 for p in c.preds)]
    if len(shared) <= GREEDY_LIMIT:
        ordered = _greedy_path(shared, profiles, live)
    else:
        def ratio(clause: _Clause) -> float:
            total = 0.0
            for pred, reach, above in profiles[id(clause)]:
                others = users[id(pred)] - 1
                if others:
                    total += others * (1.0 - pred.p) * reach / (above + pred.cost)
            return total
        ordered = sorted(shared, key=ratio, reverse=True)
    return ordered + alone


def _difference(a: _Clause, b: _Clause, profiles: dict[int, list]) -> float:
    """Expected cost of evaluating a before b minus b before a (the paper's C1 - C2)."""
    at_b = {id(pred): (reach, above) for pred, reach, above in profiles[id(b)]}
    total = 0.0
    for pred, reach_a, above_a in profiles[id(a)]:
        found = at_b.get(id(pred))
        if found is not None:
            reach_b, above_b = found
            total += (1.0 - pred.p) * (reach_b * above_a - reach_a * above_b)
    return total


def _greedy_path(chains: list[_Clause], profiles: dict[int, list], live: set[int]) -> list[_Clause]:
    """Order chains along a path built from the cheapest 'a before b' edges (Kruskal-like)."""
    if len(chains) < 2:
        return list(chains)
    index = {id(c): i for i, c in enumerate(chains)}
    edges = []
    for i, a in enumerate(chains):
        neighbours = {index[id(c)] for p in a.preds for c in p.clauses if id(c) in index and c is not a}
        for j in neighbours:
            if j > i:
                d = _difference(a, chains[j], profiles)
                edges.append((d, i, j) if d <= 0 else (-d, j, i))  # weight: the saving's opposite
    edges.sort()
    nxt: dict[int, int] = {}
    prv: dict[int, int] = {}
    root = list(range(len(chains)))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x
    for _, u, v in edges:
        if u in nxt or v in prv or find(u) == find(v):
            continue
        nxt[u], prv[v] = v, u
        root[find(u)] = find(v)
    ordered: list[_Clause] = []
    for start in range(len(chains)):
        if start in prv:
            continue
        node: int | None = start
        while node is not None:
            ordered.append(chains[node])
            node = nxt.get(node)
    return ordered

"""The per-peer shared subscription index: which stored subscriptions does an event match?

Structure (G-ToPSS's per-peer "subscription matrix", with the constraint tables of RSS filtering
on a cluster, after Liu et al.):

* A *pattern node* is one distinct triple pattern together with the subscription's graph term,
  up to variable names: `GRAPH ?g { ?x ex:p ?y }` and `GRAPH ?h { ?a ex:p ?b }` are one node,
  shared by every subscription that has it; `?x ex:p ?x` is another (a repeated variable is an
  equality the node checks). Nodes are found through a two-level hash: first the *mask* (which
  of the positions g, s, p, o hold constants), then the tuple of those constants. A quad probes
  one dict per mask in use, so finding every pattern it matches costs one lookup per mask plus
  one step per matching pattern (`?s ?p ?o` lives under the empty mask: the wildcard bucket).
  Per event, each matched node keeps the quads that matched it: its binding table, computed
  once and shared by every subscription using the node.

* A *join group* is a subscription body up to variable names: the same patterns joined in the
  same order. Its order starts with the *trigger*, the body's most selective pattern (most
  constants, subject/object constants counting more than a predicate), then takes the pattern
  with most positions fixed or bound. Subscriptions that differ only in FILTERs, projection or
  variable names share one group and so one join per event.

* Each group is registered under its trigger node. A quad matching a node makes the groups
  triggered there candidates. Subscriptions with a simple constraint `?x op constant` on a
  variable of the trigger are not in that list: they sit in the node's constraint tables
  (eventcloud.matching.constraints), sorted per operator, and become candidates only when one binary
  search per bound value says their constraint holds — before any join. A subscription whose
  trigger no quad matches is never looked at: the work per event grows with the candidates,
  not with the number stored.

* A candidate group goes on to the join only if every one of its patterns has a non-empty
  binding table. The join enumerates solutions lazily (shared by the group's members, kept per
  event). Members without FILTERs match with the first solution; members with a simple
  constraint on a non-trigger variable are read off the group's own constraint tables, one
  lookup per solution; the others evaluate their FILTERs on the solutions. Tables only prune:
  a FILTER is skipped only when it *is* the one comparison a table decided exactly, so the
  answer is exactly `matching.matches(sub, event)` for every stored subscription. Past
  `SOLUTION_CAP` shared solutions a member falls back to its own join, with each FILTER run
  as soon as its variables are bound (as matching.py does).

* Full-text and is-a conjuncts (`ftcontains`, `rdf:type/rdfs:subClassOf*` and the is-a FILTER
  functions) are constraints too: tabled in RTF's word tries and in class tables read through
  the taxonomy's closure (eventcloud.matching.tables says which table holds what). A pattern
  binding a variable so constrained counts as selective when the trigger is chosen.

* FILTERs calling registered (maybe expensive) operators are left out of the joins: a subscription
  with one is a candidate when its join has a solution, and all its FILTER conjuncts become
  residual predicates, shared across subscriptions and evaluated in the chosen order
  (eventcloud.matching.residual, .ordering, .predicates). A subscription contained in another
  stored one (eventcloud.matching.containment; checked within its join group) is evaluated only
  if its container matched.

* Identical subscriptions (the same graph term, patterns and FILTERs: popular queries, whatever
  their text, projection or kind) share one entry: the later ones are *aliases* of the first,
  cost an id in its list, and are answered with it. When the first is removed, the next alias
  takes its place.

* `first_pattern_candidates` serves CSMA's first step: each subscription is also registered
  under the node of its patterns[0], with constraint tables for the FILTERs that pattern alone
  binds, and the FILTERs evaluable after patterns[0] are then run.

Pure code, no I/O. Results are in insertion order (re-adding a removed ident appends it).
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any, Callable

from eventcloud.matching.constraints import EXTENSION_OPS, RANK, Constraint, Pair, conjuncts, simple_constraints
from eventcloud.matching.isatable import ISA_OPS
from eventcloud.matching.tables import Bucket, TableKit, Trigger, lookup as _lookup
from eventcloud.matching.containment import contains
from eventcloud.matching.groups import (
    SOLUTION_CAP, Group, Member, Solutions, first_checks, idents, match_group_tables,
)
from eventcloud.matching.ordering import ORDERS, SUBORDER
from eventcloud.matching.predicates import Templates
from eventcloud.matching.reference import matches
from eventcloud.matching.residual import EventMatch
from eventcloud.matching.statistics import Statistics
from eventcloud.matching.joins import (
    Node, canonical_key, empty_key, exists, join_program, selectivity,
)
from eventcloud.rdf.model import CompoundEvent, Quad
from eventcloud.sparql.subscription import Subscription, Var
from eventcloud.sparql.taxonomy import Taxonomy

__all__ = ["SubscriptionIndex", "SOLUTION_CAP", "EventMatch"]


_seq = attrgetter("seq")


class SubscriptionIndex:
    """Stored subscriptions of one peer, matched against whole events or single quads.

    Is-a tests read `taxonomy` (None: the empty one); `set_taxonomy` swaps it. `text_layout`
    is "rtfm" (a word trie per pattern node and position) or "rtfs" (one per index).
    `share_joins=False` gives every subscription its own join group (for measurements only:
    the answers are the same, only the sharing of joins between equal bodies is lost).
    `order` is the residual predicates' evaluation order (eventcloud.matching.ordering.ORDERS),
    `statistics` what it estimates selectivities and costs from (learnt as events are matched);
    `containment=False` turns the containment pruning off, `share_identical=False` the
    sharing of one entry by identical subscriptions (both for measurements).
    """

    def __init__(self, share_joins: bool = True, *, taxonomy: Taxonomy | None = None,
                 text_layout: str = "rtfm", order: str = SUBORDER, statistics: Statistics | None = None,
                 containment: bool = True, share_identical: bool = True) -> None:
        if order not in ORDERS:
            raise ValueError(f"unknown evaluation order {order!r}: use one of {', '.join(ORDERS)}")
        self.order = order
        self.statistics = statistics if statistics is not None else Statistics()
        self.containment = containment
        self.share_identical = share_identical
        # per chain key (graph term, patterns, FILTERs), the entry identical subscriptions alias
        self._alike: dict[tuple, Member] = {}
        self._templates = Templates()
        self._residual: dict[Group, dict[Member, None]] = {}  # members calling operators, per join group
        self._kit = TableKit(taxonomy or Taxonomy.empty(), text_layout)
        self._share = share_joins
        self._entries: dict[str, Member] = {}
        self._nodes: dict[tuple, Node] = {}
        self._groups: dict[tuple, Group] = {}
        # mask -> (key function over a quad, {constants: [nodes]})
        self._masks: dict[tuple[int, ...], tuple[Callable[[Quad], Any], dict[Any, list[Node]]]] = {}
        self._probes: tuple[tuple[Callable[[Quad], Any], dict[Any, list[Node]]], ...] = ()
        self._counter = 0
        self._tabled = 0
        self._pattern_count = 0

    # --- storing ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, ident: object) -> bool:
        return ident in self._entries

    def get(self, ident: str) -> Subscription | None:
        """The subscription matched for `ident` (bound to the index's taxonomy when it uses one):
        for an alias, the first identical one stored, which matches exactly the same events."""
        entry = self._entries.get(ident)
        return None if entry is None else entry.sub

    @property
    def taxonomy(self) -> Taxonomy:
        return self._kit.taxonomy

    def set_taxonomy(self, taxonomy: Taxonomy) -> list[str]:
        """Match with `taxonomy` from now on; the ids of the subscriptions that read it (re-bound).

        Their tables are keyed by constant classes and read the closure at match time, so only
        their compiled FILTERs are rebuilt; insertion order is kept.
        """
        self._kit.taxonomy = taxonomy
        rebound = []
        for entry in dict.fromkeys(self._entries.values()):  # each shared entry once
            if entry.sub.uses_taxonomy:
                before = entry.sub.chain_key  # FILTERs compare with their taxonomy: re-keyed below
                sub = entry.sub = entry.sub.with_taxonomy(taxonomy)
                if self._alike.get(before) is entry:
                    del self._alike[before]
                    self._alike.setdefault(sub.chain_key, entry)
                entry.filters = () if entry.residual else sub.filters
                entry.first_checks = first_checks(sub)
                entry.schedule = None
                rebound.append(entry.ident)
                rebound.extend(entry.aliases or ())
        return rebound

    def twin(self, sub: Subscription) -> tuple[str, Subscription] | None:
        """The id and subscription whose entry `sub`, identical to it, would share (None: there is
        none): its caller may share that one's parts, as the index's stored copy is that one."""
        first = self._alike.get(sub.with_taxonomy(self._kit.taxonomy).chain_key) if self.share_identical else None
        return None if first is None else (first.ident, first.sub)

    def add(self, ident: str, sub: Subscription) -> None:
        """Store `sub` under `ident`; a subscription matching the same (same chain key) again is a
        no-op, another one replaces it (and comes last in insertion order).

        A subscription that uses the taxonomy is stored re-bound to the index's (see `get`)."""
        sub = sub.with_taxonomy(self._kit.taxonomy)
        old = self._entries.get(ident)
        if old is not None:
            if old.sub is sub or old.sub.chain_key == sub.chain_key:
                return  # it matches exactly what it matched
            self.remove(ident)
        key = sub.chain_key  # hashing it hashes the FILTER expressions: once
        if self.share_identical:
            first = self._alike.get(key)
            if first is not None:
                self._counter += 1
                first.alias(ident, self._counter)
                self._entries[ident] = first
                return
        self._counter += 1
        entry = Member(ident, self._counter, sub)
        self._compile(entry)
        self._entries[ident] = entry
        if self.share_identical:
            self._alike[key] = entry

    def remove(self, ident: str) -> bool:
        """Forget `ident`; False if it was not stored."""
        entry = self._entries.pop(ident, None)
        if entry is None:
            return False
        if entry.aliases:  # identical subscriptions remain: the entry stays for them
            entry.unalias(ident)
            return True
        if self._alike.get(entry.sub.chain_key) is entry:
            del self._alike[entry.sub.chain_key]
        group = entry.group
        if entry.residual:
            self._forget_residual(entry)
        trigger = group.trigger
        if entry.level == "trigger":
            bucket = trigger.trigger
            assert bucket is not None
            bucket.take(entry.reg[0], entry.reg[1], entry)
            self._tabled -= 1
        else:
            if entry.level == "group":
                group.take(entry.reg[0], entry.reg[1], entry)
                self._tabled -= 1
            elif entry.filters:
                del group.filtered[entry]
            else:
                del group.plain[entry]
            group.free -= 1
            if group.free == 0:
                bucket = trigger.trigger
                assert bucket is not None
                del bucket.groups[group]
        if trigger.trigger is not None and trigger.trigger.empty():
            trigger.trigger = None
        group.size -= 1
        if group.size == 0:
            del self._groups[group.key]
        first = entry.nodes[0].first
        assert first is not None
        if entry.first_reg is None:
            del first.plain[entry]
        else:
            first.take(entry.first_reg[0], entry.first_reg[1], entry)
        if first.empty():
            entry.nodes[0].first = None
        for node in entry.nodes:
            node.users -= 1
            self._pattern_count -= 1
            if node.users == 0:
                self._drop(node)
        return True

    def _node(self, key: tuple, eqs: tuple[tuple[int, int], ...]) -> Node:
        node = self._nodes.get(key)
        if node is not None:
            return node
        mask = tuple(position for position, t in enumerate(key) if type(t) is not int)
        lookup = key[mask[0]] if len(mask) == 1 else tuple(key[i] for i in mask)
        node = Node(key, mask, lookup, eqs)
        self._nodes[key] = node
        probe_entry = self._masks.get(mask)
        if probe_entry is None:
            getter = empty_key if not mask else itemgetter(*mask)
            probe_entry = self._masks[mask] = (getter, {})
            self._probes = tuple(self._masks.values())
        probe_entry[1].setdefault(lookup, []).append(node)
        return node

    def _drop(self, node: Node) -> None:
        del self._nodes[node.key]
        _, table = self._masks[node.mask]
        siblings = table[node.lookup]
        siblings.remove(node)
        if not siblings:
            del table[node.lookup]
            if not table:
                del self._masks[node.mask]
                self._probes = tuple(self._masks.values())

    def _compile(self, entry: Member) -> None:
        sub = entry.sub
        gname = sub.graph.name if type(sub.graph) is Var else None
        canon = [canonical_key(sub.graph, pattern) for pattern in sub.patterns]
        nodes = []
        for key, _, eqs in canon:
            node = self._node(key, eqs)
            node.users += 1
            self._pattern_count += 1
            nodes.append(node)
        entry.nodes = tuple(nodes)

        # conjuncts a table can answer (the chosen one is tabled below)
        variables = sub.variables()
        tabled: list[tuple[Constraint, frozenset[str]]] = []
        for compiled in sub.filters:
            needed = compiled.variables & variables
            for constraint in simple_constraints(compiled):
                if constraint.var in variables and constraint.indexable:
                    tabled.append((constraint, needed))
        # a FILTER a table decides exactly: its conjuncts are exactly the tabled ones
        total = sum(len(conjuncts(f.expr)) for f in sub.filters)
        # a variable under a text or is-a constraint is about as selective as a constant
        selective = {t[0].var for t in tabled if t[0].op in EXTENSION_OPS}

        def rank(i: int) -> tuple[int, int]:
            bonus = 2 if any(canon[i][1].get(name, 0) for name in selective) else 0
            return (selectivity(canon[i][0]) + bonus, -i)

        # the join program: trigger first, then the pattern with most positions fixed or bound
        trigger = max(range(len(nodes)), key=rank)
        steps, names, vid = join_program(canon, nodes, trigger, gname)
        group_key = (gname is not None, tuple(steps)) if self._share else (entry.seq,)
        group = self._groups.get(group_key)
        if group is None:
            group = self._groups[group_key] = Group(group_key, tuple(steps), gname is not None)
        entry.group = group
        entry.names = tuple(names)
        entry.filters = sub.filters
        entry.residual = self._templates.residual(sub)
        if entry.residual:
            entry.filters = ()  # every conjunct goes through the residual plan
            entry.positions = tuple(tuple(vid.get(name) for name in slots) for _, slots in entry.residual)

        # where the entry waits: a trigger table (before the join), a group table (per solution), or none
        trigger_names = canon[trigger][1]
        at_trigger = [t for t in tabled if t[0].var in trigger_names]
        chosen = min(at_trigger or tabled, key=lambda t: RANK[t[0].op], default=None)
        pair = None if at_trigger else _isa_pair([t[0] for t in tabled])  # a class and a value: one lookup
        entry.simple = chosen is not None and total == (1 if pair is None else 2) and not entry.residual
        if at_trigger:
            entry.level, entry.reg = "trigger", (trigger_names[chosen[0].var], chosen[0])  # type: ignore[index]
            if group.trigger.trigger is None:
                group.trigger.trigger = Trigger()
            group.trigger.trigger.put(*entry.reg, entry, self._kit)
        else:
            if chosen is not None:
                entry.level = "group"
                entry.reg = (vid[chosen[0].var], chosen[0]) if pair is None else (
                    (vid[pair.first.var], vid[pair.second.var]), pair)
                group.put(*entry.reg, entry, self._kit)
            else:
                entry.level, entry.reg = None, None
                (group.filtered if entry.filters else group.plain)[entry] = None
            group.free += 1
            if group.free == 1:
                if group.trigger.trigger is None:
                    group.trigger.trigger = Trigger()
                group.trigger.trigger.groups[group] = None
        self._tabled += entry.reg is not None
        group.size += 1

        if entry.residual:
            self._place_residual(entry)

        # CSMA's first step: the filters evaluable once patterns[0] matched
        first_names = canon[0][1]
        local = set(first_names) | ({gname} if gname else set())
        entry.first_binds = tuple((position, name) for name, position in first_names.items())
        entry.first_checks = first_checks(sub)
        options = [t for t in tabled if t[0].var in first_names and t[1] <= local]
        first_choice = min(options, key=lambda t: RANK[t[0].op], default=None)
        if nodes[0].first is None:
            nodes[0].first = Bucket()
        if first_choice is None:
            entry.first_reg = None
            nodes[0].first.plain[entry] = None
        else:
            entry.first_reg = (first_names[first_choice[0].var], first_choice[0])
            nodes[0].first.put(entry.first_reg[0], first_choice[0], entry, self._kit)

    # --- containment among the members calling operators --------------------------------------

    def _container(self, entry: Member, exclude: Member | None = None) -> Member | None:
        """The most specific older member of the same join group that contains `entry`."""
        best = None
        for other in self._residual.get(entry.group, ()):
            if other is entry or other is exclude or other.seq > entry.seq:
                continue
            if contains(other.sub, entry.sub) and (best is None or len(other.residual) > len(best.residual)):
                best = other
        return best

    def _place_residual(self, entry: Member) -> None:
        members = self._residual.setdefault(entry.group, {})
        if self.containment:
            entry.parent = self._container(entry)
            if entry.parent is not None:
                entry.parent.children.append(entry)
        members[entry] = None

    def _forget_residual(self, entry: Member) -> None:
        """Unlink a removed member: its children find another container (or none)."""
        members = self._residual[entry.group]
        del members[entry]
        if not members:
            del self._residual[entry.group]
        if entry.parent is not None:
            entry.parent.children.remove(entry)
        for child in entry.children:
            child.parent = self._container(child, exclude=entry)
            if child.parent is not None:
                child.parent.children.append(child)
        entry.children = []
        entry.parent = None
        self._templates.release(entry.residual)

    def containers(self) -> dict[str, str]:
        """ident -> the ident of the stored subscription found to contain it (for tests and tools)."""
        return {ident: e.parent.ident for ident, e in self._entries.items() if e.parent is not None}

    # --- matching ------------------------------------------------------------------------------

    def _tables(self, quads: tuple[Quad, ...]) -> dict[Node, list[Quad]]:
        """Per matched node, the quads matching it (the event's binding tables)."""
        rows: dict[Node, list[Quad]] = {}
        probes = self._probes
        for quad in quads:
            for getter, table in probes:
                nodes = table.get(getter(quad))
                if nodes is None:
                    continue
                for node in nodes:
                    if node.eqs and not node.fits(quad):
                        continue
                    found = rows.get(node)
                    if found is None:
                        rows[node] = [quad]
                    else:
                        found.append(quad)
        return rows

    def match_event(self, event: CompoundEvent) -> list[str]:
        """Ids of every stored subscription matching the event (exactly `matching.matches`), in insertion order.

        Residual predicates are evaluated here, in the index's order, with operators called in
        place (or through the active CallTable: see `match` to evaluate them elsewhere)."""
        found = self.match(event)
        while (key := found.next()) is not None:
            found.record(key, found.evaluate(key))
        for member in found.direct:
            found.settle(member, matches(member.sub, event))
        return found.result()

    def match(self, event: CompoundEvent) -> EventMatch:
        """The joins' answer for the event and the residual plan left to run (eventcloud.matching.residual)."""
        self._kit.begin()
        rows = self._tables(event.quads)
        if not rows:
            return EventMatch((), [], event.graph, rows, self.order, self.statistics)
        graph = event.graph
        groups: dict[Group, None] = {}
        tabled: list[tuple[list[Member], bool, Quad]] = []  # (entries, constraint decided exactly, quad probed)
        cache: dict[int, Any] = {}
        for node, quads in rows.items():
            bucket = node.trigger
            if bucket is None:
                continue
            if bucket.groups:
                groups.update(bucket.groups)
            for (position, _), table in bucket.tables.items():
                for quad in quads:
                    exact, maybe = table.split(*_lookup(quad[position], cache))
                    if exact:
                        tabled.append((exact, True, quad))
                    if maybe:
                        tabled.append((maybe, False, quad))

        matched: dict[Member, None] = {}
        states: dict[Group, Solutions | None] = {}

        def solutions_of(group: Group) -> Solutions | None:
            if group in states:
                return states[group]
            state = None
            for node in group.others:
                if node not in rows:
                    break
            else:
                state = Solutions(group.solutions(graph, rows))
                if state.at(0) is None:
                    state = None
            states[group] = state
            return state

        for group in groups:
            if not group.filtered and not group.tables:  # only members without FILTERs: one solution will do
                for node in group.others:
                    if node not in rows:
                        break
                else:
                    if exists(group.steps, 0, [graph] if group.graph_var else [], rows):
                        matched.update(group.plain)
                continue
            state = solutions_of(group)
            if state is None:
                continue
            if group.plain:
                matched.update(group.plain)
            for entry in group.filtered:
                if state.any_for(entry, graph, rows):
                    matched[entry] = None
            if group.tables:
                match_group_tables(group, state, graph, rows, matched, cache)

        through: dict[tuple[Group, int], bool] = {}
        for entries, decided, quad in tabled:
            for entry in entries:
                if entry in matched:
                    continue
                group = entry.group
                if decided and entry.simple:
                    # the table decided the one FILTER on this trigger quad's value: any solution
                    # whose trigger step takes this quad will do (other quads get their own lookup)
                    key = (group, id(quad))
                    found = through.get(key)
                    if found is None:
                        found = through[key] = group.through(graph, quad, rows)
                    if found:
                        matched[entry] = None
                    continue
                state = solutions_of(group)
                if state is not None and state.any_for(entry, graph, rows):
                    matched[entry] = None

        if not self._residual:
            return EventMatch(matched, [], graph, rows, self.order, self.statistics)
        return EventMatch([e for e in matched if not e.residual], [e for e in matched if e.residual], graph, rows,
                          self.order, self.statistics)

    def first_pattern_candidates(self, quad: Quad) -> list[str]:
        """Ids of subscriptions whose patterns[0] (with the graph term) unifies with `quad` and whose
        FILTERs over the variables that pattern binds hold — CSMA's first step — in insertion order."""
        self._kit.begin()
        candidates: dict[Member, None] = {}
        cache: dict[int, Any] = {}
        for getter, table in self._probes:
            nodes = table.get(getter(quad))
            if nodes is None:
                continue
            for node in nodes:
                bucket = node.first
                if bucket is None or (node.eqs and not node.fits(quad)):
                    continue
                if bucket.plain:
                    candidates.update(bucket.plain)
                for (position, _), table_ in bucket.tables.items():
                    for entry in table_.select(*_lookup(quad[position], cache)):
                        candidates[entry] = None
        matched = []
        for entry in candidates:
            if entry.first_checks:
                bindings = {name: quad[position] for position, name in entry.first_binds}
                if not all(check(bindings) for check in entry.first_checks):
                    continue
            matched.append(entry)
        if len(matched) > 1:
            matched.sort(key=_seq)
        return idents(matched)

    def indexes_any(self, quads: list[Quad] | tuple[Quad, ...]) -> bool:
        """Whether some stored subscription's patterns[0] (its indexing pattern) fits one of
        `quads`: a superset of `first_pattern_candidates` (no table or FILTER is consulted), so
        False proves that none of these quads starts a CSMA chain or names an OSMA notifier here."""
        for quad in quads:
            for getter, table in self._probes:
                nodes = table.get(getter(quad))
                if nodes is not None and any(n.first is not None and (not n.eqs or n.fits(quad)) for n in nodes):
                    return True
        return False

    def stats(self) -> dict[str, int]:
        """Counts: subscriptions, their entries, stored patterns, distinct patterns, join groups, masks, tabled constraints."""
        return {
            "subscriptions": len(self._entries),
            "entries": len(dict.fromkeys(self._entries.values())),  # identical subscriptions share one
            "patterns": self._pattern_count,
            "distinct_patterns": len(self._nodes),
            "join_groups": len(self._groups),
            "masks": len(self._masks),
            "constraint_entries": self._tabled,
        }


def _isa_pair(constraints: list[Constraint]) -> Pair | None:
    """An is-a conjunct and a comparison (the best ranked) to table together, if the FILTERs have both."""
    isa = next((c for c in constraints if c.op in ISA_OPS), None)
    values = [c for c in constraints if c.op not in EXTENSION_OPS]
    if isa is None or not values:
        return None
    return Pair(isa, min(values, key=lambda c: RANK[c.op]))

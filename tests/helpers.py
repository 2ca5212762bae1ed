"""Helpers shared by the tests: the pyoxigraph oracle, seeded random workloads, sample events.

Test modules import from here (never from each other).
"""

from __future__ import annotations

import random
from typing import Any

import pyoxigraph as ox
import trio

from eventcloud.client import ClientError, Notification
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad, Term, event_graph, make_quad
from eventcloud.rdf.oxigraph import from_ox, quad_to_ox
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.sparql.subscription import parse_subscription
from eventcloud.wire.messages import Status

EX = "http://ex.org/"
EXO = "http://example.org/"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX xsd: <{XSD}> "
ALGORITHMS = ["osma", "csma"]


# --- oracle ------------------------------------------------------------------------------------

def oracle(query: str, event: CompoundEvent) -> list[frozenset]:
    """The oracle's solutions (a multiset, as a list) of `query` over a store holding only the event."""
    store = ox.Store()
    store.load(event.n_quads().encode(), format=ox.RdfFormat.N_QUADS)
    solutions_ = store.query(query)
    names = [v.value for v in solutions_.variables]
    rows = []
    for row in solutions_:
        rows.append(frozenset((name, from_ox(row[name])) for name in names if row[name] is not None))
    return rows


def as_rows(bindings: list[dict]) -> list[frozenset]:
    return [frozenset(b.items()) for b in bindings]


def visible(bindings: dict) -> dict:
    """Drop blank-node variables (SELECT * does not project them)."""
    return {k: v for k, v in bindings.items() if not k.startswith("_:")}


# --- generators -------------------------------------------------------------------------------

SUBJECTS = [IRI(EX + n) for n in ("a", "b", "c", "d")]
PREDICATES = [IRI(EX + n) for n in ("p", "q", "name", "age", "when")]
LANGS = ["en", "fr", "en-us"]


def random_literal(r: random.Random) -> Literal:
    kind = r.randrange(9)
    if kind == 0:
        return Literal(str(r.randint(-5, 40)), XSD + "integer")
    if kind == 1:
        return canonical_term(Literal(f"{r.randint(-20, 60) / 4}", XSD + "decimal"))  # type: ignore[return-value]
    if kind == 2:
        return canonical_term(Literal(f"{r.randint(-10, 80) / 2}", XSD + "double"))  # type: ignore[return-value]
    if kind == 3:
        return Literal(r.choice(["true", "false"]), XSD + "boolean")
    if kind == 4:
        return Literal(r.choice(["alice", "Bob", "carol", "", "a b", "été"]))
    if kind == 5:
        return Literal(r.choice(["chat", "cat", "hello", "Bob"]), language=r.choice(LANGS))
    if kind == 6:
        tz = r.choice(["", "Z", "+02:00", "-05:00"])
        return canonical_term(Literal(f"2020-0{r.randint(1, 3)}-1{r.randint(0, 9)}T{r.randint(10, 23)}:00:00{tz}",
                                      XSD + "dateTime"))  # type: ignore[return-value]
    if kind == 7:
        return Literal(f"2020-01-0{r.randint(1, 9)}", XSD + "date")
    return Literal(r.choice(["x", "y"]), EX + "custom")


def random_matching_event(r: random.Random, n: int) -> CompoundEvent:
    graph = IRI(f"{EX}event/{n}")
    triples = set()
    for _ in range(r.randint(1, 6)):
        s = r.choice(SUBJECTS)
        p = r.choice(PREDICATES)
        o: Term = r.choice(SUBJECTS) if r.random() < 0.35 else random_literal(r)
        triples.add((s, p, o))
    return CompoundEvent.from_triples(graph, sorted(triples, key=lambda t: tuple(x.n3() for x in t)))


VARS = ["?a", "?b", "?c", "?d", "?e"]
FILTERS = [
    "?{v} > {n}", "?{v} < {n}", "?{v} >= {n}.5", "?{v} != {n}", "?{v} = {n}",
    'lang(?{v}) = "en"', 'langMatches(lang(?{v}), "en")', 'regex(str(?{v}), "^[a-c]", "i")',
    'contains(str(?{v}), "o")', 'strlen(str(?{v})) > 3', '?{v} >= "2020-02-10T12:00:00Z"^^xsd:dateTime',
    '?{v} < "2020-02-15T00:00:00"^^xsd:dateTime', 'isLiteral(?{v})', 'isIRI(?{v})', 'bound(?{v})',
    'datatype(?{v}) = xsd:integer', '?{v} != ?{w}', '?{v} = ?{w}', '?{v} IN ({n}, "alice", ex:a)',
    '?{v} NOT IN (ex:b, "Bob"@en)', '!(?{v} > {n}) || ?{w} = ex:a', '?{v} > {n} && ?{w} != ex:c',
    'year(?{v}) = 2020 && month(?{v}) > 1', 'abs(?{v}) > {n}', '?{v} + 1 > {n}', '?{v} * 2 <= {n}',
    'str(?{v}) < "c"', '?{v} = "chat"@fr', 'sameTerm(?{v}, ex:a)', 'isNumeric(?{v})', '?{v}',
    '?g = <{EX}event/3>', 'strstarts(str(?g), "{EX}event/")', 'COALESCE(?{v} > {n}, true)',
    'IF(isNumeric(?{v}), ?{v} > {n}, ?{v} = ?{w})', 'ucase(str(?{v})) = "ALICE"', '?zz > 1 || isIRI(?{v})',
]


def random_term(r: random.Random, position: str, used: list[str], quad: Quad | None) -> str:
    roll = r.random()
    if roll < 0.55 or (position == "p" and roll < 0.65):
        v = r.choice(VARS)
        used.append(v)
        return v
    if quad is not None and roll < 0.9:  # a constant taken from the template event: likely to match
        return {"s": quad.s, "p": quad.p, "o": quad.o}[position].n3()
    if position == "p":
        return f"<{r.choice(PREDICATES).value}>"
    if position == "s" or roll < 0.95:
        if roll > 0.97:
            return "[]"
        return f"<{r.choice(SUBJECTS).value}>"
    return random_literal(r).n3()


def random_query(r: random.Random, template: CompoundEvent) -> str:
    used: list[str] = []
    patterns = []
    for _ in range(r.randint(1, 5)):
        quad = r.choice(template.quads) if r.random() < 0.8 else None
        patterns.append(" ".join(random_term(r, pos, used, quad) for pos in "spo"))
    if r.random() < 0.08:
        patterns = ["?s ?p ?o"]
        used = ["?s", "?p", "?o"]
    graph = "?g" if r.random() < 0.85 else f"<{EX}event/{r.choice([3, 999])}>"
    pool = sorted(set(used)) or ["?a"]
    filters = []
    for _ in range(r.choice([0, 0, 1, 1, 2])):
        template_text = r.choice(FILTERS)
        filters.append("FILTER(" + template_text.format(v=r.choice(pool)[1:], w=r.choice(pool)[1:],
                                                         n=r.randint(0, 30), EX=EX) + ")")
    inside = [f for f in filters if r.random() < 0.5]
    outside = [f for f in filters if f not in inside]
    projection = "*"
    if r.random() < 0.5:
        names = [v for v in pool if r.random() < 0.6] + (["?g"] if r.random() < 0.3 and graph == "?g" else [])
        if r.random() < 0.1:
            names.append("?notinscope")
        projection = " ".join(dict.fromkeys(names)) or "*"
    distinct = "DISTINCT " if r.random() < 0.3 else ""
    body = " . ".join(patterns)
    return (f"{PREFIXES}SELECT {distinct}{projection} WHERE {{ GRAPH {graph} {{ {body} {' '.join(inside)} }} "
            f"{' '.join(outside)} }}")


def mutate(r: random.Random, event: CompoundEvent) -> CompoundEvent:
    """A near miss: one quad dropped or one object changed."""
    quads = list(event.quads)
    victim = r.randrange(len(quads))
    if len(quads) > 1 and r.random() < 0.5:
        del quads[victim]
    else:
        g, s, p, _ = quads[victim]
        quads[victim] = Quad(g, s, p, random_literal(r))
    return CompoundEvent(event.graph, tuple(quads))


def cases(seed: int, subscriptions: int, events_each: int):
    r = random.Random(seed)
    for n in range(subscriptions):
        template = random_matching_event(r, r.choice([3, 3, n]))
        query = random_query(r, template)
        sub = parse_subscription(query)
        events = [template, mutate(r, template)]
        events += [random_matching_event(r, r.choice([3, n * 10 + k])) for k in range(events_each - 2)]
        for event in events:
            yield query, sub, event



# --- the shared index against brute force -----------------------------------------------------

def brute_match(model: dict, event: CompoundEvent) -> list[str]:
    """What the index must answer: every stored subscription evaluated separately, in insertion order."""
    from eventcloud.matching.reference import matches
    return [ident for ident, sub in model.items() if matches(sub, event)]


def brute_first(model: dict, quad: Quad) -> list[str]:
    """CSMA's first step by definition: patterns[0] with the graph unifies, no FILTER it can run fails."""
    from eventcloud.matching.csma import advance, start
    from eventcloud.matching.reference import match_pattern

    found = []
    for ident, sub in model.items():
        bindings = match_pattern(sub, 0, quad, {})
        if bindings is None:
            continue
        bound = set(bindings)
        if all(f(bindings) for f in sub.filters if sub.bindable(f) <= bound):
            found.append(ident)
            assert advance(sub, start(sub), 0, quad) is not None  # the same as CSMA's first step
        else:
            assert advance(sub, start(sub), 0, quad) is None
    return found


# --- overlay workloads -------------------------------------------------------------------

def sample_events(n: int, quads: int = 5, source: str = "s") -> list[CompoundEvent]:
    events = []
    for i in range(n):
        g = event_graph(source, 1_000_000 + i, i)
        triples = [(IRI(f"{EXO}sensor/{i % 7}"), IRI(f"{EXO}p{j}"),
                    Literal(str(i * 10 + j), XSD + "integer") if j % 2 else IRI(f"{EXO}thing/{i}-{j}"))
                   for j in range(quads)]
        events.append(CompoundEvent(g, tuple(make_quad(g, *t) for t in triples)))
    return events


ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def spread_events(n: int, source: str) -> list[CompoundEvent]:
    """Events whose quads have subjects and predicates across the alphabet: they land on several peers."""
    events = []
    for i in range(n):
        g = event_graph(source, 1_000 + i, i)
        events.append(CompoundEvent(g, tuple(
            make_quad(g, IRI(f"{EXO}{ALNUM[(17 * j + i) % 62]}s"), IRI(f"{EXO}{ALNUM[(29 * j) % 62]}p"),
                      Literal(str(j), XSD + "integer")) for j in range(6))))
    return events


def readings(n: int) -> list[CompoundEvent]:
    """`n` CityBench readings when the data is here, else as many synthetic ones."""
    from eventcloud.cli.demo import citybench_dir
    from eventcloud.rdf.citybench import sample_events as citybench_events, synthetic_events

    directory = citybench_dir()
    return citybench_events(directory, n) if directory is not None else synthetic_events(n)


def assert_exact_neighbour_tables(status: Status) -> None:
    """Every peer's table lists exactly the zones that neighbour its own (so it is symmetric)."""
    zones = {p.id: p.zone for p in status.peers}
    for p in status.peers:
        expected = {k for k, z in zones.items() if k != p.id and z.is_neighbour(zones[p.id])}
        assert set(p.neighbours) == expected


COUNT = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"


async def until_counted(client, total: int, seconds: float = 60) -> None:
    """Wait until COUNT(*) through `client` says `total` (a count refused meanwhile, a zone
    changing hands, is asked again); trio.TooSlowError after `seconds`."""
    with trio.fail_after(seconds):
        while True:
            try:
                if await client.count() == total:
                    return
            except ClientError:
                pass
            await trio.sleep(1)


def count_of(result) -> int:
    return int(result["results"]["bindings"][0]["n"]["value"])


def oracle_solutions(sparql: str, event: CompoundEvent) -> set[frozenset]:
    store = ox.Store()
    store.extend([quad_to_ox(q) for q in event.quads])
    result = store.query(sparql)
    names = [v.value for v in result.variables]
    rows = set()
    for solution in result:
        rows.add(frozenset((n, str(solution[n])) for n in names if solution[n] is not None))
    return rows


def notification_solutions(note: Notification) -> set[frozenset]:
    return {frozenset((k, v.n3()) for k, v in s.items()) for s in note.solutions}


def expected_of(texts: list[str], events: list[CompoundEvent]) -> list[dict[str, set]]:
    """Per subscription text calling the workload's operators, what evaluating it alone on each
    event gives (event graph -> solutions), with its own operators (their calls are not counted)."""
    from eventcloud.matching.reference import results
    from eventcloud.testing.operator_workload import CountingOperators

    oracle = CountingOperators().operator_set()
    out = []
    for text in texts:
        sub = parse_subscription(text, operators=oracle)
        found = {}
        for event in events:
            rows = results(sub, event)
            if rows:
                found[event.graph.value] = {frozenset((k, v.n3()) for k, v in row.items()) for row in rows}
        out.append(found)
    return out


# --- random pub/sub workloads ------------------------------------------------------------

PS_SUBJECTS = [IRI(f"{EXO}s{i}") for i in range(4)]
PS_PREDICATES = [IRI(f"{EXO}p{i}") for i in range(3)]


def random_object(rng: random.Random):
    choice = rng.randrange(6)
    if choice < 2:
        return rng.choice(PS_SUBJECTS)
    if choice == 2:
        return Literal(str(rng.randint(1, 20)), XSD + "integer")
    if choice == 3:
        return Literal(f"{rng.randint(1, 20)}.5", XSD + "decimal")
    if choice == 4:
        return Literal(rng.choice(["chat", "chien", "cat"]), language=rng.choice(["en", "fr"]))
    return Literal(f"2014-0{rng.randint(1, 9)}-01T00:00:00Z", XSD + "dateTime")


def random_pubsub_event(rng: random.Random, index: int, source: str = "gen") -> CompoundEvent:
    graph = event_graph(source, 1000 + index, index)
    quads = [make_quad(graph, rng.choice(PS_SUBJECTS), rng.choice(PS_PREDICATES), random_object(rng))
             for _ in range(rng.randint(2, 6))]
    return CompoundEvent(graph, tuple(quads))


PS_FILTERS = [
    "FILTER(?{v} > 7)",
    "FILTER(isLiteral(?{v}))",
    'FILTER(lang(?{v}) = "en")',
    f"FILTER(?{{v}} != <{EX}s1>)",
    'FILTER(regex(str(?{v}), "1"))',
    'FILTER(?{v} < "2014-05-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>)',
    "FILTER(isIRI(?{v}) || ?{v} >= 10)",
]


def random_subscription(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }"
    variables = ["a", "b", "c", "d"]
    patterns, objects = [], []
    for _ in range(rng.randint(1, 3)):
        s = f"?{rng.choice(variables[:2])}" if rng.random() < 0.75 else rng.choice(PS_SUBJECTS).n3()
        p = rng.choice(PS_PREDICATES).n3() if rng.random() < 0.75 else f"?p{rng.randint(0, 1)}"
        if rng.random() < 0.1 and s.startswith("?"):
            o = s  # a repeated variable in one pattern: ?a <p> ?a
        elif rng.random() < 0.75:
            o_var = rng.choice(variables)
            o = f"?{o_var}"
            objects.append(o_var)
        else:
            o = random_object(rng).n3()
        patterns.append(f"{s} {p} {o}")
    filters = ""
    if objects and rng.random() < 0.5:
        filters = rng.choice(PS_FILTERS).format(v=rng.choice(objects))
    inside = rng.random() < 0.5
    body = " . ".join(patterns)
    if inside:
        return f"SELECT * WHERE {{ GRAPH ?g {{ {body} {filters} }} }}"
    return f"SELECT DISTINCT * WHERE {{ GRAPH ?g {{ {body} }} {filters} }}"


def sparql_string(text: str) -> str:
    """A SPARQL string literal holding `text` (single quotes, so a phrase's double quotes stay as they are)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


async def check_delivered(sub, expected: dict[str, set], label: str, seconds: float = 60, extra: float = 5) -> int:
    """The notifications of `sub` are exactly `expected` (event graph -> solutions), none twice."""
    got: list[Notification] = []
    await collect(sub, len(expected), got, seconds=seconds, extra=extra)
    graphs = [n.event for n in got]
    assert len(graphs) == len(set(graphs)), f"duplicate notification for {label}"
    assert set(graphs) == set(expected), f"wrong events for {label}"
    for note in got:
        assert notification_solutions(note) == expected[note.event], label
    return len(got)


async def collect(sub, expected: int, into: list, seconds: float = 120, extra: float = 5) -> None:
    with trio.move_on_after(seconds):
        while len(into) < expected:
            into.append(await sub.receive())
    await trio.sleep(extra)  # let any extra (wrong) notification arrive too
    while True:
        try:
            into.append(sub._receive.receive_nowait())
        except trio.WouldBlock:
            break




# --- full text: an independent evaluator of the grammar (docs/subscriptions.md) -------------------
#
# Expressions are trees of tuples, evaluated by brute force on a text cut into words by
# `unicodedata` categories — no code shared with eventcloud.sparql.filters.fulltext:
#   ("word", w, prefix)  ("phrase", ((w, prefix), …))  ("near", (operand, …), (gap, …))
#   ("and", (e, …))  ("or", (e, …))  ("not", e)         an operand is a word or a phrase node

EXT = "http://eventcloud.io/ns/ext#"
FT_WORDS = ["olympic", "games", "rio", "Café", "cafe", "straße", "STRASSE", "naïve", "e\u0301te\u0301", "2016",
            "x", "Ωmega", "日本", "İzmir", "and", "near", "ǅemal"]
FT_SEPARATORS = [" ", " ", " ", ", ", " - ", "'", "\n", "… ", "/", "_", "*"]


def ft_words(text: str) -> list[str]:
    """Words: maximal runs of letters (L*), marks (M*) and digits/numbers (N*), casefolded."""
    import unicodedata

    words, current = [], []
    for char in text + " ":
        if unicodedata.category(char)[0] in "LMN":
            current.append(char)
        elif current:
            words.append("".join(current).casefold())
            current = []
    return words


def _ft_fits(token: str, word: tuple[str, bool]) -> bool:
    text, prefix = word[0].casefold(), word[1]
    return token.startswith(text) if prefix else token == text


def _ft_occurrences(operand: tuple, words: list[str]) -> list[tuple[int, int]]:
    parts = [(operand[1], operand[2])] if operand[0] == "word" else list(operand[1])
    return [(i, i + len(parts) - 1) for i in range(len(words) - len(parts) + 1)
            if all(_ft_fits(words[i + k], part) for k, part in enumerate(parts))]


def ft_oracle(node: tuple, text: str) -> bool:
    """Does the expression tree hold on the text? (brute force over every choice of occurrences)"""
    import itertools

    words = ft_words(text)

    def holds(n: tuple) -> bool:
        kind = n[0]
        if kind in ("word", "phrase"):
            return bool(_ft_occurrences(n, words))
        if kind == "near":
            choices = [_ft_occurrences(op, words) for op in n[1]]
            return any(all(a[1] < b[0] <= a[1] + gap + 1 for a, b, gap in zip(pick, pick[1:], n[2]))
                       for pick in itertools.product(*choices))
        if kind == "and":
            return all(holds(x) for x in n[1])
        if kind == "or":
            return any(holds(x) for x in n[1])
        return not holds(n[1])

    return holds(node)


def ft_render(node: tuple, r: random.Random) -> str:
    """The tree as expression text, with random case, spacing and AND written or implied."""
    def word(w: str, prefix: bool) -> str:
        w = r.choice([w, w.upper(), w.lower(), w.title()])
        if w in ("AND", "OR", "NOT", "NEAR"):
            w = w.lower()
        return w + ("*" if prefix else "")

    def operand(n: tuple) -> str:
        if n[0] == "word":
            return word(n[1], n[2])
        return '"' + r.choice([" ", "  ", ", "]).join(word(w, p) for w, p in n[1]) + '"'

    kind = node[0]
    if kind in ("word", "phrase"):
        return operand(node)
    if kind == "near":
        text = operand(node[1][0])
        for gap, op in zip(node[2], node[1][1:]):
            text += f" NEAR/{gap} {operand(op)}"
        return text
    if kind == "not":
        return "NOT (" + ft_render(node[1], r) + ")"
    joiner = " OR " if kind == "or" else r.choice([" AND ", " "])
    return "(" + joiner.join(ft_render(x, r) for x in node[1]) + ")"


def random_ft_tree(r: random.Random, depth: int = 0) -> tuple:
    def a_word() -> tuple[str, bool]:
        w = r.choice(FT_WORDS)
        return (w[:r.randint(1, len(w))], True) if r.random() < 0.15 else (w, False)

    def operand() -> tuple:
        if r.random() < 0.3:
            return ("phrase", tuple(a_word() for _ in range(r.randint(2, 3))))
        return ("word", *a_word())

    roll = r.random()
    if depth >= 3 or roll < 0.4:
        return operand()
    if roll < 0.55:
        count = r.randint(2, 3)
        return ("near", tuple(operand() for _ in range(count)), tuple(r.randint(0, 3) for _ in range(count - 1)))
    if roll < 0.65:
        return ("not", random_ft_tree(r, depth + 1))
    return (r.choice(["and", "or"]), tuple(random_ft_tree(r, depth + 1) for _ in range(r.randint(2, 3))))


def random_ft_text(r: random.Random, pool: list[str] | None = None) -> str:
    pool = pool or FT_WORDS
    words = [r.choice([w, w.upper(), w.title()]) for w in r.choices(pool, k=r.randint(0, 9))]
    return "".join(w + r.choice(FT_SEPARATORS) for w in words).strip()


def oracle_with(query: str, event: CompoundEvent, functions: dict | None = None,
                taxonomy_edges: list[tuple[str, str]] = ()) -> list[frozenset]:
    """The oracle's solutions with custom FILTER functions (IRI -> Python callable on pyoxigraph
    terms), over the event's quads plus `taxonomy_edges` as rdfs:subClassOf triples in its graph."""
    store = ox.Store()
    store.extend([quad_to_ox(q) for q in event.quads])
    graph = ox.NamedNode(event.graph.value)
    subclass = ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#subClassOf")
    store.extend([ox.Quad(ox.NamedNode(a), subclass, ox.NamedNode(b), graph) for a, b in taxonomy_edges])
    result = store.query(query, custom_functions={ox.NamedNode(k): v for k, v in (functions or {}).items()})
    names = [v.value for v in result.variables]
    return [frozenset((n, from_ox(row[n])) for n in names if row[n] is not None) for row in result]


def ft_function(trees: dict[str, tuple]):
    """ec:ftcontains for the oracle: the tree of each expression text, evaluated by `ft_oracle`."""
    xsd_string, lang_string = XSD + "string", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

    def ftcontains(value, expression):
        if not isinstance(value, ox.Literal) or value.datatype.value not in (xsd_string, lang_string):
            return None  # an error: the FILTER is false
        result = ft_oracle(trees[expression.value], value.value)
        return ox.Literal("true" if result else "false", datatype=ox.NamedNode(XSD + "boolean"))
    return ftcontains


# --- taxonomies: random acyclic hierarchies and the is-a functions for the oracle ------------------

def random_taxonomy_edges(r: random.Random, classes: int = 8) -> list[tuple[str, str]]:
    """A random DAG over ex:C0…: each class below a few classes with a smaller number (multiple inheritance)."""
    edges = set()
    for i in range(1, classes):
        for _ in range(r.choice([0, 1, 1, 1, 2, 3])):
            edges.add((f"{EX}C{i}", f"{EX}C{r.randrange(i)}"))
    return sorted(edges)


def isa_functions(edges: list[tuple[str, str]]) -> dict:
    """ec:descendantOf / ancestorOf / childOf for the oracle, by a plain search over the edges."""
    def above(cls: str) -> set[str]:
        seen, todo = {cls}, [cls]
        while todo:
            current = todo.pop()
            for a, b in edges:
                if a == current and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    def relation(test):
        def function(c, of):
            if not isinstance(c, ox.NamedNode) or not isinstance(of, ox.NamedNode):
                return None
            return ox.Literal("true" if test(c.value, of.value) else "false", datatype=ox.NamedNode(XSD + "boolean"))
        return function

    return {
        EXT + "descendantOf": relation(lambda c, of: of in above(c)),
        EXT + "ancestorOf": relation(lambda c, of: c in above(of)),
        EXT + "childOf": relation(lambda c, of: (c, of) in edges),
    }


# --- wire bodies with a part replaced (fuzz tests) ------------------------------------------

def paths(data: Any, here: tuple = ()) -> list[tuple]:
    """Every node of `data` (the root too), as the keys leading to it."""
    found = [here]
    if isinstance(data, (list, dict)):
        for key in (range(len(data)) if isinstance(data, list) else list(data)):
            found += paths(data[key], here + (key,))
    return found


def replaced(data: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = list(data) if isinstance(data, list) else dict(data)
    if new is DROP and len(path) == 1:
        del copy[path[0]]
    else:
        copy[path[0]] = replaced(copy[path[0]], path[1:], new)
    return copy


#: `replaced`'s new value that drops the node (a map's key) instead.
DROP = object()

"""Bind joins: which queries are one basic graph pattern, what the planner fetches, and that what it
gathers answers every such query exactly as all the data does (pyoxigraph over both)."""

from __future__ import annotations

import json

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventcloud.rdf.model import IRI, Literal, Quad
from eventcloud.rdf.oxigraph import quad_to_ox
from eventcloud.sparql.bind_joins import BindPlanner, JoinShape, Step, Var, box_of, join_patterns, join_shape
from eventcloud.sparql.query_plan import analyse

EX = "http://example.org/"


def _shape(text: str):
    return join_patterns(analyse(text)[1])


@pytest.mark.parametrize("text", [
    f"SELECT ?v WHERE {{ ?ob <{EX}by> <{EX}sensor> . ?ob <{EX}value> ?v }}",
    f"SELECT ?v WHERE {{ GRAPH ?g {{ ?ob <{EX}by> <{EX}sensor> . ?ob <{EX}value> ?v FILTER(?v > 3) }} }}",
    f"SELECT (AVG(?v) AS ?m) WHERE {{ ?ob <{EX}by> ?s . ?ob <{EX}value> ?v }} GROUP BY ?s ORDER BY ?m LIMIT 3",
    f"CONSTRUCT {{ ?ob <{EX}x> ?v }} WHERE {{ ?ob <{EX}by> _:s . ?ob <{EX}value> ?v }}",
    f"ASK {{ GRAPH <{EX}g1> {{ ?ob <{EX}by> ?s . ?ob <{EX}value> ?v }} }}",
])
def test_one_basic_graph_pattern_is_planned_with_its_variables(text):
    patterns = _shape(text)
    assert patterns is not None and len(patterns) == 2
    assert all(isinstance(p[1], Var) for p in patterns)


def test_optional_groups_after_a_basic_graph_pattern_are_planned_apart():
    by, value, at = IRI(f"{EX}by"), IRI(f"{EX}value"), IRI(f"{EX}at")
    shape = join_shape(analyse(f"SELECT * WHERE {{ GRAPH ?g {{ ?o <{EX}by> ?s OPTIONAL {{ ?o <{EX}value> ?v "
                               f"FILTER(?v > 2) }} OPTIONAL {{ ?o <{EX}at> ?t }} }} }}")[1])
    assert shape == JoinShape(((Var("g"), Var("o"), by, Var("s")),),
                              (((Var("g"), Var("o"), value, Var("v")),), ((Var("g"), Var("o"), at, Var("t")),)))
    for text in (f"SELECT * WHERE {{ ?o <{EX}by> ?s OPTIONAL {{ ?o <{EX}value> ?v OPTIONAL {{ ?v <{EX}at> ?t }} }} }}",
                 f"SELECT * WHERE {{ ?o <{EX}by> ?s OPTIONAL {{ ?o <{EX}value> ?v }} ?o <{EX}at> ?t }}",
                 f"SELECT * WHERE {{ ?o <{EX}by> ?s OPTIONAL {{ GRAPH ?h {{ ?o <{EX}value> ?v }} }} }}"):
        assert join_shape(analyse(text)[1]) is None, text


def test_an_optional_group_is_bound_to_what_the_required_patterns_left():
    """sensor1's observations and, where they have one, their values: 500 lookups, not 1,000 values."""
    quads = _quads(1000)
    shape = join_shape(analyse(f"SELECT * WHERE {{ ?ob <{EX}by> <{EX}sensor1> OPTIONAL {{ ?ob <{EX}value> ?v }} }}")[1])
    gathered, counters = _gathered_by_a_peer(quads, shape, 1)
    assert counters["sparql_patterns_bound"] == 1 and counters["sparql_bound_lookups"] == 500
    assert len(gathered) == 1000


def test_an_optional_group_is_never_bound_to_what_another_group_found():
    """?o1 has a value and no time, ?o2 a time and no value: the time group, bound to what the
    value group found, would miss ?o2's time."""
    g, s_ = IRI(f"{EX}g"), IRI(f"{EX}s")
    quads = [Quad(g, IRI(f"{EX}o1"), IRI(f"{EX}by"), s_), Quad(g, IRI(f"{EX}o2"), IRI(f"{EX}by"), s_),
             Quad(g, IRI(f"{EX}o1"), IRI(f"{EX}value"), Literal("1")), Quad(g, IRI(f"{EX}o2"), IRI(f"{EX}at"), Literal("t"))]
    text = (f"SELECT * WHERE {{ ?o <{EX}by> <{EX}s> OPTIONAL {{ ?o <{EX}value> ?v }} "
            f"OPTIONAL {{ ?o <{EX}at> ?t }} }}")
    gathered, counters = _gathered_by_a_peer(quads, join_shape(analyse(text)[1]), 0)
    assert counters["sparql_patterns_bound"] == 2
    assert gathered == set(quads) and _answers(gathered, text) == _answers(quads, text)


def test_the_graph_of_a_pattern_is_a_shared_variable_a_constant_or_any():
    by, value = IRI(f"{EX}by"), IRI(f"{EX}value")
    assert _shape(f"SELECT * WHERE {{ GRAPH ?g {{ ?o <{EX}by> ?s . ?o <{EX}value> ?v }} }}") == [
        (Var("g"), Var("o"), by, Var("s")), (Var("g"), Var("o"), value, Var("v"))]
    assert _shape(f"SELECT * WHERE {{ GRAPH <{EX}g1> {{ ?o <{EX}by> ?s . ?o <{EX}value> ?v }} }}")[0][0] == IRI(f"{EX}g1")
    assert _shape(f"SELECT * WHERE {{ ?o <{EX}by> ?s . ?o <{EX}value> ?v }}")[0][0] is None


@pytest.mark.parametrize("text", [
    f"SELECT * WHERE {{ {{ ?o <{EX}by> ?s }} UNION {{ ?o <{EX}value> ?v }} }}",
    f"SELECT * WHERE {{ ?o <{EX}by> ?s OPTIONAL {{ ?o <{EX}value> ?v }} }}",
    f"SELECT * WHERE {{ ?o <{EX}by> ?s MINUS {{ ?o <{EX}value> ?v }} }}",
    f"SELECT * WHERE {{ ?o <{EX}by> ?s FILTER NOT EXISTS {{ ?o <{EX}value> ?v }} }}",
    f"SELECT * WHERE {{ ?o <{EX}by> ?s FILTER EXISTS {{ ?o <{EX}value> ?v }} }}",
    f"SELECT * WHERE {{ VALUES ?s {{ <{EX}a> }} ?o <{EX}by> ?s . ?o <{EX}value> ?v }}",
    f"SELECT * WHERE {{ ?o <{EX}by> ?s . {{ SELECT ?o WHERE {{ ?o <{EX}value> ?v }} LIMIT 1 }} }}",
    f"SELECT * WHERE {{ ?o <{EX}by>/<{EX}value> ?s . ?o <{EX}value> ?v }}",
    f"DESCRIBE ?o WHERE {{ ?o <{EX}by> ?s . ?o <{EX}value> ?v }}",
    f"SELECT * WHERE {{ GRAPH ?g {{ ?o <{EX}by> ?s }} GRAPH ?h {{ ?o <{EX}value> ?v }} }}",
])
def test_queries_whose_patterns_need_not_all_match_are_gathered_whole(text):
    assert _shape(text) is None


def _quads(n_obs: int) -> list[Quad]:
    """n_obs observations of two sensors, each with one value."""
    out = []
    for i in range(n_obs):
        g, ob = IRI(f"{EX}g{i}"), IRI(f"{EX}ob{i}")
        out.append(Quad(g, ob, IRI(f"{EX}by"), IRI(f"{EX}sensor{i % 2}")))
        out.append(Quad(g, ob, IRI(f"{EX}value"), Literal(str(i), "http://www.w3.org/2001/XMLSchema#integer")))
    return out


def _matching(quads, pattern):
    return [q for q in quads if all(t is None or t == v for t, v in zip(pattern, q))]


def _run(quads, planner, gathered, steps):
    while (step := planner.next()) is not None:
        steps.append(step)
        found = _matching(quads, box_of(planner.patterns[step.index])) if step.whole else \
            [q for lookup in step.lookups for q in _matching(quads, lookup)]
        planner.learn(step.index, found)
        gathered.update(found)


def _gather(quads, patterns, **limits):
    """The planner's steps over `quads` in memory, for one basic graph pattern."""
    planner = BindPlanner(patterns, [len(_matching(quads, box_of(p))) for p in patterns], **limits)
    gathered, steps = set(), []
    _run(quads, planner, gathered, steps)
    return gathered, steps


def _gathered_by_a_peer(quads, shape, cost):
    """What an entry peer gathers (peers/queries/candidates.py, the code itself) when its finds,
    lookups and estimates read `quads`: the quads, and its counters."""
    from collections import Counter

    import trio

    from peers.queries import QueryCandidates

    async def find(pattern):
        return _matching(quads, pattern)

    async def find_each(patterns):
        return [_matching(quads, p) for p in patterns]

    async def count(pattern):
        return len(_matching(quads, pattern))

    counters = Counter()
    candidates = QueryCandidates(find, find_each, count, counters, lookup_quads=cost)
    boxes = [box_of(p) for p in shape.patterns()]
    return trio.run(candidates.gather, boxes, shape), counters


def test_a_selective_pattern_binds_a_broad_one():
    quads = _quads(1000)
    patterns = _shape(f"SELECT ?v WHERE {{ ?ob <{EX}by> <{EX}sensor1> . ?ob <{EX}value> ?v }}")
    gathered, steps = _gather(quads, patterns, lookup_quads=1)
    assert steps[0] == Step(0) and not steps[1].whole and len(steps[1].lookups) == 500
    # ?ob fixed: one small box per observation of sensor1
    assert {lookup[1] for lookup in steps[1].lookups} == {IRI(f"{EX}ob{i}") for i in range(1, 1000, 2)}
    assert len(gathered) == 1000                       # against 1,500 fetched whole


def test_binding_is_chosen_only_where_it_moves_less():
    quads = _quads(1000)
    patterns = _shape(f"SELECT ?v WHERE {{ ?ob <{EX}by> <{EX}sensor1> . ?ob <{EX}value> ?v }}")
    _, steps = _gather(quads, patterns, lookup_quads=2)      # 500 lookups cost 1,000 quads: whole is 1,000
    assert steps[1] == Step(1)
    _, steps = _gather(quads, patterns, lookup_quads=1, max_lookups=499)
    assert steps[1] == Step(1)


def test_a_variable_left_without_values_fetches_nothing_more():
    quads = _quads(10)
    patterns = _shape(f"SELECT ?v WHERE {{ ?ob <{EX}by> <{EX}nobody> . ?ob <{EX}value> ?v }}")
    gathered, steps = _gather(quads, patterns)
    assert gathered == set() and steps[1] == Step(1, False, ())


def test_values_that_cannot_stand_in_a_slot_are_not_looked_up():
    """?x is bound to literals and IRIs by the first pattern; as a subject only the IRIs can match."""
    quads = _quads(6) + [Quad(IRI(f"{EX}g"), IRI(f"{EX}a"), IRI(f"{EX}link"), Literal("text")),
                         Quad(IRI(f"{EX}g"), IRI(f"{EX}a"), IRI(f"{EX}link"), IRI(f"{EX}ob3"))]
    patterns = _shape(f"SELECT * WHERE {{ <{EX}a> <{EX}link> ?x . ?x <{EX}value> ?v }}")
    gathered, steps = _gather(quads, patterns, lookup_quads=1)
    assert [lookup[1] for lookup in steps[1].lookups] == [IRI(f"{EX}ob3")]


# --- every plan answers like all the data --------------------------------------------------------

_G = [f"<{EX}g{i}>" for i in range(3)]
_S = [f"<{EX}s{i}>" for i in range(5)]
_P = [f"<{EX}p{i}>" for i in range(3)]
_O = _S[:3] + ['"1"', '"2"', '"x"@en']
_VARS = ["?a", "?b", "?c", "?d"]

quad_texts = st.tuples(st.sampled_from(_G), st.sampled_from(_S), st.sampled_from(_P), st.sampled_from(_O))
slot = st.one_of(st.sampled_from(_VARS), st.sampled_from(_S))
triple = st.tuples(slot, st.one_of(st.sampled_from(_P), st.sampled_from(_VARS[:2])),
                   st.one_of(slot, st.sampled_from(_O[3:])))


def _data(texts) -> list[Quad]:
    store = ox.Store()
    store.load(("\n".join(f"{s} {p} {o} {g} ." for g, s, p, o in texts)).encode(), ox.RdfFormat.N_QUADS)
    out = []
    for q in store:
        o = q.object
        obj = IRI(o.value) if isinstance(o, ox.NamedNode) else Literal(o.value, o.datatype.value, o.language)
        out.append(Quad(IRI(q.graph_name.value), IRI(q.subject.value), IRI(q.predicate.value), obj))
    return out


def _answers(quads, text):
    store = ox.Store()
    store.extend([quad_to_ox(q) for q in quads])
    result = store.query(text, use_default_graph_as_union=True)
    rows = json.loads(result.serialize(format=ox.QueryResultsFormat.JSON).decode())
    return sorted(json.dumps(r, sort_keys=True) for r in rows["results"]["bindings"])


@settings(max_examples=200, deadline=None)
@given(st.lists(quad_texts, min_size=1, max_size=40), st.lists(triple, min_size=1, max_size=3),
       st.lists(st.lists(triple, min_size=1, max_size=2), max_size=2), st.booleans(), st.integers(0, 3))
def test_what_the_planner_gathers_answers_every_query_as_all_the_data_does(data, triples, optional, in_graph, cost):
    quads = _data(data)
    body = " . ".join(" ".join(t) for t in triples)
    body += "".join(" OPTIONAL { " + " . ".join(" ".join(t) for t in group) + " }" for group in optional)
    text = f"SELECT * WHERE {{ {'GRAPH ?g { ' + body + ' }' if in_graph else body} }}"
    shape = join_shape(analyse(text)[1])
    assert shape is not None
    gathered, _ = _gathered_by_a_peer(quads, shape, cost)
    assert _answers(gathered, text) == _answers(quads, text)


def test_a_query_of_very_many_patterns_is_fetched_whole_without_estimates():
    """Planning asks one estimate (a multicast) per pattern: a query of hundreds would send as many."""
    from collections import Counter

    import trio

    from peers.queries import MAX_PLANNED, QueryCandidates

    quads = _quads(10)
    body = " . ".join(f"?o <{EX}p{i}> ?v{i}" for i in range(MAX_PLANNED + 1))
    shape = join_shape(analyse(f"SELECT * WHERE {{ {body} }}")[1])
    fetched = []

    async def find(pattern):
        fetched.append(pattern)
        return _matching(quads, pattern)

    async def never(*_):
        raise AssertionError("no estimate, no lookup")

    boxes = [box_of(p) for p in shape.patterns()]
    assert trio.run(QueryCandidates(find, never, never, Counter()).gather, boxes, shape) == set()
    assert fetched == boxes

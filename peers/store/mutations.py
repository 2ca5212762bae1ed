"""A peer's store changes as *mutations*: msgpack-able lists [kind, …arguments].

Every write goes through the log as mutations, and the same lists are what a replica receives
and what a zone's handover carries, so each is built by one function here and checked by
`check_mutation` before anything is logged (a replica request is input like any other).
"""

from __future__ import annotations

from typing import Any, Iterable

import pyoxigraph as ox

from eventcloud.errors import BadRequest, ModelError
from eventcloud.rdf.model import IRI, RDF_LANGSTRING, Quad
from eventcloud.wire.codec import triple_to_wire
from peers.store import mailboxes as mb
META_GRAPH = "urn:eventcloud:meta"
SUBSCRIPTIONS_GRAPH = "urn:eventcloud:subscriptions"
DECISIONS_GRAPH = "urn:eventcloud:decisions"
RESERVED_GRAPHS = frozenset({META_GRAPH, SUBSCRIPTIONS_GRAPH, DECISIONS_GRAPH})

#: One change, as a msgpack-able list: [kind, …arguments]. Build them with the functions below.
Mutation = list

#: One publication attempt: (key `entry-id:t_P`, the point its decision is kept at, on the wire).
Attempt = tuple[str, tuple[str, ...]]

#: Attempts an owner keeps for one pending event at most (the newest): a client retries a
#: failing publication about 15 times in its 30 s.
MAX_ATTEMPTS = 32


def attempts_of(tx: Any) -> tuple[Attempt, ...]:
    """The attempts a pending event waits on, from `tx` as written now (a list of [key, point])
    or by earlier versions (one [key, point]). The event is visible once any of them is decided
    commit: a republication (a retry, or a late copy of an earlier attempt) joins the attempts
    already known instead of replacing them, since an owner cannot always learn whether the one
    it held committed (its entry moving or down), and an acknowledged event must not be judged
    by an attempt that failed."""
    if not tx:
        return ()
    if _is_attempt(tx):
        return ((tx[0], tuple(tx[1])),)
    if isinstance(tx, (list, tuple)) and all(_is_attempt(a) for a in tx):
        return tuple((a[0], tuple(a[1])) for a in tx)[-MAX_ATTEMPTS:]
    raise BadRequest(f"not a publication attempt or a list of them: {str(tx)[:80]}")


def with_attempts(known: tuple[Attempt, ...], new: tuple[Attempt, ...]) -> tuple[Attempt, ...]:
    """`known`, then those of `new` not among them (the newest `MAX_ATTEMPTS`)."""
    keys = {key for key, _ in known}
    return (known + tuple(a for a in new if a[0] not in keys))[-MAX_ATTEMPTS:]


def _is_attempt(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], (list, tuple)))

def add(graph: str, quads: Iterable[Quad], size: int, published: int, *, committed: bool,
        tx: tuple[Any, ...] | None = None) -> Mutation:
    return add_triples(graph, [triple_to_wire(q) for q in quads], size, published, committed=committed, tx=tx)


def add_triples(graph: str, triples: list[list[Any]], size: int, published: int, *, committed: bool,
                tx: tuple[Any, ...] | None = None) -> Mutation:
    """`add` of triples in their wire form already (read straight from a store: a copy)."""
    attempts = [[key, list(point)] for key, point in attempts_of(tx)]
    return ["add", graph, triples, size, published, committed, attempts or None]


def commit(graph: str) -> Mutation:
    return ["commit", graph]


def notified(graph: str) -> Mutation:
    return ["notified", graph]


def abort(graph: str, attempts: Iterable[str] = ()) -> Mutation:
    """Drop an event that never committed (its quads and metadata), if it waits on none but
    these attempts (their keys) when the store applies it: an attempt that joined while the
    abort waited for the disk (a retry stored here, to be acknowledged) keeps the event. No
    attempts given (and in logs of earlier versions): whatever it waits on."""
    keys = list(attempts)
    return ["abort", graph, keys] if keys else ["abort", graph]


def delete(graph: str) -> Mutation:
    return ["delete", graph]


def remove(graph: str, quads: Iterable[Quad]) -> Mutation:
    """Remove some quads of an event (handed to another peer with part of the zone)."""
    return ["remove", graph, [triple_to_wire(q) for q in quads]]


def put_subscription(ident: str, record: dict[str, Any]) -> Mutation:
    return ["sub", ident, record]


def drop_subscription(ident: str) -> Mutation:
    return ["unsub", ident]


def decide(key: str, decision: str, point: list[str]) -> Mutation:
    """An entry peer's decision on one publication attempt (commit or abort), kept at `point`."""
    return ["decide", key, decision, point]


def release(key: str) -> Mutation:
    """Forget a decision (a graph's claim, once its event is deleted: the IRI may be used again)."""
    return ["release", key]


_TRIPLES = "a list of [s, p, o] triples"
#: kind -> the type of each argument ("triples": a list of 3-item lists; "tx": attempts or None)
_SHAPES: dict[str, tuple[Any, ...]] = {
    "add": (str, "triples", int, int, bool, "tx"), "commit": (str,), "notified": (str,), "abort": (str,),
    "delete": (str,), "remove": (str, "triples"), "sub": (str, dict), "unsub": (str,),
    "decide": (str, str, list), "release": (str,), **mb.SHAPES,
}


def check_mutation(mutation: Any) -> None:
    """BadRequest unless `mutation` has the shape of one the store knows (it is never logged)."""
    if not isinstance(mutation, list) or not mutation or mutation[0] not in _SHAPES:
        raise BadRequest(f"not a store mutation: {str(mutation)[:80]}")
    shape = _SHAPES[mutation[0]]
    if mutation[0] == "abort" and len(mutation) == 3:   # with the attempts it is conditional on
        shape = (str, list)
        if not all(isinstance(key, str) for key in mutation[2]):
            raise BadRequest(f"store mutation 'abort': attempts {mutation[2]!r:.60} are not keys")
    if len(mutation) != len(shape) + 1:
        raise BadRequest(f"store mutation {mutation[0]!r} takes {len(shape)} arguments, got {len(mutation) - 1}")
    for value, kind in zip(mutation[1:], shape):
        if kind == "triples":
            ok = isinstance(value, list) and all(isinstance(q, list) and len(q) == 3 for q in value)
        elif kind == "tx":
            try:
                ok = value is None or (isinstance(value, list) and bool(attempts_of(value)))
            except BadRequest:
                ok = False
        else:
            ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            raise BadRequest(f"store mutation {mutation[0]!r}: argument {value!r:.60} is not {kind}")
    if mutation[0] in ("box", "install"):
        _check_mailbox(mutation)
    if mutation[0] in ("add", "remove", "commit", "notified", "abort", "delete"):
        try:
            IRI(mutation[1])
        except ModelError as exc:
            raise BadRequest(f"store mutation {mutation[0]!r}: {exc.message}") from None
    if mutation[0] in ("add", "remove"):
        if mutation[1] in RESERVED_GRAPHS:
            raise BadRequest(f"store mutation {mutation[0]!r}: graph {mutation[1]} is reserved")
        try:
            for triple in mutation[2]:
                _check_triple(triple)
        except (BadRequest, ValueError, TypeError) as exc:
            raise BadRequest(f"store mutation {mutation[0]!r}: invalid triple {str(triple)[:120]}: "
                             f"{getattr(exc, 'message', exc)}") from None


def _check_triple(triple: list) -> None:
    """Refuse a triple the store could not take, before it is logged (a logged one that fails
    to apply would fail at every replay). Mutations come from peers, which checked every term
    where it entered (`eventcloud.rdf.model`'s rules); here the store's own parser checks the
    IRIs, ~10x cheaper than our rules again (a third of a loaded peer's CPU went there)."""
    s, p, o = triple
    if type(s) is not str or type(p) is not str:
        raise BadRequest("a subject and a predicate are IRIs")
    ox.NamedNode(s)
    ox.NamedNode(p)
    if type(o) is str:
        ox.NamedNode(o)
    elif type(o) is list and len(o) in (2, 3) and all(type(x) is str for x in o):
        if len(o) == 3:
            if o[1] != RDF_LANGSTRING:
                raise BadRequest("a language-tagged literal has datatype rdf:langString")
            ox.Literal(o[0], language=o[2])
        elif o[1] == RDF_LANGSTRING:
            raise BadRequest("an rdf:langString literal needs a language tag")
        else:
            ox.Literal(o[0], datatype=ox.NamedNode(o[1]))
    else:
        raise BadRequest("an object is an IRI or [lexical, datatype(, language)]")


_BOX_FIELDS = {"sparql": str, "kind": str, "ticket": str, "home": list, "t": int, "expires": int}


def _check_mailbox(mutation: list) -> None:
    try:
        record = mb.Mailbox.unpack(mutation[1]).record if mutation[0] == "install" else mutation[2]
        for name, kind in _BOX_FIELDS.items():
            if not isinstance(record.get(name), kind):
                raise BadRequest(f"field {name!r} is not {kind.__name__}")
    except (ValueError, TypeError, AttributeError, BadRequest) as exc:
        raise BadRequest(f"store mutation {mutation[0]!r}: not a mailbox ({exc})") from None

"""The paper's synthetic workload (§5), deterministic by seed.

Subscription i is a chain of k patterns over predicates that belong to it alone::

    SELECT ?g ?s1 ?o1 … ?ok WHERE { GRAPH ?g { ?s1 <p1> ?o1 . ?o1 <p2> ?o2 . … ?o(k-1) <pk> ?ok } }

so it matches exactly the compound events built from its own chain, and every count of
expected notifications is known in advance (the manifest says which subscription each event
matches). Matching events go round-robin over the subscriptions, as the paper's "generated to
evenly match subscriptions". An event that must match nothing reuses a subscription's chain with
one join broken (k ≥ 2), so the matchers still do real work on it (the first patterns match); with
k = 1 or no subscription it carries filler predicates only. Events of more quads than k (25 for
Fig. 2e) get filler quads after the chain.

Every IRI and literal local part is drawn from a seeded generator so that points spread over the
four CAN axes; the last literal(s) of each event are padded so that the event's N-Quads text
reaches `bytes_per_quad × quads_per_event` bytes (670 for the paper's 5-quad events).
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eventcloud.rdf.model import IRI, CompoundEvent, Literal, Quad, make_quad

#: Average N-Quads bytes of one quad in the paper's events (5 quads ≈ 670 bytes).
BYTES_PER_QUAD = 134
#: The subscription of Fig. 2(d), matching every compound event.
ACCEPT_ALL = "SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
ACCEPT_ALL_NAME = "all"

_BASE = "http://wl.example/"
_ALPHABET = string.ascii_lowercase + string.digits
EVENTS_FILE, SUBSCRIPTIONS_FILE, MANIFEST_FILE = "events.nq", "subscriptions.json", "manifest.json"


class WorkloadError(ValueError):
    """Parameters that cannot make the asked-for workload, or a malformed workload directory."""


@dataclass
class Workload:
    """Events, subscriptions and the ground truth of which event each subscription matches.

    `names[i]` names `subscriptions[i]` ("s0", "s1", …, "all" for the accept-all one);
    `matches[name]` lists the indexes (into `events`) of the events that subscription matches.
    """

    events: list[CompoundEvent]
    subscriptions: list[str]
    matches: dict[str, list[int]]
    names: list[str] = field(default_factory=list)
    seed: int = 0
    k: int = 5
    quads_per_event: int = 5
    matching_fraction: float = 1.0
    accept_all: bool = False

    def __post_init__(self) -> None:
        if not self.names:
            self.names = [f"s{i}" for i in range(len(self.subscriptions))]

    @property
    def expected_notifications(self) -> int:
        """Notifications a correct overlay delivers: one per matching (subscription, event)."""
        return sum(len(indexes) for indexes in self.matches.values())

    def event_bytes(self) -> list[int]:
        """N-Quads size of each event, the size the paper quotes (≈ 670 bytes for 5 quads)."""
        return [len(event.n_quads().encode()) for event in self.events]

    def manifest(self) -> dict:
        sizes = self.event_bytes()
        return {
            "seed": self.seed,
            "events": len(self.events),
            "subscriptions": len(self.subscriptions),
            "k": self.k,
            "quads_per_event": self.quads_per_event,
            "quads": sum(len(e) for e in self.events),
            "matching_fraction": self.matching_fraction,
            "accept_all": self.accept_all,
            "bytes_per_event": {
                "mean": sum(sizes) / len(sizes) if sizes else 0,
                "min": min(sizes, default=0),
                "max": max(sizes, default=0),
            },
            "expected_notifications": self.expected_notifications,
            "graphs": [e.graph.value for e in self.events],
            "matches": self.matches,
        }


class _Names:
    """Seeded local names, unique within one workload so no two events share a graph."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._seen: set[tuple[str, str]] = set()

    def iri(self, kind: str, width: int = 8) -> IRI:
        while True:
            local = f"{self._rng.getrandbits(4 * width):0{width}x}"
            if (kind, local) not in self._seen:
                self._seen.add((kind, local))
                return IRI(f"{_BASE}{kind}/{local}")


def chain_query(predicates: Sequence[IRI]) -> str:
    """The SPARQL text of the chain (?g ?s1 p1 ?o1) ∧ (?g ?o1 p2 ?o2) ∧ … ∧ (?g ?o(k-1) pk ?ok)."""
    nodes = ["?s1"] + [f"?o{j}" for j in range(1, len(predicates) + 1)]
    patterns = " . ".join(f"{nodes[j]} {p.n3()} {nodes[j + 1]}" for j, p in enumerate(predicates))
    return f"SELECT ?g {' '.join(nodes)} WHERE {{ GRAPH ?g {{ {patterns} }} }}"


def generate(
    *,
    events: int,
    subscriptions: int,
    k: int = 5,
    quads_per_event: int = 5,
    seed: int = 0,
    accept_all: bool = False,
    matching_fraction: float = 1.0,
    bytes_per_quad: int = BYTES_PER_QUAD,
) -> Workload:
    """Build the workload; the same arguments always give the same events and subscriptions.

    `matching_fraction` of the events (evenly spaced) match one chain subscription each,
    round-robin; the others match none. `accept_all` appends the accept-all subscription,
    which matches every event.
    """
    if events < 0 or subscriptions < 0:
        raise WorkloadError("events and subscriptions must be ≥ 0")
    if k < 1:
        raise WorkloadError(f"k must be ≥ 1, got {k}")
    if not 0.0 <= matching_fraction <= 1.0:
        raise WorkloadError(f"matching_fraction must be within [0, 1], got {matching_fraction}")
    if subscriptions and quads_per_event < k:
        raise WorkloadError(
            f"an event matching a chain of k={k} patterns needs ≥ {k} quads; "
            f"raise quads_per_event (got {quads_per_event}) or lower k"
        )
    if quads_per_event < 1:
        raise WorkloadError(f"quads_per_event must be ≥ 1, got {quads_per_event}")
    rng = random.Random(seed)
    names = _Names(rng)
    chains = [[names.iri("p") for _ in range(k)] for _ in range(subscriptions)]
    fillers = [names.iri("f") for _ in range(max(4, quads_per_event))]
    queries = [chain_query(chain) for chain in chains]
    labels = [f"s{i}" for i in range(subscriptions)]
    matches: dict[str, list[int]] = {label: [] for label in labels}
    target = bytes_per_quad * quads_per_event

    built: list[CompoundEvent] = []
    matching_seen = missing_seen = 0
    for index in range(events):
        graph = names.iri("g", 10)
        wanted = int((index + 1) * matching_fraction) > int(index * matching_fraction)
        if subscriptions and wanted:
            owner = matching_seen % subscriptions
            matching_seen += 1
            matches[labels[owner]].append(index)
            triples = _chain(names, chains[owner], broken=False)
        elif subscriptions and k >= 2:
            triples = _chain(names, chains[missing_seen % subscriptions], broken=True)
            missing_seen += 1
        else:
            triples = []
        while len(triples) < quads_per_event:
            triples.append((names.iri("n"), rng.choice(fillers), Literal("")))
        built.append(_padded(graph, triples, target, rng))
    if accept_all:
        queries.append(ACCEPT_ALL)
        labels.append(ACCEPT_ALL_NAME)
        matches[ACCEPT_ALL_NAME] = list(range(events))
    return Workload(
        events=built,
        subscriptions=queries,
        matches=matches,
        names=labels,
        seed=seed,
        k=k,
        quads_per_event=quads_per_event,
        matching_fraction=matching_fraction,
        accept_all=accept_all,
    )


def _chain(names: _Names, predicates: Sequence[IRI], *, broken: bool) -> list[tuple]:
    """s1 -p1-> o1 -p2-> … -pk-> ok, the last object a literal; `broken` cuts the last join."""
    nodes = [names.iri("n") for _ in range(len(predicates))]
    triples: list[tuple] = []
    for j, predicate in enumerate(predicates):
        last = j == len(predicates) - 1
        subject = names.iri("n") if broken and last else nodes[j]
        obj = Literal("") if last else nodes[j + 1]
        triples.append((subject, predicate, obj))
    return triples


def _padded(graph: IRI, triples: list[tuple], target: int, rng: random.Random) -> CompoundEvent:
    """Fill the literal objects with seeded text so the event's N-Quads size reaches `target`."""
    literal_slots = [j for j, (_, _, o) in enumerate(triples) if isinstance(o, Literal)]
    base = sum(len(make_quad(graph, *t).n_quads().encode()) + 1 for t in triples)
    room = max(0, target - base)
    # Every literal gets at least a few characters so objects spread over the object axis.
    share, extra = divmod(room, len(literal_slots)) if literal_slots else (0, 0)
    quads: list[Quad] = []
    for j, (s, p, o) in enumerate(triples):
        if j in literal_slots:
            slot = literal_slots.index(j)
            width = share + (1 if slot < extra else 0)
            o = Literal("".join(rng.choices(_ALPHABET, k=width)))
        quads.append(make_quad(graph, s, p, o))
    return CompoundEvent(graph, tuple(quads))


# --- files ---------------------------------------------------------------------------------


def write(workload: Workload, directory: str | Path) -> Path:
    """Write events.nq, subscriptions.json and manifest.json into `directory` (created)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / EVENTS_FILE, "w", encoding="utf-8", newline="\n") as out:
        for event in workload.events:
            out.write(event.n_quads())
    subs = [{"name": n, "sparql": q} for n, q in zip(workload.names, workload.subscriptions)]
    (path / SUBSCRIPTIONS_FILE).write_text(json.dumps(subs, indent=1) + "\n", encoding="utf-8")
    (path / MANIFEST_FILE).write_text(json.dumps(workload.manifest()) + "\n", encoding="utf-8")
    return path


def load(directory: str | Path) -> Workload:
    """Read back a directory written by `write`, events in their original order."""
    path = Path(directory)
    for name in (EVENTS_FILE, SUBSCRIPTIONS_FILE, MANIFEST_FILE):
        if not (path / name).is_file():
            raise WorkloadError(
                f"{path / name} is missing: is {path} a workload directory? "
                "Make one with `python -m experiments.workloads --out DIR`"
            )
    manifest = json.loads((path / MANIFEST_FILE).read_text(encoding="utf-8"))
    subs = json.loads((path / SUBSCRIPTIONS_FILE).read_text(encoding="utf-8"))
    by_graph = {event.graph.value: event for event in read_event_file(path / EVENTS_FILE)}
    try:
        events = [by_graph[g] for g in manifest["graphs"]]
    except KeyError as missing:
        raise WorkloadError(f"{path / EVENTS_FILE} has no event {missing}; the directory is inconsistent")
    return Workload(
        events=events,
        subscriptions=[s["sparql"] for s in subs],
        matches={name: list(indexes) for name, indexes in manifest["matches"].items()},
        names=[s["name"] for s in subs],
        seed=manifest["seed"],
        k=manifest["k"],
        quads_per_event=manifest["quads_per_event"],
        matching_fraction=manifest["matching_fraction"],
        accept_all=manifest["accept_all"],
    )


def read_event_file(path: str | Path) -> list[CompoundEvent]:
    """Compound events of an N-Quads file (eventcloud.rdf.files when present, else pyoxigraph)."""
    try:
        from eventcloud.rdf.files import read_events
    except ImportError:
        return _parse_nquads(path)
    return list(read_events(path, timestamp_ms=0))


def _parse_nquads(path: str | Path) -> list[CompoundEvent]:
    import pyoxigraph as ox

    grouped: dict[str, list[Quad]] = {}
    for q in ox.parse(path=str(path), format=ox.RdfFormat.N_QUADS):
        if not isinstance(q.graph_name, ox.NamedNode):
            raise WorkloadError(f"{path}: quad {q} is not in a named graph, so it belongs to no event")
        graph = IRI(q.graph_name.value)
        grouped.setdefault(graph.value, []).append(
            make_quad(graph, _term(q.subject), _term(q.predicate), _term(q.object))
        )
    return [CompoundEvent(quads[0].g, tuple(quads)) for quads in grouped.values()]


def _term(term: object) -> IRI | Literal:
    import pyoxigraph as ox

    if isinstance(term, ox.NamedNode):
        return IRI(term.value)
    if isinstance(term, ox.Literal):
        return Literal(term.value, term.datatype.value, term.language)
    raise WorkloadError(f"unsupported term {term} in a workload file (blank nodes are not generated)")


# --- command line --------------------------------------------------------------------------


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.workloads",
        description="Write the paper's synthetic workload (events.nq, subscriptions.json, manifest.json).",
    )
    parser.add_argument("--events", type=int, required=True, help="number of compound events")
    parser.add_argument("--subscriptions", type=int, default=1, help="number of chain subscriptions")
    parser.add_argument("--k", type=int, default=5, help="patterns per chain subscription")
    parser.add_argument("--quads", type=int, default=5, help="quads per event (25 for Fig. 2e)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--accept-all", action="store_true", help="add the accept-all subscription")
    parser.add_argument("--matching", type=float, default=1.0, help="fraction of events that match")
    parser.add_argument("--out", required=True, help="directory to write")
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        workload = generate(
            events=args.events,
            subscriptions=args.subscriptions,
            k=args.k,
            quads_per_event=args.quads,
            seed=args.seed,
            accept_all=args.accept_all,
            matching_fraction=args.matching,
        )
    except WorkloadError as error:
        parser.error(str(error))
    path = write(workload, args.out)
    manifest = workload.manifest()
    print(
        f"{path}: {manifest['events']} events × {workload.quads_per_event} quads "
        f"(≈{manifest['bytes_per_event']['mean']:.0f} bytes each), "
        f"{manifest['subscriptions']} subscriptions, "
        f"{manifest['expected_notifications']} expected notifications"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The scale simulation: overlays of 64 to 10,000 peers built in-process, before and after balanced joins.

    python -m experiments.scale [--sizes 64,256,1000,4000,10000] [--datasets paper,citybench] [--rules before,after,annexes]
                                [--mappings local-name,identity] [--events 100000] [--routes 2000]
                                [--seed 1] [--plot docs/figures/scale.png]

Every overlay is built with the peers' own pure code from `eventcloud.overlay`: the join is
`split_for_join` on the owner's zone and table, the old neighbours update their tables with
`announced`, routes are `next_hop` hop by hop, probes and subscriptions are routed and
multicast with `multicast_root` / `multicast_children`, and the data-aware cut is
`median_split`, the very function the daemon calls (peers/membership/membership.py). Nothing is sent
over a socket; a "message" is one request a peer sends.

Three join rules are compared on the same data, side by side:

* **before** (the original rule): the newcomer routes a join to a uniformly random point and
  its owner halves its zone at the midpoint of the next dimension in turn;
* **after** (balanced joins, docs/overlay.md): the newcomer routes `--probes` random points to
  their owners, keeps the busiest, climbs to a busier neighbour while there is one, and that
  peer cuts its zone at the median of its quads (`median_split`); a zone without data is
  halved as before;
* **annexes** (what the peers do now, docs/overlay.md "Annex zones"): balanced joins that
  probe and climb by *host* load, each followed by the peers' annex rule (a zone with more
  than 48 neighbours gives an empty side to the host it costs least, a host over 64 hands an
  empty annex on; `AnnexOverlay` with `peers_rule` in experiments/annex_study.py). Sizes,
  neighbours and loads are then the hosts' (a host's neighbours: the distinct zones next to
  any of its zones); hops and multicasts go zone by zone.

Data is stored first (all of it on the first peer, then peers join one by one; each split
hands the upper part's quads to the newcomer), and the figures are taken as the overlay
passes each size: mean/max greedy hops (random start peer to a stored quad's point, and to a
uniformly random point) against the CAN bound (d/3)·n^(1/4) for d = 4 (no wrap-around);
neighbours per peer (max/mean); quads per peer (max/mean and the share of empty peers); the
peers a chain subscription's indexing box meets, the messages of one multicast over that
box (what a subscribe costs: it reaches only the peers its box meets), and, to compare, those
of a subscribe made of two whole-space multicasts (clock then store), which reach every peer.

Datasets: the paper's workload (experiments/workloads.py: `--events` compound events of 5
quads, 10 chain subscriptions of k = 5) and CityBench (every stream of shared/data/citybench
as compound events, plus SensorRepository.n3, AarhusLibraryEvents.n3 and
AarhusCulturalEvents.rdf: 1.73 M quads), each under both coordinate mappings.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from eventcloud.overlay import (
    Box, CoordinateSpace, Neighbour, Point, Zone, announced, climb, cut_for, evenly, multicast_children,
    multicast_root, next_hop, split_for_join,
)
from eventcloud.rdf.model import Quad

DIMS = 4
MAX_HOPS = 256
SIZES = (64, 256, 1000, 4000, 10000)
RULES = ("before", "after", "annexes")
#: The peers' annex settings (peers/config.py: neighbour_limit, host_neighbour_cap).
NEIGHBOUR_LIMIT, HOST_CAP = 48, 64


def can_bound(n: int) -> float:
    """The CAN's mean path length without wrap-around, (d/3)·n^(1/d), for d = 4."""
    return DIMS / 3 * n ** (1 / DIMS)


@dataclass
class Dataset:
    name: str
    quads: list[Quad]
    #: (g, s, p, o) indexing patterns (None: a variable) of the chain subscriptions measured.
    patterns: list[tuple]


@dataclass
class Stats:
    peers: int
    hops_data: tuple[float, int, int]     # mean, max, failed (over MAX_HOPS) to stored quads
    hops_uniform: tuple[float, int, int]  # … to uniformly random points
    neighbours: tuple[int, float]
    load: tuple[int, float, float]        # max, mean, share of empty peers
    fanout: float                         # peers a chain subscription's box meets (mean)
    box_messages: float                   # requests of one routed multicast over that box (mean)
    subscribe_today: float                # requests of a subscribe by two whole-space multicasts (the baseline)
    join_messages: float                  # requests per join (probes, climb, the join itself)
    seconds: float = 0.0
    zones: int = 0                        # with annexes: zones (peers count hosts, loads and neighbours theirs)


@dataclass
class SimOverlay:
    """An overlay of simulated peers: zones, neighbour tables and the indexes of the points each holds."""

    space: CoordinateSpace
    points: Sequence[Point]
    rng: random.Random
    rule: str = "after"
    probes: int = 4
    climb_steps: int = 16
    zones: dict[int, Zone] = field(default_factory=dict)
    tables: dict[int, dict[int, Neighbour]] = field(default_factory=dict)
    held: dict[int, list[int]] = field(default_factory=dict)
    join_requests: int = 0
    next_id: int = 1

    def __post_init__(self) -> None:
        self.zones[0] = Zone(self.space.whole_space())
        self.tables[0] = {}
        self.held[0] = list(range(len(self.points)))

    def __len__(self) -> int:
        return len(self.zones)

    # --- routing ----------------------------------------------------------------------------

    def route(self, start: int, point: Point) -> tuple[int, int]:
        """Greedy route from `start` to the owner of `point`: (owner, hops); hops > MAX_HOPS: failed."""
        current, hops = start, 0
        while hops <= MAX_HOPS:
            table = self.tables[current]
            hop = next_hop(self.zones[current], {k: n.zone for k, n in table.items()}, point)
            if hop is None:
                return current, hops
            current, hops = hop, hops + 1
        return current, hops

    def multicast(self, start: int, box: Box) -> tuple[int, int]:
        """A multicast over `box` from `start`: (peers reached, requests sent). Every peer meeting the
        box must be reached exactly once."""
        root, hops = self.route(start, multicast_root(box))
        reached = {root}
        frontier, requests = [root], hops
        while frontier:
            peer = frontier.pop()
            table = self.tables[peer]
            for child in multicast_children(self.zones[peer], {k: n.zone for k, n in table.items()}, box):
                requests += 1
                if child in reached:
                    raise AssertionError(f"multicast reached peer {child} twice")
                reached.add(child)
                frontier.append(child)
        return len(reached), requests

    def random_point(self) -> Point:
        return tuple(self.rng.randrange(self.space.top) for _ in range(DIMS))  # type: ignore[return-value]

    # --- joining ----------------------------------------------------------------------------

    def join(self) -> int:
        """One newcomer joins through a random peer; returns its id."""
        bootstrap = self._any_peer()
        point = self.random_point()
        owner, hops = self.route(bootstrap, point)
        requests = hops
        if self.rule == "after":
            for _ in range(self.probes - 1):
                other, hops = self.route(bootstrap, self.random_point())
                requests += hops + 1     # the route, then the owner's load report
                if self.load(other) > self.load(owner):
                    owner = other
            for _ in range(self.climb_steps):
                loads = {k: self.load(k) for k in self.tables[owner]}
                requests += len(loads)   # one load request per neighbour
                step = climb(owner, self.load(owner), loads)
                if step == owner:
                    break
                owner = step
        self.join_requests += requests + 1
        return self._split(owner)

    def load(self, key: int) -> int:
        """What a probe or a climb step reads of peer `key`: the quads it holds."""
        return len(self.held[key])

    def _any_peer(self) -> int:
        while True:  # ids are dense unless peers left
            key = self.rng.randrange(self.next_id)
            if key in self.zones:
                return key

    def _split(self, owner: int) -> int:
        newcomer, self.next_id = self.next_id, self.next_id + 1
        zone, held = self.zones[owner], self.held[owner]
        cut = None
        if self.rule == "after":
            cut = cut_for(zone, [self.points[i] for i in evenly(held)])
        self.cut(owner, newcomer, cut)
        return newcomer

    def cut(self, owner: int, newcomer: int, cut: tuple[int, int] | None) -> None:
        """Split `owner`'s zone for `newcomer` with `split_for_join` (at `cut`, or its midpoint):
        the quads above the cut and the upper zone go to the newcomer, tables stay exact."""
        zone, held = self.zones[owner], self.held[owner]
        plan = split_for_join(str(owner), str(owner), zone, {str(k): n for k, n in self.tables[owner].items()},
                              str(newcomer), str(newcomer), cut=cut)
        dim = plan.granted.splits[-1]
        at = plan.granted.bounds[dim][0]
        points = self.points
        self.held[owner] = [i for i in held if points[i][dim] < at]
        self.held[newcomer] = [i for i in held if points[i][dim] >= at]
        self.zones[owner], self.zones[newcomer] = plan.kept, plan.granted
        self.tables[owner] = {int(k): n for k, n in plan.owner_table.items()}
        self.tables[newcomer] = {int(k): n for k, n in plan.newcomer_table.items()}
        records = [(str(owner), Neighbour(str(owner), plan.kept)), (str(newcomer), Neighbour(str(newcomer), plan.granted))]
        for address in plan.announce_to:
            peer = int(address)
            table = announced(address, self.zones[peer], {str(k): n for k, n in self.tables[peer].items()}, records)
            self.tables[peer] = {int(k): n for k, n in table.items()}

    # --- measuring --------------------------------------------------------------------------

    def measure(self, boxes: Sequence[Box], routes: int, joins: int) -> Stats:
        n = len(self.zones)
        keys = list(self.zones)

        def hops_to(targets: Callable[[], Point]) -> tuple[float, int, int]:
            counts = [self.route(self.rng.choice(keys), targets())[1] for _ in range(routes)]
            failed = sum(c > MAX_HOPS for c in counts)
            return statistics.mean(counts), max(counts), failed

        stored = hops_to(lambda: self.points[self.rng.randrange(len(self.points))])
        uniform = hops_to(self.random_point)
        degrees = [len(t) for t in self.tables.values()]
        loads = [len(h) for h in self.held.values()]
        fan, box_requests = [], []
        for box in boxes:
            reached, requests = self.multicast(self.rng.choice(keys), box)
            fan.append(reached)
            box_requests.append(requests)
        whole, whole_requests = self.multicast(self.rng.choice(keys), self.space.whole_space())
        assert whole == n, f"a whole-space multicast reached {whole} of {n} peers"
        return Stats(n, stored, uniform, (max(degrees), statistics.mean(degrees)),
                     (max(loads), statistics.mean(loads), sum(1 for x in loads if x == 0) / n),
                     statistics.mean(fan) if fan else 0.0, statistics.mean(box_requests) if box_requests else 0.0,
                     2.0 * whole_requests, self.join_requests / max(1, joins))


def simulate(space: CoordinateSpace, points: Sequence[Point], boxes: Sequence[Box], rule: str, sizes: Iterable[int],
             *, routes: int, seed: int, probes: int = 4) -> list[Stats]:
    """Grow one overlay to each size in turn (data stored first) and measure it at each. With
    `annexes`, balanced joins climbing by host load plus the peers' annex rule
    (experiments/annex_study.py, `--peers-rule --host-climb`): sizes count hosts."""
    if rule == "annexes":
        return _simulate_annexes(space, points, boxes, sizes, routes=routes, seed=seed, probes=probes)
    overlay = SimOverlay(space, points, random.Random(seed), rule=rule, probes=probes)
    results = []
    started = time.perf_counter()
    for size in sorted(sizes):
        while len(overlay) < size:
            overlay.join()
        stats = overlay.measure(boxes, routes, len(overlay) - 1)
        stats.seconds = time.perf_counter() - started
        results.append(stats)
    return results


def _simulate_annexes(space: CoordinateSpace, points: Sequence[Point], boxes: Sequence[Box], sizes: Iterable[int],
                      *, routes: int, seed: int, probes: int) -> list[Stats]:
    from experiments.annex_study import AnnexOverlay   # it builds on SimOverlay

    overlay = AnnexOverlay(space, points, random.Random(seed), rule="after", probes=probes)
    overlay.peers_rule = overlay.host_climb = True
    rng = random.Random(seed + 7)
    results = []
    started = time.perf_counter()
    for size in sorted(sizes):
        while len(overlay.zones_of) < size:
            overlay.grow_one(NEIGHBOUR_LIMIT, HOST_CAP, rng)
        overlay.settle(HOST_CAP, rng, passes=False)
        stats = overlay.measure(boxes, routes, len(overlay.zones_of) - 1)
        hosts = list(overlay.zones_of)
        counts = [overlay.host_count(h) for h in hosts]
        loads = [overlay.host_load(h) for h in hosts]
        stats = replace(stats, peers=len(hosts), zones=len(overlay.zones),
                        neighbours=(max(counts), statistics.mean(counts)),
                        load=(max(loads), statistics.mean(loads), sum(1 for x in loads if x == 0) / len(hosts)))
        stats.seconds = time.perf_counter() - started
        results.append(stats)
    return results


# --- datasets ---------------------------------------------------------------------------------

CITYBENCH_SUBSCRIPTIONS = [
    # a traffic alert: observations of average speed with their value
    "PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#> PREFIX sao: <http://purl.oclc.org/NET/sao/> "
    "PREFIX ct: <http://www.insight-centre.org/citytraffic#> "
    "SELECT * WHERE { GRAPH ?g { ?ob ssn:observedProperty ?p . ?p a ct:AvgSpeed . ?ob sao:hasValue ?v } }",
    # a reading and its time
    "PREFIX sao: <http://purl.oclc.org/NET/sao/> PREFIX tl: <http://purl.org/NET/c4dm/timeline.owl#> "
    "SELECT * WHERE { GRAPH ?g { ?ob sao:hasValue ?v . ?ob sao:time ?t . ?t tl:at ?when } }",
    # which sensor observed what
    "PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#> "
    "SELECT * WHERE { GRAPH ?g { ?ob ssn:observedBy ?sensor . ?ob ssn:observedProperty ?p } }",
]


def paper_dataset(events: int, seed: int) -> Dataset:
    from experiments.workloads import generate

    workload = generate(events=events, subscriptions=10, k=5, seed=seed)
    return Dataset(f"paper workload ({events:,} CEs × 5 quads)", [q for e in workload.events for q in e.quads],
                   _indexing_patterns(workload.subscriptions))


def citybench_dataset(directory: Path) -> Dataset:
    from eventcloud.rdf.citybench import STREAMS, read_stream
    from eventcloud.rdf.files import read_events

    quads: list[Quad] = []
    for name in sorted(STREAMS):
        for event in read_stream(directory / name):
            quads.extend(event.quads)
    for name in ("SensorRepository.n3", "AarhusLibraryEvents.n3", "AarhusCulturalEvents.rdf"):
        for event in read_events(directory / name, timestamp_ms=0):
            quads.extend(event.quads)
    return Dataset("CityBench (all streams and RDF files)", quads, _indexing_patterns(CITYBENCH_SUBSCRIPTIONS))


def _indexing_patterns(queries: Sequence[str]) -> list[tuple]:
    from eventcloud.sparql.subscription import parse_subscription

    return [parse_subscription(q).pattern_terms(0) for q in queries]


def place(space: CoordinateSpace, quads: Sequence[Quad]) -> list[Point]:
    """Every quad's point (each distinct term's coordinate computed once)."""
    memo: dict = {}
    coordinate = space._compute_coordinate

    def c(term) -> int:
        value = memo.get(term)
        if value is None:
            value = memo[term] = coordinate(term)
        return value

    return [(c(q.g), c(q.s), c(q.p), c(q.o)) for q in quads]


# --- report -----------------------------------------------------------------------------------


def table(rows: list[tuple[str, str, Stats]]) -> str:
    lines = ["| dataset · mapping | rule | peers | mean hops to a quad (max) | to a random point | bound (d/3)·n^¼ "
             "| neighbours max / mean | quads per peer max / mean (×) | empty peers | box peers | box multicast "
             "requests | old subscribe requests | requests per join |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, rule, s in rows:
        worst, mean, empty = s.load
        ratio = worst / mean if mean else 0.0
        failed = f", {s.hops_data[2]} over {MAX_HOPS}" if s.hops_data[2] else ""
        peers = f"{s.peers:,} ({s.zones:,} zones)" if s.zones else f"{s.peers:,}"
        lines.append(
            f"| {label} | {rule} | {peers} | {s.hops_data[0]:.1f} ({s.hops_data[1]}{failed}) | "
            f"{s.hops_uniform[0]:.1f} ({s.hops_uniform[1]}) | {can_bound(s.peers):.1f} | "
            f"{s.neighbours[0]} / {s.neighbours[1]:.1f} | {worst:,} / {mean:,.1f} ({ratio:.1f}×) | {100 * empty:.1f}% | "
            f"{s.fanout:,.0f} | {s.box_messages:,.0f} | {s.subscribe_today:,.0f} | {s.join_messages:.1f} |")
    return "\n".join(lines)


def plot(results: dict[tuple[str, str, str], list[Stats]], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 4.2))
    axes = figure.subplots(1, 3)
    for (dataset, mapping, rule), stats in results.items():
        sizes = [s.peers for s in stats]
        style = {"after": "-", "annexes": "-."}.get(rule, "--")
        label = f"{dataset.split(' (')[0]} · {mapping} · {rule}"
        axes[0].plot(sizes, [s.load[0] / s.load[1] for s in stats], style, marker="o", label=label)
        axes[1].plot(sizes, [s.hops_data[0] for s in stats], style, marker="o", label=label)
        axes[2].plot(sizes, [s.neighbours[0] for s in stats], style, marker="o", label=label)
    sizes = sorted({s.peers for stats in results.values() for s in stats})
    axes[1].plot(sizes, [can_bound(n) for n in sizes], ":", color="black", label="(d/3)·n^¼")
    axes[1].plot(sizes, [1.5 * can_bound(n) for n in sizes], ":", color="grey", label="1.5 × bound")
    axes[2].axhline(64, linestyle=":", color="grey")
    axes[0].axhline(5, linestyle=":", color="grey")
    for ax, title in zip(axes, ("busiest peer / mean quads", "mean hops to a stored quad", "max neighbours")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("peers")
        ax.set_title(title)
    axes[0].legend(fontsize=6)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure).print_png(str(path))


def run(datasets: Sequence[Dataset], mappings: Sequence[str], sizes: Sequence[int], *, routes: int, seed: int,
        probes: int = 4, out=sys.stdout, rules: Sequence[str] = RULES) -> dict[tuple[str, str, str], list[Stats]]:
    results: dict[tuple[str, str, str], list[Stats]] = {}
    for dataset in datasets:
        for mapping in mappings:
            space = CoordinateSpace(mapping=mapping)
            points = place(space, dataset.quads)
            boxes = [space.pattern_box(p) for p in dataset.patterns]
            for rule in rules:
                stats = simulate(space, points, boxes, rule, sizes, routes=routes, seed=seed, probes=probes)
                results[(dataset.name, mapping, rule)] = stats
                print(f"{dataset.name} · {mapping} · {rule}: {stats[-1].seconds:.0f} s", file=sys.stderr, flush=True)
    rows = []
    for dataset in datasets:
        for mapping in mappings:
            for i in range(len(sizes)):
                for rule in rules:
                    rows.append((f"{dataset.name} ({len(dataset.quads):,} quads) · {mapping}", rule,
                                 results[(dataset.name, mapping, rule)][i]))
    print(table(rows), file=out)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="overlay sizes, comma-separated")
    parser.add_argument("--datasets", default="paper,citybench", help="paper and/or citybench")
    parser.add_argument("--mappings", default="local-name,identity")
    parser.add_argument("--events", type=int, default=100_000, help="compound events of the paper's workload")
    parser.add_argument("--routes", type=int, default=2000, help="routes measured per size")
    parser.add_argument("--probes", type=int, default=4, help="random points a joiner probes (after)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot", type=Path, help="write the figure (PNG) here")
    parser.add_argument("--rules", default=",".join(RULES),
                        help="join rules: before (midpoint), after (balanced), annexes (balanced, by host, "
                             "with the peers' annexes)")
    args = parser.parse_args(argv)
    sizes = sorted(int(x) for x in args.sizes.split(","))
    datasets = []
    for name in args.datasets.split(","):
        if name == "paper":
            datasets.append(paper_dataset(args.events, args.seed))
        elif name == "citybench":
            from eventcloud.cli.demo import citybench_dir

            directory = citybench_dir()
            if directory is None:
                print("CityBench data not found (shared/data/citybench or $EVENTCLOUD_CITYBENCH): skipped",
                      file=sys.stderr)
                continue
            datasets.append(citybench_dataset(directory))
        else:
            parser.error(f"unknown dataset {name!r}")
    mappings = args.mappings.split(",")
    rules = args.rules.split(",")
    if not set(rules) <= set(RULES):
        parser.error(f"unknown rule in {args.rules!r} (known: {', '.join(RULES)})")
    results = run(datasets, mappings, sizes, routes=args.routes, seed=args.seed, probes=args.probes, rules=rules)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A design study, not the system: hosts owning several zones ("annexes") to bound neighbours.

    python -m experiments.annex_study build --dataset citybench --mapping identity --sizes 2000,10000
    python -m experiments.annex_study annex --dataset citybench --mapping identity --size 10000 --T 48 --baseline
    python -m experiments.annex_study grow  --dataset citybench --mapping identity --size 2000 --T 48  (interleaved)

Issue 11 asks for at most 64 neighbours per peer at 10,000 peers. With one zone per peer, every
zone holding data and the zones a guillotine partition, CityBench leaves zones with 161–463
neighbours (docs/overlay.md, "Scale simulation"). This study asks whether letting a *host* (a
daemon process, which can already run several peer runtimes: peers/process/launcher.py) own empty "annex"
zones besides its data zone meets every target; the peers do not do this yet.

`build` grows an overlay exactly as `experiments.scale.simulate(rule="after")` does (one host,
one zone per join) and pickles it at each size (in `--cache`); `annex` loads a snapshot and
runs the de-crowding pass: every zone with more than T neighbours is cut where it sheds most
(`split_for_join(cut=…)`, so tables stay exact; a zone holding data only where one side is
empty, the data side staying), and the empty side goes to the host it costs fewest new
neighbours (the annex's neighbours' hosts and 64 random ones, ending ≤ cap − headroom);
hosts still over the cap hand annexes on. `--mode hosts` is a host-driven variant that
cascades (measured, not kept); `grow` interleaves the pass with the joins (not measured yet).

A host's neighbours are the distinct zones in the union of its zones' tables, its own excepted;
its load the sum of its zones' quads. Hops are greedy over zones (`SimOverlay.route`), and,
in the report, greedy over hosts (a host forwards from the union of its tables).
"""

from __future__ import annotations

import argparse
import heapq
import pickle
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from eventcloud.overlay import CoordinateSpace
from eventcloud.overlay.annexes import HostOffer, choose_host, crowd_cut, data_ranges, host_neighbours_after
from experiments.scale import MAX_HOPS, SimOverlay, can_bound, place

#: Where snapshots and placed points are kept between commands (`--cache`; CityBench's points: ~750 MB).
CACHE = Path(tempfile.gettempdir()) / "eventcloud-annex-study"


# --- data -------------------------------------------------------------------------------------

def load_points(dataset: str, mapping: str, events: int = 100_000, seed: int = 1):
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"points-{dataset}-{mapping}.pkl"
    space = CoordinateSpace(mapping=mapping)
    if path.exists():
        with path.open("rb") as f:
            return space, pickle.load(f)
    from experiments.scale import citybench_dataset, paper_dataset
    if dataset == "citybench":
        from eventcloud.cli.demo import citybench_dir
        data = citybench_dataset(citybench_dir())
    else:
        data = paper_dataset(events, seed)
    points = place(space, data.quads)
    with path.open("wb") as f:
        pickle.dump(points, f, protocol=pickle.HIGHEST_PROTOCOL)
    return space, points


def snapshot_path(dataset: str, mapping: str, size: int) -> Path:
    return CACHE / f"overlay-{dataset}-{mapping}-{size}.pkl"


# --- the overlay with hosts ------------------------------------------------------------------

class AnnexOverlay(SimOverlay):
    """SimOverlay whose zones are owned by hosts: zone id -> host id; a join makes a new host."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.host_of: dict[int, int] = {0: 0}
        self.zones_of: dict[int, set[int]] = {0: {0}}
        self.annexes = 0          # zones made by de-crowding cuts (alive or not)
        self.decrowd_cuts = 0
        self.moves = 0            # annex reassignments
        self.verbose = False
        self.max_attempts = 10
        self.piece_depth = 2
        self.headroom = 4
        self.host_climb = False   # joins climb by zone load (today's rule), or by host load
        #: exactly what peers/membership/annexes.py does: no cut through data, 8 random hosts asked besides
        #: the annex's neighbours' (the host cutting never keeps it), no pass handing annexes on
        self.peers_rule = False
        self.kept_home = 0        # annexes no other host could take

    def adopt_hosts(self) -> None:
        """After loading a plain snapshot: every zone is its own host."""
        self.host_of = {z: z for z in self.zones}
        self.zones_of = {z: {z} for z in self.zones}

    def join(self) -> int:
        newcomer = super().join()
        self.host_of[newcomer] = newcomer
        self.zones_of[newcomer] = {newcomer}
        return newcomer

    def load(self, key: int) -> int:
        """With `host_climb`, probes and climbs read the load of the zone's host (all its zones)."""
        return self.host_load(self.host_of[key]) if self.host_climb else len(self.held[key])

    def _split(self, owner: int) -> int:
        if self.host_climb:   # the host found busiest splits its busiest zone
            owner = max(sorted(self.zones_of[self.host_of[owner]]), key=lambda z: len(self.held[z]))
        return super()._split(owner)

    # --- host state ---
    def host_neighbours(self, h: int) -> set[int]:
        own = self.zones_of[h]
        s: set[int] = set()
        for z in own:
            s.update(self.tables[z])
        return s - own

    def host_count(self, h: int) -> int:
        return len(self.host_neighbours(h))

    def host_load(self, h: int) -> int:
        return sum(len(self.held[z]) for z in self.zones_of[h])

    # --- the cut ---
    def cut_zone(self, z: int, dim: int, at: int) -> int:
        """Cut zone z at (dim, at) with split_for_join; z keeps [lo, at), the new zone [at, hi).
        Tables stay exact (announced to z's old neighbours). Returns the new zone's id; its host
        is z's host until assigned."""
        new, self.next_id = self.next_id, self.next_id + 1
        self.cut(z, new, (dim, at))
        h = self.host_of[z]
        self.host_of[new] = h
        self.zones_of[h].add(new)
        return new

    def best_cut(self, z: int, data_sided: bool = True):
        """`crowd_cut` of zone z (the rule the peers use), as (score, dim, at, annex_is_upper)
        with annex_is_upper None where both sides may be given away; None if no cut helps."""
        held = self.held[z]
        ranges = data_ranges(self.points[i] for i in held) if held else None
        cut = crowd_cut(self.zones[z], {k: n.zone for k, n in self.tables[z].items()}, ranges,
                        through_data=not data_sided)
        if cut is None:
            return None
        return cut.score, cut.dim, cut.at, cut.annex_upper if held and data_sided else None

    # --- assigning an annex ---
    def assign(self, new: int, cap: int, rng: random.Random, randoms: int = 64) -> bool:
        """Give zone `new` (currently with its cut sibling's host H) to the host whose resulting
        neighbour count is least (H only if no one else is lower)."""
        h0 = self.host_of[new]
        cands = {self.host_of[k] for k in self.tables[new]}
        hosts = list(self.zones_of)
        if self.peers_rule:
            randoms = 8
        for _ in range(randoms):
            cands.add(hosts[rng.randrange(len(hosts))])
        self.zones_of[h0].discard(new)
        base0 = self.host_count(h0)
        self.zones_of[h0].add(new)
        keep = self.host_count(h0)
        if keep <= cap and keep == base0 and not self.peers_rule:
            return True  # free to keep
        nb_new = set(self.tables[new])
        offers = []
        for h in cands:
            if h == h0:
                continue
            own = self.zones_of[h]
            current = self.host_neighbours(h)
            offers.append(HostOffer(h, "", len(current), host_neighbours_after(current, own, nb_new, new), len(own)))
        best = choose_host(offers, cap, self.headroom)
        if best is None:
            self.kept_home += 1   # the peers would not cut (the study keeps the cut, on the same host)
            return keep <= cap
        self.zones_of[h0].discard(new)
        self.zones_of[best.host].add(new)
        self.host_of[new] = best.host
        return True

    # --- de-crowding ---
    def decrowd(self, T: int, cap: int, rng: random.Random, zones=None, max_cuts: int | None = None,
                host_pass: bool = True) -> None:
        """While some zone has more than T neighbours, cut it (best_cut) and assign the annex."""
        todo = [(-len(self.tables[z]), z) for z in (zones if zones is not None else self.zones)
                if z in self.zones and len(self.tables[z]) > T]
        heapq.heapify(todo)
        stuck: set[int] = set()
        cuts = 0
        limit = max_cuts if max_cuts is not None else 20 * len(self.zones) + 1000
        while todo and cuts < limit:
            negdeg, z = heapq.heappop(todo)
            if z not in self.zones or -negdeg != len(self.tables[z]) or z in stuck:
                continue
            choice = self.best_cut(z)
            if choice is None:
                stuck.add(z)
                continue
            _, d, at, annex_upper = choice
            new = self.cut_zone(z, d, at)
            cuts += 1
            self.decrowd_cuts += 1
            self.annexes += 1
            if annex_upper is False:
                # the data (and the zone id z) should stay with the data side: swap the ids' roles:
                # z keeps [lo, at) which is the empty side; give the *lower* zone away instead.
                annex = z
                # the host's data zone is `new` now; both are with the same host, so just assign z
                self._assign_zone(annex, cap, rng)
            else:
                self._assign_zone(new, cap, rng)
            for w in (z, new, *self.tables[z], *self.tables[new]):
                if len(self.tables[w]) > T:
                    stuck.discard(w) if w in (z, new) else None
                    heapq.heappush(todo, (-len(self.tables[w]), w))
        # fallback: a data zone no empty-side cut can de-crowd is cut through its data, and
        # the lighter side (with its quads) goes to the host it costs least
        self.data_cuts = getattr(self, "data_cuts", 0)
        for z in sorted(stuck) if not self.peers_rule else ():
            if z in self.zones and self.held[z] and len(self.tables[z]) > cap - self.headroom:
                choice = self.best_cut(z, data_sided=False)
                if choice is None:
                    continue
                _, d, at, _ = choice
                new = self.cut_zone(z, d, at)
                self.decrowd_cuts += 1
                self.data_cuts += 1
                light = z if len(self.held[z]) < len(self.held[new]) else new
                self.assign(light, cap, rng)
        if host_pass:
            self.rebalance_hosts(cap, rng)

    def _assign_zone(self, zone: int, cap: int, rng: random.Random) -> None:
        if self.held[zone]:
            return  # never move data (it stays with its host)
        self.assign(zone, cap, rng)

    def rebalance_hosts(self, cap: int, rng: random.Random, rounds: int = 3) -> None:
        """Hosts over the cap hand annex zones (empty ones) to the host they cost least."""
        for _ in range(rounds):
            over = [h for h in self.zones_of if self.host_count(h) > cap]
            if not over:
                return
            for h in over:
                for z in sorted(self.zones_of[h], key=lambda z: -len(self.tables[z])):
                    if self.host_count(h) <= cap:
                        break
                    if self.held[z] or len(self.zones_of[h]) == 1:
                        continue
                    before = self.host_of[z]
                    self.assign(z, cap, rng, randoms=32)
                    if self.host_of[z] != before:
                        self.moves += 1

    def hand_on(self, hosts, cap: int, rng: random.Random) -> None:
        """What peers/membership/annexes.py does for a host over the cap: its empty annex with the most
        neighbours goes to the host it costs least (one per host and round)."""
        for h in sorted(hosts):
            if h not in self.zones_of or self.host_count(h) <= cap or len(self.zones_of[h]) == 1:
                continue
            empty = [z for z in self.zones_of[h] if not self.held[z]]
            if empty:
                z = max(empty, key=lambda z: (len(self.tables[z]), z))
                before = self.host_of[z]
                self.assign(z, cap, rng)
                self.moves += self.host_of[z] != before

    def grow_one(self, T: int, cap: int, rng: random.Random, pass_every: int = 0) -> int:
        """One join, then the zones it touched de-crowded; with `peers_rule` (and no
        `pass_every`), the hosts near them over the cap hand an annex on, as the peers' next
        looks would; with `pass_every`, the study's pass every that many joins instead."""
        new = self.join()
        # the zones this join touched: the newcomer, its owner and their neighbours
        touched = {new, *self.tables[new]}
        for k in list(touched):
            touched.update(self.tables[k]) if len(self.tables[k]) > T else None
        self.decrowd(T, cap, rng, zones=touched, host_pass=False)
        if self.peers_rule and not pass_every:
            near = {w for z in touched if z in self.zones for w in (z, *self.tables[z])}
            self.hand_on({self.host_of[w] for w in near}, cap, rng)
        if pass_every and len(self.zones_of) % pass_every == 0:
            self.rebalance_hosts(cap, rng)
        return new

    def settle(self, cap: int, rng: random.Random, passes: bool) -> None:
        """After the last join: the study's pass, or a few more of the peers' rounds over every host."""
        if passes:
            self.rebalance_hosts(cap, rng)
            return
        for _ in range(5):
            self.hand_on([h for h in self.zones_of if self.host_count(h) > cap], cap, rng)

    # --- host-driven de-crowding ---
    def decrowd_hosts(self, T: int, cap: int, rng: random.Random, hosts=None, max_cuts: int | None = None) -> None:
        """While some host has more than `cap` neighbours: cut its most crowded zone that can shed
        neighbours (a data zone only where one side is empty), then cut the annex (empty) until
        its pieces have at most T neighbours and give each to the host it costs least."""
        todo = [(-self.host_count(h), h) for h in (hosts if hosts is not None else self.zones_of)
                if h in self.zones_of and self.host_count(h) > cap]
        heapq.heapify(todo)
        stuck: set[int] = set()
        attempts: dict[int, int] = {}
        cuts = 0
        limit = max_cuts if max_cuts is not None else 5 * len(self.zones) + 1000
        t0, shown = time.perf_counter(), 0
        while todo and cuts < limit:
            if self.verbose and cuts - shown >= 2000:
                shown = cuts
                print(f"  cuts {cuts}, queue {len(todo)}, stuck {len(stuck)}, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
            negc, h = heapq.heappop(todo)
            c = self.host_count(h)
            if c <= cap or h in stuck:
                continue
            attempts[h] = attempts.get(h, 0) + 1
            if attempts[h] > self.max_attempts:
                stuck.add(h)
                continue
            if -negc != c:
                heapq.heappush(todo, (-c, h))
                continue
            choice = None
            for z in sorted(self.zones_of[h], key=lambda z: -len(self.tables[z])):
                ch = self.best_cut(z)
                if ch is not None:
                    choice = (z, ch)
                    break
            if choice is None:
                stuck.add(h)
                continue
            z, (_, d, at, annex_upper) = choice
            new = self.cut_zone(z, d, at)
            cuts += 1
            self.decrowd_cuts += 1
            annex = z if annex_upper is False else new
            if self.held[annex]:
                # a both-sides-empty-zone cut (z was already an annex): give away the smaller-degree
                # side? both are empty here only when z held nothing; otherwise the data side stays
                pass
            touched = {z, new, *self.tables[z], *self.tables[new]}
            if not self.held[annex]:
                pieces = [(annex, 0)]
                placed = []
                while pieces and cuts < limit:
                    a, depth = pieces.pop()
                    if len(self.tables[a]) > T or (depth < self.piece_depth and len(self.tables[a]) > 12
                                                   and not self.assign(a, cap, rng)):
                        ch = self.best_cut(a)
                        if ch is not None:
                            _, d2, at2, _ = ch
                            b = self.cut_zone(a, d2, at2)
                            cuts += 1
                            self.decrowd_cuts += 1
                            touched.update((a, b, *self.tables[a], *self.tables[b]))
                            depth = depth + 1 if len(self.tables[a]) <= T else 0
                            pieces += [(a, depth), (b, depth)]
                            continue
                    placed.append(a)
                for a in placed:
                    if not self.held[a]:
                        self.assign(a, cap, rng)
                        touched.update(self.tables[a])
            for hh in {self.host_of[w] for w in touched} | {h}:
                cc = self.host_count(hh)
                if cc > cap:
                    heapq.heappush(todo, (-cc, hh))
        self.stuck_hosts = len(stuck)

    # --- measuring ---
    def host_route_hops(self, start: int, point) -> tuple[int, int]:
        """Zone-level greedy route; returns (zone hops, hops that change host)."""
        from eventcloud.overlay import next_hop
        current, hops, host_hops = start, 0, 0
        while hops <= MAX_HOPS:
            table = self.tables[current]
            hop = next_hop(self.zones[current], {k: n.zone for k, n in table.items()}, point)
            if hop is None:
                return hops, host_hops
            if self.host_of[hop] != self.host_of[current]:
                host_hops += 1
            current, hops = hop, hops + 1
        return hops, host_hops

    def host_greedy_hops(self, start: int, point) -> int:
        """Host-aware greedy routing: a host forwards from the union of its zones' tables to the
        zone closest to the point (hops = messages between hosts)."""
        h, hops = self.host_of[start], 0
        while hops <= MAX_HOPS:
            own = self.zones_of[h]
            if any(self.zones[z].contains(point) for z in own):
                return hops
            best = None
            for z in own:
                for k, nb in self.tables[z].items():
                    if k in own:
                        continue
                    cand = (nb.zone.distance(point), k)
                    if best is None or cand < best:
                        best = cand
            h, hops = self.host_of[best[1]], hops + 1
        return hops

    def report(self, routes: int, rng: random.Random) -> dict:
        hosts = list(self.zones_of)
        counts = [self.host_count(h) for h in hosts]
        zdeg = [len(t) for t in self.tables.values()]
        zph = [len(self.zones_of[h]) for h in hosts]
        loads = [self.host_load(h) for h in hosts]
        # start from a random host's data zone... a random zone of a random host
        def start() -> int:
            h = hosts[rng.randrange(len(hosts))]
            zs = sorted(self.zones_of[h])
            return zs[rng.randrange(len(zs))]

        def hops(target):
            rs = []
            for _ in range(routes):
                s0, t = start(), target()
                rs.append(self.host_route_hops(s0, t) + (self.host_greedy_hops(s0, t),))
            z = [r[0] for r in rs]
            hh = [r[2] for r in rs]
            return statistics.mean(z), max(z), sum(x > MAX_HOPS for x in z), statistics.mean(hh), max(hh)
        hd = hops(lambda: self.points[rng.randrange(len(self.points))])
        hu = hops(lambda: tuple(rng.randrange(self.space.top) for _ in range(4)))
        n = len(hosts)
        return dict(hosts=n, zones=len(self.zones), annex_zones=len(self.zones) - n,
                    host_nb_max=max(counts), host_nb_mean=statistics.mean(counts),
                    hosts_over_64=sum(c > 64 for c in counts),
                    zone_nb_max=max(zdeg), zone_nb_mean=statistics.mean(zdeg),
                    zph_max=max(zph), zph_mean=statistics.mean(zph),
                    hops_data=hd, hops_uniform=hu, bound15=1.5 * can_bound(n),
                    load_max=max(loads), load_mean=statistics.mean(loads),
                    load_ratio=max(loads) / statistics.mean(loads), empty_hosts=sum(x == 0 for x in loads),
                    cuts=self.decrowd_cuts, moves=self.moves, stuck=getattr(self, "stuck_hosts", 0))


def fmt(label: str, r: dict, seconds: float) -> str:
    hd, hu = r["hops_data"], r["hops_uniform"]
    return (f"| {label} | {r['hosts']:,} | {r['host_nb_max']} / {r['host_nb_mean']:.1f} ({r['hosts_over_64']} over 64) "
            f"| zone nb {r['zone_nb_max']} / {r['zone_nb_mean']:.1f} | {r['zph_max']} / {r['zph_mean']:.2f} "
            f"| {r['annex_zones']:,} | {hd[0]:.1f} ({hd[1]}{', %d failed' % hd[2] if hd[2] else ''}; host-greedy {hd[3]:.1f} ({hd[4]})) "
            f"| {hu[0]:.1f} ({hu[1]}{', %d failed' % hu[2] if hu[2] else ''}; host-greedy {hu[3]:.1f} ({hu[4]})) "
            f"| {r['load_max']:,} / {r['load_mean']:,.1f} ({r['load_ratio']:.1f}×), {r['empty_hosts']} empty "
            f"| {seconds:.0f} s |")


# --- commands ---------------------------------------------------------------------------------

def cmd_build(args) -> None:
    space, points = load_points(args.dataset, args.mapping)
    ov = AnnexOverlay(space, points, random.Random(args.seed), rule="after", probes=4)
    t0 = time.perf_counter()
    for size in sorted(int(s) for s in args.sizes.split(",")):
        while len(ov) < size:
            ov.join()
        state = dict(zones=ov.zones, tables=ov.tables, held=ov.held, next_id=ov.next_id,
                     join_requests=ov.join_requests, rng=ov.rng.getstate())
        with snapshot_path(args.dataset, args.mapping, size).open("wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        print(f"built {size} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def load_overlay(args) -> AnnexOverlay:
    space, points = load_points(args.dataset, args.mapping)
    ov = AnnexOverlay(space, points, random.Random(args.seed), rule="after", probes=4)
    with snapshot_path(args.dataset, args.mapping, args.size).open("rb") as f:
        state = pickle.load(f)
    ov.zones, ov.tables, ov.held = state["zones"], state["tables"], state["held"]
    ov.next_id, ov.join_requests = state["next_id"], state["join_requests"]
    ov.adopt_hosts()
    ov.verbose = args.verbose
    ov.headroom = args.headroom
    return ov


def cmd_annex(args) -> None:
    ov = load_overlay(args)
    label = f"{args.dataset} · {args.mapping}"
    rng = random.Random(args.seed + 7)
    if args.baseline:
        t0 = time.perf_counter()
        r = ov.report(args.routes, random.Random(args.seed + 1))
        print(fmt(f"{label} · today", r, time.perf_counter() - t0), flush=True)
    for T in [int(t) for t in args.T.split(",")]:
        ov = load_overlay(args) if args.baseline or T != int(args.T.split(",")[0]) else ov
        t0 = time.perf_counter()
        if args.mode == "hosts":
            ov.decrowd_hosts(T, args.cap, rng)
        else:
            ov.decrowd(T, args.cap, rng)
        spent = time.perf_counter() - t0
        r = ov.report(args.routes, random.Random(args.seed + 1))
        print(fmt(f"{label} · annex T={T} h={args.headroom} ({args.mode} post-pass, cuts {r['cuts']} (through data {getattr(ov, 'data_cuts', 0)}), stuck hosts {r['stuck']}, moves {r['moves']})", r, spent), flush=True)


def cmd_grow(args) -> None:
    space, points = load_points(args.dataset, args.mapping)
    ov = AnnexOverlay(space, points, random.Random(args.seed), rule="after", probes=4)
    ov.host_climb = args.host_climb
    ov.peers_rule = args.peers_rule
    rng = random.Random(args.seed + 7)
    t0 = time.perf_counter()
    label = (f"{args.dataset} · {args.mapping}{' · joins climb by host load' if args.host_climb else ''}"
             f"{' · the peers rule' if args.peers_rule else ''}{' · hand on' if args.hand_on else ''}")
    sizes = sorted(int(s) for s in str(args.size).split(","))
    for size in sizes:
        while len(ov.zones_of) < size:
            ov.grow_one(args.T, args.cap, rng, pass_every=500 if args.hand_on or not ov.peers_rule else 0)
        ov.settle(args.cap, rng, passes=args.hand_on or not ov.peers_rule)
        spent = time.perf_counter() - t0
        r = ov.report(args.routes, random.Random(args.seed + 1))
        print(fmt(f"{label} · annex T={args.T} (interleaved, cuts {r['cuts']}, moves {r['moves']}, "
                  f"no host for {ov.kept_home})", r, spent), flush=True)


def main(argv=None) -> int:
    global CACHE
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("build", "annex", "grow"))
    p.add_argument("--dataset", default="citybench")
    p.add_argument("--mapping", default="identity")
    p.add_argument("--sizes", default="2000,10000")
    p.add_argument("--size", default="2000")
    p.add_argument("--T", default="48")
    p.add_argument("--cap", type=int, default=64)
    p.add_argument("--routes", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--baseline", action="store_true")
    p.add_argument("--headroom", type=int, default=4)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--mode", default="zones", choices=("hosts", "zones"))
    p.add_argument("--cache", default=str(CACHE), help="where snapshots and placed points are kept")
    p.add_argument("--host-climb", action="store_true", help="grow: joins climb by host load, not zone load")
    p.add_argument("--peers-rule", action="store_true",
                   help="grow: what peers/membership/annexes.py does (no cut through data, 8 random hosts asked, a host "
                        "over the cap hands its most crowded empty annex on after each join near it)")
    p.add_argument("--hand-on", action="store_true", help="grow with --peers-rule: instead, hosts over the "
                                                          "cap hand annexes on every 500 joins (the study's pass)")
    args = p.parse_args(argv)
    CACHE = Path(args.cache)
    if args.command == "build":
        cmd_build(args)
    else:
        if args.command == "annex":
            args.size = int(args.size)
            cmd_annex(args)
        else:
            args.T = int(args.T)
            cmd_grow(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The background rebalancer in the real daemon: peers joined before the data move to it.

Eight peers join an empty overlay (midpoint zones), then the data is published: most of it
lands on a few peers. With `rebalance_every` set, light peers that can leave gracefully hand
their zone to a neighbour and rejoin as new peers at the busiest one, and empty peers that
cannot leave have neighbours step aside until they can (peers/membership/rebalancer.py). Publications go
on meanwhile. Afterwards the busiest peer's share of the load is down by a fifth at least and
no peer is empty with CityBench (busiest / mean 8.0 → 1.1, and 2.9 → 1.2 where the events
published meanwhile pile onto one peer; the synthetic readings used when the data is absent
leave 3 of 8 peers empty: 5.0 → 3.1), every acknowledged quad (before and during the moves) is
still found, exactly once, neighbour tables are exact (a peer that rejoined on its old address
is not mistaken for the one that left), subscriptions stored before the moves still match, and
pub/sub matches the oracle.
"""

from __future__ import annotations

import errno
import random
import statistics

import pytest
import trio

from eventcloud.cli.demo import citybench_dir
from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode
from eventcloud.overlay import CoordinateSpace, NeighboursLearned
from eventcloud.testing import open_overlay
from peers.authority import LocalAuthority
from tests.helpers import (
    COUNT, assert_exact_neighbour_tables, check_delivered, count_of, oracle_solutions, random_pubsub_event,
    random_subscription, readings, spread_events,
)

KNOBS = dict(rebalance_every=30.0, rebalance_ratio=4.0, rebalance_min_quads=100, rebalance_make_room=True)


def spread(loads: list[int]) -> float:
    return max(loads) / statistics.mean(loads)


async def quiet_status(client):
    """The overlay's status, asked again (a few times, bounded) while a move is under way."""
    for attempt in range(5):
        try:
            return await client.status()
        except ClientError:
            if attempt == 4:
                raise
            await trio.sleep(10)


@pytest.mark.parametrize(("algorithm", "mapping", "authority"),
                         [("osma", "identity", False), ("csma", "local-name", False), ("osma", "identity", True)])
async def test_peers_joined_before_the_data_move_to_it(autojump_clock, algorithm, mapping, authority):
    """`authority`: the peers hold their zones under an ownership authority (as `eventcloud
    cluster` and a lone `eventcloud peer` run them by default): a move is a leave (the mover
    retires its keys) and a join (the new peer registers), fenced as any other change."""
    events = readings(150)
    total = sum(len(e.quads) for e in events)
    rng = random.Random(5)
    async with open_overlay(8, algorithm, space=CoordinateSpace(mapping=mapping), seed=7,
                            authority=LocalAuthority() if authority else None, **KNOBS) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
            status = await client.status()
        before = [p.quads for p in status.peers]
        assert sum(before) == total
        # A subscriber subscribed before the moves: its subscriptions' stored copies must move
        # with the zones. Durable ones: an empty peer that cannot leave may ask a neighbour to
        # step aside, and that may be the subscriber's entry peer (the SDK then reconnects).
        address = max(status.peers, key=lambda p: p.quads).address
        busiest = [p.address for p in overlay.peers].index(address)
        async with overlay.client(busiest, "subscriber") as subscriber:
            subs = []
            for _ in range(5):
                text = random_subscription(rng)
                subs.append((text, await subscriber.subscribe(text, kind="bindings", durable=True)))
            # Publications go on while peers move (through the busiest peer): every one
            # acknowledged must be stored whole, exactly once.
            during = [random_pubsub_event(rng, 1000 + i, source="during") for i in range(100)]
            acked = []
            async with overlay.client(busiest, "publisher") as publisher:
                for event in during:
                    try:
                        await publisher.publish(event)
                        acked.append(event)
                    except ClientError as exc:
                        assert exc.code is ErrorCode.TIMEOUT or exc.code is ErrorCode.UNAVAILABLE, exc
                    await trio.sleep(3)
            await trio.sleep(300)  # ten rounds of looking, with the moves they make
            total += sum(len(e.quads) for e in acked)
            assert len(acked) >= 90, f"only {len(acked)} of 100 publications acknowledged"
            async with overlay.client(busiest, "checker") as client:
                status = await quiet_status(client)
                after = [p.quads for p in status.peers]
                ids = {p.id for p in status.peers}
                moved = len(ids - {p.id for p in overlay.peers})
                print(f"{algorithm}/{mapping}: before {sorted(before)} ({spread(before):.1f}x), after {sorted(after)} "
                      f"({spread(after):.1f}x), {moved} peers moved")
                assert len(after) == 8 and not any(p.down for p in status.peers)
                assert sum(after) == total and count_of(await client.query(COUNT)) == total  # nothing lost or doubled
                assert moved >= 1
                assert spread(after) < 0.8 * spread(before), "the load is no more even"
                if citybench_dir() is not None:  # the synthetic readings leave 3 of 8 empty (5.0x -> 3.1x)
                    assert min(after) > 0, "a peer is left empty (one that cannot leave makes room: docs/overlay.md)"
                assert_exact_neighbour_tables(status)
                for event in events[::13] + acked[::7]:
                    assert set(await client.find(event.graph, None, None, None)) == set(event.quads)
                fresh = [random_pubsub_event(rng, i) for i in range(20)]
                for event in fresh:
                    await client.publish(event)
            for text, sub in subs:  # the events published during the moves match too
                expected = {e.graph.value: oracle_solutions(text, e) for e in acked + fresh}
                await check_delivered(sub, {g: s for g, s in expected.items() if s}, text)


async def test_a_peer_serving_non_durable_subscribers_stays_while_the_others_move(autojump_clock):
    """The rebalancer is on by default, and a move ends the mover's client connections: a
    non-durable subscription would end with them (nothing could replay what it missed). So a
    peer whose clients hold such subscriptions neither moves nor steps aside; the others
    balance the load around it, and its subscriber is notified throughout."""
    events = readings(150)
    rng = random.Random(5)
    async with open_overlay(8, "osma", space=CoordinateSpace(mapping="identity"), seed=7, **KNOBS) as overlay:
        async with overlay.client(0, "loader") as client:
            await client.publish_batch(events)
            status = await client.status()
        before = {p.id: p.quads for p in status.peers}
        light = min((p for p in overlay.peers[1:]), key=lambda p: (before[p.id], p.id))
        index = overlay.peers.index(light)
        text = "SELECT ?s ?o WHERE { GRAPH ?g { ?s <http://example.org/p1> ?o } }"
        async with overlay.client(index, "subscriber") as subscriber:
            sub = await subscriber.subscribe(text, kind="bindings")
            await trio.sleep(300)   # ten rounds of looking, with the moves they make
            async with overlay.client(index, "checker") as client:   # (it stays: any other may be away)
                status = await quiet_status(client)
                ids = {p.id for p in status.peers}
                assert light.id in ids and light.current.id == light.id, "the subscribers' peer moved"
                assert light.counters["rebalance_kept_for_subscribers"] >= 1
                assert len(ids - set(before)) >= 1, "nobody moved"
                assert sum(p.quads for p in status.peers) == sum(before.values())
                fresh = [random_pubsub_event(rng, i) for i in range(20)]
                for event in fresh:
                    await client.publish(event)
            expected = {e.graph.value: oracle_solutions(text, e) for e in fresh}
            await check_delivered(sub, {g: s for g, s in expected.items() if s}, text)


@pytest.mark.processes
async def test_real_peer_processes_move_to_the_data(tmp_path):
    """The same with `eventcloud peer --rebalance-every` processes over TCP: a light peer
    process hands its zone over and rejoins on the same port, splitting the busiest zone."""
    from peers.supervisor import LocalCluster

    events = readings(200)
    total = sum(len(e.quads) for e in events)
    cluster = LocalCluster(4, data_dir=tmp_path, seed=3, mapping="identity",
                           extra=["--rebalance-every", "1", "--rebalance-min-quads", "100"])
    await trio.to_thread.run_sync(cluster.start)
    try:
        async with connect(cluster.addresses, source="rebalance") as client:
            first = {p.id for p in (await client.status()).peers}
            for at in range(0, len(events), 50):
                await client.publish_batch(events[at:at + 50])
            previous: frozenset[str] = frozenset()
            last = "nothing yet"
            with trio.move_on_after(90) as waiting:  # until the moves are over: the same peers twice in a row
                while True:
                    await trio.sleep(3)
                    try:
                        status = await client.status()
                    except ClientError as exc:
                        previous, last = frozenset(), f"status refused: {exc.message}"
                        continue  # a move under way
                    loads = [p.quads for p in status.peers]
                    ids = frozenset(p.id for p in status.peers)
                    last = f"loads {loads}, moved {len(ids - first)}, down {[p.id for p in status.peers if p.down]}"
                    # every process serves a zone again: a mover between its leave and its rejoin
                    # is in no status, and the others can look the same for 3 s meanwhile
                    settled = (ids - first and ids == previous and len(ids) == len(cluster.processes)
                               and not any(p.down for p in status.peers))
                    if settled and spread(loads) <= 3:
                        break
                    previous = ids
            assert not waiting.cancelled_caught, f"the moves did not settle within 90 s: {last}"
            assert all(proc.poll() is None for proc in cluster.processes)  # the same processes, moved
            assert sorted(p.address for p in status.peers) == sorted(cluster.addresses), "a stand-in took a zone over"
            assert sum(loads) == total and await client.count() == total
            for event in events[::9]:
                assert set(await client.find(event.graph)) == set(event.quads)
            await trio.sleep(6)  # stabilisation drops any ghost entry
            assert_exact_neighbour_tables(await quiet_status(client))
    finally:
        await trio.to_thread.run_sync(cluster.stop)



async def test_two_siblings_leaving_at_once_leave_no_zone_to_nobody(autojump_clock):
    """Light siblings decide to move at the same moment: each would hand its zone to the other,
    and both zones would belong to nobody. A peer that is leaving takes no zone over, so at most
    one of them leaves, and the peers that stay own the whole space."""
    import math

    from eventcloud.errors import EventCloudError

    async with open_overlay(2, seed=1) as overlay:
        a, b = overlay.peers
        results: dict[str, object] = {}

        async def leave(peer) -> None:
            try:
                results[peer.id] = await peer.membership.leave()
            except EventCloudError as exc:
                results[peer.id] = exc

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(leave, a)
                nursery.start_soon(leave, b)
        left = [p for p in (a, b) if isinstance(results[p.id], str)]
        stayed = [p for p in (a, b) if p not in left]
        assert len(left) <= 1 and stayed, results
        volume = lambda zone: math.prod(hi - lo for lo, hi in zone.bounds)  # noqa: E731
        whole = a.state.space.whole_space()
        assert sum(volume(p.state.zone) for p in stayed) == math.prod(hi - lo for lo, hi in whole)


async def test_a_leaving_peer_answers_announcements_and_hands_them_to_its_heir(autojump_clock):
    """A leaving peer holds its zone lock until an heir took the zone over, and the heir (or a
    peer the heir announces to, itself leaving) may announce to the leaver meanwhile. Found on 8
    real peers moving at once: three leaves each waited for a take-over whose announcement
    waited for another leaver's lock, for good (publications into their zones refused). The
    leaver now answers at once and passes the update on to its heir once it holds the zone."""
    from eventcloud.overlay import heirs
    from eventcloud.wire.messages import Neighbour

    async with open_overlay(4, seed=1) as overlay:
        leaver = next(p for p in overlay.peers if heirs(p.state.zone, p.state.neighbours, tree_only=True))
        heir_id = heirs(leaver.state.zone, leaver.state.neighbours, tree_only=True)[0]
        heir = next(p for p in overlay.peers if p.id == heir_id)
        bystander = next(p for p in overlay.peers if p not in (leaver, heir))
        # a record the heir must learn: the bystander's zone as the bystander announces it
        record = {bystander.id: Neighbour(bystander.state.address, bystander.state.zone, bystander.state.incarnation)}
        install, seen = heir.membership._install, []

        async def install_announcing_to_the_leaver(data):
            await heir.membership.announce(record, [leaver.state.address])  # waits for the leaver's answer
            seen.append(trio.current_time())
            await install(data)

        heir.membership._install = install_announcing_to_the_leaver
        forwarded = leaver.membership.counters["out:neighbours"]
        started = trio.current_time()
        with trio.fail_after(60):
            assert await leaver.membership.leave() == heir.id
        assert seen and seen[0] - started < overlay.config.retry_window / 2, "the announcement waited for the leaver's lock"
        assert leaver.membership.counters["out:neighbours"] == forwarded + 1, "the held update never went to the heir"


async def test_a_take_over_whose_answer_is_lost_is_asked_again_not_given_to_another_heir(autojump_clock):
    """The leaver loses the take-over's answer while the heir is still installing the zone. It
    used to read the heir's table at once, see the zone not yet merged, and try the next heir
    (or keep the zone): two owners once the first finished. It now asks the same heir again,
    which answers once the take-over it is doing is done."""
    import math

    from eventcloud.errors import ConnectionLost
    from eventcloud.overlay import heirs
    from eventcloud.wire.ops import Op

    async with open_overlay(4, seed=1) as overlay:
        leaver = next(p for p in overlay.peers if heirs(p.state.zone, p.state.neighbours, tree_only=True))
        heir = next(p for p in overlay.peers if p.id == heirs(leaver.state.zone, leaver.state.neighbours, tree_only=True)[0])
        zone = leaver.state.zone
        install = heir.membership._install

        async def slow_install(data):
            await trio.sleep(3)  # a big zone: longer than the leaver waits for its answer
            await install(data)

        heir.membership._install = slow_install
        call, lost = leaver.membership.router.call, []

        async def losing_the_first_answer(address, op, body):
            if op is Op.TAKE_OVER and not lost:
                lost.append(address)
                overlay.nursery.start_soon(call, address, op, body)  # it goes on at the heir
                await trio.sleep(0.1)
                raise ConnectionLost("connection lost (the test cut it)")
            return await call(address, op, body)

        leaver.membership.router.call = losing_the_first_answer
        with trio.fail_after(60):
            assert await leaver.membership.leave() == heir.id
        await trio.sleep(5)
        assert lost and heir.state.zone.covers(zone)
        others = [p for p in overlay.peers if p is not leaver]
        volume = lambda z: math.prod(hi - lo for lo, hi in z.bounds)  # noqa: E731
        whole = leaver.state.space.whole_space()
        assert sum(volume(p.state.zone) for p in others) == math.prod(hi - lo for lo, hi in whole), \
            "the peers that stay do not own the space exactly once"


@pytest.mark.parametrize("there", ["nobody", "another peer"])
async def test_a_leave_whose_heir_entry_is_stale_does_not_hold_stores_off_while_it_finds_out(autojump_clock, there):
    """With 8 real peers moving while CityBench was published, a peer stepping aside picked an
    heir its table named at an address where that peer no longer was (it had moved; its port
    was a rejoining peer's, or nobody's). The take-over failed three times, then a table
    request waited for an answer, all while every store into the leaver's zone waited: the
    publication was refused for not being stored within 15 s. The leaver now asks its heir
    who it is before it holds stores off, and leaves only to one that answers as itself."""
    from dataclasses import replace as moved

    from eventcloud.errors import EventCloudError
    from eventcloud.overlay import heirs

    async with open_overlay(5, seed=1) as overlay:
        leaver = next(p for p in overlay.peers if heirs(p.state.zone, p.state.neighbours, tree_only=True))
        able = heirs(leaver.state.zone, leaver.state.neighbours, tree_only=True)
        elsewhere = next(p for p in overlay.peers if p is not leaver and p.id not in able)
        address = "peer:999" if there == "nobody" else elsewhere.address
        table = leaver.state.neighbours
        leaver.state.step(NeighboursLearned({**table, **{k: moved(table[k], address=address) for k in able}}))
        held: list[float] = []
        acquire, release = leaver.membership.guard.acquire_change, leaver.membership.guard.release_change

        async def timed_acquire():
            await acquire()
            held.append(trio.current_time())

        def timed_release():
            held.append(trio.current_time() - held.pop())
            release()

        leaver.membership.guard.acquire_change = timed_acquire
        leaver.membership.guard.release_change = timed_release
        with trio.fail_after(60), pytest.raises(EventCloudError) as refused:
            await leaver.membership.leave(tree_only=True)
        assert held == [], f"stores were held off for {held} s"
        assert refused.value.code is ErrorCode.CANNOT_LEAVE and "answers as the peer" in refused.value.message
        assert leaver.counters["leave_heirs_not_answering"] == len(able)
        assert leaver.state.has_zone and not leaver.membership.leaving
        leaver.state.step(NeighboursLearned(table))                    # as stabilisation makes it again
        async with overlay.client(overlay.peers.index(leaver), "after") as client:
            events = spread_events(20, "after")
            with trio.fail_after(30):
                await client.publish_batch(events)
            assert await client.count() == sum(len(e.quads) for e in events)


async def test_a_subscription_stored_while_its_peer_hands_its_zone_over_reaches_the_heir(autojump_clock):
    """A subscription whose store request reaches a leaving peer after the leave's snapshot was
    kept there, in a zone the peer no longer had: its heir never matched it. The store now waits
    for the zone change, and once the zone is gone the multicast runs again, through the heir.
    The subscription's box meets the leaver's zone and not the heir's, so only a copy handed
    over (or stored at the heir on the second run) can match there."""
    from eventcloud.overlay import heirs
    from eventcloud.rdf.model import IRI, CompoundEvent, make_quad
    from eventcloud.wire.ops import Op
    from tests.helpers import EXO

    async with open_overlay(8, seed=1) as overlay:
        def differs(a, b):  # the one dimension two sibling zones differ in
            return next(d for d in range(4) if a.bounds[d] != b.bounds[d])

        leaver, heir, dim = next(
            (p, h, differs(p.state.zone, h.state.zone)) for p in overlay.peers
            for h in overlay.peers if h.id in heirs(p.state.zone, p.state.neighbours, tree_only=True)
            and differs(p.state.zone, h.state.zone) in (1, 3))  # subject or object
        space, zone = leaver.state.space, leaver.state.zone

        def inside(d: int, count: int) -> list:  # IRIs whose coordinate on axis d is in the leaver's zone
            lo, hi = zone.bounds[d]
            names = (f"{a}{b}{c}" for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     for b in "0123456789abcdefghijklmnopqrstuvwxyz" for c in "0123456789")
            found = [IRI(f"{EXO}{n}") for n in names if lo <= space.coordinate(IRI(f"{EXO}{n}")) < hi]
            return found[:count]

        graphs, subjects, predicates, objects = inside(0, 10), inside(1, 10), inside(2, 1), inside(3, 10)
        term = subjects[0] if dim == 1 else objects[0]
        pattern = f"<{term.value}> ?p ?o" if dim == 1 else f"?s ?p <{term.value}>"
        bystander = next(i for i, p in enumerate(overlay.peers) if p not in (leaver, heir))
        call = leaver.membership.router.call
        async with overlay.client(bystander, "sub") as client:
            subscribed, subs = trio.Event(), []

            async def subscribe() -> None:
                subs.append(await client.subscribe(f"SELECT * WHERE {{ GRAPH ?g {{ {pattern} }} }}", kind="signal"))
                subscribed.set()

            async def subscribing_after_the_snapshot(address, op, body):
                if op is Op.TAKE_OVER and not subscribed.is_set() and not getattr(subscribe, "started", False):
                    subscribe.started = True  # type: ignore[attr-defined]
                    overlay.nursery.start_soon(subscribe)
                    await trio.sleep(1)  # the store request reaches this peer before the zone goes
                return await call(address, op, body)

            leaver.membership.router.call = subscribing_after_the_snapshot

            async def leave() -> None:  # as a move does: the leave's task ends afterwards
                await leaver.membership.leave()

            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(leave)
                await subscribed.wait()
            assert heir.state.zone.covers(leaver.state.zone)
            events = []
            for i in range(10):
                g = graphs[i]
                quad = make_quad(g, term, predicates[0], objects[i]) if dim == 1 else \
                    make_quad(g, subjects[i], predicates[0], term)
                events.append(CompoundEvent(g, (quad,)))
                assert heir.state.zone.contains(space.point(quad))
                await client.publish(events[-1])
            got = set()
            with trio.move_on_after(30):
                async for note in subs[0]:
                    got.add(note.event)
                    if len(got) == len(events):
                        break
            assert len(got) == len(events), f"notified of {len(got)} of {len(events)} events"


async def test_step_aside_hands_the_zone_inside_the_box_asked_for_or_refuses_and_keeps_it(autojump_clock):
    """`step_aside` (the request of an empty peer that cannot leave): refused with a clear
    cannot-leave by a peer that does not rebalance, or when no heir lies inside the box asked
    for (the zone stays where it was); otherwise the zone and its data go to an heir inside the
    box, and the peer rejoins as a new peer once the pause asked for is over."""
    import math

    from eventcloud.errors import RequestError
    from eventcloud.overlay import Zone, heirs
    from eventcloud.wire.messages import StepAside
    from eventcloud.wire.ops import Op

    events = readings(40)
    total = sum(len(e.quads) for e in events)
    for every in (0.0, 1000.0):
        async with open_overlay(4, seed=1, rebalance_every=every) as overlay:
            async with overlay.client(0, "loader") as client:
                for event in events:
                    await client.publish(event)
            asker = overlay.peers[0]
            mover = next(p for p in overlay.peers if p is not asker and heirs(p.state.zone, p.state.neighbours, tree_only=True))
            heir = heirs(mover.state.zone, mover.state.neighbours, tree_only=True)[0]
            elsewhere = next(z for z in Zone(mover.state.space.whole_space()).split() if not z.covers(mover.state.zone))
            zone = mover.state.zone
            with pytest.raises(RequestError) as refused:
                await asker.router.call(mover.state.address, Op.STEP_ASIDE, StepAside(elsewhere.bounds, 1000))
            assert refused.value.code is ErrorCode.CANNOT_LEAVE
            assert ("does not rebalance" if not every else "inside the box asked for") in refused.value.message
            assert mover.state.zone == zone and not mover.membership.leaving
            if not every:
                continue
            inside = overlay.peers[[p.id for p in overlay.peers].index(heir)].state.zone.merge(zone)
            step_aside = mover.membership.step_aside

            async def first_through_a_dead_address(within):  # a rejoin that fails tries the next one
                return ["peer:999"] + await step_aside(within)

            mover.membership.step_aside = first_through_a_dead_address
            await asker.router.call(mover.state.address, Op.STEP_ASIDE, StepAside(inside.bounds, 20_000))
            await trio.sleep(5)
            async with overlay.client(0, "checker") as client:
                status = await quiet_status(client)
                assert len(status.peers) == 3 and any(p.id == heir and p.zone.covers(zone) for p in status.peers)
                assert sum(p.quads for p in status.peers) == total
                await trio.sleep(30)  # the pause is over: it rejoined as a new peer
                status = await quiet_status(client)
                assert len(status.peers) == 4 and mover.id not in {p.id for p in status.peers}
                assert not mover.stopped.is_set(), "the failed rejoin attempt ended the peer (its process exits)"
                assert sum(p.quads for p in status.peers) == total == await client.count()
                whole = mover.state.space.whole_space()
                assert sum(math.prod(hi - lo for lo, hi in p.zone.bounds) for p in status.peers) == \
                    math.prod(hi - lo for lo, hi in whole)
                assert_exact_neighbour_tables(status)


async def test_a_moved_peer_whose_port_was_taken_meanwhile_rejoins_on_another_port(autojump_clock):
    """A moved peer rejoins on its old port, for its clients. While it was away the OS may have
    handed that port to another socket (ports for outgoing connections come from the same
    range): the peer process then exited ("address already in use"), and with it a peer of the
    overlay (seen with 8 real peers moving). It now listens on another port."""
    events = readings(150)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(8, seed=7, **KNOBS) as overlay:
        serve, taken = overlay.network.serve, []

        async def serve_unless_taken(address, handler, *, task_status=trio.TASK_STATUS_IGNORED):
            if not address.endswith(":0") and not taken:   # the first port kept for a rejoin
                taken.append(address)
                raise OSError(errno.EADDRINUSE, f"cannot listen on {address}: address already in use")
            return await serve(address, handler, task_status=task_status)

        overlay.network.serve = serve_unless_taken
        first = {p.address for p in overlay.peers}
        async with overlay.client(0, "loader") as client:
            for at in range(0, len(events), 50):
                await client.publish_batch(events[at:at + 50])
            with trio.move_on_after(600):
                while not taken:
                    await trio.sleep(5)
            assert taken, "no peer moved"
            await trio.sleep(120)
            status = await quiet_status(client)
            assert len(status.peers) == 8 and not any(p.down for p in status.peers)
            assert {p.address for p in status.peers} - first, "the moved peer listens on a new port"
            assert taken[0] not in {p.address for p in status.peers}
            assert await client.count() == total


async def test_a_light_peer_does_not_move_to_a_busiest_zone_whose_cut_is_lopsided(autojump_clock):
    """All of the busiest zone's quads sit on one point (2,000 quads whose IRIs differ only in
    their namespace: one point under `local-name`, a line population at its extreme): no cut
    can share them, a join there takes all or nothing. `should_move` alone sent every empty
    peer that could leave there, and the peer it emptied moved back at its next look; where
    some quads lay beside the point, the mover took no more than it held and moved again, for
    ever (found by experiments/move_counts.py). Now a peer asks the busiest what a join would
    take and stays unless both sides hold twice its own (`gains_enough`)."""
    from eventcloud.overlay import gains_enough, heirs, should_move
    from eventcloud.rdf.model import IRI, CompoundEvent, Literal

    line = [CompoundEvent.from_triples(IRI(f"http://graph{i}.example/e"), [
        (IRI(f"http://n{i}-{j}.example/s"), IRI(f"http://n{i}-{j}.example/p"), Literal("x")) for j in range(100)])
        for i in range(20)]
    async with open_overlay(8, seed=3, rebalance_ratio=4.0, rebalance_min_quads=100) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in line:
                await client.publish(event)
        loads = {p.id: p.rebalancer.store.held() for p in overlay.peers}
        hot = max(overlay.peers, key=lambda p: loads[p.id])
        assert loads[hot.id] == 2_000 and sum(loads.values()) == 2_000
        looked = 0
        for peer in overlay.peers:
            if peer is hot or not heirs(peer.state.zone, peer.state.neighbours, tree_only=True):
                continue
            assert should_move(0, 2_000, ratio=4.0, min_quads=100)   # what moved it before
            takes = (await peer.rebalancer.survey.joiner_takes(hot.state.address)).takes
            assert takes in (0, 2_000) and not gains_enough(0, 2_000, takes)
            zone = peer.state.zone
            before = peer.rebalancer.counters["rebalance_not_worth"]
            for _ in range(20):   # a look whose random probes miss the busiest finds nothing to move to
                assert await peer.rebalancer.once() is None  # it used to hand its zone over here
                if peer.rebalancer.counters["rebalance_not_worth"] > before:
                    break
            assert peer.rebalancer.counters["rebalance_not_worth"] == before + 1
            assert peer.state.zone == zone and peer.rebalancer.store.held() == 0
            looked += 1
        assert looked >= 1, f"no empty peer that could leave: {loads}"
        # what a joiner would take is computed from a scan of the whole store: reused a while
        scans = []
        sample = hot.rebalancer.survey.store.sample

        async def counted(*args, **kwargs):
            scans.append(args)
            return await sample(*args, **kwargs)
        hot.rebalancer.survey.store.sample = counted
        hot.rebalancer.survey._cut = None
        asker = next(p for p in overlay.peers if p is not hot)
        assert [(await asker.rebalancer.survey.joiner_takes(hot.state.address)).takes for _ in range(3)] == [takes] * 3
        assert len(scans) == 1
        await trio.sleep(11)  # CUT_KEPT later: computed again
        assert (await asker.rebalancer.survey.joiner_takes(hot.state.address)).takes == takes and len(scans) == 2


async def test_light_peers_do_not_all_move_to_the_same_busiest_peer_at_once(autojump_clock):
    """At the start of a publication every empty peer finds the same busiest peer within a few
    seconds; all of them moved, split it one after the other (a half, a quarter, an eighth) and
    moved on again (8 real peers: most of the overlay between zones at once, publications
    refused). The busiest now keeps itself for the first mover a join would be worth it for;
    the others asking within PROMISED_FOR seconds stay, and look again later."""
    from eventcloud.overlay import heirs
    from peers.membership import PROMISED_FOR

    async with open_overlay(8, seed=3, rebalance_ratio=4.0, rebalance_min_quads=100) as overlay:
        async with overlay.client(0, "loader") as client:
            await client.publish_batch(readings(150))
        held = {p.id: p.rebalancer.store.held() for p in overlay.peers}
        hot = max(overlay.peers, key=lambda p: held[p.id])
        movers = [p for p in overlay.peers if p is not hot and held[p.id] * 8 < held[hot.id]
                  and heirs(p.state.zone, p.state.neighbours, tree_only=True)]
        assert len(movers) >= 2, held
        first, second = movers[:2]
        ask = lambda peer: peer.rebalancer.survey.joiner_takes(hot.state.address, held[peer.id])  # noqa: E731
        assert not (await ask(first)).promised
        assert (await ask(second)).promised
        assert not (await ask(first)).promised                     # its own promise still
        assert not (await hot.rebalancer.survey.joiner_takes(hot.state.address)).promised   # not a mover
        zone = second.state.zone
        for _ in range(20):   # a look whose random probes miss the busiest finds nothing to move to
            assert await second.rebalancer.once() is None
            if second.rebalancer.counters["rebalance_busiest_promised"]:
                break
        assert second.rebalancer.counters["rebalance_busiest_promised"] == 1 and second.state.zone == zone
        await trio.sleep(PROMISED_FOR / 2)
        assert not (await ask(first)).promised                     # asking again does not extend it
        await trio.sleep(PROMISED_FOR / 2 + 1)                     # the first did not come: free again
        assert not (await ask(second)).promised
        assert (await ask(first)).promised


async def test_the_stand_ins_a_moved_peer_hosts_come_back_with_it_and_are_not_taken_over(autojump_clock, tmp_path):
    """A peer hosting a stand-in (the zone of a crashed peer it was the replica of) is moved by
    the rebalancer. Its next runtime starts the stand-in again from its data directory; the
    move used to delete it (with the moved peer's own stale store), so every move was a
    crash of the zones it hosted, taken over once more by their replicas."""
    from eventcloud.overlay import heirs
    from eventcloud.wire.messages import Empty, StepAside, Table
    from eventcloud.wire.ops import Op

    events = readings(40)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(3, seed=1, rebalance_every=1000.0, failure_timeout=20.0) as overlay:
        host = await overlay.add_peer(data_dir=tmp_path / "host")
        victim = await overlay.add_peer()
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
        victim.replication.candidates = lambda: [(host.id, host.address)]
        if victim.state.replica is None or victim.state.replica[0] != host.id:
            assert await victim.replication.ensure(replace=True)
        assert victim.state.replica[0] == host.id
        victim.stop()
        await overlay.network.kill(victim.address)
        await trio.sleep(30)                                   # past the failure timeout: taken over
        standin = host.standins.holds(victim.id)
        assert standin is not None and standin.state.incarnation == 1
        zone = standin.state.zone
        assert (tmp_path / "host" / "standins").is_dir()
        # a neighbour asks the host to step aside: it hands its own zone over and rejoins
        heir = heirs(host.state.zone, host.state.neighbours, tree_only=True)[0]
        inside = next(p for p in overlay.peers if p.id == heir).state.zone.merge(host.state.zone)
        asker = next(p for p in overlay.peers[:3] if p.id != heir)
        await asker.router.call(host.state.address, Op.STEP_ASIDE, StepAside(inside.bounds, 1000))
        await trio.sleep(60)                                   # rejoined; past the failure timeout again
        assert host.stopped.is_set() or host.state.id not in {p.id for p in overlay.peers[:3]}
        async with overlay.client(0, "checker") as client:
            status = await quiet_status(client)
            listed = {p.id: p for p in status.peers}
            assert host.id not in listed and victim.id in listed and not listed[victim.id].down
            # (its zone may have changed since: the rejoin may split it, or hand it the moved zone)
            assert listed[victim.id].zone.intersects(zone.bounds)
            tables = [Table.from_wire(await overlay.peers[0].router.call(p.address, Op.TABLE, Empty()))
                      for p in status.peers if p.id != victim.id]
            records = [t.neighbours[victim.id] for t in tables if victim.id in t.neighbours]
            assert records and all(r.incarnation == 1 for r in records)   # the same stand-in, not a second takeover
            assert sum(p.quads for p in status.peers) == total == await client.count()
            assert_exact_neighbour_tables(status)

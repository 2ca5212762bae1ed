"""The ownership authority's contract, held by each implementation: the local one in this
process, the local one served over HTTP and reached by the etcd client, and a real etcd
(Debian's etcd-server; skipped where it is not installed). Then a peer's standing with it
(`Ownership`): registration, the fence on writes, claims on a crashed owner's zone."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial

import httpx
import pytest
import trio

from eventcloud.errors import AuthorityUnreachable, BadRequest, Fenced, LeaseExpired
from eventcloud.overlay import CoordinateSpace, Zone
from eventcloud.testing.etcd import EtcdCluster, etcd_binary, free_port
from peers.authority import (
    Delete, EtcdAuthority, LocalAuthority, Ownership, Put, Same, WatchCompacted, parse_authority, serve_authority,
    zone_map,
)
from peers.runtime.lifecycle import drop_stale
from peers.store import PeerState

BACKENDS = ["local", "served", "etcd"]


class _Clock:
    """A clock the test moves (the served and direct local authorities run on it)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return trio.current_time() + self.offset


@pytest.fixture
async def backend(request, tmp_path, nursery):
    """(authority, advance): `advance(s)` lets `s` seconds pass on the authority's clock."""
    kind = request.param
    if kind == "etcd":
        if etcd_binary() is None:
            pytest.skip("etcd is not installed (Debian's etcd-server)")
        cluster = EtcdCluster(tmp_path / "etcd")
        await trio.to_thread.run_sync(cluster.start)
        authority = EtcdAuthority(cluster.url)
        try:
            yield authority, trio.sleep
        finally:
            await authority.aclose()
            await trio.to_thread.run_sync(cluster.stop)
        return
    clock = _Clock()

    async def advance(seconds: float) -> None:
        clock.offset += seconds
        await trio.sleep(0)

    local = LocalAuthority(clock)
    if kind == "local":
        yield local, advance
        return
    url = await nursery.start(serve_authority, local)
    authority = EtcdAuthority(url.replace("http://", "etcd://"))
    try:
        yield authority, advance
    finally:
        await authority.aclose()


contract = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@contract
async def test_a_key_is_created_once_and_swapped_only_from_the_value_it_holds(backend):
    authority, _ = backend
    assert await authority.get("t/a") is None
    assert await authority.transact([Same("t/a", None)], [Put("t/a", "1")])
    assert not await authority.transact([Same("t/a", None)], [Put("t/a", "2")])   # exists: refused
    assert (await authority.get("t/a")).value == "1"
    assert not await authority.transact([Same("t/a", "0")], [Put("t/a", "2")])    # wrong value: refused
    assert await authority.transact([Same("t/a", "1")], [Put("t/a", "2"), Put("t/b", "x")])
    assert [(e.key, e.value) for e in await authority.scan("t/")] == [("t/a", "2"), ("t/b", "x")]
    assert await authority.scan("u/") == []
    # all or nothing: one failing condition applies none of the writes
    assert not await authority.transact([Same("t/a", "2"), Same("t/b", "y")], [Put("t/a", "3"), Delete("t/b")])
    assert (await authority.get("t/a")).value == "2" and (await authority.get("t/b")).value == "x"
    assert await authority.transact([Same("t/b", "x")], [Delete("t/b")])
    assert await authority.get("t/b") is None


@contract
async def test_a_leased_key_vanishes_when_its_lease_is_not_kept_alive(backend):
    authority, advance = backend
    kept, dropped = await authority.grant(2), await authority.grant(2)
    assert await authority.transact([], [Put("l/kept", "k", kept), Put("l/dropped", "d", dropped)])
    assert (await authority.get("l/kept")).lease == kept
    for _ in range(4):                     # 3 s in all: past the TTL, for the lease not renewed
        await advance(0.75)
        assert await authority.keep_alive(kept) >= 1
    for _ in range(40):                    # etcd expires leases on its own schedule (bounded wait)
        if await authority.get("l/dropped") is None:
            break
        await advance(0.25)
    assert await authority.get("l/dropped") is None
    assert (await authority.get("l/kept")).value == "k"
    with pytest.raises(LeaseExpired):
        await authority.keep_alive(dropped)
    with pytest.raises(LeaseExpired):      # nothing can be attached to an expired lease
        await authority.transact([], [Put("l/late", "x", dropped)])
    await authority.revoke(kept)
    assert await authority.get("l/kept") is None
    await authority.revoke(kept)           # gone already: no error


@contract
async def test_a_condition_on_an_absent_key_holds_after_its_lease_expired(backend):
    """The takeover's transaction: the owner key absent (its lease expired) and the epoch unchanged."""
    authority, advance = backend
    owner = await authority.grant(2)
    assert await authority.transact([], [Put("z/epoch", "1"), Put("z/owner", "o", owner)])
    claim = [Same("z/owner", None), Same("z/epoch", "1")]
    assert not await authority.transact(claim, [Put("z/epoch", "2")])       # the owner's lease lives
    for _ in range(40):
        await advance(0.25)
        if await authority.transact(claim, [Put("z/epoch", "2")]):
            break
    assert (await authority.get("z/epoch")).value == "2"
    assert not await authority.transact(claim, [Put("z/epoch", "2")])       # a second claim loses


@contract
async def test_a_watch_from_a_listing_reports_every_later_change_under_its_prefix_in_order(backend):
    """The zone map's cache: a listing, then every change after it (puts, deletes, a lease's
    lapse), none missed or repeated, nothing from outside the prefix; a quiet watch returns."""
    authority, advance = backend
    assert await authority.transact([], [Put("w/a", "1"), Put("x/other", "o")])
    listing = await authority.listing("w/")
    assert [(e.key, e.value) for e in listing.entries] == [("w/a", "1")] and listing.revision >= 1
    seen: list = []
    lease = await authority.grant(2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(authority.watch, "w/", listing.revision + 1, seen.extend, quiet=60))
        assert await authority.transact([Same("w/a", "1")], [Put("w/a", "2"), Put("w/b", "leased", lease)])
        assert await authority.transact([], [Put("x/other", "p")])       # outside the prefix
        assert await authority.transact([], [Delete("w/a")])
        for _ in range(60):                                               # w/b goes with its lease (bounded)
            await advance(0.25)
            await authority.get("w/b")
            if any(c.entry.key == "w/b" and c.deleted for c in seen):
                break
        nursery.cancel_scope.cancel()
    assert [(c.entry.key, c.entry.value, c.deleted) for c in seen] == [
        ("w/a", "2", False), ("w/b", "leased", False), ("w/a", "", True), ("w/b", "", True)]
    revisions = [c.entry.revision for c in seen]
    assert revisions == sorted(revisions) and revisions[0] > listing.revision and revisions[0] == revisions[1]
    with trio.fail_after(10):   # nothing changes: the watch returns after `quiet` seconds
        await authority.watch("w/", revisions[-1] + 1, seen.extend, quiet=0.5)
    assert len(seen) == 4


@pytest.mark.parametrize("backend", ["local", "etcd"], indirect=True)
async def test_a_watch_from_a_revision_no_longer_held_is_told_to_list_again(backend, monkeypatch):
    """The local authority forgets its oldest changes past HISTORY; etcd, those before a
    compaction. A watch from there is told so (it lists again); one from a revision still held
    replays from it."""
    authority, _ = backend
    monkeypatch.setattr("peers.authority.local.HISTORY", 3)
    for i in range(5):
        assert await authority.transact([], [Put(f"h/{i}", "v")])
    revision = (await authority.listing("h/")).revision
    if isinstance(authority, EtcdAuthority):
        async with httpx.AsyncClient() as http:
            compacted = await http.post(authority.members[0] + "/v3/kv/compaction",
                                        json={"revision": str(revision - 1), "physical": True})
            assert compacted.status_code == 200
    with pytest.raises(WatchCompacted):
        await authority.watch("h/", revision - 4, lambda batch: None, quiet=1)
    seen: list = []
    await authority.watch("h/", revision - 1, seen.extend, quiet=1)   # still held: replayed, then quiet
    assert [c.entry.key for c in seen] == ["h/3", "h/4"]


async def test_the_served_authority_ends_a_watch_whose_client_went_away(nursery):
    """Each quiet return or broken stream of a watching peer closes its HTTP stream: the server
    must drop that watcher, or a long-running authority collects one per reconnect."""
    local = LocalAuthority()
    url = await nursery.start(serve_authority, local)
    client = EtcdAuthority(url.replace("http://", "etcd://"))
    try:
        for _ in range(3):
            with trio.fail_after(10):
                await client.watch("q/", local.revision + 1, lambda batch: None, quiet=0.3)
        with trio.fail_after(10):
            while local._watchers:
                await trio.sleep(0.05)
        async with httpx.AsyncClient() as http:   # a malformed watch is a typed 400, not a hang
            bad = await http.post(url + "/v3/watch", json={"create_request": {"key": "cQ==", "range_end": "eg=="}})
            assert bad.status_code == 400 and "prefix" in bad.json()["error"]
    finally:
        await client.aclose()


# --- the etcd client alone -----------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["served"], indirect=True)
async def test_an_unreachable_member_is_skipped_and_none_answering_is_a_typed_error(backend):
    authority, _ = backend
    alive = authority.members[0].removeprefix("http://")
    dead = f"127.0.0.1:{free_port()}"
    both = EtcdAuthority(f"etcd://{dead},{alive}", timeout=1.0)
    try:
        assert await both.transact([Same("m/k", None)], [Put("m/k", "v")])
        assert (await both.get("m/k")).value == "v"
    finally:
        await both.aclose()
    none = EtcdAuthority(f"etcd://{dead}", timeout=1.0)
    try:
        with trio.fail_after(5):
            with pytest.raises(AuthorityUnreachable, match=dead):
                await none.get("m/k")
    finally:
        await none.aclose()


@pytest.mark.parametrize("backend", ["served"], indirect=True)
async def test_a_renewal_not_answered_soon_is_sent_again_to_the_next_member(backend, nursery):
    """A renewal whose request is stuck (a dropped packet waiting out TCP's backoff behind a
    saturated link; here a member that accepts and never answers) is hedged: sent again to the
    next member half a second later, so the lease is renewed long before its TTL."""
    authority, _ = backend

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
    stuck = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    hedged = EtcdAuthority(f"etcd://{stuck},{authority.members[0].removeprefix('http://')}")
    try:
        lease = await authority.grant(5)
        started = trio.current_time()
        with trio.fail_after(3):   # unhedged, it waited for the stuck member's 6 s timeout
            assert await hedged.keep_alive(lease) == 5
        assert trio.current_time() - started < 2
    finally:
        await hedged.aclose()


@pytest.mark.parametrize("backend", ["served"], indirect=True)
async def test_the_served_authority_refuses_garbage_with_a_typed_reply(backend):
    authority, _ = backend
    base = authority.members[0]
    async with httpx.AsyncClient() as http:
        garbage = await http.post(base + "/v3/kv/txn", content=b"\xff not json")
        assert garbage.status_code == 400 and "malformed" in garbage.json()["error"]
        unknown = await http.post(base + "/v3/kv/compact", json={})
        assert unknown.status_code == 404 and "not served here" in unknown.json()["error"]
        wrong = await http.post(base + "/v3/kv/txn", json={"compare": [{"key": "eA==", "result": "GREATER"}]})
        assert wrong.status_code == 400 and "EQUAL" in wrong.json()["error"]
    assert (await authority.get("x")) is None   # still serving


@pytest.mark.parametrize("url", ["", "etcd://", "etcd://host", "zk://h:1", "etcd://h:x"])
def test_a_bad_authority_url_is_refused_naming_it(url):
    with pytest.raises(BadRequest, match="authority"):
        parse_authority(url)


# --- a peer's standing: registration, the fence, claims ------------------------------------------

def _peer(ident: str, incarnation: int = 0) -> PeerState:
    return PeerState(ident, f"h:{ident}", "ov", space=CoordinateSpace(), algorithm="osma", replicas=2,
                     incarnation=incarnation)


async def test_an_owner_serves_while_its_lease_lives_and_a_replica_claims_only_after_it_lapsed(autojump_clock):
    authority = LocalAuthority()         # on the test's virtual clock, as the fence is
    owner_state, keeper_state = _peer("a", 1), _peer("b")
    owner = Ownership(owner_state, authority, Counter(), ttl=2)
    keeper = Ownership(keeper_state, authority, Counter(), ttl=2)
    with pytest.raises(Fenced, match="no live lease"):
        owner.fence()                    # not registered yet: nothing is acknowledged
    await owner.establish()
    await keeper.establish()
    owner.fence()
    assert (await authority.get("eventcloud/ov/epoch/a")).value == "1"
    assert json.loads((await authority.get("eventcloud/ov/owner/a")).value)["address"] == "h:a"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(owner.run)
        nursery.start_soon(keeper.run)
        await trio.sleep(30)             # the owner renews: it stays fenced in, and unclaimable
        owner.fence()
        assert not await keeper.claim("a", 1)
        assert "still holds its lease" in await keeper.refusal("a", 1)
        # The owner is cut off from the authority (its renewals fail): its own fence closes
        # before the authority lets the replica claim.
        real = authority.keep_alive

        async def unreachable(lease: int) -> int:
            if lease == owner.lease:
                raise AuthorityUnreachable("cut off")
            return await real(lease)

        authority.keep_alive = unreachable
        claimed_at = fenced_at = None
        start = trio.current_time()
        while claimed_at is None:
            await trio.sleep(0.1)
            if fenced_at is None:
                try:
                    owner.fence()
                except Fenced:
                    fenced_at = trio.current_time() - start
            if await keeper.claim("a", 1):
                claimed_at = trio.current_time() - start
        assert fenced_at is not None and fenced_at <= claimed_at
        assert (await authority.get("eventcloud/ov/epoch/a")).value == "2"
        assert not await keeper.claim("a", 1)          # claimed once
        assert await keeper.refusal("a", 1) == "peer b claimed it first"
        authority.keep_alive = real                    # healed: the old owner learns it was deposed
        with trio.fail_after(10):
            await owner.superseded.wait()
        with pytest.raises(Fenced, match="deposed"):
            owner.fence()
        nursery.cancel_scope.cancel()


class _SlowLink:
    """The authority as an owner behind a slow link reaches it: each call waits `delay` seconds
    before it arrives (the authority's clock counts from the arrival, as etcd's does)."""

    def __init__(self, authority: LocalAuthority) -> None:
        self.authority, self.delay = authority, 0.0

    def __getattr__(self, name: str):
        call = getattr(self.authority, name)

        async def delayed(*args, **kwargs):
            await trio.sleep(self.delay)
            return await call(*args, **kwargs)

        return delayed


@pytest.mark.parametrize("extended", [3, 1])
async def test_an_owner_whose_renewals_are_slow_extends_its_lease_and_outlives_a_stall_past_the_base_ttl(
        autojump_clock, monkeypatch, extended):
    """Renewals that take seconds (a saturated link) move the owner key to a lease three times
    as long; a stall of 8 s (nothing crosses the link) then passes without the lease lapsing, so
    the replica cannot claim a live owner. Once renewals are fast again the lease returns to the
    base TTL, so a crash is taken over as quickly as before. With no extension (EXTENDED = 1) the
    same stall lets the replica claim the zone."""
    monkeypatch.setattr("peers.authority.ownership.EXTENDED", extended)
    authority = LocalAuthority()
    link = _SlowLink(authority)
    owner = Ownership(_peer("a", 1), link, Counter(), ttl=5)
    keeper = Ownership(_peer("b"), authority, Counter(), ttl=5)
    await owner.establish()
    await keeper.establish()
    key = "eventcloud/ov/owner/a"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(owner.run)
        nursery.start_soon(keeper.run)
        await trio.sleep(10)
        link.delay = 2.0                  # slow: the lease is extended
        await trio.sleep(12)
        link.delay = 8.0                  # nothing crosses for 8 s at a time: past the base TTL
        claimed = False
        for _ in range(24):
            await trio.sleep(0.5)
            claimed = claimed or await keeper.claim("a", 1)
        if extended == 1:
            assert claimed                # the live owner lost its zone
            nursery.cancel_scope.cancel()
            return
        assert not claimed and (await authority.get(key)) is not None
        assert owner.counters["leases_extended"] == 1 and owner.ttl == 15
        owner.fence()                     # and it still acknowledges writes
        link.delay = 0.0                  # fast again: back to the base TTL
        await trio.sleep(40)
        entry = await authority.get(key)
        assert owner.ttl == 5 and owner.counters["leases_restored"] == 1 and authority.remaining(entry.lease) <= 5
        owner.fence()
        nursery.cancel_scope.cancel()


async def test_a_leave_is_decided_at_the_authority_and_leaves_nothing_to_claim(autojump_clock):
    """`absorb`: an heir takes a leaver's zone only if both epochs are as expected; from then the
    leaver's replica cannot claim it."""
    authority = LocalAuthority()
    leaver, heir, keeper = (Ownership(_peer(i), authority, Counter(), ttl=2) for i in ("l", "h", "k"))
    for ownership in (leaver, heir, keeper):
        await ownership.establish()
    await leaver.record_replica("k", "h:k")
    with pytest.raises(Fenced, match="that zone's epoch is 0, not 3"):
        await heir.absorb("l", 3)                  # not the epoch the leaver leaves at
    await heir.absorb("l", 0)
    assert (await authority.get("eventcloud/ov/replica/l")).value == "absorbed:h"
    await authority.revoke(leaver.lease)           # the leaver dies before it retired its keys
    assert not await keeper.claim("l", 0, "k", "h:k")
    assert await keeper.refusal("l", 0, "k", "h:k") == "it left: peer h took its zone over"
    stale = Ownership(_peer("h", 0), authority, Counter(), ttl=2)
    await authority.transact([], [Put("eventcloud/ov/epoch/h", "1")])   # the heir was taken over meanwhile
    with pytest.raises(Fenced, match="its own zone's epoch is 1, not 0"):
        await stale.absorb("x", 0)
    assert stale.superseded.is_set()


async def test_a_leave_attempt_is_the_heirs_or_the_leavers_whichever_transaction_comes_first(autojump_clock):
    """`begin_leave` records the attempt; the heir's `absorb` and the leaver's `settle_leave`
    exclude each other, and each side, asking again, learns the other's decision."""
    authority = LocalAuthority()
    leaver, heir, other = (Ownership(_peer(i), authority, Counter(), ttl=2) for i in ("l", "h", "o"))
    for ownership in (leaver, heir, other):
        await ownership.establish()
    whole = Zone(CoordinateSpace().whole_space())
    lower, upper = whole.split()
    token = await leaver.begin_leave()
    await heir.absorb("l", 0, token, whole)
    await heir.absorb("l", 0, token, whole)        # asked again (a restart, a stand-in): still ours
    with pytest.raises(Fenced, match="decided otherwise"):
        await other.absorb("l", 0, token, whole)   # one heir only
    assert await leaver.settle_leave(token) == "h"  # the answer was lost: the leaver learns it left
    assert await leaver.absorbed_by("l") == "h"
    assert (await zone_map(authority, "ov")) == {"h": whole}
    await authority.transact([], [Delete("eventcloud/ov/epoch/l")])   # the leaver retired its keys
    await heir.absorb("l", 0, token, whole)   # a stand-in restoring a copy still merging: the record says ours
    kept = await heir.begin_leave()
    assert await heir.settle_leave(kept) is None    # no answer: withdrawn, the zone stays the heir's
    with pytest.raises(Fenced, match="decided otherwise"):
        await other.absorb("h", 0, kept, whole)
    assert await heir.absorbed_by("h") == ""


async def test_a_split_is_committed_or_undone_by_whichever_transaction_comes_first(autojump_clock):
    """`begin_split` records it; the splitter's commit (the newcomer asked) and its undo (the
    newcomer never did) exclude each other, a deposed splitter commits nothing, and only a
    commit writes the zone map."""
    authority = LocalAuthority()
    splitter = Ownership(_peer("s"), authority, Counter(), ttl=2)
    await splitter.establish()
    whole = Zone(CoordinateSpace().whole_space())
    lower, upper = whole.split()
    await splitter.founded(whole)
    await splitter.begin_split("n1")
    assert await splitter.commit_split("n1", lower, upper) == "committed"
    assert await splitter.undo_split("n1") == "committed"         # a timer that fired too late: it stands
    assert await splitter.commit_split("n1", lower, upper) == "committed"   # asked again
    assert await splitter.split_committed("n1")
    assert await zone_map(authority, "ov") == {"s": lower, "n1": upper}
    await splitter.begin_split("n2")
    assert await splitter.undo_split("n2") == "undone"
    assert await splitter.commit_split("n2", lower, upper) == "undone"      # too late: refused
    assert not await splitter.split_committed("n2")
    await splitter.begin_split("n3")
    await authority.transact([], [Put("eventcloud/ov/epoch/s", "1")])   # taken over meanwhile
    with pytest.raises(Fenced, match="epoch is 1, not 0"):
        await splitter.commit_split("n3", lower, upper)
    assert splitter.superseded.is_set()
    assert await zone_map(authority, "ov") == {"s": lower, "n1": upper}


async def test_a_restarted_owner_resumes_its_epoch_and_a_superseded_one_steps_down(autojump_clock):
    authority = LocalAuthority()
    first = Ownership(_peer("a", 1), authority, Counter(), ttl=2)
    await first.establish()
    # killed -9: its lease is never revoked; the same incarnation restarted registers again at once
    again = Ownership(_peer("a", 1), authority, Counter(), ttl=2)
    await again.establish()
    again.fence()
    assert not again.superseded.is_set()
    # a replica claims after the restarted one's lease lapsed; an older incarnation then steps down
    await trio.sleep(5)
    keeper = Ownership(_peer("b"), authority, Counter(), ttl=2)
    await keeper.establish()
    assert await keeper.claim("a", 1)
    stale = Ownership(_peer("a", 1), authority, Counter(), ttl=2)
    await stale.establish()
    assert stale.superseded.is_set() and stale.newer_epoch == 2
    standin = Ownership(_peer("a", 2), authority, Counter(), ttl=2)
    await standin.establish()
    standin.fence()


async def test_only_the_copy_the_owner_named_claims_its_zone_even_once_its_holder_rejoined_as_another_peer(
        autojump_clock):
    """Simulation seeds 9 and 27: the peer holding an owner's current copy was deposed (cut off)
    and rejoined under a new id while the owner crashed. The copy it kept on disk, under the id it
    was named with, still claims the zone; a peer holding an older copy never does."""
    authority = LocalAuthority()
    owner = Ownership(_peer("a"), authority, Counter(), ttl=2)
    await owner.establish()
    await owner.record_replica("c")     # the owner's writes since are on c's copy only
    await trio.sleep(5)                 # crashed: no renewal, its lease lapses
    older = Ownership(_peer("b"), authority, Counter(), ttl=2)
    rejoined = Ownership(_peer("d"), authority, Counter(), ttl=2)   # c, deposed, rejoined as d
    for keeper in (older, rejoined):
        await keeper.establish()
    assert not await older.claim("a", 0)
    assert not await rejoined.claim("a", 0)            # as d, it holds no copy the owner named
    assert "names another copy of it as current (taken as c)" in await rejoined.refusal("a", 0)
    assert await rejoined.claim("a", 0, holder="c")    # the copy it took as c
    assert (await authority.get("eventcloud/ov/epoch/a")).value == "1"
    assert not await older.claim("a", 0)


async def test_a_copy_kept_under_an_id_a_stand_in_serves_now_claims_nothing_once_the_owner_names_the_stand_in(
        autojump_clock):
    """Simulation seed 32: replica c was taken over (its stand-in serves on as c, elsewhere) and
    rejoined as d at its old address, keeping its copy of a's zone taken as c. Owner a then named
    the stand-in c as its replica and crashed: by id alone, d's stale copy claimed a's zone and
    every write since was lost. Named with its address, the stand-in's copy is told apart."""
    authority = LocalAuthority()
    owner = Ownership(_peer("a"), authority, Counter(), ttl=2)
    await owner.establish()
    await owner.record_replica("c", "h:c")          # the first runtime of c, whose copy d kept
    await owner.record_replica("c", "h:stand-in")   # c's stand-in: the copy holding every write since
    await trio.sleep(5)                             # a crashed
    rejoined = Ownership(_peer("d"), authority, Counter(), ttl=2)
    rejoined.state.address = "h:c"                  # d listens where c did
    standin = Ownership(_peer("c", 1), authority, Counter(), ttl=2)
    standin.state.address = "h:stand-in"
    for keeper in (rejoined, standin):
        await keeper.establish()
    assert not await rejoined.claim("a", 0, holder="c", holder_address="h:c")
    assert "taken as c@h:stand-in" in await rejoined.refusal("a", 0, holder="c", holder_address="h:c")
    assert await standin.claim("a", 0)


def test_a_superseded_peer_drops_only_its_own_zone_keeping_the_copies_and_stand_ins_it_holds_for_others(tmp_path):
    for name in ("store", "replicas/a-1234/store", "standins/b"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "peer.json").write_text("{}")
    drop_stale(tmp_path)
    assert not (tmp_path / "store").exists() and not (tmp_path / "peer.json").exists()
    assert (tmp_path / "peer.json.superseded").exists()
    assert (tmp_path / "replicas/a-1234/store").is_dir() and (tmp_path / "standins/b").is_dir()


async def test_without_an_authority_every_check_passes():
    alone = Ownership(_peer("a"), None, Counter(), ttl=2)
    await alone.establish()
    alone.fence()
    assert await alone.claim("b", 3)


async def test_a_hosted_authority_comes_back_at_its_url_with_its_keys_and_asks_for_the_cluster_token(tmp_path):
    """What a lone first peer hosts (peers/authority/hosted.py): saved in its data directory,
    served again on the same port after a restart with its keys, every lease given its whole TTL
    again (a restart expires no live owner), lease ids never handed out twice, and only to
    requests carrying the token derived from the cluster secret."""
    from peers.authority import authority_token, serve_hosted_authority

    token = authority_token(b"s" * 32)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(serve_hosted_authority, tmp_path, "127.0.0.1", token)
        client = EtcdAuthority(url, token=token)
        lease = await client.grant(5)
        assert await client.transact([Same("k/owned", None)], [Put("k/owned", "a", lease), Put("k/plain", "b")])
        await client.aclose()
        stranger = EtcdAuthority(url)   # no token: refused, with a typed error
        with pytest.raises(AuthorityUnreachable, match="token"):
            await stranger.grant(5)
        await stranger.aclose()
        nursery.cancel_scope.cancel()
    assert (tmp_path / "authority.json").exists()
    async with trio.open_nursery() as nursery:
        again = await nursery.start(serve_hosted_authority, tmp_path, "127.0.0.1", token)
        assert again == url
        client = EtcdAuthority(again, token=token)
        assert {e.key: e.value for e in await client.scan("k/")} == {"k/owned": "a", "k/plain": "b"}
        assert await client.keep_alive(lease) == 5     # the owner's lease lives on
        assert await client.grant(5) > lease           # a new lease never reuses an id
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_leases_are_credited_with_the_time_their_authority_was_stopped(autojump_clock):
    clock = _Clock()
    authority = LocalAuthority(clock)
    lease = await authority.grant(5)
    clock.offset += 4
    authority.credit(20)    # the process was stopped for 20 s (its server's ticker saw it)
    clock.offset += 20
    assert await authority.keep_alive(lease) == 5

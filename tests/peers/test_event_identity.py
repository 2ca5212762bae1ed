"""A graph IRI that holds an event belongs to that event's content: the same content again is
an idempotent retry (through any entry peer, in any order, notified once); other content is
refused with `conflict` naming the IRI, before anything of it is stored, also when its quads
would land on owners that hold nothing of the first event; deleting the event frees the IRI.
(Before, "D" published under the IRI of an event holding "C" was acknowledged, stored beside
it and never notified; an outsider could add quads to another client's event the same way.)"""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError
from eventcloud.rdf.model import IRI, CompoundEvent, Literal, make_quad
from eventcloud.testing import open_overlay

EX = "http://ex.org/"


def event(graph: str, *objects: str, subject: str = "c") -> CompoundEvent:
    g = IRI(EX + graph)
    return CompoundEvent(g, tuple(make_quad(g, IRI(EX + subject), IRI(EX + "q"), Literal(o)) for o in objects))


async def _quiet(sub, seconds: float = 10) -> list:
    extra = []
    with trio.move_on_after(seconds):
        extra.append(await sub.receive())
    return extra


async def test_same_content_is_idempotent_and_other_content_is_refused_with_nothing_stored(autojump_clock):
    async with open_overlay(6) as overlay:
        async with overlay.client(0, "sub") as subscriber, overlay.client(1, "a") as first, \
                overlay.client(4, "b") as other:
            sub_c = await subscriber.subscribe(f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}q> "C" }} }}', kind="signal")
            sub_d = await subscriber.subscribe(f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}q> "D" }} }}', kind="signal")
            await first.publish(event("g3", "C", "C2"))
            with trio.fail_after(10):
                assert (await sub_c.receive()).event == EX + "g3"
            # a retry, through another entry peer, its quads in another order: acknowledged, not notified again
            await other.publish(event("g3", "C2", "C"))
            assert await _quiet(sub_c) == []
            # other content under the same IRI: refused, named, nothing of it stored or notified
            for objects in (("D",), ("C", "C2", "D"), ("C",)):
                with pytest.raises(ClientError, match=f"graph IRI {EX}g3 already holds an event with other content") \
                        as info:
                    await other.publish(event("g3", *objects))
                assert info.value.code == "conflict"
                assert "delete the event first" in str(info.value)
            assert await first.count(IRI(EX + "g3")) == 2
            rows = await first.query(f"SELECT ?o WHERE {{ GRAPH <{EX}g3> {{ ?s ?p ?o }} }}")
            assert sorted(b["o"]["value"] for b in rows["results"]["bindings"]) == ["C", "C2"]
            assert await _quiet(sub_d) == []
            # deleting the event frees its IRI for another one
            assert await first.delete(IRI(EX + "g3")) == 2
            await other.publish(event("g3", "D"))
            with trio.fail_after(10):
                assert (await sub_d.receive()).event == EX + "g3"
            assert await first.count(IRI(EX + "g3")) == 1


async def test_a_batch_publishes_its_other_events_and_names_the_conflicting_ones(autojump_clock):
    async with open_overlay(4) as overlay:
        async with overlay.client(0) as victim, overlay.client(3) as outsider:
            await victim.publish(event("mine", "a", "b", "c"))
            # the outsider squats nothing: adding quads to the victim's event is refused
            with pytest.raises(ClientError, match="mine already holds an event") as info:
                await outsider.publish_batch([event("theirs-1", "x"), event("mine", "a", "b", "c", "d", "e"),
                                              event("theirs-2", "y")])
            assert info.value.code == "conflict" and "theirs" not in str(info.value)
            assert await victim.count(IRI(EX + "mine")) == 3
            assert await victim.count(IRI(EX + "theirs-1")) == 1 and await victim.count(IRI(EX + "theirs-2")) == 1
            # retrying the whole batch: the published ones are idempotent, the conflicting one still refused
            with pytest.raises(ClientError, match="mine already holds"):
                await outsider.publish_batch([event("theirs-1", "x"), event("mine", "z")])
            assert await victim.count() == 5


async def test_claims_move_with_their_zones_when_peers_join(autojump_clock):
    async with open_overlay(2) as overlay:
        async with overlay.client(0) as client:
            events = [event(f"e{i}", f"v{i}", subject=f"s{i}") for i in range(30)]
            await client.publish_batch(events)
            for _ in range(5):   # the claims' points are split off to the newcomers
                await overlay.add_peer()
            refused = 0
            for i in range(30):
                try:
                    await client.publish(event(f"e{i}", f"other{i}", subject=f"t{i}"))
                except ClientError as exc:
                    assert exc.code == "conflict"
                    refused += 1
            assert refused == 30
            assert await client.count() == 30

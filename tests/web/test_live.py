"""Live subscriptions through the gateway against a real overlay: SSE streams that are cut and
resumed with Last-Event-ID (counting lost and repeated notifications), durable subscriptions
made with POST and streamed by id, and WebSocket sessions (SEPA-like messages)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
import trio
from trio_websocket import ConnectionRejected, open_websocket_url

from tests.web.support import sse_events

pytestmark = pytest.mark.processes

EX = "http://live.example/"
READING = f"{EX}reading"


def subscription(tag: str) -> str:
    return f"SELECT ?s ?v WHERE {{ GRAPH ?g {{ ?s <{READING}> ?v ; <{EX}tag> \"{tag}\" }} }}"


async def publish(http: httpx.AsyncClient, tag: str, numbers: range) -> list[str]:
    """One event per number, each matching `subscription(tag)`; their graph IRIs."""
    graphs = [f"{EX}{tag}/event/{n}" for n in numbers]
    body = "".join(f'<{EX}s{n}> <{READING}> "{n}" <{g}> .\n<{EX}s{n}> <{EX}tag> "{tag}" <{g}> .\n'
                   for n, g in zip(numbers, graphs))
    reply = await http.post("/events", content=body, headers={"content-type": "application/n-quads"})
    assert reply.status_code == 200, reply.text
    return graphs


async def message(ws, seconds: float = 30) -> dict:
    """The next WebSocket message, decoded; a test failure (not a hang) if none comes in time."""
    with trio.fail_after(seconds):
        return json.loads(await ws.get_message())


async def next_event(events, seconds: float = 30):
    """The next server-sent event; a test failure (not a hang) if none comes in time."""
    with trio.fail_after(seconds):
        return await anext(events)


async def read_notifications(events, want: int, into: list[tuple[int, str]], limit: float = 30) -> None:
    with trio.fail_after(limit):
        while want > 0:
            event = await anext(events)
            assert event.event == "message", event
            into.append((int(event.id), event.data["event"]))
            assert event.data["sequence"] == int(event.id)
            want -= 1


def check_exactly_once(received: list[tuple[int, str]], published: list[str]) -> None:
    numbers = [n for n, _ in received]
    graphs = [g for _, g in received]
    lost = set(published) - set(graphs)
    repeated = len(graphs) - len(set(graphs))
    assert (len(lost), repeated) == (0, 0), f"lost {sorted(lost)}, repeated {repeated}"
    assert numbers == list(range(1, len(published) + 1))


async def test_sse_resumes_after_last_event_id_without_loss_or_repeat(gateway):
    tag = uuid.uuid4().hex[:8]
    query = subscription(tag)
    received: list[tuple[int, str]] = []
    async with gateway.client() as http, gateway.client() as publisher:
        async with http.stream("GET", "/subscriptions/stream", params={"query": query}) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            events = sse_events(response)
            hello = await next_event(events)
            assert hello.event == "subscribed" and hello.id == "0" and hello.data["resumed"] is False
            ident = hello.data["subscription"]
            published = await publish(publisher, tag, range(0, 10))
            await read_notifications(events, 4, received)
        # the connection is cut with six notifications in flight; six more are published meanwhile
        published += await publish(publisher, tag, range(10, 16))
        last = received[-1][0]
        async with http.stream("GET", "/subscriptions/stream", params={"query": query},
                               headers={"last-event-id": str(last)}) as response:
            assert response.status_code == 200, response.status_code  # 409: the old stream was not released
            events = sse_events(response)
            hello = await next_event(events)
            assert hello.data["subscription"] == ident and hello.data["resumed"] is True
            assert hello.data["after"] == last
            await read_notifications(events, 6, received)
        # a client without the cookie (curl) resumes the same stream too
        last = received[-1][0]
        published += await publish(publisher, tag, range(16, 20))
        async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.auth, timeout=30) as curl:
            async with curl.stream("GET", "/subscriptions/stream", params={"query": query},
                                   headers={"last-event-id": str(last)}) as response:
                assert response.status_code == 200, response.status_code
                events = sse_events(response)
                hello = await next_event(events)
                assert hello.data["subscription"] == ident
                await read_notifications(events, len(published) - len(received), received)
        # and through the resource URL the `subscribed` event gives, with the ticket in it
        last = received[-1][0]
        published += await publish(publisher, tag, range(20, 23))
        async with http.stream("GET", hello.data["resume"], headers={"last-event-id": str(last)}) as response:
            events = sse_events(response)
            assert (await next_event(events)).data["after"] == last
            await read_notifications(events, len(published) - len(received), received)
    check_exactly_once(received, published)


async def test_durable_subscription_created_by_post_and_streamed_by_id(gateway):
    tag = uuid.uuid4().hex[:8]
    async with gateway.client() as http:
        reply = await http.post("/subscriptions", json={"sparql": subscription(tag), "kind": "event"})
        assert reply.status_code == 201, reply.text
        created = reply.json()
        ident, ticket = created["id"], created["ticket"]
        assert reply.headers["location"] == created["stream"] == f"/subscriptions/{ident}/stream"
        # published before anyone streams: kept by the overlay, numbered from 1
        published = await publish(http, tag, range(0, 5))
        received: list[tuple[int, str]] = []
        async with http.stream("GET", created["stream"], params={"ticket": ticket}) as response:
            assert response.status_code == 200
            events = sse_events(response)
            assert (await next_event(events)).data["resumed"] is True
            with trio.fail_after(30):
                event = await anext(events)
            assert event.data["kind"] == "event" and len(event.data["quads"]) == 2
            received.append((int(event.id), event.data["event"]))
            await read_notifications(events, 1, received)
        published += await publish(http, tag, range(5, 8))
        async with http.stream("GET", created["stream"], params={"lastEventId": received[-1][0]},
                               headers={"eventcloud-ticket": ticket}) as response:
            events = sse_events(response)
            assert (await next_event(events)).data["after"] == received[-1][0]
            await read_notifications(events, len(published) - len(received), received)
        check_exactly_once(received, published)
        # wrong ticket, renew, cancel, then gone
        reply = await http.get(created["stream"], params={"ticket": "not-the-ticket"})
        assert reply.status_code == 403, reply.text
        reply = await http.post(f"/subscriptions/{ident}/renew", params={"ticket": ticket, "lease": 600})
        assert reply.status_code == 200 and reply.json()["expires"] > 0
        reply = await http.get("/subscriptions")
        assert any(s["id"] == ident for s in reply.json()["subscriptions"])
        reply = await http.delete(f"/subscriptions/{ident}", headers={"eventcloud-ticket": ticket})
        assert reply.status_code == 204
        reply = await http.get(created["stream"], params={"ticket": ticket})
        assert reply.status_code in (404, 410) and "cancel" in reply.text.lower(), reply.text
        reply = await http.get(created["stream"], headers={"last-event-id": "seven"}, params={"ticket": ticket})
        assert reply.status_code == 400 and "Last-Event-ID" in reply.text


async def test_websocket_subscribe_notify_unsubscribe(gateway):
    tag = uuid.uuid4().hex[:8]
    ws_url = gateway.url.replace("http://", "ws://") + "/ws"
    async with gateway.client() as http:
        async with open_websocket_url(f"{ws_url}?access_token={gateway.token}") as ws:
            await ws.send_message(json.dumps({"subscribe": {"sparql": subscription(tag), "alias": "mine"}}))
            with trio.fail_after(30):
                reply = await message(ws)
            assert reply["subscribed"]["alias"] == "mine"
            spuid = reply["subscribed"]["spuid"]
            published = await publish(http, tag, range(0, 3))
            seen = []
            with trio.fail_after(30):
                while len(seen) < 3:
                    note = (await message(ws))["notification"]
                    assert note["spuid"] == spuid and note["alias"] == "mine"
                    assert note["addedResults"]["head"]["vars"] == ["s", "v"]
                    seen.append((note["sequence"], note["event"]))
            check_exactly_once(seen, published)
            await ws.send_message(json.dumps({"subscribe": {"sparql": "SELECT ?s WHERE { ?s ?p ?o }", "alias": 2}}))
            error = (await message(ws))["error"]
            assert error["status_code"] == 400 and error["alias"] == 2 and "GRAPH" in error["error_description"]
            await ws.send_message("not json")
            assert (await message(ws))["error"]["status_code"] == 400
            await ws.send_message(json.dumps({"unsubscribe": {"spuid": spuid}}))
            assert await message(ws) == {"unsubscribed": {"spuid": spuid, "alias": "mine"}}
            await publish(http, tag, range(3, 5))
            with trio.move_on_after(1.5):
                extra = await ws.get_message()
                pytest.fail(f"a notification after unsubscribe: {extra}")
        # the token: wrong at the handshake is refused, missing is asked for per message
        with pytest.raises(ConnectionRejected) as refused:
            async with open_websocket_url(f"{ws_url}?access_token=wrong"):
                pass
        assert refused.value.status_code == 403
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(json.dumps({"subscribe": {"sparql": subscription(tag)}}))
            assert (await message(ws))["error"]["status_code"] == 401
            await ws.send_message(json.dumps({"subscribe": {"sparql": subscription(tag),
                                                            "authorization": f"Bearer {gateway.token}"}}))
            assert "subscribed" in await message(ws)


async def test_websocket_durable_subscription_resumed_on_a_new_socket(gateway):
    tag = uuid.uuid4().hex[:8]
    ws_url = gateway.url.replace("http://", "ws://") + f"/subscribe?access_token={gateway.token}"  # SEPA's path
    async with gateway.client() as http:
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(json.dumps({"subscribe": {"sparql": subscription(tag), "durable": True}}))
            opened = (await message(ws))["subscribed"]
            published = await publish(http, tag, range(0, 4))
            with trio.fail_after(30):
                first = (await message(ws))["notification"]
        published += await publish(http, tag, range(4, 6))
        seen = [(first["sequence"], first["event"])]
        async with open_websocket_url(ws_url) as ws:
            await ws.send_message(json.dumps({"resume": {"spuid": opened["spuid"], "ticket": opened["ticket"],
                                                         "after": first["sequence"]}}))
            assert (await message(ws))["subscribed"]["after"] == first["sequence"]
            with trio.fail_after(30):
                while len(seen) < len(published):
                    note = (await message(ws))["notification"]
                    seen.append((note["sequence"], note["event"]))
            await ws.send_message(json.dumps({"unsubscribe": {"spuid": opened["spuid"]}}))
            assert "unsubscribed" in await message(ws)
        check_exactly_once(seen, published)


async def test_an_sse_stream_goes_on_through_another_peer_when_the_gateways_entry_is_killed(nursery, tmp_path):
    """Issue 44, item 7: a gateway given several peers fails over as the SDK does. Its entry
    peer is killed (-9) with a stream open: publishing goes on through the next peer, and the
    stream, resumed with Last-Event-ID, delivers every notification exactly once."""
    import signal

    from peers.supervisor import LocalCluster
    from tests.web.support import serve

    with LocalCluster(3, data_dir=tmp_path / "cluster", extra=["--failure-timeout", "2"]) as cluster:
        gateway = await serve(nursery, [cluster.addresses[0], cluster.addresses[1]], cluster.admin_token)
        tag = uuid.uuid4().hex[:8]
        query = subscription(tag)
        received: list[tuple[int, str]] = []
        async with gateway.client() as http, gateway.client() as publisher:
            async with http.stream("GET", "/subscriptions/stream", params={"query": query}) as response:
                events = sse_events(response)
                hello = await next_event(events)
                published = await publish(publisher, tag, range(0, 5))
                await read_notifications(events, 5, received)
                await trio.to_thread.run_sync(cluster.stop_peer, 0, signal.SIGKILL)
                with trio.fail_after(60):   # the gateway's next request finds the next peer
                    while True:
                        try:
                            published += await publish(publisher, tag, range(5, 10))
                            break
                        except AssertionError:
                            await trio.sleep(0.5)
                with trio.move_on_after(30):   # the open stream may go on, or end: either way, resumed below
                    await read_notifications(events, 5, received)
                assert gateway.app.overlay.address == cluster.addresses[1]
            with trio.fail_after(90):
                while len(received) < len(published):
                    try:
                        async with http.stream("GET", hello.data["resume"],
                                               headers={"last-event-id": str(received[-1][0])}) as response:
                            if response.status_code != 200:
                                await trio.sleep(0.5)
                                continue
                            events = sse_events(response)
                            assert (await next_event(events)).data["after"] == received[-1][0]
                            await read_notifications(events, len(published) - len(received), received)
                    except (httpx.HTTPError, trio.TooSlowError):
                        await trio.sleep(0.5)
        check_exactly_once(received, published)

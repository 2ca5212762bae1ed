"""The gateway's ASGI application: routes, bearer-token authentication, CORS, and the handlers
that translate HTTP to SDK calls (docs/web.md describes every route).

    GET  /  /dashboard  /static/…                 the dashboard (no token needed)
    GET  /health                                  is the overlay reachable (no token needed)
    GET  /status                                  peers, zones, counters as JSON
    GET|POST /sparql                              SPARQL 1.1 Protocol query operation
    GET  /events?graph=IRI, /events?default       Graph Store Protocol: an event's graph, every event
    POST /events                                  publish RDF (one event per graph)
    POST /update                                  SPARQL 1.1 Update: INSERT DATA, DROP/CLEAR GRAPH
    DELETE /events?graph=IRI                      delete one event
    GET  /subscriptions                           every subscription (the overlay's admin list)
    POST /subscriptions                           create a durable subscription -> id, ticket
    GET  /subscriptions/stream?query=…            SSE stream of an ad-hoc subscription
    GET  /subscriptions/{id}/stream               SSE stream of a durable one (ticket)
    POST /subscriptions/{id}/renew                extend its lease (ticket)
    DELETE /subscriptions/{id}                    cancel it (ticket)
    WebSocket /ws                                 SEPA-like subscribe/unsubscribe/notifications

When the gateway has an admin token, every route but the dashboard's files, /health, /status and
CORS preflights needs `Authorization: Bearer TOKEN` (or `access_token=TOKEN` in the URL, for
EventSource and WebSocket in browsers): none is 401, a wrong one 403.
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import re
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Awaitable, Callable

import trio

from eventcloud.net.asgi import answer_lifespan
from eventcloud.rdf.results import SolutionsWriter
from eventcloud.rdf.files import RDFInputError, parse_events
from eventcloud.web import graph_store, publishing, sparql, update
from eventcloud.web.http import HttpError, Request, Response
from eventcloud.web.live import Receive, Send, Streams, stream_key
from eventcloud.web.overlay import Overlay
from eventcloud.web.status import status_json

log = logging.getLogger(__name__)

__all__ = ["Gateway", "GatewaySettings"]

_STATIC = {"dashboard.html": "text/html; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8",
           "dashboard.css": "text/css; charset=utf-8"}
#: Open without a token: the page, liveness, and the overlay's shape (any client of a peer may ask
#: for its status too); everything that reads or writes data, or subscribes, needs the token.
_PUBLIC = ("/", "/dashboard", "/dashboard/", "/health", "/status")
_ID = r"(?P<id>[A-Za-z0-9_-]{1,128})"


@dataclass
class GatewaySettings:
    admin_token: str | None = None
    cors: tuple[str, ...] = ()                   # allowed origins; "*" for any
    max_body: int = 64 * 1024 * 1024             # bytes of a request body
    ack_delay: float = 30.0
    linger: float = 300.0
    keepalive: float = 15.0
    lease: float = 3600.0                        # of the subscriptions a stream or socket makes
    extra: dict[str, Any] = field(default_factory=dict)


Handler = Callable[..., Awaitable[Response | None]]


class Gateway:
    """The ASGI app (`await gateway(scope, receive, send)`), given the overlay adapter."""

    def __init__(self, overlay: Overlay, settings: GatewaySettings | None = None) -> None:
        self.overlay = overlay
        self.settings = settings or GatewaySettings()
        self.streams = Streams(overlay, ack_delay=self.settings.ack_delay, linger=self.settings.linger,
                               keepalive=self.settings.keepalive, lease=self.settings.lease)
        self.requests = 0
        self.published = 0
        self._sequence = itertools.count()
        self.routes: list[tuple[str, re.Pattern[str], Handler, bool]] = [
            (m, re.compile(p + "$"), h, s) for m, p, h, s in [
                ("GET", r"/(?:dashboard/?)?", self.dashboard, False),
                ("GET", r"/static/(?P<name>[a-z.]+)", self.static, False),
                ("GET", r"/health", self.health, False),
                ("GET", r"/status", self.status, False),
                ("GET", r"/sparql", self.sparql, True),
                ("POST", r"/sparql", self.sparql, True),
                ("POST", r"/events", self.publish, False),
                ("GET", r"/events", self.read_graph, True),
                ("POST", r"/update", self.update, False),
                ("DELETE", r"/events", self.delete, False),
                ("GET", r"/subscriptions", self.list_subscriptions, False),
                ("POST", r"/subscriptions", self.create_subscription, False),
                ("GET", r"/subscriptions/stream", self.adhoc_stream, True),
                ("GET", rf"/subscriptions/{_ID}/stream", self.stream, True),
                ("POST", rf"/subscriptions/{_ID}/renew", self.renew, False),
                ("DELETE", rf"/subscriptions/{_ID}", self.cancel, False),
            ]]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The gateway's own tasks: the overlay connection and the ad-hoc subscriptions' sweeper."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.overlay.run)
            await nursery.start(self.streams.run)
            task_status.started()

    # --- ASGI -------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "lifespan":
            await answer_lifespan(receive, send)

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        request = Request.from_scope(scope)
        self.requests += 1
        cors = self._cors_headers(request)
        try:
            if request.method == "OPTIONS":
                response = self._preflight(request, cors)
            else:
                handler, match, streaming = self._route(request)
                if request.path not in _PUBLIC and not request.path.startswith("/static/"):
                    self._authorize(request.header("authorization"), request.param("access_token"))
                if streaming:
                    await handler(request, match, send, receive, cors)
                    return
                if request.method in ("POST", "PUT", "DELETE"):
                    request.body = await self._body(receive)
                response = await handler(request, match)
        except HttpError as exc:
            response = exc.response()
        except Exception:  # a bug of the gateway: one line to the client, the traceback to the log
            log.exception("gateway: %s %s failed", request.method, request.path)
            response = HttpError(500, "the gateway failed on this request (see its log)").response()
        response.headers.extend(cors)
        await send({"type": "http.response.start", "status": response.status, "headers": response.header_list()})
        await send({"type": "http.response.body", "body": b"" if request.method == "HEAD" else response.body})

    def _route(self, request: Request) -> tuple[Handler, dict[str, str], bool]:
        method = "GET" if request.method == "HEAD" else request.method
        allowed = []
        for route_method, pattern, handler, streaming in self.routes:
            match = pattern.match(request.path)
            if match is None:
                continue
            if route_method == method:
                return handler, match.groupdict(), streaming
            allowed.append(route_method)
        if allowed:
            raise HttpError(405, f"{request.method} is not allowed on {request.path}: use {', '.join(allowed)}",
                            [("allow", ", ".join(allowed + ["OPTIONS"]))])
        raise HttpError(404, f"no such route: {request.path} (see /dashboard, /sparql, /events, /subscriptions, "
                             f"/status, /ws)")

    async def _body(self, receive: Receive) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "the client went away before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.settings.max_body:
                raise HttpError(413, f"the body is larger than {self.settings.max_body} bytes (gateway "
                                     f"--max-body); split it, or publish with `eventcloud publish`")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # --- authentication and CORS ------------------------------------------------------------------

    def _authorize(self, header: str | None, param: str | None) -> None:
        why = self.refusal(header if header is not None else (f"Bearer {param}" if param else None))
        if why is not None:
            status = 401 if "missing" in why else 403
            raise HttpError(status, why, [("www-authenticate", 'Bearer realm="eventcloud"')] if status == 401 else [])

    def refusal(self, authorization: str | None) -> str | None:
        """None when `authorization` (an Authorization header's value) is allowed, else why not."""
        token = self.settings.admin_token
        if token is None:
            return None
        if not authorization:
            return "missing bearer token: this gateway needs `Authorization: Bearer TOKEN` (the admin token)"
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return "missing bearer token: use the Bearer scheme (`Authorization: Bearer TOKEN`)"
        if not hmac.compare_digest(given.strip().encode(), token.encode()):
            return "wrong token: this is not the gateway's admin token"
        return None

    def _cors_headers(self, request: Request) -> list[tuple[str, str]]:
        origin = request.header("origin")
        allowed = self.settings.cors
        if not origin or not allowed:
            return []
        if "*" in allowed:
            return [("access-control-allow-origin", "*"),
                    ("access-control-expose-headers", "Location, EventCloud-Error, Content-Type")]
        if origin in allowed:
            return [("access-control-allow-origin", origin), ("vary", "Origin"),
                    ("access-control-expose-headers", "Location, EventCloud-Error, Content-Type")]
        return []

    def _preflight(self, request: Request, cors: list[tuple[str, str]]) -> Response:
        if not cors:
            return Response(204, headers=[("allow", "GET, POST, DELETE, OPTIONS")])
        return Response(204, headers=[
            ("access-control-allow-methods", "GET, POST, DELETE, OPTIONS"),
            ("access-control-allow-headers", "Authorization, Content-Type, Accept, Last-Event-ID, EventCloud-Ticket"),
            ("access-control-max-age", "600")])

    # --- pages ------------------------------------------------------------------------------------

    async def dashboard(self, request: Request, match: dict[str, str]) -> Response:
        return await self.static(request, {"name": "dashboard.html"})

    async def static(self, request: Request, match: dict[str, str]) -> Response:
        name = match["name"]
        if name not in _STATIC:
            raise HttpError(404, f"no such file: /static/{name}")
        body = resources.files("eventcloud.web").joinpath("static", name).read_bytes()
        return Response(200, body, _STATIC[name], [("cache-control", "no-cache")])

    async def health(self, request: Request, match: dict[str, str]) -> Response:
        ok = self.overlay.connected
        body = {"ok": ok, "entry": self.overlay.address, "error": None if ok else self.overlay.error}
        return _json(200 if ok else 503, body)

    async def status(self, request: Request, match: dict[str, str]) -> Response:
        with self.overlay.request():
            result = await self.overlay.client().status()
        gateway = {"entry": self.overlay.address, "peers": self.overlay.peers, "requests": self.requests,
                   "published": self.published, "streams": len(self.streams.attached),
                   "notifications": self.streams.notifications, "auth": self.settings.admin_token is not None}
        return _json(200, status_json(result, gateway))

    # --- SPARQL and publishing --------------------------------------------------------------------

    async def sparql(self, request: Request, match: dict[str, str], send: Send, receive: Receive,
                     cors: list[tuple[str, str]]) -> None:
        """A query's answer; a SELECT's rows stream (chunked) as the overlay sends them, each
        page within the request timeout, so no answer is too large and none is held whole."""
        try:
            if request.method == "POST":
                request.body = await self._body(receive)
            query = sparql.query_of(request)
            sparql.wanted_type(request, graph=_looks_like_graph(query))  # 406 before asking the overlay
            with self.overlay.request():
                answer = await self.overlay.client().query_stream(query)
        except HttpError as exc:
            await _respond(send, request, exc.response(), cors)
            return
        async with answer:
            if answer.form != "solutions":
                result = answer.text if answer.form == "graph" else {"head": {}, "boolean": answer.boolean}
                try:
                    response = sparql.render(request, result)
                except HttpError as exc:
                    response = exc.response()
                await _respond(send, request, response, cors)
                return
            chosen = sparql.wanted_type(request, graph=False)
            writer = SolutionsWriter(sparql.SOLUTION_TYPES[chosen], answer.variables)
            await self._chunked(send, request, chosen, cors, writer.start(), answer.pages().__aiter__(), writer.rows,
                                writer.end(), "a query's answer")

    async def read_graph(self, request: Request, match: dict[str, str], send: Send, receive: Receive,
                         cors: list[tuple[str, str]]) -> None:
        """The Graph Store Protocol's GET: one event's graph, or every event (streamed)."""
        try:
            graph = graph_store.graph_of(request)
            chosen, how = graph_store.wanted_format(request, graph)
            with self.overlay.request():
                quads = await self.overlay.client().find_stream(graph)
        except HttpError as exc:
            await _respond(send, request, exc.response(), cors)
            return
        async with quads:
            pages = quads.pages().__aiter__()
            try:
                with self.overlay.request():
                    first = await pages.__anext__()
            except StopAsyncIteration:
                first = []
            except HttpError as exc:
                await _respond(send, request, exc.response(), cors)
                return
            if not first and graph is not None:
                await _respond(send, request, HttpError(404, f"no event holds the graph <{graph.value}>").response(),
                               cors)
                return
            await self._chunked(send, request, chosen, cors, graph_store.lines(first, how), pages,
                               lambda page: graph_store.lines(page, how), b"", "a graph's quads")

    async def _chunked(self, send: Send, request: Request, chosen: str, cors: list[tuple[str, str]], start: bytes,
                      pages: Any, write: Any, end: bytes, what: str) -> None:
        """A 200 response in media type `chosen` whose body streams (chunked): `start`, then each
        page as `write` writes it (each page asked for within the request timeout), then `end`."""
        headers = [(b"content-type", sparql.content_type(chosen).encode("latin-1")), (b"vary", b"Accept"),
                   *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in cors)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if request.method == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.body", "body": start, "more_body": True})
        while True:
            try:
                with self.overlay.request():
                    page = await pages.__anext__()
            except StopAsyncIteration:
                break
            except HttpError as exc:   # the answer had begun: the response ends unfinished
                log.warning("gateway: %s broke off after it began: %s", what, exc.message)
                return
            await send({"type": "http.response.body", "body": write(page), "more_body": True})
        await send({"type": "http.response.body", "body": end})

    async def publish(self, request: Request, match: dict[str, str]) -> Response:
        events = publishing.events_of(request, int(time.time() * 1000), next(self._sequence))
        with self.overlay.request("nothing or part of it may be stored; publishing again is safe: "):
            receipts = await self.overlay.client().publish_batch(events)
        self.published += len(events)
        return _json(200, publishing.published_json(events, receipts))

    async def update(self, request: Request, match: dict[str, str]) -> Response:
        """SPARQL 1.1 Update: INSERT DATA publishes events, DROP/CLEAR GRAPH deletes one (eventcloud.web.update)."""
        steps = update.plan_update(update.update_of(request))
        published: list[str] = []
        deleted: list[str] = []
        for step in steps:
            done = (f"(done before it: published {', '.join(published) or 'nothing'}; deleted "
                    f"{', '.join(deleted) or 'nothing'}) ")
            if step.kind == "publish":
                try:
                    events = parse_events(step.trig.encode("utf-8"), "trig", name="update", source="update",
                                          timestamp_ms=int(time.time() * 1000), sequence=next(self._sequence))
                except RDFInputError as exc:
                    raise HttpError(400, f"{done}INSERT DATA: {exc}", code="bad-rdf") from None
                with self.overlay.request(f"{done}INSERT DATA: nothing or part of it may be stored; sending it "
                                          f"again is safe: "):
                    await self.overlay.client().publish_batch(events)
                self.published += len(events)
                published += step.graphs
            else:
                with self.overlay.request(f"{done}DROP GRAPH <{step.graph}>: "):
                    await self.overlay.client().delete(step.graph)
                deleted.append(step.graph)
        return _json(200, {"published": published, "deleted": deleted})

    async def delete(self, request: Request, match: dict[str, str]) -> Response:
        graph = request.param("graph")
        if not graph:
            raise HttpError(400, "DELETE /events needs `graph`, the event's graph IRI")
        with self.overlay.request():
            removed = await self.overlay.client().delete(graph.strip("<>"))
        return _json(200, {"graph": graph.strip("<>"), "removed": removed})

    # --- subscriptions ----------------------------------------------------------------------------

    async def list_subscriptions(self, request: Request, match: dict[str, str]) -> Response:
        with self.overlay.request():
            found = await self.overlay.client().subscriptions()
        return _json(200, {"subscriptions": [s.to_wire() for s in found]})

    async def create_subscription(self, request: Request, match: dict[str, str]) -> Response:
        fields = _subscription_fields(request)
        async with self.overlay.session() as client:
            with self.overlay.request():
                sub = await client.subscribe(fields["sparql"], kind=fields["kind"], durable=True,
                                             lease=fields["lease"], auto_ack=False)
        location = f"/subscriptions/{sub.id}/stream"
        body = {"id": sub.id, "ticket": sub.ticket, "kind": sub.kind, "expires": sub.expires, "stream": location}
        return _json(201, body, [("location", location)])

    async def renew(self, request: Request, match: dict[str, str]) -> Response:
        lease = _number(request.param("lease", "0"), "lease")
        with self.overlay.request():
            expires = await self.overlay.client().renew(match["id"], _ticket(request), lease)
        return _json(200, {"id": match["id"], "expires": expires})

    async def cancel(self, request: Request, match: dict[str, str]) -> Response:
        ticket = request.header("eventcloud-ticket") or request.param("ticket") or ""
        if not ticket and self.settings.admin_token is None:
            raise HttpError(400, "cancelling needs the subscription's ticket (EventCloud-Ticket header or "
                                 "`ticket` parameter)")
        with self.overlay.request():
            await self.overlay.client().unsubscribe(match["id"], ticket)
        self.streams.held.pop(match["id"], None)
        return Response(204)

    async def stream(self, request: Request, match: dict[str, str], send: Send, receive: Receive,
                     cors: list[tuple[str, str]]) -> None:
        ident, ticket = match["id"], _ticket(request)
        after = sse_after(request)

        async def opener(client: Any) -> Any:
            sub = await client.resume(ident, ticket, after, auto_ack=False)
            if after is not None:
                sub.ack(after)  # the client has everything up to `after`
            return sub, {"subscription": sub.id, "kind": sub.kind, "after": sub.resumed_after,
                         "expires": sub.expires, "resumed": True}

        await self._stream(send, receive, opener, cors, ident=ident)

    async def adhoc_stream(self, request: Request, match: dict[str, str], send: Send, receive: Receive,
                           cors: list[tuple[str, str]]) -> None:
        fields = _subscription_fields(request, from_query=True)
        after = sse_after(request)
        key = stream_key(fields["sparql"], fields["kind"], request.header("authorization") or
                         request.param("access_token") or "")
        cookie_name = f"eventcloud-sse-{key}"
        held = await self.streams.find(key, _cookie(request, cookie_name)) if after is not None else None
        lease = self.settings.lease

        async def opener(client: Any) -> Any:
            if held is not None:
                sub = await client.resume(held.id, held.ticket, after, auto_ack=False)
                sub.ack(after)
                return sub, {"subscription": sub.id, "kind": sub.kind, "after": sub.resumed_after,
                             "ticket": held.ticket, "resumed": True, "stream": f"/subscriptions/{sub.id}/stream",
                             "resume": f"/subscriptions/{sub.id}/stream?ticket={held.ticket}"}
            sub = await client.subscribe(fields["sparql"], kind=fields["kind"], durable=True, lease=lease,
                                         auto_ack=False)
            header = {"subscription": sub.id, "kind": sub.kind, "after": 0, "ticket": sub.ticket, "resumed": False,
                      "stream": f"/subscriptions/{sub.id}/stream",
                      "resume": f"/subscriptions/{sub.id}/stream?ticket={sub.ticket}"}
            if after is not None:
                header["notice"] = (f"Last-Event-ID {after} belongs to no subscription this gateway keeps for this "
                                    f"query (it ended, or the gateway restarted): this is a new subscription, and "
                                    f"what was published in between is not delivered")
            return sub, header

        def remember(sub: Any, header: dict[str, Any]) -> None:
            from eventcloud.web.live import Held

            if sub.id not in self.streams.held:
                self.streams.held[sub.id] = Held(sub.id, sub.ticket, key, renewed_at=trio.current_time())

        cookie = [("set-cookie", f"{cookie_name}={{id}}; Path=/subscriptions/stream; HttpOnly; SameSite=Lax")]
        await self._stream(send, receive, opener, cors, remember, cookie, ident=held.id if held else None)

    async def _stream(self, send: Send, receive: Receive, opener: Any, cors: list[tuple[str, str]],
                      on_open: Any = None, cookie: list[tuple[str, str]] | None = None,
                      ident: str | None = None) -> None:
        headers = list(cors)
        opened: dict[str, Any] = {}

        def opened_with(sub: Any, header: dict[str, Any]) -> None:
            opened["id"] = sub.id
            if on_open is not None:
                on_open(sub, header)
            for name, value in cookie or ():
                headers.append((name, value.format(id=sub.id)))

        try:
            await self.streams.sse(send, receive, opener, headers, opened_with, ident)
        except HttpError as exc:
            if opened:  # the stream had started: nothing more can be said over HTTP
                log.info("gateway: stream of %s ended: %s", opened["id"], exc.message)
                return
            response = exc.response()
            response.headers.extend(cors)
            await send({"type": "http.response.start", "status": response.status,
                        "headers": response.header_list()})
            await send({"type": "http.response.body", "body": response.body})

    # --- WebSocket --------------------------------------------------------------------------------

    async def _websocket(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        request = Request.from_scope(scope)
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if request.path not in ("/ws", "/subscribe", "/subscriptions/ws"):  # /subscribe: SEPA's path
            await send({"type": "websocket.close", "code": 1008, "reason": f"no WebSocket at {request.path}: use /ws"})
            return
        given = request.header("authorization") or (f"Bearer {request.param('access_token')}"
                                                     if request.param("access_token") else None)
        why = self.refusal(given)
        if given is not None and why is not None:  # a wrong token: refused at the handshake (403)
            await send({"type": "websocket.close", "code": 1008, "reason": why})
            return
        await send({"type": "websocket.accept"})
        handshake_ok = given is not None and why is None

        def authorized(authorization: str | None) -> str | None:
            return None if handshake_ok else self.refusal(authorization)

        await self.streams.websocket(send, receive, authorized)


def sse_after(request: Request) -> int | None:
    from eventcloud.web.sse import last_event_id

    return last_event_id(request)


async def _respond(send: Send, request: Request, response: Response, cors: list[tuple[str, str]]) -> None:
    response.headers.extend(cors)
    await send({"type": "http.response.start", "status": response.status, "headers": response.header_list()})
    await send({"type": "http.response.body", "body": b"" if request.method == "HEAD" else response.body})


#: What a query's form is read past: IRIs, strings and comments, each from where it begins (a
#: `#` inside an IRI or a string starts no comment).
_SKIPPED = re.compile(r"""<[^<>"{}|^`\\\s]*>|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|#[^\n]*""")


def _looks_like_graph(query: str) -> bool:
    """CONSTRUCT or DESCRIBE? (to refuse an impossible Accept before running the query; the
    overlay's answer decides the format in the end)."""
    text = _SKIPPED.sub(" ", query)
    found = re.search(r"\b(SELECT|ASK|CONSTRUCT|DESCRIBE)\b", text, re.IGNORECASE)
    return bool(found) and found.group(1).upper() in ("CONSTRUCT", "DESCRIBE")


def _subscription_fields(request: Request, from_query: bool = False) -> dict[str, Any]:
    """sparql/query, kind and lease of a subscription request (JSON, form, sparql-query or URL)."""
    fields: dict[str, Any] = {k: v[-1] for k, v in request.query.items()}
    if not from_query and request.body:
        kind = request.content_type
        if kind == "application/json":
            try:
                body = json.loads(request.body)
            except ValueError as exc:
                raise HttpError(400, f"the body is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise HttpError(400, "the body must be a JSON object: {\"sparql\": \"SELECT …\", \"kind\": …}")
            fields.update(body)
        elif kind == "application/x-www-form-urlencoded":
            fields.update({k: v[-1] for k, v in request.form().items()})
        elif kind == "application/sparql-query":
            fields["sparql"] = request.body.decode("utf-8", errors="replace")
        else:
            raise HttpError(415, f"send the subscription as application/json, application/x-www-form-urlencoded "
                                 f"or application/sparql-query, not {kind or 'a body without Content-Type'}")
    text = fields.get("sparql") or fields.get("query")
    if not isinstance(text, str) or not text.strip():
        raise HttpError(400, "missing the subscription: give `query` (or `sparql`), a SELECT … WHERE { GRAPH ?g "
                             "{ … } } query")
    kind = fields.get("kind", "bindings")
    if kind not in ("signal", "bindings", "event"):
        raise HttpError(400, f"unknown kind {kind!r}: use signal, bindings or event")
    lease = _number(fields.get("lease", 0), "lease")
    return {"sparql": text, "kind": kind, "lease": lease}


def _number(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise HttpError(400, f"{name} must be a number of seconds, got {str(value)[:40]!r}") from None
    if not 0 <= number <= 10 * 365 * 86400:
        raise HttpError(400, f"{name} must be between 0 and ten years in seconds")
    return number


def _ticket(request: Request) -> str:
    ticket = request.header("eventcloud-ticket") or request.param("ticket")
    if not ticket:
        raise HttpError(400, "this needs the subscription's ticket: an EventCloud-Ticket header or a `ticket` "
                             "parameter (from POST /subscriptions or the stream's `subscribed` event)")
    return ticket


def _cookie(request: Request, name: str) -> str | None:
    for part in (request.header("cookie") or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _json(status: int, body: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json.dumps(body, ensure_ascii=False).encode("utf-8"), "application/json",
                    headers or [])

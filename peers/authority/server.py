"""The local authority served over HTTP, as the subset of etcd's v3 JSON API ownership uses.

`eventcloud cluster` serves one in its supervising process, and its peers reach it with the
same client as etcd (`EtcdAuthority`, given `http://HOST:PORT`): the contract tests run that
client against both. Only what ownership calls is served: lease grant, keep-alive, revoke,
range (one key or a prefix), txn (value/absence compares, put and single-key delete) and watch
(a prefix from a revision on, streamed as etcd's gateway streams it: one JSON object per line).
With a `token` (the hosted authority's, derived from the cluster secret) a request without it
is refused (401): whoever reaches the port could otherwise take any zone. While it serves, a
ticker notices the process was stopped (its clock jumped past a tick) and credits the leases.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import math
from typing import Any, Awaitable, Callable

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from eventcloud.errors import EventCloudError, LeaseExpired
from eventcloud.net.asgi import answer_lifespan
from peers.authority.base import Change, Delete, Entry, Put, Same, WatchCompacted
from peers.authority.etcd import from_b64, prefix_end, to_b64
from peers.authority.local import LocalAuthority

__all__ = ["serve_authority"]

log = logging.getLogger(__name__)

#: A request body past this is refused: ownership's requests are a few hundred bytes.
MAX_BODY = 1 << 20
#: The stall ticker's period, and the lateness past which a tick counts as time stopped.
TICK = 0.5
STALL = 1.5
#: Batches a watch's HTTP stream may hold unsent before it is ended (its client watches again).
WATCH_BUFFER = 256


class _App:
    """The ASGI application: one JSON request, one JSON reply."""

    def __init__(self, authority: LocalAuthority, token: str | None = None) -> None:
        self.authority = authority
        self.token = token
        self.routes: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "/v3/lease/grant": self._grant, "/v3/lease/keepalive": self._keep_alive,
            "/v3/lease/revoke": self._revoke, "/v3/kv/range": self._range, "/v3/kv/txn": self._txn,
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        route = self.routes.get(scope["path"])
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                return await _reply(send, 413, {"error": "request body too large", "code": 8})
            if not message.get("more_body"):
                break
        if self.token is not None and not _bears(scope, self.token):
            return await _reply(send, 401, {"error": "this authority needs the cluster's token", "code": 16})
        if scope["path"] == "/v3/watch" and scope["method"] == "POST":
            try:
                request = json.loads(body or b"{}")
                create = request["create_request"]
                prefix = from_b64(create["key"])
                if create.get("range_end") != prefix_end(prefix):
                    raise ValueError("only prefix watches (range_end = the prefix's end) are served here")
                start = int(create.get("start_revision", 0) or 0)
            except (ValueError, KeyError, TypeError) as exc:
                return await _reply(send, 400, {"error": f"malformed watch: {type(exc).__name__} {exc}", "code": 3})
            return await self._watch(prefix, start, receive, send)
        if route is None or scope["method"] != "POST":
            return await _reply(send, 404, {"error": f"not served here: {scope['method']} {scope['path']}", "code": 12})
        try:
            request = json.loads(body or b"{}")
            if not isinstance(request, dict):
                raise ValueError("a JSON object is expected")
            return await _reply(send, 200, await route(request))
        except LeaseExpired as exc:
            return await _reply(send, 404, {"error": f"etcdserver: requested lease not found ({exc})", "code": 5})
        except EventCloudError as exc:
            return await _reply(send, 400, {"error": str(exc), "code": 3})
        except (ValueError, KeyError, TypeError) as exc:
            return await _reply(send, 400, {"error": f"malformed request: {type(exc).__name__} {exc}", "code": 3})

    async def _watch(self, prefix: str, start: int, receive: Any, send: Any) -> None:
        """Stream the changes under `prefix` from `start` (0: from now) until the client goes away:
        `created` first, then one result per revision; a start whose history is gone, or a client
        too slow to take its stream, gets `canceled` (it lists again and watches anew)."""
        authority = self.authority
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        start = start or authority.revision + 1
        outbox, inbox = trio.open_memory_channel[Any](WATCH_BUFFER)

        def changed(batch: list[Change]) -> None:
            try:
                outbox.send_nowait({"header": {"revision": str(batch[-1].entry.revision)},
                                    "events": [_event(change) for change in batch]})
            except trio.WouldBlock:
                raise WatchCompacted("this watch's client fell behind its stream") from None

        async def produce() -> None:
            try:
                await authority.watch(prefix, start, changed, quiet=math.inf)
            except WatchCompacted as exc:
                outbox.send_nowait({"header": self._header(), "canceled": True,
                                    "compact_revision": str(authority.revision), "cancel_reason": str(exc)})
            outbox.close()

        async def until_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(until_gone)
            nursery.start_soon(produce)
            await _line(send, {"result": {"header": self._header(), "created": True}})
            async for result in inbox:
                await _line(send, {"result": result})
            await send({"type": "http.response.body", "body": b""})
            nursery.cancel_scope.cancel()

    def _header(self) -> dict[str, Any]:
        return {"revision": str(self.authority.revision)}

    async def _grant(self, request: dict[str, Any]) -> dict[str, Any]:
        lease = await self.authority.grant(int(request["TTL"]))
        return {"header": self._header(), "ID": str(lease), "TTL": str(int(request["TTL"]))}

    async def _keep_alive(self, request: dict[str, Any]) -> dict[str, Any]:
        lease = int(request["ID"])
        try:
            ttl = await self.authority.keep_alive(lease)
        except LeaseExpired:
            return {"result": {"header": self._header(), "ID": str(lease)}}   # etcd: no TTL when unknown
        return {"result": {"header": self._header(), "ID": str(lease), "TTL": str(ttl)}}

    async def _revoke(self, request: dict[str, Any]) -> dict[str, Any]:
        await self.authority.revoke(int(request["ID"]))
        return {"header": self._header()}

    async def _range(self, request: dict[str, Any]) -> dict[str, Any]:
        key = from_b64(request["key"])
        if "range_end" in request:
            end = base64.b64decode(request["range_end"])
            entries = [e for e in await self.authority.scan("") if key.encode() <= e.key.encode() < end]
        else:
            entry = await self.authority.get(key)
            entries = [entry] if entry is not None else []
        return {"header": self._header(), "kvs": [_kv(e) for e in entries], "count": str(len(entries))}

    async def _txn(self, request: dict[str, Any]) -> dict[str, Any]:
        when = [_condition(c) for c in request.get("compare", [])]
        then: list[Put | Delete] = []
        for op in request.get("success", []):
            if "request_put" in op:
                put = op["request_put"]
                then.append(Put(from_b64(put["key"]), from_b64(put.get("value", "")), int(put.get("lease", 0) or 0)))
            elif "request_delete_range" in op and "range_end" not in op["request_delete_range"]:
                then.append(Delete(from_b64(op["request_delete_range"]["key"])))
            else:
                raise ValueError(f"only puts and single-key deletes are served here, not {sorted(op)}")
        if request.get("failure"):
            raise ValueError("a txn's failure branch is not served here")
        succeeded = await self.authority.transact(when, then)
        return {"header": self._header(), "succeeded": succeeded}


def _condition(compare: dict[str, Any]) -> Same:
    key, target = from_b64(compare["key"]), compare.get("target", "VERSION")
    if compare.get("result", "EQUAL") != "EQUAL":
        raise ValueError("only EQUAL compares are served here")
    if target == "VERSION" and int(compare.get("version", 0)) == 0:
        return Same(key, None)
    if target == "VALUE":
        return Same(key, from_b64(compare.get("value", "")))
    raise ValueError(f"only VALUE and VERSION == 0 compares are served here, not {target}")


def _event(change: Change) -> dict[str, Any]:
    if change.deleted:
        return {"type": "DELETE", "kv": {"key": to_b64(change.entry.key), "mod_revision": str(change.entry.revision)}}
    return {"type": "PUT", "kv": _kv(change.entry)}


async def _line(send: Any, body: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": json.dumps(body).encode() + b"\n", "more_body": True})


def _bears(scope: dict[str, Any], token: str) -> bool:
    expected = b"Bearer " + token.encode()
    given = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
    return hmac.compare_digest(given, expected)


async def _credit_stalls(authority: LocalAuthority) -> None:
    """Credit the leases with the time this process spent stopped: a tick that comes late by
    more than STALL seconds (SIGSTOP, a frozen machine) found nobody able to renew meanwhile."""
    last = trio.current_time()
    while True:
        await trio.sleep(TICK)
        now = trio.current_time()
        late = now - last - TICK
        if late > STALL:
            authority.credit(late)
            log.warning("the ownership authority was stopped for %.1f s: its leases are extended as much", late)
        last = now
        authority.expire_due()   # after the credit: a watch sees a lease lapse when it happens


def _kv(entry: Entry) -> dict[str, Any]:
    return {"key": to_b64(entry.key), "value": to_b64(entry.value), "mod_revision": str(entry.revision),
            "lease": str(entry.lease)}


async def _reply(send: Any, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


async def serve_authority(authority: LocalAuthority, listen: str = "127.0.0.1:0", *, token: str | None = None,
                          task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve `authority` until cancelled; started with its URL, e.g. http://127.0.0.1:2379."""
    config = Config()
    config.bind = [listen]
    config.accesslog = None
    config.errorlog = logging.getLogger("peers.authority.server")
    config.graceful_timeout = 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_credit_stalls, authority)
        binds: Any = await nursery.start(serve, _App(authority, token), config)
        task_status.started(binds[0])

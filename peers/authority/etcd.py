"""The ownership authority of real deployments: etcd, through its v3 JSON gateway over httpx.

Why the JSON gateway and httpx rather than a gRPC client (aetcd and its kind): the peers run on
trio, and the gRPC clients for Python run on asyncio (a second event loop in a thread, beside
every peer) or are synchronous; httpx runs on trio natively, is already the project's HTTP
client, and every etcd since 3.4 serves the same API as JSON at `/v3/...` on its client port.
The calls ownership needs are single requests (grant, keep-alive, range, txn, revoke), so the
gateway costs nothing that gRPC streams would save. The same client talks to the local
authority's server (peers/authority/server.py), which serves that API's subset: one client, two
authorities, one contract test.

`etcd://h1:2379,h2:2379,h3:2379` names the members; a request that finds one unreachable tries
the next. etcd is linearizable through any member (reads are linearizable by default).
"""

from __future__ import annotations

import base64
import json
from typing import Any, Callable, Sequence

import httpx
import trio

from eventcloud.errors import AuthorityUnreachable, BadRequest, LeaseExpired
from peers.authority.base import Change, Delete, Entry, Listing, Put, Same, WatchCompacted

__all__ = ["EtcdAuthority", "from_b64", "parse_authority", "prefix_end", "to_b64"]

#: Seconds one request to one member may take before the next member is asked.
REQUEST_TIMEOUT = 2.0
#: ... a renewal: a lease's renewals overlap (peers/authority/ownership.py), so one that waits
#: behind a slow link's queue is better left to arrive than cancelled and sent again.
RENEWAL_TIMEOUT = 6.0
#: A renewal not answered within this many seconds is sent again, to the next member (or, to an
#: authority of one member, on a connection of its own), up to HEDGES requests at once; the first
#: answer wins. Behind a saturated link a request whose packet was dropped waits out TCP's
#: retransmission backoff, and a new connection's SYN a second or more: one live owner in about
#: eight runs behind 16 kbit/s lost its lease that way (experiments.faults, scenario slow).
HEDGE_AFTER = 0.5
HEDGES = 3


def parse_authority(url: str) -> list[str]:
    """`etcd://h1:2379,h2:2379` (or `http://h:2379`) -> the members' base URLs."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("etcd", "http") or not rest.strip("/"):
        raise BadRequest(f"an authority is etcd://HOST:PORT[,HOST:PORT...] (or http://HOST:PORT), not {url!r}")
    members = [m for m in rest.strip("/").split(",") if m]
    for member in members:
        host, colon, port = member.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise BadRequest(f"authority member {member!r} of {url!r} is not HOST:PORT")
    return [f"http://{m}" for m in members]


def to_b64(text: str) -> str:
    """etcd's JSON API carries keys and values as base64."""
    return base64.b64encode(text.encode()).decode()


def from_b64(b64: str) -> str:
    return base64.b64decode(b64).decode()


def prefix_end(prefix: str) -> str:
    """etcd's range_end for every key starting with `prefix` (its last byte plus one)."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return to_b64("\0")
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode()


class EtcdAuthority:
    def __init__(self, url: str, *, timeout: float = REQUEST_TIMEOUT, token: str | None = None,
                 advertised: str | None = None) -> None:
        self.url = url
        self.advertised = advertised if advertised is not None else url   # told to joiners (overlay_info)
        self.members = parse_authority(url)
        self.timeout = timeout
        self._first = 0   # the member that answered last: asked first next time
        headers = {"authorization": f"Bearer {token}"} if token else {}   # a peer-hosted authority's
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout), trust_env=False, headers=headers)

    async def _call(self, path: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        failures = []
        for i in range(len(self.members)):
            index = (self._first + i) % len(self.members)
            member = self.members[index]
            try:
                with trio.fail_after(timeout or self.timeout):
                    response = await self._http.post(member + path, json=body,
                                                     timeout=httpx.Timeout(timeout or self.timeout))
                reply = response.json()
            except (httpx.HTTPError, trio.TooSlowError, ValueError) as exc:
                failures.append(f"{member}: {type(exc).__name__} {exc}".strip())
                continue
            if response.status_code >= 500 and "lease not found" not in str(reply.get("error", "")):
                failures.append(f"{member}: HTTP {response.status_code} {reply.get('error', '')}")
                continue
            self._first = index
            return reply
        raise AuthorityUnreachable(f"the ownership authority {self.url} did not answer: {'; '.join(failures)}")

    async def _hedged(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """`_call` for a request that must get through soon (a renewal): sent again to the next
        member after HEDGE_AFTER seconds without an answer, or at once when one fails; the first
        answer wins and the others are cancelled (a renewal repeated is harmless)."""
        won: list[dict[str, Any]] = []
        failures: list[str] = []
        failed = trio.Semaphore(0, max_value=HEDGES)

        async def attempt(index: int) -> None:
            member = self.members[index]
            try:
                # httpx's own timeouts too (the client's are a plain request's): a renewal's
                # answer that waits seconds in a saturated link's queue still counts
                with trio.fail_after(max(self.timeout, RENEWAL_TIMEOUT)):
                    response = await self._http.post(member + path, json=body,
                                                     timeout=httpx.Timeout(max(self.timeout, RENEWAL_TIMEOUT)))
                reply = response.json()
                if response.status_code >= 500 and "lease not found" not in str(reply.get("error", "")):
                    raise ValueError(f"HTTP {response.status_code} {reply.get('error', '')}")
            except (httpx.HTTPError, trio.TooSlowError, ValueError) as exc:
                failures.append(f"{member}: {type(exc).__name__} {exc}".strip())
                failed.release()
                return
            if not won:
                won.append(reply)
                self._first = index
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            for k in range(HEDGES):
                nursery.start_soon(attempt, (self._first + k) % len(self.members))
                if k + 1 < HEDGES:
                    with trio.move_on_after(HEDGE_AFTER):
                        await failed.acquire()   # one failed at once (a member down): the next now
        if not won:
            raise AuthorityUnreachable(f"the ownership authority {self.url} did not answer: {'; '.join(failures)}")
        return won[0]

    async def grant(self, ttl: int) -> int:
        reply = await self._call("/v3/lease/grant", {"TTL": ttl})
        if reply.get("error") or "ID" not in reply:
            raise AuthorityUnreachable(f"the ownership authority {self.url} granted no lease: {reply.get('error')}")
        return int(reply["ID"])

    async def keep_alive(self, lease: int) -> int:
        reply = await self._hedged("/v3/lease/keepalive", {"ID": str(lease)})
        result = reply.get("result", {})
        ttl = int(result.get("TTL", 0) or 0)
        if ttl <= 0:
            raise LeaseExpired(f"lease {lease:x} expired (or was revoked): the authority no longer knows it")
        return ttl

    async def revoke(self, lease: int) -> None:
        await self._call("/v3/lease/revoke", {"ID": str(lease)})   # "not found": gone already

    async def get(self, key: str) -> Entry | None:
        reply = await self._call("/v3/kv/range", {"key": to_b64(key)})
        found = [_entry(kv) for kv in reply.get("kvs", [])]
        return found[0] if found else None

    async def scan(self, prefix: str) -> list[Entry]:
        reply = await self._call("/v3/kv/range", {"key": to_b64(prefix), "range_end": prefix_end(prefix)})
        return [_entry(kv) for kv in reply.get("kvs", [])]

    async def listing(self, prefix: str) -> Listing:
        reply = await self._call("/v3/kv/range", {"key": to_b64(prefix), "range_end": prefix_end(prefix)})
        return Listing([_entry(kv) for kv in reply.get("kvs", [])], int(reply.get("header", {}).get("revision", 0)))

    async def watch(self, prefix: str, start: int, changed: Callable[[list[Change]], None], *,
                    quiet: float) -> None:
        """One watch stream (POST /v3/watch, a JSON object per line). A member that cannot be
        reached is skipped; once a stream is open, its end is the caller's to handle (it watches
        again from the revision it reached, through whichever member answers)."""
        body = {"create_request": {"key": to_b64(prefix), "range_end": prefix_end(prefix), "start_revision": str(start)}}
        failures = []
        for i in range(len(self.members)):
            index = (self._first + i) % len(self.members)
            member = self.members[index]
            try:
                async with self._http.stream("POST", member + "/v3/watch", json=body,
                                             timeout=httpx.Timeout(self.timeout, read=quiet)) as response:
                    if response.status_code != 200:
                        failures.append(f"{member}: HTTP {response.status_code}")
                        continue
                    self._first = index
                    try:
                        async for line in response.aiter_lines():
                            if line.strip():
                                _watched(json.loads(line), changed, self.url)
                    except httpx.ReadTimeout:
                        return   # quiet: watched again from where it reached
                    except (httpx.HTTPError, ValueError) as exc:
                        raise AuthorityUnreachable(f"the watch on {member} broke: {type(exc).__name__} {exc}") from None
                    raise AuthorityUnreachable(f"the watch on {member} ended")
            except (httpx.HTTPError, trio.TooSlowError) as exc:
                failures.append(f"{member}: {type(exc).__name__} {exc}".strip())
        raise AuthorityUnreachable(f"the ownership authority {self.url} took no watch: {'; '.join(failures)}")

    async def transact(self, when: Sequence[Same], then: Sequence[Put | Delete]) -> bool:
        body = {"compare": [_compare(c) for c in when], "success": [_request(c) for c in then]}
        reply = await self._call("/v3/kv/txn", body)
        if "lease not found" in str(reply.get("error", "")):
            raise LeaseExpired(f"a lease of this transaction expired: {reply['error']}")
        if reply.get("error"):
            raise AuthorityUnreachable(f"the ownership authority {self.url} refused a transaction: {reply['error']}")
        return bool(reply.get("succeeded", False))

    async def aclose(self) -> None:
        await self._http.aclose()


def _entry(kv: dict[str, Any]) -> Entry:
    return Entry(from_b64(kv["key"]), from_b64(kv.get("value", "")), int(kv.get("mod_revision", 0)),
                 int(kv.get("lease", 0) or 0))


def _watched(message: dict[str, Any], changed: Callable[[list[Change]], None], url: str) -> None:
    """One line of a watch stream: its events to `changed`; a cancelled watch raises."""
    if "error" in message:
        raise AuthorityUnreachable(f"the ownership authority {url} ended a watch: {message['error']}")
    result = message.get("result", {})
    if result.get("canceled"):
        if int(result.get("compact_revision", 0) or 0):
            raise WatchCompacted(f"the ownership authority {url} no longer holds the history asked for "
                                 f"(compacted at {result['compact_revision']})")
        raise AuthorityUnreachable(f"the ownership authority {url} cancelled a watch: {result.get('cancel_reason', '')}")
    events = result.get("events") or []
    if events:
        changed([_change(event) for event in events])


def _change(event: dict[str, Any]) -> Change:
    kv = event["kv"]
    if event.get("type") == "DELETE":   # etcd leaves out the type of a put (its enum's default)
        return Change(Entry(from_b64(kv["key"]), "", int(kv.get("mod_revision", 0)), 0), deleted=True)
    return Change(_entry(kv))


def _compare(condition: Same) -> dict[str, Any]:
    if condition.value is None:
        return {"key": to_b64(condition.key), "target": "VERSION", "result": "EQUAL", "version": "0"}
    return {"key": to_b64(condition.key), "target": "VALUE", "result": "EQUAL", "value": to_b64(condition.value)}


def _request(change: Put | Delete) -> dict[str, Any]:
    if isinstance(change, Delete):
        return {"request_delete_range": {"key": to_b64(change.key)}}
    put: dict[str, Any] = {"key": to_b64(change.key), "value": to_b64(change.value)}
    if change.lease:
        put["lease"] = str(change.lease)
    return {"request_put": put}

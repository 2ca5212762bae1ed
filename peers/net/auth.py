"""Who may do what on a connection: peers prove the cluster secret, admins show their token.

Every connection starts as a *client* connection: it may use the client operations only
(publish, query, subscribe, …). A peer proves it knows the overlay's shared secret with a
mutual HMAC challenge when it opens a connection, and the connection becomes a *peer*
connection, which may also carry the peer operations (routing, deliveries, replication,
membership, notifications):

    1. hello  {challenge_c}                 →
    2.        ← {challenge_s, proof_s = HMAC(secret, "server" | challenge_c | challenge_s)}
    3. auth   {id, proof_c = HMAC(secret, "client" | challenge_s | challenge_c)}  →   ok

Both sides check the other's proof (a fake peer learns nothing, a fake server is refused); a
challenge serves once. When the overlay has an admin token, the administrative client
operations (`leave`, `delete`) need a connection that presented it (`admin`). A peer started
without a secret accepts every operation from everyone, and says so once at start.

A wrong proof or token ends its connection, and failures are counted per host: past
`FAILURES_ALLOWED` within `FAILURE_WINDOW` seconds a penalty begins (one log line each time),
doubling with each further failure up to `MAX_PENALTY`, during which that host's admin and
publish tokens are refused unchecked. Peer proofs are never refused unchecked: peers share hosts
(a local cluster, 127.0.0.1), and a misconfigured or hostile neighbour must not lock them out;
instead a wrong proof from a host under penalty is answered only once the penalty has passed
(every wrong one also costs its connection), so guessing is throttled and correct proofs are not.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections import Counter
from typing import Any

import trio

from eventcloud.errors import ErrorCode, RemoteError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.wire.messages import Admin, Auth, Challenge, Empty, Hello, PeerId, Publisher
from eventcloud.wire.ops import ADMIN_OP_WORDS, ADMIN_OPS, PEER_OPS, Op

log = logging.getLogger(__name__)

__all__ = ["PeerAuth", "CLIENT", "PEER", "ADMIN", "PUBLISHER"]

CLIENT, PEER, ADMIN, PUBLISHER = "client", "peer", "admin", "publisher"

FAILURES_ALLOWED = 5
FAILURE_WINDOW = 10.0
FIRST_PENALTY, MAX_PENALTY = 2.0, 120.0


class _Failures:
    """Failed proofs of one host: when they began, how many, and the penalty now in force."""

    __slots__ = ("since", "count", "penalty", "until")

    def __init__(self, now: float) -> None:
        self.since, self.count, self.penalty, self.until = now, 0, 0.0, 0.0


def _mac(secret: bytes, *parts: str) -> str:
    return hmac.new(secret, "|".join(parts).encode(), hashlib.sha256).hexdigest()


class PeerAuth:
    def __init__(self, peer_id: Any, secret: bytes | None, admin_token: str | None, counters: Counter[str],
                 publish_policy: dict[str, tuple[str, ...]] | None = None) -> None:
        self._peer_id = peer_id          # a callable: this peer's current id
        self.secret = secret
        self.admin_token = admin_token
        self.publish_policy = publish_policy   # publish token -> graph IRI prefixes (None: no policy)
        self._prefixes: dict[RpcConnection, tuple[str, ...]] = {}   # what each connection's token allows
        self.counters = counters
        self._challenges: dict[RpcConnection, tuple[str, str]] = {}
        self._failures: dict[str, _Failures] = {}   # host (or connection, without one) -> its failures

    def handlers(self) -> dict[Op, Any]:
        return {Op.HELLO: self._on_hello, Op.AUTH: self._on_auth, Op.ADMIN: self._on_admin,
                Op.PUBLISHER: self._on_publisher}

    @property
    def open(self) -> bool:
        return self.secret is None

    # --- the server side ------------------------------------------------------------------------

    def check(self, conn: RpcConnection, op: Op) -> None:
        """Refuse `op` on `conn` unless its role allows it (forbidden, naming what is missing)."""
        role = conn.role
        if op in PEER_OPS and self.secret is not None and role != PEER:
            self.counters["refused_peer_ops"] += 1
            raise RequestError(f"operation {op.value!r} is for peers only: this connection did not prove "
                               f"the cluster secret", ErrorCode.FORBIDDEN)
        if op in ADMIN_OPS and self.admin_token is not None and role not in (ADMIN, PEER):
            self.counters["refused_admin_ops"] += 1
            what = ADMIN_OP_WORDS.get(op, f"operation {op.value}")
            raise RequestError(f"{what} needs the overlay's admin token, and this connection did not present it",
                               ErrorCode.FORBIDDEN)

    def publish_refusal(self, conn: RpcConnection, graphs: list[str]) -> str | None:
        """Why `conn` may not publish under these graph IRIs (None: it may). Without a publish
        policy anyone publishes anywhere; with one, a connection publishes under the prefixes
        its publish token allows (peers and the admin token anywhere)."""
        if self.publish_policy is None or conn.role in (ADMIN, PEER):
            return None
        prefixes = self._prefixes.get(conn)
        if prefixes is None:
            return ("this overlay has a publish policy: publishing needs a publish token (eventcloud "
                    "--publish-token-file FILE, EVENTCLOUD_PUBLISH_TOKEN, or connect(..., publish_token=...))")
        outside = [g for g in graphs if not g.startswith(prefixes)]
        if outside:
            return (f"graph IRI {outside[0]} is outside the namespaces your publish token allows "
                    f"({', '.join(prefixes[:5])}); publish under one of them")
        return None

    def is_admin(self, conn: RpcConnection) -> bool:
        """May `conn` use administrative operations (no admin token set, or it presented it)?"""
        return self.admin_token is None or conn.role in (ADMIN, PEER)

    @staticmethod
    def _host(conn: RpcConnection) -> str:
        return conn.remote or f"connection {conn.name}#{id(conn)}"

    def _refuse_if_throttled(self, conn: RpcConnection) -> None:
        failures = self._failures.get(self._host(conn))
        if failures is not None and trio.current_time() < failures.until:
            self.counters["refused_throttled_auth"] += 1
            conn.end_after_reply = True
            raise RequestError(f"too many failed proofs from {self._host(conn)}: wait "
                               f"{failures.until - trio.current_time():.0f} s", ErrorCode.FORBIDDEN)

    def _failed(self, conn: RpcConnection, what: str) -> None:
        """Count a failed proof of `conn`'s host; end the connection; past the allowance, a penalty."""
        conn.end_after_reply = True   # told why, then disconnected
        now, host = trio.current_time(), self._host(conn)
        failures = self._failures.get(host)
        if failures is None or (now - failures.since > FAILURE_WINDOW and now >= failures.until):
            if len(self._failures) > 10_000:   # bounded: forget hosts whose penalty is over
                self._failures = {h: f for h, f in self._failures.items() if f.until > now}
            failures = self._failures[host] = _Failures(now)
        failures.count += 1
        if failures.count > FAILURES_ALLOWED:
            failures.penalty = min(MAX_PENALTY, failures.penalty * 2 or FIRST_PENALTY)
            failures.until = now + failures.penalty
            self.counters["auth_penalties"] += 1
            log.warning("%d failed %s from %s within %.0f s: its proofs are refused for %.0f s", failures.count,
                        what, host, now - failures.since, failures.penalty)

    async def _on_hello(self, conn: RpcConnection, body: Hello) -> Challenge:
        if self.secret is None:
            return Challenge("", "")
        mine = secrets.token_hex(16)
        self._challenges[conn] = (body.challenge, mine)
        return Challenge(mine, _mac(self.secret, "server", body.challenge, mine))

    async def _on_auth(self, conn: RpcConnection, body: Auth) -> PeerId:
        if self.secret is None:
            conn.role = PEER
            return PeerId(self._peer_id())
        theirs, mine = self._challenges.pop(conn, ("", ""))
        if not mine or not hmac.compare_digest(body.proof, _mac(self.secret, "client", mine, theirs)):
            self.counters["failed_peer_auth"] += 1
            log.warning("a connection claiming to be peer %s failed to prove the cluster secret", body.id[:40])
            self._failed(conn, "proofs of the cluster secret")
            # throttled without refusing unchecked (peers share hosts): a host past its allowance
            # waits its penalty for each wrong proof's answer, a correct proof never waits
            failures = self._failures.get(self._host(conn))
            if failures is not None and failures.until > trio.current_time():
                await trio.sleep(failures.until - trio.current_time())
            raise RequestError("wrong proof of the cluster secret", ErrorCode.FORBIDDEN)
        conn.role = PEER
        return PeerId(self._peer_id())

    async def _on_admin(self, conn: RpcConnection, body: Admin) -> Empty:
        self._refuse_if_throttled(conn)
        if self.admin_token is not None and not hmac.compare_digest(body.token.encode(), self.admin_token.encode()):
            self.counters["failed_admin_auth"] += 1
            self._failed(conn, "admin tokens")
            raise RequestError("wrong admin token", ErrorCode.FORBIDDEN)
        if conn.role != PEER:
            conn.role = ADMIN
        return Empty()

    async def _on_publisher(self, conn: RpcConnection, body: Publisher) -> Empty:
        self._refuse_if_throttled(conn)
        if self.publish_policy is None:
            return Empty()   # no policy: every connection publishes anywhere already
        prefixes = next((p for token, p in self.publish_policy.items()
                         if hmac.compare_digest(token.encode(), body.token.encode())), None)
        if prefixes is None:
            self.counters["failed_publish_auth"] += 1
            self._failed(conn, "publish tokens")
            raise RequestError("unknown publish token", ErrorCode.FORBIDDEN)
        self._prefixes[conn] = prefixes
        if conn.role == CLIENT:   # a credential: the connection may keep a reserved slot (eventcloud.net.limits)
            conn.role = PUBLISHER
        return Empty()

    # --- the client side (a peer opening a connection to another) -----------------------------

    async def prove(self, conn: RpcConnection) -> None:
        """Make `conn` (opened by this peer) a peer connection; RequestError if the other side is
        not a peer of this overlay."""
        if self.secret is None:
            return
        mine = secrets.token_hex(16)
        reply = Challenge.from_wire(await conn.call(Op.HELLO, Hello(mine)))
        if not reply.challenge or not hmac.compare_digest(reply.proof, _mac(self.secret, "server", mine,
                                                                                 reply.challenge)):
            await conn.aclose()
            raise RequestError(f"{conn.name}: the other side did not prove the cluster secret: not a peer of "
                               f"this overlay", ErrorCode.FORBIDDEN)
        try:
            await conn.call(Op.AUTH, Auth(self._peer_id(), _mac(self.secret, "client", reply.challenge, mine)))
        except RemoteError as exc:
            raise RequestError(f"{conn.name}: refused as a peer ({exc.message}); do both peers have the same "
                               f"cluster secret?", ErrorCode.FORBIDDEN) from None

    def forget(self, conn: RpcConnection) -> None:
        self._challenges.pop(conn, None)
        self._prefixes.pop(conn, None)

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
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections import Counter
from typing import Any

from eventcloud.errors import ErrorCode, RemoteError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.wire.messages import Admin, Auth, Challenge, Empty, Hello, PeerId
from eventcloud.wire.ops import ADMIN_OP_WORDS, ADMIN_OPS, PEER_OPS, Op

log = logging.getLogger(__name__)

__all__ = ["PeerAuth", "CLIENT", "PEER", "ADMIN"]

CLIENT, PEER, ADMIN = "client", "peer", "admin"


def _mac(secret: bytes, *parts: str) -> str:
    return hmac.new(secret, "|".join(parts).encode(), hashlib.sha256).hexdigest()


class PeerAuth:
    def __init__(self, peer_id: Any, secret: bytes | None, admin_token: str | None, counters: Counter[str]) -> None:
        self._peer_id = peer_id          # a callable: this peer's current id
        self.secret = secret
        self.admin_token = admin_token
        self.counters = counters
        self._challenges: dict[RpcConnection, tuple[str, str]] = {}

    def handlers(self) -> dict[Op, Any]:
        return {Op.HELLO: self._on_hello, Op.AUTH: self._on_auth, Op.ADMIN: self._on_admin}

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

    def is_admin(self, conn: RpcConnection) -> bool:
        """May `conn` use administrative operations (no admin token set, or it presented it)?"""
        return self.admin_token is None or conn.role in (ADMIN, PEER)

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
            conn.end_after_reply = True  # a wrong proof: told why, then disconnected
            raise RequestError("wrong proof of the cluster secret", ErrorCode.FORBIDDEN)
        conn.role = PEER
        return PeerId(self._peer_id())

    async def _on_admin(self, conn: RpcConnection, body: Admin) -> Empty:
        if self.admin_token is not None and not hmac.compare_digest(body.token.encode(), self.admin_token.encode()):
            self.counters["failed_admin_auth"] += 1
            raise RequestError("wrong admin token", ErrorCode.FORBIDDEN)
        if conn.role != PEER:
            conn.role = ADMIN
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

"""The local ownership authority served from a thread of the supervising process.

`eventcloud cluster` and the demo run every peer on one machine, which fails as a whole anyway:
the authority lives in the process that supervises them (no etcd to install), on a trio loop of
its own in a thread, so the synchronous supervisor need not become a trio program. Its peers
reach it over HTTP (`--authority http://HOST:PORT`), with the client they would use for etcd.
"""

from __future__ import annotations

import queue
import threading

import trio

from peers.authority import LocalAuthority, serve_authority

__all__ = ["AuthorityHost"]


class AuthorityHost:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.url: str | None = None
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None

    def start(self, timeout: float = 10.0) -> str:
        """Serve it; its URL (`http://HOST:PORT`). RuntimeError if it does not serve in time."""
        started: queue.Queue = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._run, args=(started,), name="eventcloud-authority", daemon=True)
        self._thread.start()
        try:
            outcome = started.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"the local ownership authority did not start within {timeout:g} s") from None
        if isinstance(outcome, BaseException):
            raise RuntimeError(f"the local ownership authority did not start: {outcome}") from outcome
        self.url = outcome
        return outcome

    def _run(self, started: queue.Queue) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    started.put(await nursery.start(serve_authority, LocalAuthority(), f"{self.host}:0"))

        try:
            trio.run(main)
        except BaseException as exc:  # noqa: BLE001 - reported to start(), which raises it
            if started.empty():
                started.put(exc)

    def stop(self) -> None:
        if self._scope is not None and self._token is not None:
            try:   # thread-safe and non-blocking: callable from any thread, a trio program's included
                self._token.run_sync_soon(self._scope.cancel)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = self._scope = self._token = None

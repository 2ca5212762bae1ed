"""The ownership authority a lone `eventcloud peer` hosts when started without `--authority`.

The first peer of an overlay (started without `--join`) serves the local authority from its own
process, over HTTP on its host, saved in its data directory (`authority.json`: the port, the
keys and the leases), so a restart brings it back at the same URL with the same keys. Peers that
join without `--authority` learn its URL from the peer they join (`overlay_info`) and keep it in
theirs (`authority.url`) for their restarts. Requests carry a token derived from the cluster
secret. Its limit, stated in the log and in docs/reliability.md: while that peer is down, no
zone changes owner (takeovers, joins and leaves wait), and a lost data directory loses the
authority; a deployment that needs more names an etcd (`--authority etcd://...`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from functools import partial
from pathlib import Path
from typing import Any

import trio

from peers.authority.local import LocalAuthority
from peers.authority.server import serve_authority

__all__ = ["AUTHORITY_FILE", "LEARNED_FILE", "authority_token", "learned_url", "remember_url",
           "serve_hosted_authority"]

log = logging.getLogger(__name__)

AUTHORITY_FILE = "authority.json"   # the hosting peer's: its port, keys and leases
LEARNED_FILE = "authority.url"      # a joined peer's: the URL it learned


def authority_token(secret: bytes | None) -> str | None:
    """The token a hosted authority asks of its peers: derived from the cluster secret (None: an
    open overlay, whose authority is as open as its peers)."""
    if not secret:
        return None
    return hmac.new(secret, b"eventcloud ownership authority", hashlib.sha256).hexdigest()


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


async def serve_hosted_authority(data_dir: Path | None, host: str, token: str | None, *,
                                 task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve this overlay's authority until cancelled; started with its URL. Saved in `data_dir`
    (None: in memory only), on the port it had before when it is free."""
    path = data_dir / AUTHORITY_FILE if data_dir is not None else None
    saved: dict[str, Any] = {}
    if path is not None and path.exists():
        saved = json.loads(path.read_text())
    port = int(saved.get("port", 0))
    bound: dict[str, int] = {"port": port}

    failing: list[str] = []

    def save(snapshot: dict[str, Any]) -> None:   # rare and small: within the call, so it stays atomic
        if path is None:
            return
        try:
            _write(path, {"port": bound["port"], "authority": snapshot})
        except OSError as exc:
            # A full disk must not stop ownership: served from memory, saved again at the next change.
            if not failing:
                log.warning("cannot save the ownership authority to %s (%s): it goes on from memory, and a restart "
                            "before it is saved again would lose what changed since", path, exc)
            failing[:] = [str(exc)]
            return
        if failing:
            log.warning("the ownership authority is saved to %s again", path)
            failing.clear()

    authority = LocalAuthority(saved=saved.get("authority"), save=save)
    async with trio.open_nursery() as nursery:
        try:
            url = await nursery.start(partial(serve_authority, token=token), authority, f"{host}:{port}")
        except OSError:
            if not port:
                raise
            log.warning("the port %d of this overlay's ownership authority is taken; serving it on another one "
                        "(its peers find it again through this peer)", port)
            url = await nursery.start(partial(serve_authority, token=token), authority, f"{host}:0")
        bound["port"] = int(url.rpartition(":")[2])
        save(authority.snapshot())
        task_status.started(url)


def learned_url(data_dir: Path | None) -> str | None:
    """The authority URL this data directory's peer learned when it joined, if any."""
    if data_dir is None or not (data_dir / LEARNED_FILE).exists():
        return None
    return (data_dir / LEARNED_FILE).read_text().strip() or None


def remember_url(data_dir: Path | None, url: str) -> None:
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / LEARNED_FILE).write_text(url + "\n")

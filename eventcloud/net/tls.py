"""TLS for peers and clients: the two `ssl` contexts a TcpTransport needs, built from files.

A peer serves with its certificate chain and key and verifies the peers it connects to (and a
client verifies its entry peer) against a CA file, or the system's trust store when none is
given. Host names are checked: a certificate must name the host (or IP address) others use to
reach the peer, i.e. its advertised address. docs/operations.md shows a self-signed set-up.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from eventcloud.errors import ErrorCode, InputError

__all__ = ["TLSConfigError", "server_context", "client_context"]


class TLSConfigError(InputError):
    """A certificate, key or CA file that cannot be used."""

    default_code = ErrorCode.BAD_REQUEST


def server_context(cert: Path | str, key: Path | str) -> ssl.SSLContext:
    """The context a peer serves with: its certificate chain and private key (PEM)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except FileNotFoundError as exc:
        raise TLSConfigError(f"TLS: no such file {exc.filename}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TLSConfigError(f"TLS: cannot use the certificate {cert} with the key {key}: {exc}") from None
    return context


def client_context(ca: Path | str | None = None) -> ssl.SSLContext:
    """The context for connecting to peers: verify them against `ca` (PEM), or the system's CAs."""
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca) if ca else None)
    except FileNotFoundError as exc:
        raise TLSConfigError(f"TLS: no such CA file {exc.filename or ca}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TLSConfigError(f"TLS: cannot use the CA file {ca}: {exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context

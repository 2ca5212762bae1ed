"""Where the CLI finds secrets: the cluster secret, the admin token and the TLS files.

Secrets come from files (or environment variables), never from the command line, where any
user of the machine could read them in the process list. A file readable by others is used,
with a warning.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import Any

from eventcloud.errors import ErrorCode, InputError

__all__ = ["CredentialError", "read_secret", "read_admin_token", "read_publish_token", "read_publish_policy", "add_client_options", "client_options", "SECRET_ENV", "TOKEN_ENV",
           "TLS_CA_ENV", "PEER_ENV"]

SECRET_ENV = "EVENTCLOUD_SECRET"
TOKEN_ENV = "EVENTCLOUD_ADMIN_TOKEN"
PUBLISH_TOKEN_ENV = "EVENTCLOUD_PUBLISH_TOKEN"
TLS_CA_ENV = "EVENTCLOUD_TLS_CA"
PEER_ENV = "EVENTCLOUD_PEER"


class CredentialError(InputError):
    """A secret file that cannot be read or a secret too short to protect anything."""

    default_code = ErrorCode.BAD_REQUEST


def _read(path: Path | None, env: str, what: str, minimum: int) -> str | None:
    if path is not None:
        try:
            mode = path.stat().st_mode
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CredentialError(f"cannot read the {what} file {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CredentialError(f"the {what} file {path} is not UTF-8 text") from None
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            print(f"eventcloud: warning: the {what} file {path} is readable by other users (chmod 600 it)",
                  file=sys.stderr)
        source = str(path)
    else:
        text = os.environ.get(env, "").strip()
        source = f"${env}"
        if not text:
            return None
    if len(text) < minimum:
        raise CredentialError(f"the {what} in {source} is too short: use at least {minimum} characters "
                              f"(e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)")
    return text


def read_secret(path: Path | None) -> bytes | None:
    """The cluster secret from `path`, else $EVENTCLOUD_SECRET; None when neither is set."""
    text = _read(path, SECRET_ENV, "cluster secret", 16)
    return None if text is None else text.encode("utf-8")


def read_admin_token(path: Path | None) -> str | None:
    """The admin token from `path`, else $EVENTCLOUD_ADMIN_TOKEN; None when neither is set."""
    return _read(path, TOKEN_ENV, "admin token", 8)


def read_publish_token(path: Path | None) -> str | None:
    """The publish token from `path`, else $EVENTCLOUD_PUBLISH_TOKEN; None when neither is set."""
    return _read(path, PUBLISH_TOKEN_ENV, "publish token", 8)


def read_publish_policy(path: Path | None) -> dict[str, tuple[str, ...]] | None:
    """A publish policy file: a JSON object, publish token -> the graph IRI prefixes it allows."""
    if path is None:
        return None
    import json
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CredentialError(f"cannot read the publish policy {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CredentialError(f"the publish policy {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise CredentialError(f'the publish policy {path} must be a JSON object: {{"TOKEN": ["http://prefix/", …]}}')
    policy = {}
    for token, prefixes in data.items():
        if isinstance(prefixes, str):
            prefixes = [prefixes]
        if len(token) < 8 or not isinstance(prefixes, list) or not prefixes \
                or not all(isinstance(p, str) and p for p in prefixes):
            raise CredentialError(f"the publish policy {path}: token {token[:4]!r}…: at least 8 characters, and a "
                                  f"list of graph IRI prefixes")
        policy[token] = tuple(prefixes)
    if path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH):
        print(f"eventcloud: warning: the publish policy {path} is readable by other users (chmod 600 it)",
              file=sys.stderr)
    return policy


def add_client_options(p: argparse.ArgumentParser, peer_help: str = "an entry peer",
                       address: Any = str) -> None:
    """The options every client command shares: where to connect and how to prove who we are."""
    p.add_argument("--peer", type=address, action="append", metavar="HOST:PORT",
                   help=f"{peer_help}; give it more than once for other peers to fail over to (or set {PEER_ENV}="
                        f"HOST:PORT[,HOST:PORT…])")
    p.add_argument("--admin-token-file", type=Path, metavar="FILE",
                   help=f"file holding the overlay's admin token, for leave, delete, schema load, subscriptions "
                        f"list and cancel --admin, and a gateway's DELETE (eventcloud cluster writes it to "
                        f"DATA_DIR/admin.token; or set {TOKEN_ENV})")
    p.add_argument("--publish-token-file", type=Path, metavar="FILE",
                   help=f"file holding a publish token, where the overlay has a publish policy (or set "
                        f"{PUBLISH_TOKEN_ENV})")
    p.add_argument("--tls-ca", type=Path, metavar="FILE",
                   help=f"connect with TLS, trusting this CA certificate (PEM) (or set {TLS_CA_ENV})")
    p.add_argument("--tls", action="store_true", help="connect with TLS, trusting the system's CAs")
    p.set_defaults(command_parser=p)  # errors found after parsing are shown under this command's usage


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `eventcloud.client.connect` the shared options ask for."""
    ca = args.tls_ca or (Path(os.environ[TLS_CA_ENV]) if os.environ.get(TLS_CA_ENV) else None)
    return {"admin_token": read_admin_token(args.admin_token_file),
            "publish_token": read_publish_token(args.publish_token_file), "tls": ca or args.tls or None}

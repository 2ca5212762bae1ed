"""TODO docstring for peers.net."""

from peers.net.auth import PeerAuth
from peers.net.dispatch import Dispatcher
from peers.net.router import FAILED, RetryPolicy, Router

__all__ = ["Dispatcher", "FAILED", "PeerAuth", "RetryPolicy", "Router"]

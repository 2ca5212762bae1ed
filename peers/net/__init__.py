"""Reaching other peers: the connection pool and greedy unicast (`Router`), box multicast over
them (`multicast`), one retry policy, the dispatch table that runs each operation here, and
who may use which operations (`PeerAuth`: the cluster secret, the admin token).
"""

from peers.net.auth import PeerAuth
from peers.net.dispatch import Dispatcher
from peers.net.locate import Locate, addresses_of
from peers.net.retry import FAILED, RetryPolicy
from peers.net.router import Router

__all__ = ["Dispatcher", "FAILED", "Locate", "PeerAuth", "RetryPolicy", "Router", "addresses_of"]

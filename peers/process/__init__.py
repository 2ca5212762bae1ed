"""TODO docstring for peers.process."""

from peers.process.launcher import PeerLauncher, ProcessPeers

__all__ = ["PeerLauncher", "ProcessPeers"]

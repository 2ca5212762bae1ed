"""What one daemon process runs: the peers it serves (`ProcessPeers`: its first peer, the
stand-ins it started for crashed peers whose replica it held, the annexes it adopted) and the
launcher that starts another peer in it (`PeerLauncher`). A peer never picks a peer of its own
process as its replica: a crash of the process would take both copies.
"""

from peers.process.launcher import PeerLauncher, ProcessPeers

__all__ = ["PeerLauncher", "ProcessPeers"]

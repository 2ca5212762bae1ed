"""TODO docstring for peers.replication."""

from peers.replication.keeper import ReplicaKeeper
from peers.replication.owner import ReplicatedStore, OwnerReplication

__all__ = ["ReplicaKeeper", "ReplicatedStore", "OwnerReplication"]

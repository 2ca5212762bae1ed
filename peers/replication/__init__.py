"""Replicated zones. The owner side (`owner`): every write is durable on this peer and on its
replica before it is acknowledged (`ReplicatedStore`, `OwnerReplication`). The replica side
(`keeper`): the copies this peer keeps of other owners' zones, failure detection, and takeover
by a stand-in of the next incarnation (`ReplicaKeeper`).
"""

from peers.replication.keeper import ReplicaKeeper
from peers.replication.owner import ReplicatedStore, OwnerReplication

__all__ = ["ReplicaKeeper", "ReplicatedStore", "OwnerReplication"]

"""TODO docstring for peers.supervisor."""

from peers.supervisor.cluster import ClusterError, LocalCluster

__all__ = ["ClusterError", "LocalCluster"]

"""Supervising peer processes on one machine: `LocalCluster` starts N `eventcloud peer`
processes (port 0 works), hands them the cluster's secret and admin token, and stops them; used
by `eventcloud cluster`, the demo, the experiments and the multi-process tests.
"""

from peers.supervisor.cluster import ClusterError, LocalCluster

__all__ = ["ClusterError", "LocalCluster"]

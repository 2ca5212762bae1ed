"""The ownership authority: who owns each zone, decided by a linearizable store with leases
(etcd in deployments, `LocalAuthority` in one process), and a peer's standing with it."""

from peers.authority.base import Authority, Change, Delete, Entry, Listing, Put, Same, WatchCompacted
from peers.authority.etcd import EtcdAuthority, parse_authority
from peers.authority.hosted import authority_token, learned_url, remember_url, serve_hosted_authority
from peers.authority.local import LocalAuthority
from peers.authority.ownership import Ownership, lease_ttl, zone_map
from peers.authority.server import serve_authority
from peers.authority.watched import WatchedZoneMap

__all__ = ["Authority", "Change", "Delete", "Entry", "EtcdAuthority", "Listing", "LocalAuthority", "Ownership", "Put",
           "Same", "WatchCompacted", "WatchedZoneMap", "authority_token", "learned_url", "lease_ttl", "parse_authority", "remember_url", "serve_authority",
           "serve_hosted_authority", "zone_map"]

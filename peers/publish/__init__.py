"""Publishing: an event's quads travel to their owners and are stored pending, then the entry's
two-phase decision makes the event visible whole or not at all (`Publishing`, `Commits`);
where recent deliveries found the owners (`OwnerCache`); the events published here, kept whole
for the entries that reconstruct CSMA notifications (`RecentPublications`); which content a
graph IRI holds (`GraphClaims`).
"""

from peers.publish.claims import GraphClaims
from peers.publish.commits import COMMIT, Commits, RESOLVE_BATCH
from peers.publish.owner_cache import OwnerCache
from peers.publish.publishing import Publishing
from peers.publish.recent import RecentPublications

__all__ = ["COMMIT", "Commits", "GraphClaims", "OwnerCache", "RESOLVE_BATCH", "RecentPublications", "Publishing"]

"""TODO docstring for peers.publish."""

from peers.publish.commits import COMMIT, Commits, RESOLVE_BATCH
from peers.publish.owner_cache import OwnerCache
from peers.publish.publishing import Publishing
from peers.publish.recent import RecentPublications

__all__ = ["COMMIT", "Commits", "OwnerCache", "RESOLVE_BATCH", "RecentPublications", "Publishing"]

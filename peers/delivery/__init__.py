"""TODO docstring for peers.delivery."""

from peers.delivery.attachments import Attachments
from peers.delivery.homes import Homes
from peers.delivery.reconstruction import Gatherer
from peers.delivery.subscribers import Subscribers

__all__ = ["Attachments", "Subscribers", "Gatherer", "Homes", "RecentPublications"]

"""The subscriber's side of pub/sub. At the entry peer: subscribe and unsubscribe, sessions,
dedup and pumps (`Subscribers`), durable subscriptions attached to connections
(`Attachments`). At a durable subscription's home: its mailbox, numbering, lease and forwarding
(`Homes`). Completing CSMA notifications with the whole event (`Gatherer`).
"""

from peers.delivery.attachments import Attachments
from peers.delivery.homes import Homes
from peers.delivery.reconstruction import Gatherer
from peers.delivery.subscribers import Subscribers

__all__ = ["Attachments", "Gatherer", "Homes", "Subscribers"]

"""The Python SDK (trio, async): publish, query and subscribe through any peer of the overlay.

    async with connect(["10.0.0.1:7000", "10.0.0.2:7000"]) as client:
        sub = await client.subscribe("SELECT ?s WHERE { GRAPH ?g { ?s <http://ex/p> ?o } }",
                                     durable=True)
        save(sub.id, sub.ticket)                      # to resume it from anywhere later
        await client.publish(client.event([(s, p, o)]))
        async for note in sub:
            print(note.seq, note.event, note.solutions)

A client survives the loss of its entry peer: it reconnects to another peer, attaches its
durable subscriptions again after the last number it received, and retries what can run
twice (`eventcloud.client.link`). A durable subscription's notifications are numbered, kept
by the overlay until acknowledged and delivered to the application once each, in order
(`eventcloud.client.subscription`). A non-durable one ends with its connection, with a
ClientError, never silently.
"""

from eventcloud.client.api import KINDS, Client, connect
from eventcloud.client.link import ClientError
from eventcloud.client.subscription import Subscription
from eventcloud.wire.messages import Notification, Receipt

PublishReceipt = Receipt

__all__ = ["ClientError", "Client", "Subscription", "Notification", "PublishReceipt", "connect", "KINDS"]

"""What a peer keeps on disk: its quads and records, the log that makes writes durable, its state.

`PeerStore` (pyoxigraph on RocksDB, with its own records store and write-ahead log) blocks;
services use it through `AsyncStore`, which runs its calls off the event loop and commits
concurrent writes with one fsync. Every change is a *mutation* (`mutations`), the one form that
is logged, replicated and handed over. `PeerState` is the peer's identity file (id, zone,
neighbours); `ZoneGuard` keeps a write decided from the zone from racing a split of it.
"""

from peers.store import mailboxes
from peers.store.async_store import CHECKPOINT_BYTES, AsyncStore
from peers.store.offload import Offload
from peers.store.foreign import ForeignQuads
from peers.store.mutations import (
    RESERVED_GRAPHS, Mutation, abort, add, add_triples, check_mutation, commit, decide, delete, drop_subscription, notified, release,
    put_subscription, remove,
)
from peers.store.peer_store import CLAIM_PREFIX, EventInfo, PeerStore, StoreError, write_atomically
from peers.store.sparql_rows import iter_rows, query_rows
from peers.store.state import GRANTED_KEPT, PeerState, SplitUnderWay, StateError, load_state, save_state
from peers.store.wal import WriteAheadLog
from peers.store.zone_guard import ZoneGuard

__all__ = ["CHECKPOINT_BYTES", "GRANTED_KEPT", "AsyncStore", "CLAIM_PREFIX", "EventInfo", "ForeignQuads", "Mutation", "Offload", "PeerState", "PeerStore", "SplitUnderWay", "RESERVED_GRAPHS", "StateError",
           "StoreError", "WriteAheadLog", "ZoneGuard", "abort", "add", "add_triples", "check_mutation", "commit", "decide", "delete",
           "drop_subscription", "load_state", "mailboxes", "notified", "put_subscription", "query_rows", "iter_rows", "release", "remove",
           "save_state", "write_atomically"]

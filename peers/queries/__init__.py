"""Client operations on stored data: find, count, one-time SPARQL, delete and status, each a
multicast over the box its pattern covers (`Queries`); a gathered query's candidates fetched
pattern by pattern (`QueryCandidates`); joins evaluated in a child process under a budget;
large answers read page by page (`Cursors` where they are produced, `open_peer_pages` at the
entry peer).
"""

from peers.queries.candidates import MAX_PLANNED, QueryCandidates
from peers.queries.child_process import RESULT_BYTES, QueryBudget
from peers.queries.cursors import PAGE_BYTES, Cursors
from peers.queries.operations import Queries

__all__ = ["PAGE_BYTES", "RESULT_BYTES", "Cursors", "MAX_PLANNED", "Queries", "QueryBudget", "QueryCandidates"]

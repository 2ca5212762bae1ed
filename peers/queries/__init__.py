"""Client operations on stored data: find, count, one-time SPARQL, delete and status, each a
multicast over the box its pattern covers (`Queries`); a gathered query's candidates fetched
pattern by pattern (`QueryCandidates`); joins evaluated in a child process under a budget.
"""

from peers.queries.candidates import MAX_PLANNED, QueryCandidates
from peers.queries.child_process import QueryBudget
from peers.queries.operations import Queries

__all__ = ["MAX_PLANNED", "Queries", "QueryBudget", "QueryCandidates"]

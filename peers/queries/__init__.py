"""TODO docstring for peers.queries."""

from peers.queries.candidates import MAX_PLANNED, QueryCandidates
from peers.queries.child_process import QueryBudget
from peers.queries.operations import Queries

__all__ = ["MAX_PLANNED", "Queries", "QueryBudget", "QueryCandidates"]

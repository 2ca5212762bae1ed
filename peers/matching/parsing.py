"""rdflib's SPARQL parser, one parse at a time per process.

rdflib parses SPARQL with pyparsing, whose parse actions learn their arity on first use without
a lock: two threads meeting a parse action for the first time can make it remember a wrong
arity, and from then on every query using it fails ("missing 1 required positional argument:
'tokenList'") until the process restarts. A peer parses subscriptions on its event loop and
analyses one-time queries in worker threads, so every parse goes through this lock. Parses
take milliseconds; the event loop may wait that long for a query's analysis to finish.
"""

from __future__ import annotations

import threading
from typing import Any

from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.query_plan import Pattern, analyse
from eventcloud.sparql.subscription import Subscription, parse_subscription

__all__ = ["parse_subscription_locked", "analyse_locked"]

_PARSER = threading.Lock()


def parse_subscription_locked(text: str, operators: OperatorSet = NO_OPERATORS) -> Subscription:
    with _PARSER:
        return parse_subscription(text, operators=operators)


def analyse_locked(text: str) -> tuple[list[Pattern], Any]:
    """`query_plan.analyse` (candidate patterns and algebra of a one-time query)."""
    with _PARSER:
        return analyse(text)

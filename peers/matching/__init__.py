"""Matching on a peer: the subscriptions stored here and their shared index (`Subscriptions`),
OSMA's decisions and CSMA's chains (`Matcher`), registered operator functions evaluated once
per event and off the loop when expensive (`OperatorRunner`), the class taxonomy every peer
holds (`Schema`), offline statistics, and rdflib's parser behind one lock.
"""

from peers.matching.matcher import Matcher
from peers.matching.operator_loading import ENTRY_POINT_GROUP, OperatorLoadError, check_same_operators, load_operators
from peers.matching.operators import OperatorRunner
from peers.matching.parsing import analyse_locked, parse_subscription_locked
from peers.matching.registry import Stored, Subscriptions, indexing_box, parse_cached
from peers.matching.schema import Schema, load_taxonomy
from peers.matching.statistics import StatisticsError, load_statistics

__all__ = ["ENTRY_POINT_GROUP", "Matcher", "OperatorLoadError", "OperatorRunner", "Schema", "StatisticsError", "Stored", "Subscriptions", "analyse_locked", "check_same_operators", "indexing_box", "load_operators", "load_statistics", "load_taxonomy", "parse_cached", "parse_subscription_locked"]

"""TODO docstring for peers.membership."""

from peers.membership.annexes import Annexes
from peers.membership.load_survey import LoadSurvey, PROMISED_FOR
from peers.membership.membership import Membership
from peers.membership.rebalancer import Rebalancer

__all__ = ["Annexes", "LoadSurvey", "Membership", "PROMISED_FOR", "Rebalancer"]

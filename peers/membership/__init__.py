"""Overlay membership: join by splitting the busiest peer found (`Membership`, `LoadSurvey`),
graceful leave and the handover of a zone's content in chunks, announcements and stabilisation
that keep neighbour tables exact, the rebalancer (a light peer moves to where the data is) and
annexes (a crowded peer hands the empty side of its zone to another host).
"""

from peers.membership.annexes import Annexes
from peers.membership.decisions import decided
from peers.membership.load_survey import LoadSurvey, PROMISED_FOR
from peers.membership.membership import Membership
from peers.membership.rebalancer import Rebalancer

__all__ = ["Annexes", "LoadSurvey", "Membership", "PROMISED_FOR", "Rebalancer", "decided"]

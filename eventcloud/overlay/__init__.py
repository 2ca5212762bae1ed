"""The 4-D lexicographic CAN as pure code: coordinates, zones, routing, multicast, membership plans.

    space = CoordinateSpace()                  # how terms become points (one per overlay)
    point = space.point(quad)                  # where a quad lives
    lower, upper = zone.split()                # a join into an empty zone halves it
    cut = median_split(zone, points)           # a zone with data is cut at its median
    hop = next_hop(zone, neighbours, point)    # greedy routing (None: this zone owns it)
    children = multicast_children(zone, neighbours, box)   # who a box multicast continues to
    life = ZoneLifecycle(holding); life.step(SplitGranted(split, kept, table))   # the only way a holding changes
"""

from eventcloud.errors import GeometryError
from eventcloud.overlay.annexes import (
    HEADROOM, AnnexCut, HostOffer, choose_host, crowd_cut, cut_between, data_ranges, host_neighbours_after,
)
from eventcloud.overlay.balance import (
    MIN_SHARE, SplitChoice, climb, cut_for, evenly, gains_enough, joiner_share, median_split, should_move,
)
from eventcloud.overlay.coordinates import (
    DIMENSIONS, MAPPINGS, Box, CoordinateSpace, Interval, Point, local_name,
)
from eventcloud.overlay.lifecycle import (
    GRANTED_KEPT, TRANSITIONS, Ended, Event, Founded, Granted, Holding, JoinCommitted, Left, LifecycleError, MergeBegun,
    MergeDropped, Merged, MergeUnderWay, NeighboursLearned, Outcome, Phase, Ready, Rejoin, ReplicaNamed, SplitCommitted, SplitGranted, SplitUndone,
    SplitUnderWay, Stopped, TakenOver, ZoneLifecycle,
)
from eventcloud.overlay.plans import (
    MergePlan, Neighbour, RoomFace, SplitPlan, announced, heirs, is_guillotine, merge_for_leave, room_faces,
    split_for_join, verified,
)
from eventcloud.overlay.routing import (
    covering, disjoint, hull, intersection, lowest_corner, multicast_children, multicast_root, neighbours_of,
    next_hop, subtree_reach, tiles,
)
from eventcloud.overlay.zones import Zone

__all__ = [
    "DIMENSIONS", "MAPPINGS", "Point", "Interval", "Box", "CoordinateSpace", "GeometryError", "local_name",
    "Zone", "next_hop", "multicast_root", "multicast_children", "neighbours_of", "covering", "lowest_corner",
    "intersection", "tiles", "disjoint", "hull", "subtree_reach",
    "Neighbour", "SplitPlan", "MergePlan", "RoomFace", "split_for_join", "merge_for_leave", "heirs", "room_faces",
    "is_guillotine", "announced", "verified",
    "AnnexCut", "HostOffer", "HEADROOM", "crowd_cut", "choose_host", "cut_between", "data_ranges",
    "host_neighbours_after",
    "ZoneLifecycle", "Holding", "Phase", "Ready", "TRANSITIONS", "LifecycleError", "SplitUnderWay", "GRANTED_KEPT",
    "Founded", "Granted", "JoinCommitted", "SplitGranted", "SplitCommitted", "SplitUndone", "NeighboursLearned",
    "MergeUnderWay", "MergeBegun", "Merged", "MergeDropped", "ReplicaNamed", "TakenOver", "Ended", "Event", "Outcome", "Stopped", "Left", "Rejoin",
    "SplitChoice", "median_split", "cut_for", "climb", "evenly", "should_move", "joiner_share", "gains_enough", "MIN_SHARE",
]

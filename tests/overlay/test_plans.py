"""Membership plans as pure functions: splits, merges, announcements and stabilisation."""

from __future__ import annotations

from eventcloud.overlay import (
    CoordinateSpace, Neighbour, Zone, announced, heirs, merge_for_leave, split_for_join, verified,
)

SPACE = CoordinateSpace(precision=4)
WHOLE = Zone(SPACE.whole_space())


def test_a_split_gives_each_half_exactly_its_abutting_neighbours():
    # four peers: A and B halves along graph, then A's half split along subject into A and C
    a0, b = WHOLE.split()
    plan = split_for_join("A", "a:1", a0, {"B": Neighbour("b:1", b)}, "C", "c:1")
    assert (plan.lower, plan.upper) == a0.split()
    assert set(plan.owner_table) == {"B", "C"} and plan.owner_table["C"] == Neighbour("c:1", plan.upper)
    assert set(plan.newcomer_table) == {"A", "B"}
    assert plan.newcomer_table["A"] == Neighbour("a:1", plan.lower)
    assert plan.announce_to == ("b:1",)


def test_the_sibling_is_the_first_heir_and_a_merge_rebuilds_the_table():
    a0, b = WHOLE.split()
    a, c = a0.split()
    table_c = {"A": Neighbour("a:1", a), "B": Neighbour("b:1", b)}
    assert heirs(c, table_c) == ["A"]  # B's zone does not merge with C's into a box
    plan = merge_for_leave("A", a, {"B": Neighbour("b:1", b), "C": Neighbour("c:1", c)}, "C", c, table_c)
    assert plan is not None and plan.merged == a0
    assert set(plan.table) == {"B"}
    assert merge_for_leave("B", b, {}, "C", c, table_c) is None


def test_announcements_add_abutting_zones_and_drop_others_and_the_departed():
    a0, b = WHOLE.split()
    a, c = a0.split()
    table = announced("B", b, {"X": Neighbour("x:1", a0)}, [("A", Neighbour("a:1", a)), ("C", Neighbour("c:1", c)),
                                                           ("B", Neighbour("b:1", b))], removed=("X",))
    assert set(table) == {"A", "C"}
    far = Zone(((0, 1),) * 4)
    assert "A" not in announced("B", b, table, [("A", Neighbour("a:1", far))])


def test_stabilisation_trusts_each_peer_about_its_own_zone():
    a0, b = WHOLE.split()
    a, c = a0.split()
    stale = {"A": Neighbour("a:1", a0)}
    fixed = verified(b, stale, {"A": Neighbour("a:1", a), "C": Neighbour("c:1", c)})
    assert fixed == {"A": Neighbour("a:1", a), "C": Neighbour("c:1", c)}

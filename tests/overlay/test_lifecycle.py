"""The zone lifecycle (issue 44.3): the table, the nine paths as sequences of its steps, Step/Ready."""

from __future__ import annotations

import itertools

import pytest

from eventcloud.overlay import (
    TRANSITIONS, CoordinateSpace, Ended, Founded, Granted, Holding, JoinCommitted, Left, LifecycleError, MergeBegun,
    MergeDropped, Merged, MergeUnderWay, Neighbour, NeighboursLearned, Phase, Rejoin, ReplicaNamed, SplitCommitted, SplitGranted, SplitUndone,
    SplitUnderWay, Stopped, TakenOver, Zone, ZoneLifecycle,
)

WHOLE = Zone(CoordinateSpace().whole_space())
LOWER, UPPER = WHOLE.split()
TABLE = {"n": Neighbour("h:2", UPPER)}


def serving(zone: Zone = WHOLE, **rest) -> ZoneLifecycle:
    return ZoneLifecycle(Holding(zone, TABLE, **rest))


def split_for(newcomer: str = "new") -> SplitUnderWay:
    return SplitUnderWay(newcomer, "h:9", UPPER, WHOLE, TABLE, ("h:3",))


def merge_of(leaver: str = "n", zone: Zone = UPPER) -> MergeUnderWay:
    return MergeUnderWay(leaver, 0, "token", zone, {})


#: One event of each kind, valid in some phase.
EVENTS = [Founded(WHOLE), Granted(LOWER, TABLE, ("s", "h:1")), JoinCommitted(),
          SplitGranted(split_for(), LOWER, {"new": Neighbour("h:9", UPPER)}), SplitCommitted("new"),
          SplitUndone("new"), NeighboursLearned(TABLE), MergeBegun(merge_of()), Merged(WHOLE, {}), MergeDropped("n"),
          ReplicaNamed(("r", "h:5")),
          TakenOver(1), Ended(Stopped())]

PHASES = {
    Phase.UNJOINED: lambda: ZoneLifecycle(),
    Phase.JOINING: lambda: ZoneLifecycle(Holding(LOWER, TABLE, joining=("s", "h:1"))),
    Phase.SERVING: lambda: serving(),
    Phase.SPLITTING: lambda: ZoneLifecycle(Holding(LOWER, {}, splitting=split_for())),
    Phase.MERGING: lambda: ZoneLifecycle(Holding(LOWER, TABLE, merging=merge_of())),
    Phase.ENDED: lambda: _ended(),
}


def _ended() -> ZoneLifecycle:
    machine = serving()
    machine.step(Ended(Stopped()))
    return machine


@pytest.mark.parametrize("phase, event", list(itertools.product(PHASES, EVENTS)),
                         ids=lambda x: getattr(x, "value", type(x).__name__))
def test_a_step_outside_the_table_is_refused_and_changes_nothing(phase, event):
    machine = PHASES[phase]()
    assert machine.phase is phase
    before = machine.holding
    if (phase, type(event)) in TRANSITIONS:
        machine.step(event)
        return
    with pytest.raises(LifecycleError, match=type(event).__name__):
        machine.step(event)
    assert machine.holding is before and machine.phase is phase


def test_a_join_is_granted_then_committed():
    machine = ZoneLifecycle()
    machine.step(Granted(LOWER, TABLE, ("s", "h:1")))
    assert machine.phase is Phase.JOINING and machine.holding.joining == ("s", "h:1")
    machine.step(ReplicaNamed(("r", "h:5")))   # copied before the commit
    machine.step(JoinCommitted())
    assert machine.phase is Phase.SERVING and machine.holding.zone == LOWER and machine.holding.joining is None


def test_a_split_committed_stands_and_is_remembered_and_one_undone_restores_the_zone():
    machine = serving()
    machine.step(SplitGranted(split_for("a"), LOWER, {"a": Neighbour("h:9", UPPER)}))
    assert machine.phase is Phase.SPLITTING and machine.holding.zone == LOWER
    machine.step(SplitCommitted("a"))
    assert machine.phase is Phase.SERVING and machine.holding.granted == ("a",)
    machine.step(SplitCommitted("a"))   # asked again: answered from what it remembers, nothing changes
    assert machine.holding.granted == ("a",)

    undone = serving()
    undone.step(SplitGranted(split_for("b"), LOWER, {}))
    undone.step(SplitUndone("b"))
    assert undone.phase is Phase.SERVING and undone.holding.zone == WHOLE and dict(undone.holding.neighbours) == TABLE


def test_a_split_is_refused_for_a_zone_it_does_not_hold_and_an_undo_for_another_newcomer():
    machine = serving(LOWER)
    with pytest.raises(LifecycleError, match="split of"):
        machine.step(SplitGranted(split_for(), LOWER, {}))
    machine = serving()
    machine.step(SplitGranted(split_for("a"), LOWER, {}))
    with pytest.raises(LifecycleError, match="no split under way for b"):
        machine.step(SplitUndone("b"))
    assert machine.phase is Phase.SPLITTING


def test_a_merge_keeps_the_zone_it_grows_and_waits_for_a_split_to_be_decided():
    machine = serving(LOWER)
    machine.step(Merged(WHOLE, {}))
    assert machine.holding.zone == WHOLE
    with pytest.raises(LifecycleError, match="does not keep"):
        serving(UPPER).step(Merged(LOWER, {}))
    splitting = serving()
    splitting.step(SplitGranted(split_for(), LOWER, {}))
    with pytest.raises(LifecycleError, match="not allowed while splitting"):
        splitting.step(Merged(WHOLE, {}))


def test_a_merge_under_way_is_merged_or_dropped_and_allows_no_other_change_meanwhile():
    """The heir saves the leaver's zone as under way before the authority decides (merges.py)."""
    machine = serving(LOWER)
    machine.step(MergeBegun(merge_of()))
    assert machine.phase is Phase.MERGING and machine.holding.zone == LOWER
    for refused in (SplitGranted(split_for(), LOWER, {}), MergeBegun(merge_of("other"))):
        with pytest.raises(LifecycleError, match="not allowed while merging"):
            machine.step(refused)
    with pytest.raises(LifecycleError, match="leaves out n's zone"):
        machine.step(Merged(LOWER, {}))
    machine.step(TakenOver(1))   # a stand-in resumes it
    assert machine.phase is Phase.MERGING
    machine.step(Merged(WHOLE, {}))
    assert machine.phase is Phase.SERVING and machine.holding.zone == WHOLE and machine.holding.merging is None
    dropped = serving(LOWER)
    dropped.step(MergeBegun(merge_of()))
    with pytest.raises(LifecycleError, match="no merge under way for x"):
        dropped.step(MergeDropped("x"))
    dropped.step(MergeDropped("n"))
    assert dropped.phase is Phase.SERVING and dropped.holding.zone == LOWER and dropped.holding.merging is None


def test_a_takeover_is_one_epoch_on_with_no_replica_and_the_join_decided():
    machine = ZoneLifecycle(Holding(LOWER, TABLE, replica=("old", "h:7"), incarnation=2, joining=("s", "h:1")))
    machine.step(TakenOver(3))
    assert machine.phase is Phase.SERVING
    assert (machine.holding.incarnation, machine.holding.replica, machine.holding.joining) == (3, None, None)
    with pytest.raises(LifecycleError, match="not past 3"):
        machine.step(TakenOver(3))
    splitting = ZoneLifecycle(Holding(LOWER, {}, splitting=split_for()))
    splitting.step(TakenOver(1))
    assert splitting.phase is Phase.SPLITTING   # the stand-in resumes the split


@pytest.mark.parametrize("outcome, keeps", [
    (Stopped(), True),                                       # a restart serves it again
    (Rejoin(("h:2",), "deposed"), True),                     # kept for inspection; the peer rejoins as new
    (Left(), False),                                         # handed over: nothing to bring back
    (Rejoin(("h:2",), "moved", handed_over=True), False),    # a move handed it to an heir first
])
def test_every_end_is_one_step_and_a_zone_handed_over_is_held_no_more(outcome, keeps):
    machine = serving(replica=("r", "h:5"))
    machine.step(Ended(outcome))
    assert machine.ended and machine.outcome == outcome
    assert (machine.holding.zone == WHOLE) is keeps and (machine.holding.zone is None) is not keeps
    with pytest.raises(LifecycleError, match="not allowed while ended"):
        machine.step(Ended(Stopped()))   # the first end wins
    held = machine.holding
    machine.step(NeighboursLearned({}))   # news arriving as its tasks are cancelled: changes nothing
    machine.step(ReplicaNamed(None))
    assert machine.holding is held


def test_ready_says_what_the_runtime_owes_until_it_advances():
    machine = serving()
    assert machine.ready().save is False and machine.ready().end is None
    machine.step(NeighboursLearned(TABLE))   # the same table: nothing to save
    assert machine.ready().save is False
    machine.step(ReplicaNamed(("r", "h:5")))
    ready = machine.ready()
    assert ready.save and ready.end is None
    machine.advance(ready)
    assert not machine.ready().save
    machine.step(Ended(Left()))
    ready = machine.ready()
    assert ready.save and ready.end == Left()
    machine.advance(ready)
    assert machine.ready() == type(ready)(False, None)


def test_a_holding_cannot_be_changed_in_place():
    machine = serving()
    with pytest.raises(TypeError):
        machine.holding.neighbours["x"] = Neighbour("h:3", UPPER)  # type: ignore[index]
    with pytest.raises(AttributeError):
        machine.holding.zone = LOWER  # type: ignore[misc]

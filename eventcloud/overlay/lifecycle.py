"""One zone lifecycle: the only thing that changes a peer's zone, neighbours, replica and epoch.

Rule 1, as in h11's state machine: everything that affects a peer's holding lives here. Nine
paths change what a peer owns (join, undo of a join, leave, step-aside, making room, a move,
an annex adopted or handed on, a takeover, a rejoin); each is a sequence of the transitions in
`TRANSITIONS`, and nothing else may assign a zone, a neighbour table, a replica or an epoch
(tests/test_architecture.py holds every other module to it). Before, five modules set those
fields each in its own way, and a runtime ended by four exits (a cancel, two retirements and an
exception used as control flow); a review could not tell which combinations were possible.

The runtime drives it the way etcd's raft is driven: `step(event)` applies one event (refused
with `LifecycleError`, the holding unchanged, if the table has no such transition), `ready()`
says what the runtime owes it (the holding to save, or the runtime to end, and how), and
`advance(ready)` says that was done. No I/O, no clock: the same steps give the same holdings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from types import MappingProxyType
from typing import Mapping, Union

from eventcloud.errors import EventCloudError
from eventcloud.overlay.coordinates import Point
from eventcloud.overlay.plans import Neighbour
from eventcloud.overlay.zones import Zone

__all__ = [
    "Phase", "Holding", "SplitUnderWay", "MergeUnderWay", "LifecycleError", "ZoneLifecycle", "Ready", "TRANSITIONS", "GRANTED_KEPT",
    "Founded", "Granted", "JoinCommitted", "SplitGranted", "SplitCommitted", "SplitUndone", "NeighboursLearned",
    "MergeBegun", "Merged", "MergeDropped", "ReplicaNamed", "TakenOver", "Ended", "Event",
    "Outcome", "Stopped", "Left", "Rejoin",
]

#: Committed newcomers a peer remembers (`Holding.granted`): a commit asked again is answered from them.
GRANTED_KEPT = 32


class LifecycleError(EventCloudError):
    """A step the zone lifecycle does not allow in the peer's phase: a bug, refused whole."""


class Phase(Enum):
    UNJOINED = "unjoined"     # no zone yet (a new peer, before its grant or its first zone)
    JOINING = "joining"       # holds a granted zone; its splitter has not confirmed the commit
    SERVING = "serving"       # owns its zone
    SPLITTING = "splitting"   # owns the kept half of a split whose newcomer has not committed
    MERGING = "merging"       # holds a leaver's content; the authority has not yet said the zone is ours
    ENDED = "ended"           # this runtime holds nothing any more (`ZoneLifecycle.outcome` says why)


@dataclass(frozen=True)
class SplitUnderWay:
    """A split this peer granted and the newcomer has not committed yet: saved with the zone
    (already the kept half) and copied to the replica with it, so whoever serves this state
    next (this peer restarted, or its stand-in) waits for that commit or undoes the split.
    Without it a splitter killed before the commit left a stand-in serving the kept half and
    the newcomer, its commit unanswered, serving nothing: half the zone owned by nobody."""

    newcomer: str                      # the joining peer's id
    address: str                       # where it joins from (asked whether it is still there)
    granted: Zone                      # the part it takes
    before: Zone                       # this peer's zone before the split (an undo restores it)
    table: Mapping[str, Neighbour]     # and its neighbours then
    announce_to: tuple[str, ...]       # addresses told about both zones once it commits


@dataclass(frozen=True)
class MergeUnderWay:
    """A leaving neighbour's zone whose content this heir holds, not yet decided at the ownership
    authority: saved (and copied to the replica) before the heir asks, so whoever serves this
    state next (the heir restarted, or its stand-in) learns the answer and merges, or drops the
    content. Without it an heir that crashed between the authority's yes and saving its merge
    came back without the leaver's zone, which the leaver, told by the authority it had left,
    no longer served; and one that saved the merge but crashed before answering served the zone
    beside the leaver, which took the unanswered leave for a failed one."""

    leaver: str                        # the leaving peer's id
    incarnation: int                   # its zone's epoch as it left
    token: str                         # the leave attempt the authority names ("": no authority)
    zone: Zone                         # its zone
    table: Mapping[str, Neighbour]     # its neighbours (the merged zone's table comes from both)


def _frozen(table: Mapping[str, Neighbour]) -> Mapping[str, Neighbour]:
    return MappingProxyType(dict(table))


@dataclass(frozen=True)
class Holding:
    """What a peer holds at one moment; replaced whole by each step, never changed in place."""

    zone: Zone | None = None
    neighbours: Mapping[str, Neighbour] = field(default_factory=lambda: _frozen({}))
    replica: tuple[str, str] | None = None   # (id, address) of the peer holding this zone's copy
    incarnation: int = 0                      # the zone's epoch: +1 each time a replica takes it over
    splitting: SplitUnderWay | None = None    # a split granted, its newcomer's commit awaited
    joining: tuple[str, str] | None = None    # (id, address) of the splitter, until our commit is answered
    granted: tuple[str, ...] = ()             # the newcomers whose splits committed here (the last GRANTED_KEPT)
    merging: MergeUnderWay | None = None      # a leaver's content held, the authority's answer awaited

    def __post_init__(self) -> None:
        if not isinstance(self.neighbours, MappingProxyType):   # frozen whatever it was given
            object.__setattr__(self, "neighbours", _frozen(self.neighbours))

    @property
    def phase(self) -> Phase:
        """The phase a holding restored from a saved state is in."""
        if self.zone is None:
            return Phase.UNJOINED
        if self.joining is not None:
            return Phase.JOINING
        if self.splitting is not None:
            return Phase.SPLITTING
        if self.merging is not None:
            return Phase.MERGING
        return Phase.SERVING


# --- events ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Founded:
    """The first peer of a new overlay takes the whole space."""
    zone: Zone


@dataclass(frozen=True)
class Granted:
    """A splitter granted this newcomer a zone: held (and copied) before the commit is answered."""
    zone: Zone
    neighbours: Mapping[str, Neighbour]
    splitter: tuple[str, str]


@dataclass(frozen=True)
class JoinCommitted:
    """The splitter answered our commit: the zone is ours for good."""


@dataclass(frozen=True)
class SplitGranted:
    """This peer keeps `kept` and grants the rest to `split.newcomer` until it commits."""
    split: SplitUnderWay
    kept: Zone
    neighbours: Mapping[str, Neighbour]


@dataclass(frozen=True)
class SplitCommitted:
    """The newcomer committed: the split stands (remembered, so a commit asked again is answered)."""
    newcomer: str


@dataclass(frozen=True)
class SplitUndone:
    """The newcomer never committed (or the split could not be saved): the zone is whole again."""
    newcomer: str


@dataclass(frozen=True)
class NeighboursLearned:
    """The neighbour table as announcements, stabilisation or a dropped ghost leave it."""
    neighbours: Mapping[str, Neighbour]


@dataclass(frozen=True)
class MergeBegun:
    """A leaver's content is here: the merge waits for the authority (saved before it is asked)."""
    merge: MergeUnderWay


@dataclass(frozen=True)
class Merged:
    """This peer's zone grows: a leaver, a stepping-aside peer or an annex handed its zone here."""
    zone: Zone
    neighbours: Mapping[str, Neighbour]


@dataclass(frozen=True)
class MergeDropped:
    """The leaver kept its zone (or another heir took it): the merge under way is dropped."""
    leaver: str


@dataclass(frozen=True)
class ReplicaNamed:
    """The peer holding this zone's copy (None: no copy now)."""
    replica: tuple[str, str] | None


@dataclass(frozen=True)
class TakenOver:
    """A copy of a silent owner's holding becomes its stand-in's, one epoch on: the stand-in has
    no replica yet, and a join the owner was committing is decided (the keeper asked first)."""
    incarnation: int


@dataclass(frozen=True)
class Stopped:
    """Stopped (asked to, or it failed): the holding stays saved and a restart serves it again."""
    reason: str = "stopped"


@dataclass(frozen=True)
class Left:
    """Handed its zone over (a leave, an annex handed on): nothing to serve again; the peer stops."""


@dataclass(frozen=True)
class Rejoin:
    """Deposed, taken over while away, or moved by the rebalancer: the peer rejoins as a new one,
    through `through` (in order), on `listen` if given (its clients' port), splitting the zone
    holding `at` if given (else the busiest it finds), not before `after` seconds. `handed_over`:
    its zone went to an heir first (a move), so nothing of it is served again."""
    through: tuple[str, ...]
    why: str
    listen: str | None = None
    at: Point | None = None
    after: float = 0.0
    handed_over: bool = False


Outcome = Union[Stopped, Left, Rejoin]


@dataclass(frozen=True)
class Ended:
    """This runtime ends: why, and what the peer does next."""
    outcome: Outcome


Event = Union[Founded, Granted, JoinCommitted, SplitGranted, SplitCommitted, SplitUndone, NeighboursLearned,
              MergeBegun, Merged, MergeDropped, ReplicaNamed, TakenOver, Ended]

_HOLDING = (Phase.JOINING, Phase.SERVING, Phase.SPLITTING, Phase.MERGING)

#: Which events each phase accepts, and the phase after (None: the one the new holding is in).
TRANSITIONS: dict[tuple[Phase, type], Phase | None] = {
    (Phase.UNJOINED, Founded): Phase.SERVING,
    (Phase.UNJOINED, Granted): Phase.JOINING,
    (Phase.JOINING, JoinCommitted): Phase.SERVING,
    (Phase.SERVING, SplitGranted): Phase.SPLITTING,
    (Phase.SPLITTING, SplitCommitted): None,          # SERVING once the split under way is the one committed
    (Phase.SERVING, SplitCommitted): Phase.SERVING,   # asked again after it was decided
    (Phase.SPLITTING, SplitUndone): Phase.SERVING,
    (Phase.SERVING, MergeBegun): Phase.MERGING,
    (Phase.MERGING, Merged): Phase.SERVING,
    (Phase.SERVING, Merged): Phase.SERVING,           # no leave record: decided by the two peers alone
    (Phase.MERGING, MergeDropped): Phase.SERVING,
    **{(phase, NeighboursLearned): phase for phase in _HOLDING},
    **{(phase, ReplicaNamed): phase for phase in _HOLDING},
    # the keeper asked a JOINING owner's splitter first; a SPLITTING one's stand-in resumes the split
    **{(phase, TakenOver): None for phase in _HOLDING},
    **{(phase, Ended): Phase.ENDED for phase in (Phase.UNJOINED, *_HOLDING)},
    # news reaching a runtime that ended in the moment before its tasks are cancelled (an
    # announcement, a replica's answer): taken, and changes nothing
    (Phase.ENDED, NeighboursLearned): Phase.ENDED,
    (Phase.ENDED, ReplicaNamed): Phase.ENDED,
}


@dataclass(frozen=True)
class Ready:
    """What the runtime owes the lifecycle after some steps: `save` the holding (its state file
    and its replica's copy), and end this runtime with `end` if set."""
    save: bool
    end: Outcome | None


class ZoneLifecycle:
    """A peer's holding and phase, changed only by `step`."""

    def __init__(self, holding: Holding | None = None) -> None:
        self.holding = holding if holding is not None else Holding()
        self.phase = self.holding.phase
        self.outcome: Outcome | None = None
        self._unsaved = False
        self._told_end = False

    @property
    def ended(self) -> bool:
        return self.phase is Phase.ENDED

    def step(self, event: Event) -> None:
        key = (self.phase, type(event))
        if key not in TRANSITIONS:
            raise LifecycleError(f"zone lifecycle: {type(event).__name__} is not allowed while {self.phase.value}")
        phase = TRANSITIONS[key]
        holding = self.holding if self.phase is Phase.ENDED else self._apply(self.holding, event)
        if phase is None:   # e.g. a split committed: serving again only if it was the one under way
            phase = holding.phase
        self._unsaved = self._unsaved or holding != self.holding
        self.holding, self.phase = holding, phase
        if isinstance(event, Ended):
            self.outcome = event.outcome

    def ready(self) -> Ready:
        return Ready(self._unsaved, self.outcome if self.outcome is not None and not self._told_end else None)

    def advance(self, ready: Ready) -> None:
        if ready.save:
            self._unsaved = False
        if ready.end is not None:
            self._told_end = True

    @staticmethod
    def _apply(h: Holding, event: Event) -> Holding:
        if isinstance(event, Founded):
            return replace(h, zone=event.zone, neighbours=_frozen({}))
        if isinstance(event, Granted):
            return replace(h, zone=event.zone, neighbours=_frozen(event.neighbours), joining=event.splitter)
        if isinstance(event, JoinCommitted):
            return replace(h, joining=None)
        if isinstance(event, SplitGranted):
            if event.split.before != h.zone or not event.split.before.covers(event.kept):
                raise LifecycleError(f"zone lifecycle: a split of {event.split.before} granted by a peer "
                                     f"holding {h.zone}")
            return replace(h, zone=event.kept, neighbours=_frozen(event.neighbours), splitting=event.split)
        if isinstance(event, SplitCommitted):
            splitting = None if h.splitting is not None and h.splitting.newcomer == event.newcomer else h.splitting
            granted = h.granted if event.newcomer in h.granted else (*h.granted, event.newcomer)[-GRANTED_KEPT:]
            return replace(h, splitting=splitting, granted=granted)
        if isinstance(event, SplitUndone):
            split = h.splitting
            if split is None or split.newcomer != event.newcomer:
                raise LifecycleError(f"zone lifecycle: no split under way for {event.newcomer} to undo")
            return replace(h, zone=split.before, neighbours=_frozen(split.table), splitting=None)
        if isinstance(event, NeighboursLearned):
            return replace(h, neighbours=_frozen(event.neighbours))
        if isinstance(event, MergeBegun):
            return replace(h, merging=event.merge)
        if isinstance(event, Merged):
            if h.zone is None or not event.zone.covers(h.zone):
                raise LifecycleError(f"zone lifecycle: a merge into {event.zone} does not keep {h.zone}")
            if h.merging is not None and not event.zone.covers(h.merging.zone):
                raise LifecycleError(f"zone lifecycle: a merge into {event.zone} leaves out {h.merging.leaver}'s "
                                     f"zone {h.merging.zone}")
            return replace(h, zone=event.zone, neighbours=_frozen(event.neighbours), merging=None)
        if isinstance(event, MergeDropped):
            if h.merging is None or h.merging.leaver != event.leaver:
                raise LifecycleError(f"zone lifecycle: no merge under way for {event.leaver} to drop")
            return replace(h, merging=None)
        if isinstance(event, ReplicaNamed):
            return replace(h, replica=event.replica)
        if isinstance(event, TakenOver):
            if event.incarnation <= h.incarnation:
                raise LifecycleError(f"zone lifecycle: a takeover at epoch {event.incarnation}, not past "
                                     f"{h.incarnation}")
            return replace(h, incarnation=event.incarnation, replica=None, joining=None)
        if isinstance(event, Ended):
            if isinstance(event.outcome, Left) or (isinstance(event.outcome, Rejoin) and event.outcome.handed_over):
                # handed over: a restart must not bring it back
                return replace(h, zone=None, replica=None, splitting=None, joining=None, merging=None)
            return h
        raise LifecycleError(f"zone lifecycle: unknown event {event!r}")

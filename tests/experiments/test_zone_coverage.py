"""experiments.zone_coverage: the share of the space the persisted zones cover, and ghosts."""

from __future__ import annotations

from eventcloud.overlay import CoordinateSpace, Neighbour, Zone
from experiments.zone_coverage import coverage, main, read_states
from peers.store import PeerState, save_state


def _states(tmp_path, *, drop_upper: bool = False):
    space = CoordinateSpace(mapping="identity")
    lower, upper = Zone(space.whole_space()).split()
    a = PeerState(id="a", address="h:1", zone_or_none=lower, neighbours={"b": Neighbour("h:2", upper)}, space=space)
    b = PeerState(id="b", address="h:2", zone_or_none=upper, neighbours={"a": Neighbour("h:1", lower)}, space=space)
    save_state(tmp_path / "peer-0", a)
    if not drop_upper:
        save_state(tmp_path / "peer-1", b)
    return read_states(tmp_path)


def test_zones_that_tile_the_space_cover_it_once(tmp_path):
    found = coverage(_states(tmp_path))
    assert found is not None and found.fraction == 1.0 and found.zones == 2 and found.ghosts == {}


def test_a_zone_nobody_holds_is_a_gap_and_its_last_owner_a_ghost(tmp_path, capsys):
    found = coverage(_states(tmp_path, drop_upper=True))
    assert found is not None and found.fraction == 0.5 and found.ghosts == {"b": 0.5}
    assert main([str(tmp_path), "--every", "0", "--seconds", "0.01"]) == 0
    assert "covered 0.5000 by 1 zones; named but held by no state: b (50.0%)" in capsys.readouterr().out


def test_no_state_yet_is_no_answer(tmp_path):
    assert coverage(read_states(tmp_path)) is None
    (tmp_path / "peer-0").mkdir()
    (tmp_path / "peer-0" / "peer.json").write_text("{not json")   # being rewritten
    assert coverage(read_states(tmp_path)) is None

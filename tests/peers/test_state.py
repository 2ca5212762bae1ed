"""A peer's saved identity: round trips, atomic writes, and clear refusals of unusable files."""

from __future__ import annotations

import json

import pytest

from eventcloud.errors import Unavailable
from eventcloud.overlay import CoordinateSpace, MergeUnderWay, Neighbour, Zone
from peers.config import PeerConfig, advertised_address
from peers.store import PeerState, StateError, load_state, save_state

SPACE = CoordinateSpace(mapping="identity")
ZONE = Zone(SPACE.whole_space())


def test_state_round_trips_through_its_file(tmp_path):
    lower, upper = ZONE.split()
    state = PeerState(id="abc", address="h:1", zone_or_none=lower, neighbours={"n": Neighbour("h:2", upper)},
                      space=SPACE, algorithm="csma", clock=99)
    save_state(tmp_path, state)
    assert load_state(tmp_path) == state
    assert not (tmp_path / "peer.tmp").exists()  # written to a temporary file, then renamed


def test_a_merge_under_way_round_trips_and_a_broken_one_is_refused(tmp_path):
    """Saved before the authority is asked (peers/membership/merges.py): a restart asks again."""
    lower, upper = ZONE.split()
    merge = MergeUnderWay("leaver", 3, "t0k", upper, {"x": Neighbour("h:3", upper)})
    state = PeerState(id="abc", address="h:1", zone_or_none=lower, space=SPACE, merging=merge)
    save_state(tmp_path, state)
    assert load_state(tmp_path).merging == merge
    data = state.to_json()
    data["merging"]["incarnation"] = "3"
    (tmp_path / "peer.json").write_text(json.dumps(data))
    with pytest.raises(StateError, match="invalid merge under way"):
        load_state(tmp_path)


def test_a_fresh_directory_has_no_state(tmp_path):
    assert load_state(tmp_path) is None


@pytest.mark.parametrize("content", ["{not json", "[]", '{"id": "x"}', json.dumps({
    "id": "x", "address": "h:1", "zone": [[["0", "1"]] * 4, [9]], "space": {}, "algorithm": "osma"}),
    json.dumps({"id": "x", "address": "h:1", "zone": None, "space": {}, "algorithm": "bogus"}),
    json.dumps({"id": "x", "address": "h:1", "zone": None, "space": {"mapping": "nope"}}),
    json.dumps({"id": "x", "address": "h:1", "zone": None, "space": {}, "clock": -5})])
def test_a_corrupt_state_file_is_refused_with_its_path(tmp_path, content):
    (tmp_path / "peer.json").write_text(content)
    with pytest.raises(StateError, match=r"corrupt peer state .*peer\.json.*move it away"):
        load_state(tmp_path)


def test_a_peer_without_zone_says_so():
    with pytest.raises(Unavailable, match="has no zone yet"):
        PeerState(id="p").zone  # noqa: B018


@pytest.mark.parametrize("knobs, words", [
    ({"algorithm": "bogus"}, "unknown algorithm 'bogus'"),
    ({"retry_window": 0}, "retry_window must be positive"),
    ({"workers": 0}, "workers must be a positive integer"),
    ({"max_inflight": 2.5}, "max_inflight must be a positive integer"),
    ({"stabilise_every": -1}, "stabilise_every"),
    ({"commit_later": 0}, "commit_later must be positive"),
    ({"commit_later": 5.0, "resolve_after": 3.0}, "resolve_after must be longer than commit_later"),
    ({"resolve_after": 30.0, "abort_after": 30.0}, "abort_after must be longer than resolve_after"),
])
def test_config_knobs_are_validated(knobs, words):
    with pytest.raises(ValueError, match=words):
        PeerConfig(**knobs)


def test_the_advertised_address():
    assert advertised_address("127.0.0.1:7000", None) == "127.0.0.1:7000"
    assert advertised_address("0.0.0.0:7000", "peer1") == "peer1:7000"
    assert advertised_address("0.0.0.0:7000", "peer1:0") == "peer1:7000"
    assert advertised_address("0.0.0.0:7000", "peer1:9000") == "peer1:9000"
    assert not advertised_address("0.0.0.0:7000", None).startswith("0.0.0.0")

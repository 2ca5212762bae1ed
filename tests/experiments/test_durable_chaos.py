"""The durable chaos check tells a killed subscriber's reprint from a real duplicate."""

from __future__ import annotations

from experiments.durable_chaos import _without_reprints


def note(seq: int, event: str) -> dict:
    return {"seq": seq, "event": event, "kind": "signal"}


def test_the_last_line_of_a_killed_subscriber_printed_again_first_is_a_reprint():
    first = [note(1, "a"), note(2, "b")]
    resumed = [note(2, "b"), note(3, "c")]     # killed after printing #2, before saving its place
    notes, reprints = _without_reprints([first, resumed])
    assert reprints == [note(2, "b")]
    assert [n["seq"] for n in notes] == [1, 2, 3]


def test_repeats_that_are_not_a_resumed_reprint_stay_in_the_lines():
    # same event under another number, a repeat inside one incarnation, a repeat of an older line
    cases = [
        [[note(1, "a"), note(2, "b")], [note(3, "b")]],
        [[note(1, "a"), note(1, "a")]],
        [[note(1, "a"), note(2, "b")], [note(1, "a"), note(3, "c")]],
        [[note(1, "a")], [note(2, "b"), note(1, "a")]],
    ]
    for printed in cases:
        notes, reprints = _without_reprints(printed)
        assert reprints == [] and len(notes) == sum(map(len, printed))


def test_an_incarnation_that_printed_nothing_does_not_hide_the_one_before():
    notes, reprints = _without_reprints([[note(1, "a")], [], [note(1, "a"), note(2, "b")]])
    assert reprints == [note(1, "a")] and [n["seq"] for n in notes] == [1, 2]

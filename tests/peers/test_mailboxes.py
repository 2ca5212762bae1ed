"""The mailbox of a durable subscription as a state machine of store mutations: numbering,
duplicates, retention with a gap, acknowledgement, ending, handover and replay give the same
result on every copy."""

from __future__ import annotations

from peers.store import mailboxes as mb
from peers.store import PeerStore

RECORD = {"sparql": "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }", "kind": "signal", "ticket": "h", "home": ["0"] * 4,
          "t": 1, "expires": 10_000, "retain_count": 5, "retain_bytes": 1000, "seen_ms": 60_000}


def _filled(n: int, ident: str = "a") -> mb.Mailboxes:
    boxes = mb.Mailboxes()
    boxes.apply(mb.box(ident, RECORD))
    for seq in range(1, n + 1):
        assert boxes.apply(mb.put(ident, seq, f"http://g/{seq}", seq * 10, b"x" * 10))
    return boxes


def test_numbers_are_kept_in_order_and_repeats_are_ignored():
    boxes = _filled(3)
    assert not boxes.apply(mb.put("a", 4, "http://g/2", 20, b"x"))   # the same event again
    assert not boxes.apply(mb.put("a", 2, "http://g/9", 90, b"x"))   # a number already used
    fetched = boxes.fetch("a", 0, 1 << 20)
    assert [seq for seq, _ in fetched.notes] == [1, 2, 3] and fetched.gap is None
    assert [seq for seq, _ in boxes.fetch("a", 2, 1 << 20).notes] == [3]
    assert [seq for seq, _ in boxes.fetch("a", 0, 15).notes] == [1]  # the byte budget (at least one)


def test_retention_overflow_leaves_a_gap_and_acknowledgement_frees():
    boxes = _filled(8)      # keeps 5: 1..3 dropped unacknowledged
    box = boxes.get("a")
    assert sorted(box.retained) == [4, 5, 6, 7, 8] and box.dropped_until == 3 and box.dropped == 3
    fetched = boxes.fetch("a", 1, 1 << 20)
    assert fetched.gap == (2, 3) and [s for s, _ in fetched.notes] == [4, 5, 6, 7, 8]
    assert boxes.fetch("a", 3, 1 << 20).gap is None
    assert boxes.apply(mb.ack("a", 6)) == 6
    assert sorted(box.retained) == [7, 8] and box.size == 20
    assert boxes.apply(mb.ack("a", 99)) == 8   # never past the newest


def test_ending_keeps_a_tombstone_and_drops_the_notifications():
    boxes = _filled(3)
    assert boxes.apply(mb.end("a", "expired", 5000))
    box = boxes.get("a")
    assert box.ended == "expired" and not box.retained and not box.seen
    assert not boxes.apply(mb.put("a", 4, "http://g/4", 40, b"x"))
    assert not boxes.apply(mb.lease("a", 99_999))
    assert boxes.apply(mb.forget("a")) and boxes.get("a") is None


def test_install_keeps_the_copy_that_is_further_along():
    boxes = _filled(4)
    older = _filled(2).get("a").pack()
    assert not boxes.apply(mb.install(older))
    newer = _filled(6).get("a").pack()
    assert boxes.apply(mb.install(newer)) and boxes.get("a").last == 6


def test_a_store_logs_replays_and_checkpoints_mailboxes(tmp_path):
    store = PeerStore(tmp_path / "s")
    store.write([mb.box("a", RECORD)])
    store.write([mb.put("a", seq, f"http://g/{seq}", seq, b"n%d" % seq) for seq in (1, 2, 3)])
    store.write([mb.ack("a", 1)])
    store._wal.close()   # a crash: the log only, no checkpoint
    del store
    again = PeerStore(tmp_path / "s")           # replayed from the log
    assert sorted(again.mailboxes.get("a").retained) == [2, 3]
    again.write([mb.put("a", 4, "http://g/4", 4, b"n4")])
    again.close()                                # checkpointed into the mailbox file
    third = PeerStore(tmp_path / "s")
    assert sorted(third.mailboxes.get("a").retained) == [2, 3, 4] and third.mailboxes.get("a").acked == 1
    third.close()


def test_malformed_mailbox_mutations_are_refused():
    import pytest

    from eventcloud.errors import BadRequest
    from peers.store import check_mutation

    for bad in (["box", "a", {"sparql": 1}], ["put", "a", "1", "g", 1, b""], ["install", b"\x00garbage"],
                ["ack", "a"], ["end", "a", "why", "when"]):
        with pytest.raises(BadRequest):
            check_mutation(bad)

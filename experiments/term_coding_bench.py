"""Term coding on the wire (issue 12): would per-connection IRI prefix dictionaries pay?

    python -m experiments.term_coding_bench [--events 2000] [--rounds 5]

Encodes the `deliver` frames an entry peer sends for the publish benchmark's events (5 quads
each, the whole event per delivery as OSMA sends it) and decodes them as an owner does (frame,
typed body, each triple with trusted terms), two ways, over one connection's stream of frames:

* `today`: the wire as it is (an IRI is its string, a literal [lexical, datatype]);
* `prefixes`: a per-connection dictionary: an IRI is [n, local name] where n numbers its
  namespace (the part up to the last `/` or `#`) on this connection, and a frame defines the
  namespaces it is the first to use (`px`); the receiver keeps the same table.

Prints bytes per frame and the CPU of coding one frame both ways (the minimum over `--rounds`
passes, to see past this machine's noise), and what that is per event at the publish
benchmark's 4.4 messages per event. Nothing here is wired into the peers: it measures whether
it should be.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import msgpack

from eventcloud.rdf.model import Quad
from eventcloud.wire.codec import triple_from_wire, triple_to_wire, trusted_iri
from eventcloud.wire.peer_messages import Deliver, Delivery
from experiments.workloads import generate


def _split(iri: str) -> tuple[str, str]:
    cut = max(iri.rfind("/"), iri.rfind("#")) + 1
    return iri[:cut], iri[cut:]


class PrefixEncoder:
    """One connection's sending side: namespaces numbered in the order first sent."""

    def __init__(self) -> None:
        self.table: dict[str, int] = {}

    def term(self, data: Any, fresh: dict[int, str]) -> Any:
        if type(data) is not str:
            return data
        prefix, local = _split(data)
        n = self.table.get(prefix)
        if n is None:
            n = self.table[prefix] = len(self.table)
            fresh[n] = prefix
        return [n, local]


class PrefixDecoder:
    """The receiving side: the same table, grown by each frame's `px`."""

    def __init__(self) -> None:
        self.table: list[str] = []

    def term(self, data: Any) -> Any:
        if type(data) is list and len(data) == 2 and type(data[0]) is int:
            return self.table[data[0]] + data[1]
        return data


def frames_today(bodies: list[Delivery]) -> list[bytes]:
    out = []
    for i, body in enumerate(bodies):  # each body built again, as the prefixed coding must
        quads = tuple(list(q) for q in body.quads)
        wire = Deliver((Delivery(body.graph, body.size, body.published, quads, body.take, body.whole, body.tx),)).to_wire()
        out.append(msgpack.packb({"k": "req", "op": "deliver", "id": i, "hlc": 1, "b": wire}))
    return out


def decode_today(frames: list[bytes]) -> list[Quad]:
    quads: list[Quad] = []
    for frame in frames:
        envelope = msgpack.unpackb(frame, raw=False, strict_map_key=True)
        for delivery in Deliver.from_wire(envelope["b"], trusted=True).deliveries:
            graph = trusted_iri(delivery.graph)
            quads.extend([triple_from_wire(graph, q, trusted=True) for q in delivery.quads])
    return quads


def frames_prefixed(bodies: list[Delivery]) -> list[bytes]:
    encoder, out = PrefixEncoder(), []
    for i, body in enumerate(bodies):
        fresh: dict[int, str] = {}
        quads = tuple([encoder.term(t, fresh) for t in q] for q in body.quads)
        wire = Deliver((Delivery(body.graph, body.size, body.published, quads, body.take, body.whole, body.tx),)).to_wire()
        out.append(msgpack.packb({"k": "req", "op": "deliver", "id": i, "hlc": 1, "b": wire, "px": fresh}))
    return out


def decode_prefixed(frames: list[bytes]) -> list[Quad]:
    decoder, quads = PrefixDecoder(), []
    for frame in frames:
        envelope = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        for n, prefix in sorted(envelope.get("px", {}).items()):
            assert n == len(decoder.table)
            decoder.table.append(prefix)
        for delivery in Deliver.from_wire(envelope["b"], trusted=True).deliveries:
            graph = trusted_iri(delivery.graph)
            quads.extend([triple_from_wire(graph, [decoder.term(t) for t in q], trusted=True) for q in delivery.quads])
    return quads


def best(fn: Any, arg: Any, rounds: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn(arg)
        times.append(time.perf_counter() - started)
    return min(times), result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    events = generate(events=args.events, subscriptions=1, k=5, seed=0).events
    bodies = [Delivery(e.graph.value, len(e.quads), 1, tuple(triple_to_wire(q) for q in e.quads)) for e in events]
    rows = []
    for name, encode, decode in (("today", frames_today, decode_today), ("prefixes", frames_prefixed, decode_prefixed)):
        enc_s, frames = best(encode, bodies, args.rounds)
        dec_s, quads = best(decode, frames, args.rounds)
        assert quads == [q for e in events for q in e.quads]
        rows.append((name, sum(map(len, frames)) / len(frames), enc_s / len(frames) * 1e6, dec_s / len(frames) * 1e6))
    base = rows[0]
    print(f"{args.events} deliver frames of 5 quads (the publish benchmark's events), one connection; "
          f"best of {args.rounds} passes\n")
    print("| coding | bytes per frame | encode µs per frame | decode µs per frame | CPU µs per event at 4.4 messages |")
    print("|---|---:|---:|---:|---:|")
    for name, size, enc, dec in rows:
        print(f"| {name} | {size:,.0f} ({size / base[1]:.0%}) | {enc:.1f} | {dec:.1f} | {(enc + dec) * 4.4:.0f} |")


if __name__ == "__main__":
    main()

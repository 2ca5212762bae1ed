"""The `eventcloud` command line's arguments: one subparser per command, with its help."""

from __future__ import annotations

import argparse
from pathlib import Path

from eventcloud.cli.credentials import SECRET_ENV, TOKEN_ENV, add_client_options
from eventcloud.net.transport import AddressError, parse_address

__all__ = ["build_parser"]


def _address(text: str) -> str:
    try:
        parse_address(text)
    except AddressError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _at_least(minimum: float, kind: type = int):  # type: ignore[no-untyped-def]
    """An argparse type: a number of `kind` not below `minimum`."""
    def parse(text: str):  # type: ignore[no-untyped-def]
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value < minimum or value != value:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _positive_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of events per second above 0, got {text}")
    return value


def _operator_options(p: argparse.ArgumentParser) -> None:
    """Operators FILTERs may call (docs/matching.md, "Operators"); every peer needs the same set."""
    p.add_argument("--operators", action="append", default=[], metavar="MODULE",
                   help="a Python module exposing OPERATORS to register (repeatable; installed plugins of the "
                        "eventcloud.operators entry-point group are loaded too)")
    p.add_argument("--no-operator-plugins", action="store_true",
                   help="do not load installed eventcloud.operators plugins")
    p.add_argument("--evaluation-order", choices=("naive", "sequential", "suborder"), default="suborder",
                   help="order of residual operator predicates [suborder]")
    p.add_argument("--operator-budget", type=float, default=2.0, metavar="SECONDS",
                   help="time one operator call may take before its FILTER counts as false [2]")
    p.add_argument("--statistics", type=Path, metavar="FILE",
                   help="offline predicate statistics to start from (experiments/spark/statistics.py)")


def _security_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--secret-file", type=Path, metavar="FILE",
                   help=f"file holding the cluster secret every peer of the overlay shares (or set {SECRET_ENV}); "
                        f"without one, any client may use peer operations")
    p.add_argument("--admin-token-file", type=Path, metavar="FILE",
                   help=f"file holding the admin token that leave and delete require (or set {TOKEN_ENV})")
    p.add_argument("--publish-policy", type=Path, metavar="FILE",
                   help='JSON file {"TOKEN": ["http://graph-prefix/", ...], ...}: publishing then needs a token, '
                        'and a token publishes only under its prefixes (give every peer the same file)')
    p.add_argument("--max-connections", type=int, default=1024, metavar="N",
                   help="connections served at once [1024]")
    p.add_argument("--max-per-address", type=int, default=256, metavar="N",
                   help="connections without credentials one host may hold; past it the least active one that holds "
                        "nothing makes room [256]")
    p.add_argument("--reserved-connections", type=int, default=64, metavar="N",
                   help="slots kept for connections proving the cluster secret or the admin token [64]")
    p.add_argument("--first-request-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="a new connection that asks nothing this long is closed [10]")
    p.add_argument("--tls-cert", type=Path, metavar="FILE",
                   help="serve and connect with TLS, with this certificate chain (PEM); it must name the "
                        "advertised host")
    p.add_argument("--tls-key", type=Path, metavar="FILE", help="the private key of --tls-cert (PEM)")
    p.add_argument("--tls-ca", type=Path, metavar="FILE",
                   help="verify other peers' certificates against this CA (PEM) [the system's CAs]")


def _ticket_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ticket-file", type=Path, metavar="FILE",
                   help="file holding the subscription's ticket (or set EVENTCLOUD_TICKET) [from the state dir]")
    p.add_argument("--state-dir", type=Path, metavar="DIR",
                   help="where durable subscribers keep their ticket and place (or set EVENTCLOUD_STATE_DIR) "
                        "[~/.local/state/eventcloud]")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eventcloud",
        description="EventCloud: a distributed publish/subscribe system and store for RDF events "
                    "on a 4-D CAN overlay (graph, subject, predicate, object).",
        epilog="Start with `eventcloud demo`, or `eventcloud cluster --peers 4` in one terminal and "
               "`eventcloud subscribe`/`eventcloud publish` against the printed address in others.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("peer", help="run one peer daemon in the foreground",
                       description="Run one peer daemon. Without --join it starts a new overlay; with "
                                   "--join it enters the overlay through that peer. Restarted with the same "
                                   "--data-dir it returns with its zone and data. Stops on SIGTERM/Ctrl-C.")
    p.add_argument("--listen", type=_address, default="127.0.0.1:0", help="HOST:PORT to listen on (port 0: any free port)")
    p.add_argument("--join", type=_address, help="HOST:PORT of any peer of the overlay to join")
    p.add_argument("--advertise", help="HOST[:PORT] other peers use to reach this one (default: the listen "
                                       "address; this host's address when listening on 0.0.0.0)")
    p.add_argument("--data-dir", required=True, type=Path, help="directory for this peer's store and state")
    p.add_argument("--algorithm", choices=("osma", "csma"), default="osma",
                   help="matching algorithm of a new overlay (joining peers learn it) [osma]")
    p.add_argument("--mapping", choices=("local-name", "identity"), default="local-name",
                   help="term-to-coordinate mapping of a new overlay [local-name]")
    p.add_argument("--log-level", default="warning", help="debug, info, warning, error [warning]")
    p.add_argument("--seed", type=int, help="seed of the random join point (reproducible experiments)")
    p.add_argument("--replicas", type=int, choices=(1, 2), default=2,
                   help="copies of every zone in a new overlay: 2 survives the loss of any one peer [2]")
    p.add_argument("--no-fsync", action="store_true",
                   help="acknowledge writes once the OS has them (faster; a machine crash may lose the last ones)")
    p.add_argument("--failure-timeout", type=float, default=3.0,
                   help="seconds without an answer before a replica takes a peer's zone over [3]")
    p.add_argument("--authority", metavar="URL",
                   help="the ownership authority that decides who owns each zone: etcd://H1:2379,H2:2379,... "
                        "(a zone is taken over only once its owner's lease there lapsed; docs/reliability.md). "
                        "Default: the first peer (no --join) hosts one in its data directory and the peers joining "
                        "use it; 'none': each peer decides alone, and a partition can depose a live owner")
    p.add_argument("--lease-ttl", type=int, default=0, metavar="SECONDS",
                   help="an owner's lease with the authority: a crashed owner's zone is taken over no sooner; "
                        "raise it for links whose queues hold seconds of traffic (0: four times --failure-timeout, "
                        "at least 10) [0]")
    p.add_argument("--query-budget", type=float, default=30.0, metavar="SECONDS",
                   help="a one-time query that joins several patterns is stopped after this long [30]")
    p.add_argument("--query-memory", type=int, default=2048, metavar="MB",
                   help="... or once its evaluation needs more memory than this [2048]")
    p.add_argument("--rebalance-every", type=float, default=10.0, metavar="SECONDS",
                   help="this often (with jitter), a peer holding far fewer quads than the busiest one it finds "
                        "hands its zone to a neighbour and rejoins splitting that busiest zone (0: never) [10]")
    p.add_argument("--rebalance-ratio", type=float, default=4.0, metavar="R",
                   help="... when the busiest holds at least R times its quads (R >= 2) [4]")
    p.add_argument("--rebalance-min-quads", type=int, default=10_000, metavar="N",
                   help="... and at least N quads [10000]")
    p.add_argument("--rebalance-make-room", action=argparse.BooleanOptionalAction, default=True,
                   help="... and an empty peer that cannot leave asks neighbours to step aside until it can "
                        "(docs/overlay.md, 'Making room') [on]")
    p.add_argument("--neighbour-limit", type=int, default=48, metavar="N",
                   help="a peer with more neighbours cuts off an empty side of its zone for another host's "
                        "process to run as an extra peer, an annex (docs/overlay.md, 'Annex zones'; 0: never) [48]")
    p.add_argument("--host-neighbour-cap", type=int, default=64, metavar="N",
                   help="... a host that stays within N neighbours with it, over all the peers it runs [64]")
    p.add_argument("--annex-every", type=float, default=30.0, metavar="SECONDS",
                   help="... looking this often (with jitter) [30]")
    p.add_argument("--retain-count", type=int, default=10_000, metavar="N",
                   help="unacknowledged notifications kept per durable subscription homed here; older ones "
                        "are dropped with a gap notice [10000]")
    p.add_argument("--retain-bytes", type=int, default=16 * 1024 * 1024, metavar="BYTES",
                   help="... and their bytes [16 MiB]")
    p.add_argument("--lease-max", type=float, default=30 * 86_400.0, metavar="SECONDS",
                   help="longest lease a subscription may ask for [30 days]")
    p.add_argument("--max-clock-offset", type=float, default=30.0, metavar="SECONDS",
                   help="how far this host's clock may be from other peers' (under 60): a peer further off is "
                        "refused at join, and one whose clock jumps that far stops serving (docs/reliability.md, "
                        "'Clocks') [30]")
    p.add_argument("--stop-with-stdin", action="store_true",
                   help="stop (as on SIGTERM) once standard input is closed: a supervisor that starts the peer "
                        "with a pipe takes the peer with it when it dies, even by kill -9 (`eventcloud cluster` does)")
    _security_options(p)
    _operator_options(p)

    p = sub.add_parser("cluster", help="start N local peer processes and keep them running",
                       description="Start N peer processes on this machine (the first on --port, the others on "
                                   "the next ports; --port 0 picks free ports). Prints the entry address on its "
                                   "first line, runs until interrupted, then stops every peer. A peer that exits "
                                   "(a crash, kill -9) is restarted with its command, on its port, so the printed "
                                   "address keeps working; one that left the overlay is not, nor one that exits "
                                   "3 times within a minute.")
    p.add_argument("--peers", type=_at_least(1), default=4, help="number of peers [4]")
    p.add_argument("--data-dir", type=Path, help="directory for the peers' data (default: a temporary one, removed at exit)")
    p.add_argument("--port", type=_at_least(0), default=0, help="port of the first peer [0 = free ports]")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on [127.0.0.1]")
    p.add_argument("--algorithm", choices=("osma", "csma"), default="osma", help="matching algorithm [osma]")
    p.add_argument("--mapping", choices=("local-name", "identity"), default="local-name", help="coordinate mapping [local-name]")
    p.add_argument("--replicas", type=int, choices=(1, 2), default=2, help="copies of every zone [2]")
    p.add_argument("--no-fsync", action="store_true", help="do not fsync before acknowledging writes")
    p.add_argument("--open", action="store_true",
                   help="no cluster secret and no admin token (any client may use peer operations)")
    p.add_argument("--tls-cert", type=Path, metavar="FILE", help="serve TLS with this certificate chain (PEM)")
    p.add_argument("--tls-key", type=Path, metavar="FILE", help="... and this private key (PEM)")
    p.add_argument("--tls-ca", type=Path, metavar="FILE", help="... verifying peers against this CA (PEM)")
    p.add_argument("--authority", metavar="URL",
                   help="an etcd the peers use as their ownership authority (etcd://H1:2379,...); default: one "
                        "served from this process")
    p.add_argument("--rebalance-every", type=float, metavar="SECONDS",
                   help="the peers' rebalancer: a light peer moves to the busiest zone it finds, looking this "
                        "often (0: never; `eventcloud peer --help` has the other knobs) [10]")
    _operator_options(p)

    p = sub.add_parser("publish", help="publish the events of RDF files, CityBench streams or stdin",
                       description="Publish compound events read from RDF files: N-Quads/TriG (each named graph is "
                                   "one event; they stream, an event's quads must be together) or Turtle/N-Triples/"
                                   "N3/RDF-XML (each file is one event); CityBench sensor streams (.stream, .csv: one "
                                   "event per reading, an SSN observation naming its sensor and property); a directory "
                                   "(its files with those extensions); - for stdin (N-Quads unless --format). Files are "
                                   "checked first: nothing of a malformed file is published. Big files stream with "
                                   "bounded memory and show progress; --rate replays at a given pace; Ctrl-C stops and "
                                   "says what was stored.")
    add_client_options(p, address=_address)
    p.add_argument("--format", choices=("nquads", "trig", "turtle", "ntriples", "n3", "rdfxml", "citybench"),
                   help="input format (default: from the extension)")
    p.add_argument("--source", default="cli", help="source id used to name events without a graph [cli]")
    p.add_argument("--concurrency", type=_at_least(1), default=4, help="requests in flight at once [4]")
    p.add_argument("--batch", type=_at_least(1), default=50, help="events per request (each stays atomic) [50]")
    p.add_argument("--rate", type=_positive_rate, metavar="EVENTS_PER_S",
                   help="publish at this pace (a replay of sensor streams), not as fast as possible")
    p.add_argument("--progress", action="store_true",
                   help="show progress on stderr even when it is not a terminal (it is shown there, and for inputs "
                        "over 8 MB)")
    p.add_argument("files", nargs="+", metavar="FILE", help="file, directory, or - for stdin")

    p = sub.add_parser("query", help="run a one-time SPARQL query over everything stored",
                       description="Run a one-time SPARQL 1.1 query (SELECT, ASK, CONSTRUCT, aggregates) over all "
                                   "stored quads. Use GRAPH ?g { … } to see events' graphs; the default graph is "
                                   "the union of all events.")
    add_client_options(p, address=_address)
    p.add_argument("--format", default="table",
                   choices=("table", "json", "csv", "tsv", "xml", "ntriples", "turtle", "nquads", "rdfxml"),
                   help="SELECT/ASK: table, json, csv, tsv or xml (SPARQL 1.1 results formats); CONSTRUCT/DESCRIBE: "
                        "ntriples (also for table), turtle, nquads, rdfxml or json (JSON-LD) [table]")
    p.add_argument("--file", metavar="FILE", help="read the query from FILE")
    p.add_argument("sparql", nargs="?", help="the query text; - reads it from stdin, @FILE from a file")

    for command, help_text, description in (
            ("find", "find stored quads by pattern (or count them)",
             "Print the stored quads matching a pattern as N-Quads; each of -g -s -p -o is a term in N-Triples "
             "syntax (<iri>, \"lit\", \"5\"^^<dt>), omitted = any."),
            ("dump", "export every stored quad (or those of a pattern), streamed",
             "Write every stored quad, or those matching -g -s -p -o, as N-Quads or TriG, a page at a time as the "
             "peers send them (an export of any size holds one page in memory); with --output, to FILE, saying how "
             "many were written. Each term is in N-Triples syntax (<iri>, \"lit\", \"5\"^^<dt>), omitted = any.")):
        p = sub.add_parser(command, help=help_text, description=description)
        add_client_options(p, address=_address)
        for flag, name in (("-g", "graph"), ("-s", "subject"), ("-p", "predicate"), ("-o", "object")):
            p.add_argument(flag, f"--{name}", help=f"the {name} term (N-Triples syntax)")
        if command == "find":
            p.add_argument("--count", action="store_true", help="print only how many quads match")
        else:
            p.add_argument("--format", choices=("nquads", "trig"), default="nquads",
                           help="N-Quads (a quad a line) or TriG (each event's graph as a block) [nquads]")
            p.add_argument("--output", metavar="FILE", help="write to FILE (default: standard output)")

    p = sub.add_parser("delete", help="delete a compound event (all its quads) by graph IRI",
                       description="Delete a compound event, every quad of its graph IRI, from every peer; the IRI "
                                   "is then free for another event (a graph IRI holds one event's content). "
                                   "Needs the overlay's admin token: --admin-token-file FILE (eventcloud cluster "
                                   "writes it to DATA_DIR/admin.token) or EVENTCLOUD_ADMIN_TOKEN.")
    add_client_options(p, address=_address)
    p.add_argument("graph", help="the event's graph IRI (with or without <>)")

    p = sub.add_parser("status", help="show every peer: address, zone, quads, subscriptions, neighbours",
                       description="Show every peer of the overlay (id, address, quads, subscriptions, neighbours, "
                                   "zone), the totals (each event and subscription counted once, though several "
                                   "peers hold it), and whether the zones tile the space. Peers that do not answer "
                                   "are shown as down.")
    add_client_options(p, address=_address)
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="a table for people, or the JSON of GET /status [table]")

    p = sub.add_parser("leave", help="make a peer leave the overlay gracefully and stop",
                       description="Ask the peer at --peer to hand its zone, quads and subscriptions to a neighbour "
                                   "whose zone merges with it, then stop. (SIGTERM only stops a peer: it keeps its "
                                   "zone and comes back with it when restarted.)")
    add_client_options(p, "the peer that leaves", _address)

    p = sub.add_parser("subscribe", help="subscribe with SPARQL and print notifications as they arrive",
                       description="Register a SPARQL continuous query and print a notification for every matching "
                                   "compound event published afterwards, until interrupted. In jsonl format the first "
                                   'line is {"subscription": ID, "status": "active", …} (with the ticket of a durable '
                                   "one). A durable subscription survives this process and its entry peer: its "
                                   "notifications are kept until printed; `--resume ID` continues after the last line "
                                   "printed (reconnections are shown on stderr).")
    add_client_options(p, address=_address)
    p.add_argument("--kind", choices=("signal", "bindings", "event"), default="bindings",
                   help="signal (id and event), bindings (all solutions) or event (all quads) [bindings]")
    p.add_argument("--format", choices=("jsonl", "nquads", "table"), default="jsonl",
                   help="a JSON object a line, an event's quads as N-Quads (with --kind event), or a table [jsonl]")
    p.add_argument("--count", type=_at_least(0), metavar="N",
                   help="exit after N notifications (0: once the subscription is active, e.g. to make a durable one)")
    p.add_argument("--durable", action="store_true",
                   help="keep notifications while nobody listens; resume with --resume ID (ticket in the state dir)")
    p.add_argument("--lease", type=float, help="durable: seconds until it ends unless renewed [a day]")
    p.add_argument("--resume", metavar="ID", help="continue a durable subscription (no SPARQL then)")
    p.add_argument("--after", type=int, metavar="N",
                   help="with --resume: the notifications numbered after N [the last printed, else acknowledged]")
    _ticket_options(p)
    p.add_argument("sparql", nargs="?", help="the subscription: SELECT … WHERE { GRAPH ?g { … } FILTER(…) }")

    p = sub.add_parser("subscriptions", help="list subscriptions, renew or cancel one",
                       description="`list` shows every subscription of the overlay (needs the admin token where one "
                                   "is set); `renew ID` extends a durable subscription's lease and `cancel ID` ends it, "
                                   "with its ticket (or any subscription with --admin and the admin token).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("list", help="every subscription (never tickets)",
                           description="List every subscription of the overlay: id, kind, lease, the peers that "
                                       "hold it, its notifications (last numbered, acknowledged, kept) and its "
                                       "SPARQL. Needs the admin token where the overlay has one.")
    add_client_options(q, address=_address)
    q.add_argument("--format", choices=("table", "json"), default="table", help="a table, or JSON [table]")
    for name, text, description in (
            ("renew", "extend a durable subscription's lease",
             "Extend a durable subscription's lease to --lease seconds from now. Needs its ticket: from the state "
             "dir of the `eventcloud subscribe --durable` that made it, --ticket-file or EVENTCLOUD_TICKET."),
            ("cancel", "end a subscription",
             "End a subscription: nothing more is kept or sent for it. Needs its ticket (from the state dir of "
             "the `eventcloud subscribe` that made it, --ticket-file or EVENTCLOUD_TICKET), or --admin with the "
             "overlay's admin token.")):
        q = actions.add_parser(name, help=text, description=description)
        add_client_options(q, address=_address)
        q.add_argument("id", metavar="ID", help="the subscription's id (as `subscribe` and `subscriptions list` "
                                                "print it)")
        _ticket_options(q)
        if name == "renew":
            q.add_argument("--lease", type=float, help="seconds from now [a day]")
        else:
            q.add_argument("--admin", action="store_true", help="cancel any subscription with the admin token")

    p = sub.add_parser("schema", help="load or show the class taxonomy (rdfs:subClassOf) is-a subscriptions read",
                       description="`load FILE` makes the rdfs:subClassOf triples of an RDF file the overlay's class "
                                   "taxonomy (a new version, on every peer; needs the admin token where one is set); "
                                   "`show` prints it and each peer's version.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("load", help="load a taxonomy from an RDF file (Turtle, RDF/XML, N-Triples, …)",
                           description="Make the rdfs:subClassOf triples of FILE the overlay's class taxonomy, as a "
                                       "new version on every peer (other triples are ignored). Is-a subscriptions "
                                       "and one-time queries read it. Needs the admin token where the overlay has "
                                       "one.")
    add_client_options(q, address=_address)
    q.add_argument("file", metavar="FILE", help="an RDF file holding rdfs:subClassOf triples")
    q.add_argument("--format", choices=("turtle", "rdfxml", "ntriples", "n3", "trig", "nquads"),
                   help="FILE's RDF format [from the extension]")
    q = actions.add_parser("show", help="the current taxonomy and each peer's version",
                           description="Print the overlay's class taxonomy (its version, edges and digest) and "
                                       "the version each peer holds: every peer should show the same.")
    add_client_options(q, address=_address)
    q.add_argument("--format", dest="format_out", choices=("table", "turtle", "json"), default="table",
                   help="a summary and each peer's version, the edges as Turtle, or JSON [table]")

    p = sub.add_parser("gateway", help="serve the overlay over HTTP: SPARQL, publishing, SSE/WebSocket, dashboard",
                       description="An HTTP gateway in front of the peers given: the SPARQL 1.1 Protocol at /sparql, "
                                   "publishing by POST /events, live subscriptions over Server-Sent Events "
                                   "(/subscriptions/stream?query=…) and WebSocket (/ws), GET /status and a dashboard "
                                   "at /. With an admin token, every route but the dashboard's page, /health and /status needs "
                                   "`Authorization: Bearer TOKEN`. See docs/web.md.")
    add_client_options(p, address=_address)
    p.add_argument("--listen", type=_address, default="127.0.0.1:8080", help="HOST:PORT to serve HTTP on [127.0.0.1:8080]")
    p.add_argument("--cors", action="append", metavar="ORIGIN",
                   help="allow browsers on this origin (e.g. https://app.example) to call the gateway; * for any; "
                        "repeat for several")
    p.add_argument("--max-body", type=int, default=64 * 1024 * 1024, metavar="BYTES",
                   help="largest request body accepted (publishing) [64 MiB]")
    p.add_argument("--ack-delay", type=float, default=30.0, metavar="SECONDS",
                   help="a streamed notification is acknowledged to the overlay this long after it was sent, so a "
                        "client reconnecting within it loses nothing [30]")
    p.add_argument("--linger", type=float, default=300.0, metavar="SECONDS",
                   help="an ad-hoc SSE subscription whose client left is kept this long for it to resume [300]")
    p.add_argument("--log-level", default="warning", help="debug, info, warning, error [warning]")

    p = sub.add_parser("demo", help="the main job: a local cluster, a subscriber and a publisher",
                       description="Start a local cluster, subscribe to high sensor readings, publish Aarhus "
                                   "sensor observations (CityBench) and print the notifications as they arrive. "
                                   "The readings are the real ones when shared/data/citybench is beside the "
                                   "checkout, else synthetic ones of the same shape (the demo says which; the "
                                   "README's 'CityBench data' says how to get the real ones).")
    p.add_argument("--peers", type=_at_least(1), default=4, help="peer processes to start [4]")
    p.add_argument("--events", type=_at_least(1), default=60, help="events to publish [60]")
    p.add_argument("--algorithm", choices=("osma", "csma"), default="osma",
                   help="matching algorithm: one step (osma) or chained rewriting (csma) [osma]")
    return parser

"""The EventCloud peer daemon, one folder per concept, bottom to top.

    config.py, tasks.py   every knob; a request's steps at once; long-lived tasks' starters
    store/                what a peer keeps on disk, and the log that makes writes durable
    net/                  reaching other peers: connections, unicast, multicast, dispatch, auth
    process/              the peers one daemon process runs, and starting another
    replication/          the owner's writes on its replica; the replica's copies and takeover
    matching/             subscriptions stored here, OSMA and CSMA, operators, taxonomy
    publish/              an event's quads to their owners, the two-phase decision
    queries/              find, count, one-time SPARQL, delete, status
    delivery/             subscribers at their entry, durable subscriptions' homes
    membership/           join, leave, handover, stabilisation, rebalancing, annexes
    runtime/              building the services and running one peer
    supervisor/           a local cluster of peer processes

A folder imports only the folders above it in this list (and `eventcloud`), and another folder
only through its package; tests/test_architecture.py checks both.
"""

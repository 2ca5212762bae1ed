"""The publish benchmark's comparison with a baseline commit passes each tree only the options
its own benchmark knows (an older one may predate replication), and says which it left out."""

from __future__ import annotations

from experiments.pubsub_bench import _own_options

HELP = "usage: pubsub_bench [--peers PEERS] [--events EVENTS] [--k K] [--batch BATCH] [--repeat REPEAT]"


def test_options_a_tree_does_not_know_are_left_out_of_its_runs_and_named() -> None:
    argv = ["--peers", "8", "--events=200", "--baseline", "076716a", "--repeat", "2", "--replicas", "1",
            "--no-fsync", "--algorithms", "osma,csma", "--k", "5", "--keep-going"]
    kept, dropped = _own_options(argv, HELP)
    assert kept == ["--peers", "8", "--events=200", "--k", "5"]
    assert dropped == ["--replicas", "1", "--no-fsync", "--keep-going"]  # "--k" is no prefix of "--keep-going"


def test_a_tree_that_knows_every_option_gets_them_all() -> None:
    kept, dropped = _own_options(["--batch", "50", "--no-fsync"], HELP + " [--no-fsync]")
    assert kept == ["--batch", "50", "--no-fsync"] and dropped == []

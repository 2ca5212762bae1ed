"""rdflib's SPARQL parser used from several threads at once (peers/matching/parsing.py).

pyparsing's parse actions learn their arity on first use without a lock: in a fresh process,
four threads parsing subscriptions and one-time queries at once broke nearly every parse, for
good ("Param.postParse2() missing 1 required positional argument: 'tokenList'"); 11–12 of 12
failed in each of five runs without the lock. The check needs a fresh interpreter (this one
has parsed already), so it runs in a child process.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r'''
import threading
from peers.matching import analyse_locked, parse_subscription_locked
EX = "http://ex.org/"
QUERIES = [f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?v . ?s <{EX}p1> ?w }} }}",
           "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g1 { ?a ?b ?c } GRAPH ?g2 { ?d ?e ?f } }",
           f"SELECT * WHERE {{ GRAPH ?g {{ ?s ?p ?o FILTER(?o > 3 && REGEX(STR(?s), 'x')) }} }} ORDER BY ?s LIMIT 3"]
SUBSCRIPTIONS = [f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p> ?v FILTER(?v > {i}) }} }}" for i in range(3)]
errors = []
start = threading.Barrier(4)

def work(i):
    start.wait()
    for k in range(3):
        try:
            if i % 2:
                analyse_locked(QUERIES[(i + k) % 3])
            else:
                parse_subscription_locked(SUBSCRIPTIONS[(i + k) % 3])
        except Exception as exc:
            errors.append(repr(exc))

threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
analyse_locked(QUERIES[0])  # and the parser still works afterwards
print(len(errors), errors[:2])
'''


def test_parses_from_several_threads_in_a_fresh_process_all_succeed() -> None:
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "0 []", done.stdout

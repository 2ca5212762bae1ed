"""The Spark statistics job: history + notification logs -> a statistics file peers start from."""

from __future__ import annotations

import json
import random

import pytest

from eventcloud.matching.statistics import Statistics
from eventcloud.rdf.files import write_nquads
from eventcloud.testing.operator_workload import overlapping_workload, reading
from experiments.spark import statistics as job
from peers.matching import load_statistics

pytestmark = pytest.mark.spark


def test_statistics_from_history_and_notifications(tmp_path):
    pytest.importorskip("pyspark")
    rng = random.Random(2)
    texts = [t for t in dict.fromkeys(overlapping_workload(rng, 30))
             if not any(f"t:{name}(" in t for name in ("near", "fails", "slow"))]  # city operators only
    assert len(texts) >= 3
    (tmp_path / "subs.txt").write_text("\n\n".join(texts))
    events = [reading(random.Random(n), n) for n in range(12)]
    with open(tmp_path / "history.nq", "w") as out:
        write_nquads(events, out)
    log = tmp_path / "logs"
    log.mkdir()
    (log / "sub.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"type": "notification", "scenario": "s", "x": 1, "run": 0, "algorithm": "osma", "subscription": a,
         "event": e, "time": 1.0} for a, e in [("s0", "e1"), ("s1", "e1"), ("s0", "e2"), ("s1", "e2"), ("s2", "e2")]]))
    out = tmp_path / "stats.json"
    assert job.main(["--history", str(tmp_path / "history.nq"), "--subscriptions", str(tmp_path / "subs.txt"),
                     "--operators", "eventcloud.operators.city", "--notifications", str(log), "--out", str(out),
                     "--master", "local[2]", "--partitions", "2"]) == 0
    stats = load_statistics(out)
    document = json.loads(out.read_text())
    assert document["events"] == 12 and document["templates"]
    assert set(document["operators"]) <= {"http://eventcloud.io/ns/geo#distance",
                                          "http://eventcloud.io/ns/geo#withinRadius",
                                          "http://eventcloud.io/ns/geo#withinPolygon"}
    assert document["operators"]
    assert stats.matched_together("s0", "s1") == 2 and stats.matched_together("s1", "s2") == 1
    # the counts equal evaluating every candidate's predicates directly
    direct = Statistics()
    for record in job.evaluate_partition(events, texts, ["eventcloud.operators.city"]):
        if record["kind"] == "template":
            direct.observe_predicate(record["name"], record["value"])
    assert {t: r for t, r in document["templates"].items()} == direct.to_dict()["templates"]

"""Events for the demo: real Aarhus sensor readings (CityBench) when shared/data is there."""

from __future__ import annotations

import os
from pathlib import Path

from eventcloud.rdf.model import CompoundEvent


def citybench_dir() -> Path | None:
    """Where the CityBench data is: $EVENTCLOUD_CITYBENCH, or shared/data/citybench beside the repo."""
    candidates = [os.environ.get("EVENTCLOUD_CITYBENCH"),
                  Path(__file__).resolve().parents[2] / "shared" / "data" / "citybench",
                  Path.cwd().parent / "shared" / "data" / "citybench"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def demo_events(n: int) -> list[CompoundEvent]:
    """`n` sensor-observation events: CityBench parking and traffic readings if available,
    else readings synthesised in the same vocabulary (and the demo says so)."""
    from eventcloud.rdf.citybench import sample_events

    directory = citybench_dir()
    if directory is not None:
        return sample_events(directory, n)
    return _synthetic(n)


def _synthetic(n: int) -> list[CompoundEvent]:
    import random

    from eventcloud.rdf.citybench import _HAS_VALUE, _OBSERVATION, _OBSERVED_BY, _RDF_TYPE, SES
    from eventcloud.rdf.model import IRI, XSD, Literal, event_graph

    rng = random.Random(7)
    events = []
    for i in range(n):
        graph = event_graph("synthetic-sensor", 1_400_000_000_000 + i * 300_000, i)
        obs = IRI(f"{SES}Observation-synthetic-{i}")
        events.append(CompoundEvent.from_triples(graph, [
            (obs, _RDF_TYPE, _OBSERVATION),
            (obs, _OBSERVED_BY, IRI(f"{SES}SyntheticSensor{i % 4}")),
            (obs, _HAS_VALUE, Literal(str(rng.randint(0, 60)), XSD + "integer")),
        ]))
    return events

"""CityBench sensor streams (Aarhus, 2014) as compound events: realistic input for demos and tests.

Each CSV row becomes one compound event holding one SSN observation per measured column, in
the vocabulary of CityBench's own stream annotations and datasets (CityBench `DataWrapper`,
`AarhusLibraryEvents.n3`):

    <obs>     a ssn:Observation ;
              ssn:observedBy <sensor> ;            # e.g. :AarhusTrafficData158324
              ssn:observedProperty <property> ;    # the sensor's property in SensorRepository.n3
              sao:hasValue "50"^^xsd:integer ;
              sao:time <instant> .
    <property> a ct:AvgSpeed .                     # so subscriptions can select by kind
    <instant> a tl:Instant ; tl:at "2014-08-01T07:50:00"^^xsd:dateTime .

`sao:` is CityBench's `http://purl.oclc.org/NET/sao/` (not the later UNIS SAO namespace), so
CityBench's queries (`?ob sao:hasValue ?v`) work unchanged. Sensor and property IRIs are the
ones of SensorRepository.n3 for the streams shipped in shared/data; readings of other sensors
get `:<sensor>-<Kind>` properties. Values keep the CSV's lexical form (xsd:integer or
xsd:decimal); the parking value is CityBench's vacancy count, totalspaces - vehiclecount
(negative when a garage reports more cars than spaces, as the raw data sometimes does).

The data carry no time zone: literals stay zone-less, and the graph IRI's timestamp_ms reads
the time as UTC. The graph is `event_graph(<sensor>, timestamp_ms, <data row number>)`.
An empty cell is a missing reading (its observation is left out); a row with no reading at
all, or a blank line, yields no event. Anything else malformed raises `CityBenchError`
naming file and line.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
import random
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterator, Mapping

from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal, Quad, event_graph
from eventcloud.rdf.files import RDFInputError

__all__ = [
    "CityBenchError",
    "KINDS",
    "STREAMS",
    "Reading",
    "StreamKind",
    "property_iri",
    "read_stream",
    "sample_events",
    "synthetic_events",
    "HAS_VALUE",
]

SSN = "http://purl.oclc.org/NET/ssnx/ssn#"
SAO = "http://purl.oclc.org/NET/sao/"
TL = "http://purl.org/NET/c4dm/timeline.owl#"
CT = "http://www.insight-centre.org/citytraffic#"
#: CityBench's namespace for sensors, properties and observations (SensorRepository.n3's `:`).
SES = "http://www.insight-centre.org/dataset/SampleEventService#"

_RDF_TYPE = IRI(RDF + "type")
_OBSERVATION = IRI(SSN + "Observation")
_OBSERVED_BY = IRI(SSN + "observedBy")
_OBSERVED_PROPERTY = IRI(SSN + "observedProperty")
HAS_VALUE = IRI(SAO + "hasValue")
_TIME = IRI(SAO + "time")
_INSTANT = IRI(TL + "Instant")
_AT = IRI(TL + "at")

_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?")
_NOT_SOURCE = re.compile(r"[^A-Za-z0-9._-]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MILLISECOND = timedelta(milliseconds=1)


class CityBenchError(RDFInputError):
    """A stream file that cannot be read as CityBench CSV (located by file and line)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One measured column: which property kind (`ct:` class) and XSD datatype it has."""

    column: str
    kind: str
    datatype: str


@dataclass(frozen=True, slots=True)
class StreamKind:
    """How one kind of stream file maps to observations."""

    name: str  # parking, traffic, weather, pollution
    time_column: str
    readings: tuple[Reading, ...]
    sensor_column: str | None  # where the row names its sensor; None: the file stem does
    sensor_prefix: str  # sensor IRI local name = prefix + id


_INT = XSD + "integer"
_DEC = XSD + "decimal"

KINDS: Mapping[str, StreamKind] = MappingProxyType(
    {
        # CityBench's parking value: vacancies = totalspaces - vehiclecount (a derived reading).
        "parking": StreamKind(
            "parking", "updatetime", (Reading("vacancies", "ParkingVacancy", _INT),), "garagecode", "AarhusParkingData"
        ),
        "traffic": StreamKind(
            "traffic",
            "TIMESTAMP",
            (
                Reading("avgSpeed", "AvgSpeed", _INT),
                Reading("vehicleCount", "VehicleCount", _INT),
                Reading("avgMeasuredTime", "MeasureTime", _INT),
            ),
            "REPORT_ID",
            "AarhusTrafficData",
        ),
        "weather": StreamKind(
            "weather",
            "TIMESTAMP",
            (
                Reading("hum", "Humidity", _INT),
                Reading("tempm", "Temperature", _DEC),
                Reading("wspdm", "WindSpeed", _DEC),
            ),
            None,
            "",
        ),
        # CityBench's air pollution index: the largest of the five pollutant readings.
        "pollution": StreamKind("pollution", "timestamp", (Reading("api", "API", _INT),), None, ""),
    }
)

#: The stream files of shared/data/citybench and their kinds.
STREAMS: Mapping[str, StreamKind] = MappingProxyType(
    {
        "AarhusParkingData.stream": KINDS["parking"],
        "AarhusTrafficData158324.stream": KINDS["traffic"],
        "AarhusTrafficData158355.stream": KINDS["traffic"],
        "AarhusTrafficData158386.stream": KINDS["traffic"],
        "AarhusWeatherData0.stream": KINDS["weather"],
        "AarhusPollutionData158324.stream": KINDS["pollution"],
    }
)

# Raw columns a kind's derived readings are computed from (the rest are read as they are).
_RAW_COLUMNS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "parking": ("vehiclecount", "totalspaces"),
        "pollution": ("ozone", "particullate_matter", "carbon_monoxide", "sulfure_dioxide", "nitrogen_dioxide"),
    }
)

# (sensor, property kind) -> property local name, as declared by SensorRepository.n3.
_PROPERTIES: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        **{
            (f"AarhusParkingData{garage}", "ParkingVacancy"): f"parkingproperty-{n}"
            for garage, n in (
                ("BRUUNS", 1), ("NORREPORT", 2), ("BUSGADEHUSET", 3), ("SKOLEBAKKEN", 4),
                ("SCANDCENTER", 5), ("SALLING", 6), ("MAGASIN", 7), ("KALKVAERKSVEJ", 8),
            )
        },
        ("AarhusTrafficData158324", "AvgSpeed"): "Property-3059bcb3-db0c-4d8f-948a-49fc27a2d15c",
        ("AarhusTrafficData158324", "VehicleCount"): "Property-99f37f4d-377e-48a4-93b5-796d5c887fe8",
        ("AarhusTrafficData158324", "MeasureTime"): "Property-ccf6c991-ab0d-4bb3-9173-e298e91a884d",
        ("AarhusTrafficData158355", "AvgSpeed"): "Property-a8cd18da-ff56-42e0-ac6f-e8d149c6571f",
        ("AarhusTrafficData158355", "VehicleCount"): "Property-2221bfd8-4274-4e03-9f00-9e84f24d63cc",
        ("AarhusTrafficData158355", "MeasureTime"): "Property-30643a14-6ebd-4d16-8a30-0143152132fe",
        ("AarhusTrafficData158386", "AvgSpeed"): "Property-cad4e7eb-8fe3-4e1d-9168-986c03a09505",
        ("AarhusTrafficData158386", "VehicleCount"): "Property-0665f72e-ecc8-436a-bf78-cba45ef6407f",
        ("AarhusTrafficData158386", "MeasureTime"): "Property-3904c8f5-4c92-43b2-bae4-83a0b717f613",
        ("AarhusWeatherData0", "Humidity"): "Property-7e96ab11-820a-42b9-aab2-b6c4ebf88de2",
        ("AarhusWeatherData0", "Temperature"): "Property-66462839-6a65-4d5a-acc6-ffb627d8dc14",
        ("AarhusWeatherData0", "WindSpeed"): "Property-5cb2e2d7-8773-4e66-9690-6cfb3591c17b",
        ("AarhusPollutionData158324", "API"): "Property-bb6fa643-d98b-415c-8525-3c988da75536",
    }
)


def property_iri(sensor: str, kind: str) -> IRI:
    """The IRI of `sensor`'s property of `kind` (SensorRepository's when it declares one)."""
    return IRI(SES + _PROPERTIES.get((sensor, kind), f"{sensor}-{kind}"))


def read_stream(path: str | Path, *, limit: int | None = None) -> Iterator[CompoundEvent]:
    """Events of a CityBench stream file, lazily, one per row with at least one reading.

    The kind comes from the file name (`STREAMS`), else from the header's columns. Errors are
    raised when the bad row is reached, after the events before it were yielded.
    """
    path = Path(path)
    if limit is not None and limit <= 0:
        return
    name = str(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise CityBenchError(name, None, f"cannot read file: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle, strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise CityBenchError(name, None, "empty file: expected a CSV header")
            kind = _stream_kind(path, header)
            to_event = _row_converter(kind, header, path)
            produced = 0
            for number, row in enumerate(reader, start=1):
                event = to_event(row, number, reader.line_num)
                if event is not None:
                    yield event
                    produced += 1
                    if limit is not None and produced >= limit:
                        return
        except csv.Error as exc:
            raise CityBenchError(name, reader.line_num, f"malformed CSV: {exc}") from None
        except UnicodeDecodeError as exc:
            raise CityBenchError(name, reader.line_num + 1, f"not UTF-8: {exc.reason}") from None


def sample_events(data_dir: Path, n: int) -> list[CompoundEvent]:
    """`n` events alternating parking and traffic readings (the three traffic sensors in turn)."""
    data_dir = Path(data_dir)
    if n <= 0:
        return []
    parking = read_stream(data_dir / "AarhusParkingData.stream", limit=n)
    traffic = [read_stream(data_dir / f, limit=n) for f in sorted(STREAMS) if STREAMS[f].name == "traffic"]
    active: list[Iterator[CompoundEvent]] = [s for t in traffic for s in (parking, t)]
    events: list[CompoundEvent] = []
    while len(events) < n and active:
        for stream in list(active):
            if len(events) >= n:
                break
            event = next(stream, None)
            if event is None:
                active = [s for s in active if s is not stream]
            else:
                events.append(event)
    return events


def is_stream(path: str | Path) -> bool:
    """Whether `path` is a CityBench stream this reader knows (by its name, else its CSV header)."""
    path = Path(path)
    if path.name in STREAMS:
        return True
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), None)
        if header is None:
            return False
        _stream_kind(path, header)
        return True
    except (OSError, UnicodeDecodeError, csv.Error, CityBenchError):
        return False


# --- internals ---------------------------------------------------------------------------


def _stream_kind(path: Path, header: list[str]) -> StreamKind:
    known = STREAMS.get(path.name)
    if known is not None:
        return known
    columns = set(header)
    for kind in KINDS.values():
        if _needed_columns(kind) <= columns:
            return kind
    raise CityBenchError(
        str(path), 1, f"not a known CityBench stream: header {','.join(header)} matches no kind ({', '.join(KINDS)})"
    )


def _needed_columns(kind: StreamKind) -> frozenset[str]:
    raw = _RAW_COLUMNS.get(kind.name)
    measured = set(raw) if raw else {r.column for r in kind.readings}
    sensor = {kind.sensor_column} if kind.sensor_column else set()
    return frozenset({kind.time_column, *measured, *sensor})


def _row_converter(
    kind: StreamKind, header: list[str], path: Path
) -> Callable[[list[str], int, int], CompoundEvent | None]:
    """A function turning one row into an event, with column positions resolved once."""
    name = str(path)
    missing = _needed_columns(kind) - set(header)
    if missing:
        raise CityBenchError(name, 1, f"{kind.name} stream lacks column(s) {', '.join(sorted(missing))}")
    index = {column: header.index(column) for column in _needed_columns(kind)}
    file_sensor = _NOT_SOURCE.sub("_", path.stem).strip("._") or "sensor"
    width = len(header)

    def readings(row: list[str], line: int) -> list[tuple[Reading, str]]:
        if kind.name in _RAW_COLUMNS:
            raw = [_number(row[index[c]], _INTEGER, c, name, line) for c in _RAW_COLUMNS[kind.name]]
            if any(v is None for v in raw):
                return []
            values = [int(v) for v in raw if v is not None]
            value = values[1] - values[0] if kind.name == "parking" else max(values)
            return [(kind.readings[0], str(value))]
        found = []
        for reading in kind.readings:
            pattern = _INTEGER if reading.datatype == _INT else _DECIMAL
            lexical = _number(row[index[reading.column]], pattern, reading.column, name, line)
            if lexical is not None:
                found.append((reading, lexical))
        return found

    def convert(row: list[str], number: int, line: int) -> CompoundEvent | None:
        if not row:  # a blank line
            return None
        if len(row) != width:
            raise CityBenchError(name, line, f"expected {width} fields as in the header, found {len(row)}")
        stamp = row[index[kind.time_column]].strip()
        if not _DATETIME.fullmatch(stamp):
            raise CityBenchError(name, line, f"{kind.time_column}: {stamp!r} is not a date and time")
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError as exc:
            raise CityBenchError(name, line, f"{kind.time_column}: {stamp!r}: {exc}") from None
        if kind.sensor_column:
            ident = row[index[kind.sensor_column]].strip()
            if not ident or _NOT_SOURCE.search(ident):
                raise CityBenchError(name, line, f"{kind.sensor_column}: {ident!r} is not a sensor id")
            sensor = kind.sensor_prefix + ident
        else:
            sensor = file_sensor
        found = readings(row, line)
        if not found:
            return None
        timestamp_ms = (when.replace(tzinfo=timezone.utc) - _EPOCH) // _MILLISECOND
        return _event(sensor, number, stamp.replace(" ", "T"), timestamp_ms, found)

    return convert


def _number(text: str, pattern: re.Pattern[str], column: str, name: str, line: int) -> str | None:
    value = text.strip()
    if not value:
        return None
    if not pattern.fullmatch(value):
        what = "an integer" if pattern is _INTEGER else "a decimal number"
        raise CityBenchError(name, line, f"{column}: {text!r} is not {what}")
    return value


def _event(sensor: str, number: int, when: str, timestamp_ms: int, found: list[tuple[Reading, str]]) -> CompoundEvent:
    graph = event_graph(sensor, timestamp_ms, number)
    sensor_iri = IRI(SES + sensor)
    instant = IRI(f"{SES}{sensor}-Instant-{number}")
    triples: list[tuple[IRI, IRI, IRI | Literal]] = []
    for reading, lexical in found:
        obs = IRI(f"{SES}{sensor}-Observation-{number}-{reading.kind}")
        prop = property_iri(sensor, reading.kind)
        triples += [
            (obs, _RDF_TYPE, _OBSERVATION),
            (obs, _OBSERVED_BY, sensor_iri),
            (obs, _OBSERVED_PROPERTY, prop),
            (prop, _RDF_TYPE, IRI(CT + reading.kind)),
            (obs, HAS_VALUE, Literal(lexical, reading.datatype)),
            (obs, _TIME, instant),
        ]
    triples += [(instant, _RDF_TYPE, _INSTANT), (instant, _AT, Literal(when, XSD + "dateTime"))]
    return CompoundEvent(graph, tuple(Quad(graph, s, p, o) for s, p, o in triples))


def synthetic_events(n: int, seed: int = 7) -> list[CompoundEvent]:
    """`n` observation events in CityBench's vocabulary with random values (when the data is absent)."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        graph = event_graph("synthetic-sensor", 1_400_000_000_000 + i * 300_000, i)
        obs = IRI(f"{SES}Observation-synthetic-{i}")
        events.append(CompoundEvent.from_triples(graph, [
            (obs, _RDF_TYPE, _OBSERVATION),
            (obs, _OBSERVED_BY, IRI(f"{SES}SyntheticSensor{i % 4}")),
            (obs, HAS_VALUE, Literal(str(rng.randint(0, 60)), XSD + "integer")),
        ]))
    return events

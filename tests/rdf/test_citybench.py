"""CityBench CSV streams as SSN observation events: synthetic rows first, then the real files."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path

import pytest

from eventcloud.cli.demo import citybench_dir as citybench_data_dir
from eventcloud.rdf.citybench import (
    CT,
    SAO,
    SES,
    SSN,
    STREAMS,
    TL,
    CityBenchError,
    property_iri,
    read_stream,
    sample_events,
)
from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal, Quad, event_graph
from eventcloud.rdf.files import RDFInputError, parse_events, read_events, write_nquads

DATA = citybench_data_dir() or Path("../shared/data/citybench")
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"CityBench data not found at {DATA} (set EVENTCLOUD_CITYBENCH or clone the repo next to shared/)"
)

TRAFFIC_HEADER = "status,avgMeasuredTime,avgSpeed,extID,medianMeasuredTime,TIMESTAMP,vehicleCount,_id,REPORT_ID\n"
PARKING_HEADER = "vehiclecount,updatetime,_id,totalspaces,garagecode,streamtime\n"
WEATHER_HEADER = "hum,tempm,wspdm,TIMESTAMP\n"
POLLUTION_HEADER = (
    "ozone,particullate_matter,carbon_monoxide,sulfure_dioxide,nitrogen_dioxide,longitude,latitude,timestamp\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


def value_of(event: CompoundEvent, kind: str) -> Literal:
    """The sao:hasValue of the observation whose property has type ct:<kind>."""
    props = {q.s for q in event.quads if q.p == IRI(RDF + "type") and q.o == IRI(CT + kind)}
    (obs,) = {q.s for q in event.quads if q.p == IRI(SSN + "observedProperty") and q.o in props}
    (value,) = [q.o for q in event.quads if q.s == obs and q.p == IRI(SAO + "hasValue")]
    return value


def kinds(event: CompoundEvent) -> set[str]:
    return {q.o.value[len(CT):] for q in event.quads if q.p == IRI(RDF + "type") and q.o.value.startswith(CT)}


def test_traffic_row_becomes_an_observation_event_with_exact_quads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "AarhusTrafficData158324.stream",
        TRAFFIC_HEADER + "OK,74,50,668,74,2014-08-01T07:50:00,5,20746220,158324\n",
    )
    (event,) = read_stream(path)
    graph = event_graph("AarhusTrafficData158324", ms("2014-08-01T07:50:00"), 1)
    assert event.graph == graph
    sensor = IRI(SES + "AarhusTrafficData158324")
    instant = IRI(SES + "AarhusTrafficData158324-Instant-1")
    expected = set()
    for kind, value, prop in [
        ("AvgSpeed", "50", "Property-3059bcb3-db0c-4d8f-948a-49fc27a2d15c"),
        ("VehicleCount", "5", "Property-99f37f4d-377e-48a4-93b5-796d5c887fe8"),
        ("MeasureTime", "74", "Property-ccf6c991-ab0d-4bb3-9173-e298e91a884d"),
    ]:
        obs = IRI(f"{SES}AarhusTrafficData158324-Observation-1-{kind}")
        expected |= {
            (obs, IRI(RDF + "type"), IRI(SSN + "Observation")),
            (obs, IRI(SSN + "observedBy"), sensor),
            (obs, IRI(SSN + "observedProperty"), IRI(SES + prop)),
            (IRI(SES + prop), IRI(RDF + "type"), IRI(CT + kind)),
            (obs, IRI(SAO + "hasValue"), Literal(value, XSD + "integer")),
            (obs, IRI(SAO + "time"), instant),
        }
    expected |= {
        (instant, IRI(RDF + "type"), IRI(TL + "Instant")),
        (instant, IRI(TL + "at"), Literal("2014-08-01T07:50:00", XSD + "dateTime")),
    }
    assert {Quad(graph, *t) for t in expected} == set(event.quads)
    assert len(event.quads) == len(expected)


def test_parking_rows_name_their_garage_and_report_vacancies(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "AarhusParkingData.stream",
        PARKING_HEADER
        + "10,2014-05-22 09:09:04.145,1,65,NORREPORT,2014-11-03 16:18:44\n"
        + "600,2014-05-22 09:39:01,2,512,SKOLEBAKKEN,2014-11-03 16:18:44\n",
    )
    first, second = read_stream(path)
    assert first.graph == event_graph("AarhusParkingDataNORREPORT", ms("2014-05-22T09:09:04.145"), 1)
    assert value_of(first, "ParkingVacancy") == Literal("55", XSD + "integer")
    assert Quad(first.graph, IRI(SES + "AarhusParkingDataNORREPORT-Observation-1-ParkingVacancy"),
                IRI(SSN + "observedProperty"), IRI(SES + "parkingproperty-2")) in first.quads
    (at,) = [q.o for q in first.quads if q.p == IRI(TL + "at")]
    assert at == Literal("2014-05-22T09:09:04.145", XSD + "dateTime")
    # more cars than spaces happens in the real data; CityBench's vacancy goes negative
    assert value_of(second, "ParkingVacancy") == Literal("-88", XSD + "integer")
    assert second.graph == event_graph("AarhusParkingDataSKOLEBAKKEN", ms("2014-05-22T09:39:01"), 2)


def test_weather_missing_readings_are_left_out(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "AarhusWeatherData0.stream",
        "\ufeff" + WEATHER_HEADER
        + "56,18,7.4,2014-08-01T00:00:00\n,,,2014-08-01T00:20:00\n86,14.5,,2014-08-01T00:40:00\n\n",
    )
    first, third = read_stream(path)
    assert kinds(first) == {"Humidity", "Temperature", "WindSpeed"}
    assert value_of(first, "WindSpeed") == Literal("7.4", XSD + "decimal")
    assert value_of(first, "Temperature") == Literal("18", XSD + "decimal")
    assert value_of(first, "Humidity") == Literal("56", XSD + "integer")
    assert kinds(third) == {"Humidity", "Temperature"}
    # the row number stays the sequence even though the empty row made no event
    assert third.graph == event_graph("AarhusWeatherData0", ms("2014-08-01T00:40:00"), 3)


def test_pollution_row_reports_the_air_pollution_index(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "AarhusPollutionData158324.stream",
        POLLUTION_HEADER + "101,94,49,144,87,10.1049,56.2317,2014-08-01 00:05:00\n",
    )
    (event,) = read_stream(path)
    assert value_of(event, "API") == Literal("144", XSD + "integer")
    assert property_iri("AarhusPollutionData158324", "API") in {q.o for q in event.quads}


def test_unknown_file_kind_comes_from_header_and_properties_fall_back(tmp_path: Path) -> None:
    path = write(tmp_path, "other.csv", TRAFFIC_HEADER + "OK,60,40,1,60,2014-08-01T08:00:00,3,7,999\n")
    (event,) = read_stream(path)
    assert event.graph == event_graph("AarhusTrafficData999", ms("2014-08-01T08:00:00"), 1)
    assert property_iri("AarhusTrafficData999", "AvgSpeed") == IRI(SES + "AarhusTrafficData999-AvgSpeed")
    assert IRI(SES + "AarhusTrafficData999-AvgSpeed") in {q.o for q in event.quads}


def test_limit_and_round_trip(tmp_path: Path) -> None:
    rows = "".join(f"OK,74,{50 + i},668,74,2014-08-01T{8 + i:02d}:00:00,5,{i},158355\n" for i in range(5))
    path = write(tmp_path, "AarhusTrafficData158355.stream", TRAFFIC_HEADER + rows)
    assert len(list(read_stream(path, limit=2))) == 2
    assert list(read_stream(path, limit=0)) == []
    events = list(read_stream(path))
    assert len({e.graph for e in events}) == 5
    out = io.StringIO()
    write_nquads(events, out)
    assert parse_events(out.getvalue(), "nquads") == events


@pytest.mark.parametrize(
    "name, text, line, words",
    [
        ("AarhusTrafficData158324.stream", TRAFFIC_HEADER + "OK,74,50,668,74,2014-08-01T07:50:00,5,1,158324\n"
         "OK,74,fast,668,74,2014-08-01T07:55:00,5,2,158324\n", 3, "avgSpeed: 'fast' is not an integer"),
        ("AarhusTrafficData158324.stream", TRAFFIC_HEADER + "OK,74,50,668\n", 2, "expected 9 fields"),
        ("AarhusTrafficData158324.stream", TRAFFIC_HEADER + "OK,74,50,668,74,yesterday,5,1,158324\n", 2,
         "TIMESTAMP: 'yesterday' is not a date and time"),
        ("AarhusTrafficData158324.stream", TRAFFIC_HEADER + "OK,74,50,668,74,2014-02-30T07:50:00,5,1,158324\n", 2,
         "day is out of range"),
        ("AarhusParkingData.stream", PARKING_HEADER + "1,2014-05-22 09:09:04,1,65,NORRE PORT,x\n", 2,
         "garagecode: 'NORRE PORT' is not a sensor id"),
        ("AarhusWeatherData0.stream", WEATHER_HEADER + "56,1e3,7.4,2014-08-01T00:00:00\n", 2,
         "tempm: '1e3' is not a decimal number"),
        ("AarhusWeatherData0.stream", "hum,tempm,TIMESTAMP\n", 1, "lacks column(s) wspdm"),
        ("mystery.csv", "a,b,c\n1,2,3\n", 1, "not a known CityBench stream"),
        ("AarhusWeatherData0.stream", WEATHER_HEADER + '56,"18\n', 2, "malformed CSV"),
        ("AarhusWeatherData0.stream", "", None, "empty file"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, name: str, text: str, line: int | None, words: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(CityBenchError) as info:
        list(read_stream(path))
    error = info.value
    assert isinstance(error, RDFInputError)
    assert (error.path, error.line) == (str(path), line)
    assert words in str(error)
    assert str(error).startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CityBenchError, match="cannot read file"):
        list(read_stream(tmp_path / "AarhusParkingData.stream"))


# --- the real files -------------------------------------------------------------------------


@needs_data
def test_streams_table_covers_the_data_files() -> None:
    assert set(STREAMS) == {p.name for p in DATA.glob("*.stream")}
    assert {k.name for k in STREAMS.values()} == {"parking", "traffic", "weather", "pollution"}


@needs_data
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_real_streams_read(name: str) -> None:
    events = list(read_stream(DATA / name, limit=300))
    assert len(events) == 300
    assert len({e.graph for e in events}) == 300
    kind = STREAMS[name].name
    expected = {"parking": 8, "traffic": 20, "weather": 20, "pollution": 8}[kind]
    assert max(len(e) for e in events) == expected


@needs_data
def test_whole_weather_stream_skips_only_the_empty_row() -> None:
    events = list(read_stream(DATA / "AarhusWeatherData0.stream"))
    assert len(events) == 4357 - 1
    assert sum(1 for e in events if len(kinds(e)) < 3) == 21  # rows without wind speed


@needs_data
def test_property_table_matches_sensor_repository() -> None:
    """Every sensor/property IRI we emit for the shipped streams is declared in SensorRepository.n3."""
    (repo,) = read_events(DATA / "SensorRepository.n3", timestamp_ms=0)
    observes = {(q.s, q.o) for q in repo.quads if q.p == IRI(SSN + "observes")}
    typed = {(q.s, q.o) for q in repo.quads if q.p == IRI(RDF + "type")}
    for name in STREAMS:
        for event in read_stream(DATA / name, limit=8):
            sensor_props = {(q.o, q.s) for q in event.quads if q.p == IRI(SSN + "observedBy")}
            for quad in event.quads:
                if quad.p == IRI(SSN + "observedBy"):
                    (prop,) = [q.o for q in event.quads if q.s == quad.s and q.p == IRI(SSN + "observedProperty")]
                    assert (quad.o, prop) in observes, (name, quad.o, prop)
                    (kind,) = [q.o for q in event.quads if q.s == prop and q.p == IRI(RDF + "type")]
                    assert (prop, kind) in typed
            assert sensor_props


@needs_data
def test_sample_events_mix_parking_and_traffic() -> None:
    events = sample_events(DATA, 12)
    assert len(events) == 12 and len(set(events)) == 12
    sources = [e.graph.value.split("/")[4] for e in events]
    assert all(s.startswith("AarhusParkingData") for s in sources[0::2])
    assert {s for s in sources[1::2]} == {f"AarhusTrafficData{i}" for i in (158324, 158355, 158386)}
    assert sample_events(DATA, 0) == []


def test_a_directory_publishes_the_streams_it_knows_and_names_the_csvs_it_skips(tmp_path):
    """`eventcloud publish <citybench dir>` published nothing: trafficMetaData.csv is no stream."""
    from eventcloud.cli.inputs import expand

    write(tmp_path, "traffic.csv", TRAFFIC_HEADER + "OK,60,40,1,60,2014-08-01T08:00:00,3,7,999\n")
    write(tmp_path, "mystery.csv", "a,b,c\n1,2,3\n")
    write(tmp_path, "events.nq", "<http://x/s> <http://x/p> <http://x/o> <http://x/g> .\n")
    skipped: list[str] = []
    inputs = expand([str(tmp_path)], None, skipped)
    assert sorted(Path(i.label).name for i in inputs) == ["events.nq", "traffic.csv"]
    assert [Path(s).name for s in skipped] == ["mystery.csv"]

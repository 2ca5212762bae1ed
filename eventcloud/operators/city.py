"""Geographic operators on WGS84 points, for city data (CityBench sensors carry lat/long).

    PREFIX geo: <http://eventcloud.io/ns/geo#>
    geo:distance(?lat1, ?long1, ?lat2, ?long2)        metres along the great circle (haversine)
    geo:withinRadius(?lat, ?long, lat0, long0, r)     is the point at most r metres from (lat0, long0)?
    geo:withinPolygon(?lat, ?long, "lat long, …")     is the point inside the polygon (ray casting)?

Latitudes and longitudes are decimal degrees. The polygon is a string of "lat long" vertex
pairs separated by commas (closed implicitly); it is parsed once per distinct string. Points
outside [-90, 90] × [-180, 180] and malformed polygons are errors (the FILTER is false). The
polygon test treats degrees as planar coordinates, which is exact enough at city scale and
wrong near the poles and across the antimeridian (documented, not handled).
"""

from __future__ import annotations

from functools import lru_cache
from math import asin, cos, radians, sin, sqrt

from eventcloud.sparql.filters.operators import Operator

__all__ = ["GEO", "DISTANCE", "WITHIN_RADIUS", "WITHIN_POLYGON", "OPERATORS", "distance", "within_radius",
           "within_polygon", "parse_polygon"]

GEO = "http://eventcloud.io/ns/geo#"
DISTANCE = GEO + "distance"
WITHIN_RADIUS = GEO + "withinRadius"
WITHIN_POLYGON = GEO + "withinPolygon"
EARTH_RADIUS_M = 6_371_008.8  # the mean radius of the WGS84 ellipsoid


def _point(lat: float, long: float) -> tuple[float, float]:
    lat, long = float(lat), float(long)
    if not (-90.0 <= lat <= 90.0 and -180.0 <= long <= 180.0):
        raise ValueError(f"not a WGS84 point: ({lat}, {long})")
    return lat, long


def distance(lat1: float, long1: float, lat2: float, long2: float) -> float:
    """Great-circle distance in metres between two WGS84 points (haversine, mean radius)."""
    (a, b), (c, d) = _point(lat1, long1), _point(lat2, long2)
    phi1, phi2 = radians(a), radians(c)
    h = sin((phi2 - phi1) / 2) ** 2 + cos(phi1) * cos(phi2) * sin(radians(d - b) / 2) ** 2
    return 2 * EARTH_RADIUS_M * asin(min(1.0, sqrt(h)))


def within_radius(lat: float, long: float, lat0: float, long0: float, radius: float) -> bool:
    if float(radius) < 0:
        raise ValueError("a negative radius")
    return distance(lat, long, lat0, long0) <= float(radius)


@lru_cache(maxsize=1024)
def parse_polygon(text: str) -> tuple[tuple[float, float], ...]:
    """'lat long, lat long, …' -> vertices (at least three)."""
    vertices = []
    for pair in str(text).split(","):
        parts = pair.split()
        if len(parts) != 2:
            raise ValueError(f"a polygon vertex must be 'lat long', got {pair.strip()!r}")
        vertices.append(_point(float(parts[0]), float(parts[1])))
    if len(vertices) < 3:
        raise ValueError("a polygon needs at least three vertices")
    return tuple(vertices)


def within_polygon(lat: float, long: float, polygon: str) -> bool:
    """Is the point inside the polygon (even-odd rule; a point on an edge may go either way)?"""
    y, x = _point(lat, long)
    inside = False
    vertices = parse_polygon(polygon)
    j = len(vertices) - 1
    for i, (yi, xi) in enumerate(vertices):
        yj, xj = vertices[j]
        if (yi > y) != (yj > y) and x < (xj - xi) * (y - yi) / (yj - yi) + xi:
            inside = not inside
        j = i
    return inside


OPERATORS = (
    Operator(DISTANCE, distance, cost=2.0, arity=(4, 4)),
    Operator(WITHIN_RADIUS, within_radius, cost=2.5, selectivity=0.2, arity=(5, 5)),
    Operator(WITHIN_POLYGON, within_polygon, cost=5.0, selectivity=0.2, arity=(3, 3)),
)

"""xsd:dateTime, xsd:date, xsd:time and durations for compiled FILTERs, as the oracle engine has them.

Values are points on the XSD timeline: seconds scaled by 10^18 (normalised to UTC when the
value has a timezone) plus the timezone offset in minutes, computed with Oxigraph's formulas so
that components, canonical forms and the partial order (with and without timezone) agree.
Errors (overflow, an order that does not hold for every implicit timezone) raise TemporalError.
"""

from __future__ import annotations

import re
from typing import Callable

from eventcloud.rdf.model import XSD

XSD_DATETIME = XSD + "dateTime"
XSD_DATE = XSD + "date"
XSD_TIME = XSD + "time"
XSD_DURATION = XSD + "duration"
XSD_YEARMONTHDURATION = XSD + "yearMonthDuration"
XSD_DAYTIMEDURATION = XSD + "dayTimeDuration"

SCALE = 10**18
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I128_MIN, _I128_MAX = -(2**127), 2**127 - 1


class TemporalError(ValueError):
    """Overflow, or an order between date/time values that is indeterminate."""


def scaled_decimal(text: str) -> int | None:
    """Unsigned decimal digits (at most 18 after the point) -> integer scaled by 10^18."""
    match = _UNSIGNED.match(text)
    if match is None:
        return None
    whole, frac = match.group(1), (match.group(2) or "").rstrip("0")
    if len(frac) > 18:
        return None
    return int(whole) * SCALE + (int(frac) * 10 ** (18 - len(frac)) if frac else 0)


_UNSIGNED = re.compile(r"([0-9]+)(?:\.([0-9]*))?\Z")


def format_decimal(v: int) -> str:
    """Canonical xsd:decimal lexical form of an integer scaled by 10^18 (no trailing zeros)."""
    sign = "-" if v < 0 else ""
    whole, frac = divmod(abs(v), SCALE)
    if not frac:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{str(frac).rjust(18, '0').rstrip('0')}"


class Temporal:
    """A point on the XSD timeline: seconds * 10^18 (UTC when tz is set) and the offset in minutes."""

    __slots__ = ("v", "tz")
    datatype = ""

    def __init__(self, v: int, tz: int | None) -> None:
        self.v = v
        self.tz = tz

    def __eq__(self, other: object) -> bool:  # Oxigraph's Timestamp equality, used for identity
        return type(other) is type(self) and (self.tz is None) == (other.tz is None) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


class DateTimeV(Temporal):
    __slots__ = ()
    datatype = XSD_DATETIME


class DateV(Temporal):
    __slots__ = ()
    datatype = XSD_DATE


class TimeV(Temporal):
    __slots__ = ()
    datatype = XSD_TIME


class Duration:
    """xsd:duration and its two subtypes: a number of months and of seconds * 10^18."""

    __slots__ = ("months", "seconds", "datatype")

    def __init__(self, months: int, seconds: int, datatype: str) -> None:
        self.months = months
        self.seconds = seconds
        self.datatype = datatype

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and (self.months, self.seconds) == (other.months, other.seconds)

    def __hash__(self) -> int:
        return hash((self.months, self.seconds))



_DATETIME_RE = re.compile(
    r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2}(?:\.[0-9]+)?)(Z|[+-][0-9]{2}:[0-9]{2})?\Z"
)
_DATE_RE = re.compile(r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})(Z|[+-][0-9]{2}:[0-9]{2})?\Z")
_TIME_RE = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2}(?:\.[0-9]+)?)(Z|[+-][0-9]{2}:[0-9]{2})?\Z")

def _tz_minutes(text: str | None) -> int | None | bool:
    """Offset in minutes, None for no timezone, False when invalid."""
    if text is None:
        return None
    if text == "Z":
        return 0
    hours, minutes = int(text[1:3]), int(text[4:6])
    if minutes > 59 or hours > 14 or (hours == 14 and minutes != 0):
        return False
    offset = hours * 60 + minutes
    return -offset if text[0] == "-" else offset


def _seconds(text: str) -> int | None:
    value = scaled_decimal(text)
    if value is None or not value < 60 * SCALE:
        return None
    return value


def days_in_month(year: int | None, month: int) -> int:
    if month == 2:
        if year is None:
            return 28
        return 28 if year % 4 != 0 or (year % 100 == 0 and year % 400 != 0) else 29
    return 30 if month in (4, 6, 9, 11) else 31


def _timeline(year: int | None, month: int | None, day: int | None, hour: int, minute: int, second: int,
              tz: int | None) -> int:
    """XSD timeOnTimeline (as Oxigraph computes it), scaled by 10^18."""
    yr = 1971 if year is None else year - 1
    mo = 12 if month is None else month
    da = days_in_month(yr + 1, mo) - 1 if day is None else day - 1
    mi = minute - (tz or 0)
    days = sum(days_in_month(yr + 1, m) for m in range(1, mo))
    total = (31536000 * yr + 86400 * (yr // 400 - yr // 100 + yr // 4) + 86400 * days + 86400 * da
             + 3600 * hour + 60 * mi)
    value = total * SCALE + second
    if not _I128_MIN <= value <= _I128_MAX:
        raise TemporalError("dateTime overflow")
    return value


def _year(text: str) -> int | None:
    digits = text.lstrip("-")
    if len(digits) > 4 and digits[0] == "0":
        return None
    return int(text)


def parse_datetime(text: str) -> DateTimeV | None:
    match = _DATETIME_RE.match(text)
    if match is None:
        return None
    y, mo, d, h, mi, s, tz_text = match.groups()
    year, month, day, hour, minute = _year(y), int(mo), int(d), int(h), int(mi)
    second, tz = _seconds(s), _tz_minutes(tz_text)
    if year is None or second is None or tz is False or not 1 <= month <= 12 or not 1 <= day <= 31:
        return None
    if minute > 59 or hour > 24 or (hour == 24 and (minute or second)):
        return None
    if day > days_in_month(year, month):
        return None
    try:
        return DateTimeV(_timeline(year, month, day, hour, minute, second, tz), tz)
    except TemporalError:
        return None


def parse_date(text: str) -> DateV | None:
    match = _DATE_RE.match(text)
    if match is None:
        return None
    y, mo, d, tz_text = match.groups()
    year, month, day, tz = _year(y), int(mo), int(d), _tz_minutes(tz_text)
    if year is None or tz is False or not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month):
        return None
    try:
        return DateV(_timeline(year, month, day, 0, 0, 0, tz), tz)
    except TemporalError:
        return None


def parse_time(text: str) -> TimeV | None:
    match = _TIME_RE.match(text)
    if match is None:
        return None
    h, mi, s, tz_text = match.groups()
    hour, minute, second, tz = int(h), int(mi), _seconds(s), _tz_minutes(tz_text)
    if second is None or tz is False or minute > 59 or hour > 24 or (hour == 24 and (minute or second)):
        return None
    return TimeV(_timeline(None, None, None, 0 if hour == 24 else hour, minute, second, tz), tz)


_DURATION_RE = re.compile(
    r"(-?)P(?:([0-9]+)Y)?(?:([0-9]+)M)?(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+(?:\.[0-9]*)?)S)?)?\Z"
)


def duration_parser(datatype: str) -> Callable[[str], Duration | None]:
    def parse(text: str) -> Duration | None:
        match = _DURATION_RE.match(text)
        if match is None or text.endswith(("P", "T")):
            return None
        sign, years, months, days, hours, minutes, secs = match.groups()
        if datatype == XSD_YEARMONTHDURATION and (days or hours or minutes or secs):
            return None
        if datatype == XSD_DAYTIMEDURATION and (years or months):
            return None
        fraction = scaled_decimal(secs) if secs else 0
        if fraction is None:
            return None
        total_months = int(years or 0) * 12 + int(months or 0)
        total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * SCALE + fraction
        if sign:
            total_months, total = -total_months, -total
        if not (_I64_MIN <= total_months <= _I64_MAX and _I128_MIN <= total <= _I128_MAX):
            return None
        return Duration(total_months, total, datatype)
    return parse



def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def components(t: Temporal) -> tuple[int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second*10^18) in the value's own timezone (Oxigraph's algorithm)."""
    local = trunc_div(t.v, SCALE) + (t.tz or 0) * 60
    days = local // 86400 + 366
    shift = 0
    if days < 0:
        shift = trunc_div(days, 146097) - 1
        days -= shift * 146097
        shift *= 400
    y400 = trunc_div(days, 146097)  # Rust integer division truncates: keep it for -1 below
    days -= y400 * 146097
    days -= 1
    y100 = trunc_div(days, 36524)
    days -= y100 * 36524
    days += 1
    y4 = trunc_div(days, 1461)
    days -= y4 * 1461
    days -= 1
    y1 = trunc_div(days, 365)
    days -= y1 * 365
    year = 400 * y400 + 100 * y100 + 4 * y4 + y1 + shift
    days += 1 if (y100 == 0 or y4 != 0) and y1 == 0 else 0
    month = 12
    for m in range(1, 13):
        length = days_in_month(year, m)
        if length > days:
            month = m
            break
        days -= length
    hour = (local % 86400) // 3600
    minute = (local % 3600) // 60
    second = abs(t.v % (60 * SCALE))
    return year, month, int(days) + 1, hour, minute, second


def format_tz(tz: int | None) -> str:
    if tz is None:
        return ""
    if tz == 0:
        return "Z"
    sign = "-" if tz < 0 else "+"
    return f"{sign}{abs(tz) // 60:02d}:{abs(tz) % 60:02d}"


def format_temporal(t: Temporal) -> str:
    year, month, day, hour, minute, second = components(t)
    sec = format_decimal(second)
    sec = "0" + sec if second < 10 * SCALE else sec
    date = f"{'-' if year < 0 else ''}{abs(year):04d}-{month:02d}-{day:02d}"
    if type(t) is DateV:
        return date + format_tz(t.tz)
    time = f"{hour:02d}:{minute:02d}:{sec}"
    if type(t) is TimeV:
        return time + format_tz(t.tz)
    return f"{date}T{time}{format_tz(t.tz)}"


def format_duration(d: Duration) -> str:
    months, seconds = abs(d.months), abs(d.seconds)
    text = "-P" if d.months < 0 or d.seconds < 0 else "P"
    years, months = divmod(months, 12)
    text += (f"{years}Y" if years else "") + (f"{months}M" if months else "")
    days, rest = divmod(seconds, 86400 * SCALE)
    hours, rest = divmod(rest, 3600 * SCALE)
    minutes, rest = divmod(rest, 60 * SCALE)
    text += f"{days}D" if days else ""
    if hours or minutes or rest:
        text += "T" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
        text += f"{format_decimal(rest)}S" if rest else ""
    if text.endswith("P"):
        return "P0M" if d.datatype == XSD_YEARMONTHDURATION else "PT0S"
    return text



_FOURTEEN_HOURS = 14 * 3600 * SCALE


def compare_temporal(a: Temporal, b: Temporal) -> int:
    """XSD order: with one side lacking a timezone, the order must hold for every offset."""
    if (a.tz is None) == (b.tz is None):
        return (a.v > b.v) - (a.v < b.v)
    if a.tz is not None:
        low, high = b.v - _FOURTEEN_HOURS, b.v + _FOURTEEN_HOURS
        first, second = (a.v > high) - (a.v < high), (a.v > low) - (a.v < low)
    else:
        low, high = a.v - _FOURTEEN_HOURS, a.v + _FOURTEEN_HOURS
        first, second = (high > b.v) - (high < b.v), (low > b.v) - (low < b.v)
    if first != second:
        raise TemporalError("indeterminate order between dateTimes with and without timezone")
    return first


_REFERENCES = ((1696, 9), (1697, 2), (1903, 3), (1903, 7))  # XSD's reference dates (day 1)


def compare_durations(a: Duration, b: Duration) -> int:
    """XSD duration order: compare the dates the two durations reach from four reference dates."""
    results = set()
    for year, month in _REFERENCES:
        ends = []
        for d in (a, b):
            y, m = divmod(month - 1 + d.months, 12)
            ends.append(_timeline(year + y, m + 1, 1, 0, 0, 0, None) + d.seconds)
        results.add((ends[0] > ends[1]) - (ends[0] < ends[1]))
    if len(results) != 1:
        raise TemporalError("indeterminate order between durations")
    return results.pop()



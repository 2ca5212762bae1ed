"""Runtime values of FILTER expressions: typed values, their lexical forms, and the operators.

A FILTER is evaluated over Python values, not RDF terms, so that `?age > 25` costs one parse
of the bound literal and one comparison. The value model mirrors the one of the SPARQL engine
the tests use as oracle (Oxigraph), so that corner cases agree with it:

    IRI -> model.IRI              simple / xsd:string literal -> str      rdf:langString -> LangStr
    xsd:boolean -> bool           xsd:integer and derived types -> int (64-bit, overflow is an error)
    xsd:decimal -> Dec (fixed point, 18 fractional digits)   xsd:float -> F32   xsd:double -> float
    xsd:dateTime / xsd:date / xsd:time -> DateTimeV / DateV / TimeV
    anything else (unknown datatype, or an ill-typed lexical form) -> the model.Literal itself

Every operation raises ExprError on a SPARQL error (type error, overflow, unbound variable);
filters.py turns that into "the filter is false".
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal as _PyDecimal
from typing import Callable

from .model import IRI, RDF_LANGSTRING, XSD, XSD_STRING, Literal, Term

XSD_BOOLEAN = XSD + "boolean"
XSD_INTEGER = XSD + "integer"
XSD_DECIMAL = XSD + "decimal"
XSD_FLOAT = XSD + "float"
XSD_DOUBLE = XSD + "double"
XSD_DATETIME = XSD + "dateTime"
XSD_DATE = XSD + "date"
XSD_TIME = XSD + "time"
XSD_DAYTIMEDURATION = XSD + "dayTimeDuration"
XSD_YEARMONTHDURATION = XSD + "yearMonthDuration"
XSD_DURATION = XSD + "duration"

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I128_MIN, _I128_MAX = -(2**127), 2**127 - 1
_SCALE = 10**18  # xsd:decimal and timeline values are integers scaled by 10^18


class ExprError(Exception):
    """A SPARQL expression error: the enclosing FILTER evaluates to false."""


class LangStr:
    """A language-tagged string (the tag is lower case, as model.Literal keeps it)."""

    __slots__ = ("value", "lang")

    def __init__(self, value: str, lang: str) -> None:
        self.value = value
        self.lang = lang

    def __eq__(self, other: object) -> bool:
        return type(other) is LangStr and self.value == other.value and self.lang == other.lang

    def __hash__(self) -> int:
        return hash((self.value, self.lang))


class Dec:
    """An xsd:decimal as an integer scaled by 10^18 (range of a signed 128-bit integer)."""

    __slots__ = ("v",)

    def __init__(self, v: int) -> None:
        if not _I128_MIN <= v <= _I128_MAX:
            raise ExprError("decimal overflow")
        self.v = v

    def __eq__(self, other: object) -> bool:
        return type(other) is Dec and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)


class F32:
    """An xsd:float: a Python float already rounded to single precision."""

    __slots__ = ("v",)

    def __init__(self, v: float) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return type(other) is F32 and _bits(self.v) == _bits(other.v)

    def __hash__(self) -> int:
        return hash(_bits(self.v))


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


Value = object  # IRI | str | LangStr | bool | int | Dec | F32 | float | Temporal | Literal
NUMERIC = (int, Dec, F32, float)  # bool is excluded by exact type checks (type(v) is int)
_NUMERIC_TYPES = frozenset((int, Dec, F32, float))


def is_numeric(v: object) -> bool:
    return type(v) in _NUMERIC_TYPES


# --- lexical forms -> values ---------------------------------------------------------------

_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DECIMAL_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?\Z")
_DOUBLE_RE = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])\Z"
)
_DATETIME_RE = re.compile(
    r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2}(?:\.[0-9]+)?)(Z|[+-][0-9]{2}:[0-9]{2})?\Z"
)
_DATE_RE = re.compile(r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})(Z|[+-][0-9]{2}:[0-9]{2})?\Z")
_TIME_RE = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2}(?:\.[0-9]+)?)(Z|[+-][0-9]{2}:[0-9]{2})?\Z")


def parse_integer(text: str) -> int | None:
    if _INTEGER_RE.match(text) is None:
        return None
    value = int(text)
    return value if _I64_MIN <= value <= _I64_MAX else None


def parse_decimal(text: str) -> Dec | None:
    match = _DECIMAL_RE.match(text)
    if match is None:
        return None
    sign, whole, frac = match.groups()
    if not whole and not frac:
        return None
    frac = (frac or "").rstrip("0")
    if len(frac) > 18:
        return None
    value = int(whole or "0") * _SCALE + (int(frac) * 10 ** (18 - len(frac)) if frac else 0)
    value = -value if sign == "-" else value
    return Dec(value) if _I128_MIN <= value <= _I128_MAX else None


def parse_double(text: str) -> float | None:
    return float(text) if _DOUBLE_RE.match(text) else None


def parse_float(text: str) -> F32 | None:
    value = parse_double(text)
    return None if value is None else F32(f32(value))


def parse_boolean(text: str) -> bool | None:
    if text == "true" or text == "1":
        return True
    if text == "false" or text == "0":
        return False
    return None


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
    dec = parse_decimal(text)
    if dec is None or not 0 <= dec.v < 60 * _SCALE:
        return None
    return dec.v


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
    value = total * _SCALE + second
    if not _I128_MIN <= value <= _I128_MAX:
        raise ExprError("dateTime overflow")
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
    except ExprError:
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
    except ExprError:
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


def _duration_parser(datatype: str) -> Callable[[str], Duration | None]:
    def parse(text: str) -> Duration | None:
        match = _DURATION_RE.match(text)
        if match is None or text.endswith(("P", "T")):
            return None
        sign, years, months, days, hours, minutes, secs = match.groups()
        if datatype == XSD_YEARMONTHDURATION and (days or hours or minutes or secs):
            return None
        if datatype == XSD_DAYTIMEDURATION and (years or months):
            return None
        fraction = parse_decimal(secs) if secs else Dec(0)
        if fraction is None:
            return None
        total_months = int(years or 0) * 12 + int(months or 0)
        total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60) * _SCALE + fraction.v
        if sign:
            total_months, total = -total_months, -total
        if not (_I64_MIN <= total_months <= _I64_MAX and _I128_MIN <= total <= _I128_MAX):
            return None
        return Duration(total_months, total, datatype)
    return parse


_INTEGER_TYPES = ("integer", "byte", "short", "int", "long", "unsignedByte", "unsignedShort",
                  "unsignedInt", "unsignedLong", "positiveInteger", "negativeInteger",
                  "nonPositiveInteger", "nonNegativeInteger")
PARSERS = {XSD + name: parse_integer for name in _INTEGER_TYPES}
PARSERS.update({
    XSD_BOOLEAN: parse_boolean, XSD_DECIMAL: parse_decimal, XSD_FLOAT: parse_float,
    XSD_DOUBLE: parse_double, XSD_DATETIME: parse_datetime, XSD + "dateTimeStamp": parse_datetime,
    XSD_DATE: parse_date, XSD_TIME: parse_time,
    XSD_DURATION: _duration_parser(XSD_DURATION),
    XSD_YEARMONTHDURATION: _duration_parser(XSD_YEARMONTHDURATION),
    XSD_DAYTIMEDURATION: _duration_parser(XSD_DAYTIMEDURATION),
})


def canonical_term(term: Term) -> Term:
    """The canonical form of a literal of a known datatype (what Oxigraph stores and compares).

    Query constants are canonicalised at parse time; events should be canonicalised on
    publication so that pattern matching (RDF term equality) agrees with the stores.
    """
    if type(term) is not Literal or term.datatype == XSD_STRING or term.language is not None:
        return term
    parser = PARSERS.get(term.datatype)
    if parser is None:
        return term
    value = parser(term.lexical)
    return term if value is None else to_term(value)


def to_value(term: Term) -> Value:
    """The expression value of an RDF term (ill-typed or unknown literals stay literals)."""
    if type(term) is IRI:
        return term
    datatype = term.datatype
    if datatype == XSD_STRING:
        return term.lexical
    if term.language is not None:
        return LangStr(term.lexical, term.language)
    parser = PARSERS.get(datatype)
    if parser is None:
        return term
    value = parser(term.lexical)
    return term if value is None else value


# --- values -> canonical lexical forms ----------------------------------------------------

def f32(x: float) -> float:
    """Round a double to single precision (overflow gives an infinity, as a cast does)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _plain(digits: str) -> str:
    """Shortest round-trip digits written without exponent, like Rust's Display for floats."""
    if "e" in digits or "E" in digits:
        digits = format(_PyDecimal(digits), "f")
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    return digits


def format_double(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "INF" if x > 0 else "-INF"
    return _plain(repr(x))


def format_float(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return format_double(x)
    for precision in range(1, 10):
        text = "%.*g" % (precision, x)
        if f32(float(text)) == x:
            break
    if x == 0 and math.copysign(1.0, x) < 0:
        return "-0"
    return _plain(text)


def format_decimal(v: int) -> str:
    sign = "-" if v < 0 else ""
    whole, frac = divmod(abs(v), _SCALE)
    if not frac:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{str(frac).rjust(18, '0').rstrip('0')}"


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def components(t: Temporal) -> tuple[int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second*10^18) in the value's own timezone (Oxigraph's algorithm)."""
    local = _trunc_div(t.v, _SCALE) + (t.tz or 0) * 60
    days = local // 86400 + 366
    shift = 0
    if days < 0:
        shift = _trunc_div(days, 146097) - 1
        days -= shift * 146097
        shift *= 400
    y400 = _trunc_div(days, 146097)  # Rust integer division truncates: keep it for -1 below
    days -= y400 * 146097
    days -= 1
    y100 = _trunc_div(days, 36524)
    days -= y100 * 36524
    days += 1
    y4 = _trunc_div(days, 1461)
    days -= y4 * 1461
    days -= 1
    y1 = _trunc_div(days, 365)
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
    second = abs(t.v % (60 * _SCALE))
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
    sec = "0" + sec if second < 10 * _SCALE else sec
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
    days, rest = divmod(seconds, 86400 * _SCALE)
    hours, rest = divmod(rest, 3600 * _SCALE)
    minutes, rest = divmod(rest, 60 * _SCALE)
    text += f"{days}D" if days else ""
    if hours or minutes or rest:
        text += "T" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
        text += f"{format_decimal(rest)}S" if rest else ""
    if text.endswith("P"):
        return "P0M" if d.datatype == XSD_YEARMONTHDURATION else "PT0S"
    return text


def to_term(v: Value) -> Term:
    """The canonical RDF term of a value (used for results of functions and for sameTerm)."""
    tv = type(v)
    if tv is IRI or tv is Literal:
        return v  # type: ignore[return-value]
    if tv is str:
        return Literal(v)  # type: ignore[arg-type]
    if tv is LangStr:
        return Literal(v.value, language=v.lang)  # type: ignore[attr-defined]
    if tv is bool:
        return Literal("true" if v else "false", XSD_BOOLEAN)
    if tv is int:
        return Literal(str(v), XSD_INTEGER)
    if tv is Dec:
        return Literal(format_decimal(v.v), XSD_DECIMAL)  # type: ignore[attr-defined]
    if tv is F32:
        return Literal(format_float(v.v), XSD_FLOAT)  # type: ignore[attr-defined]
    if tv is float:
        return Literal(format_double(v), XSD_DOUBLE)  # type: ignore[arg-type]
    if isinstance(v, Temporal):
        return Literal(format_temporal(v), v.datatype)
    if tv is Duration:
        return Literal(format_duration(v), v.datatype)  # type: ignore[arg-type,attr-defined]
    raise ExprError(f"not a value: {v!r}")


def lexical(v: Value) -> str:
    """STR() of a computed value."""
    if type(v) is IRI:
        return v.value  # type: ignore[attr-defined]
    if type(v) is str:
        return v  # type: ignore[return-value]
    return to_term(v).lexical  # type: ignore[union-attr]


# --- effective boolean value, equality and order ---------------------------------------------

def ebv(v: Value) -> bool:
    tv = type(v)
    if tv is bool:
        return v  # type: ignore[return-value]
    if tv is str:
        return bool(v)
    if tv is int:
        return v != 0
    if tv is float:
        return not (v == 0 or v != v)
    if tv is Dec:
        return v.v != 0  # type: ignore[attr-defined]
    if tv is F32:
        return not (v.v == 0 or v.v != v.v)  # type: ignore[attr-defined]
    raise ExprError("no effective boolean value")


def dec_to_double(v: int) -> float:
    shift = _SCALE
    if v:
        while shift != 1 and v % 10 == 0:
            v //= 10
            shift //= 10
    return float(v) / float(shift)


def _num_pair(a: Value, b: Value) -> tuple[object, object]:
    """Promote two numerics to a common comparable representation (ints are exact)."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int or ta is float:
            return a, b
        return a.v, b.v  # type: ignore[attr-defined]
    if ta is float or tb is float:
        return _as_double(a), _as_double(b)
    if ta is F32 or tb is F32:
        return _as_float(a), _as_float(b)
    return _as_scaled(a), _as_scaled(b)  # int with Dec


def _as_double(v: Value) -> float:
    tv = type(v)
    if tv is float:
        return v  # type: ignore[return-value]
    if tv is int:
        return float(v)  # type: ignore[arg-type]
    if tv is F32:
        return v.v  # type: ignore[attr-defined]
    return dec_to_double(v.v)  # type: ignore[attr-defined]


def _as_float(v: Value) -> float:
    tv = type(v)
    if tv is F32:
        return v.v  # type: ignore[attr-defined]
    return f32(_as_double(v))


def _as_scaled(v: Value) -> int:
    return v * _SCALE if type(v) is int else v.v  # type: ignore[operator,attr-defined]


def identical(a: Value, b: Value) -> bool:
    """Oxigraph's value identity, which makes `a <= a` true for any term."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is float:
        return _bits(a) == _bits(b)  # type: ignore[arg-type]
    return a == b


def equals(a: Value, b: Value) -> bool:
    """The `=` operator (raises ExprError where SPARQL gives a type error)."""
    ta, tb = type(a), type(b)
    if ta is IRI or ta is LangStr:
        return a == b
    if ta is Literal:
        if tb is Literal and a == b:
            return True
        if tb is IRI or tb is LangStr:
            return False
        raise ExprError("cannot compare literals of unknown or ill-typed datatypes")
    if tb is Literal:
        raise ExprError("cannot compare literals of unknown or ill-typed datatypes")
    if ta in _NUMERIC_TYPES:
        if tb in _NUMERIC_TYPES:
            x, y = _num_pair(a, b)
            return x == y
        return False
    if ta is str or ta is bool:
        return tb is ta and a == b
    if isinstance(a, Temporal):
        return tb is ta and a == b
    if ta is Duration:
        return a == b
    return False


def compare(a: Value, b: Value) -> int:
    """-1, 0 or 1 for <, =, > (raises ExprError when the values are not ordered)."""
    if identical(a, b):
        return 0
    ta, tb = type(a), type(b)
    if ta in _NUMERIC_TYPES and tb in _NUMERIC_TYPES:
        x, y = _num_pair(a, b)
    elif ta is str and tb is str:
        x, y = a, b
    elif ta is LangStr and tb is LangStr and a.lang == b.lang:  # type: ignore[attr-defined]
        x, y = a.value, b.value  # type: ignore[attr-defined]
    elif ta is tb and isinstance(a, Temporal):
        return _compare_temporal(a, b)  # type: ignore[arg-type]
    elif ta is Duration and tb is Duration:
        return _compare_durations(a, b)  # type: ignore[arg-type]
    else:
        raise ExprError("values are not comparable")
    if x < y:  # type: ignore[operator]
        return -1
    if x > y:  # type: ignore[operator]
        return 1
    if x == y:
        return 0
    raise ExprError("NaN is not ordered")


_FOURTEEN_HOURS = 14 * 3600 * _SCALE


def _compare_temporal(a: Temporal, b: Temporal) -> int:
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
        raise ExprError("indeterminate order between dateTimes with and without timezone")
    return first


_REFERENCES = ((1696, 9), (1697, 2), (1903, 3), (1903, 7))  # XSD's reference dates (day 1)


def _compare_durations(a: Duration, b: Duration) -> int:
    """XSD duration order: compare the dates the two durations reach from four reference dates."""
    results = set()
    for year, month in _REFERENCES:
        ends = []
        for d in (a, b):
            y, m = divmod(month - 1 + d.months, 12)
            ends.append(_timeline(year + y, m + 1, 1, 0, 0, 0, None) + d.seconds)
        results.add((ends[0] > ends[1]) - (ends[0] < ends[1]))
    if len(results) != 1:
        raise ExprError("indeterminate order between durations")
    return results.pop()


# --- arithmetic -----------------------------------------------------------------------------

def _check_i64(v: int) -> int:
    if not _I64_MIN <= v <= _I64_MAX:
        raise ExprError("integer overflow")
    return v


def dec_mul(a: int, b: int) -> int:
    """Oxigraph's decimal product: exact, an error when digits would be lost."""
    if a == 0 or b == 0:
        return 0
    shift = -18
    while a % 10 == 0:
        a //= 10
        shift += 1
    while b % 10 == 0:
        b //= 10
        shift += 1
    if shift < 0:
        raise ExprError("decimal underflow")
    return Dec(a * b * 10**shift).v


def dec_div(a: int, b: int) -> int:
    """Oxigraph's decimal quotient (truncated to 18 fractional digits)."""
    if b == 0:
        raise ExprError("division by zero")
    shift = -18
    if a:
        while _I128_MIN <= a * 10 <= _I128_MAX:
            a *= 10
            shift += 1
    while b % 10 == 0:
        b //= 10
        shift += 1
    if shift < 0:
        raise ExprError("decimal overflow")
    return Dec(_trunc_div(_trunc_div(a, b), 10**shift)).v


def arithmetic(op: str, a: Value, b: Value) -> Value:
    ta, tb = type(a), type(b)
    if ta not in _NUMERIC_TYPES or tb not in _NUMERIC_TYPES:
        if op == "-" and ta is tb and isinstance(a, Temporal) and (a.tz is None) == (b.tz is None):  # type: ignore[attr-defined]
            return Duration(0, a.v - b.v, XSD_DAYTIMEDURATION)  # type: ignore[attr-defined]
        raise ExprError("arithmetic on non-numeric values")
    if ta is int and tb is int:
        if op == "+":
            return _check_i64(a + b)  # type: ignore[operator]
        if op == "-":
            return _check_i64(a - b)  # type: ignore[operator]
        if op == "*":
            return _check_i64(a * b)  # type: ignore[operator]
        return Dec(dec_div(a * _SCALE, b * _SCALE))  # type: ignore[operator]
    x, y = _num_pair(a, b)
    if ta is float or tb is float or ta is F32 or tb is F32:
        if op == "+":
            r = x + y  # type: ignore[operator]
        elif op == "-":
            r = x - y  # type: ignore[operator]
        elif op == "*":
            r = x * y  # type: ignore[operator]
        elif y == 0:
            r = math.nan if x == 0 or x != x else math.copysign(math.inf, x) * math.copysign(1.0, y)  # type: ignore[arg-type]
        else:
            r = x / y  # type: ignore[operator]
        return r if ta is float or tb is float else F32(f32(r))
    if op == "+":
        return Dec(x + y)  # type: ignore[operator]
    if op == "-":
        return Dec(x - y)  # type: ignore[operator]
    if op == "*":
        return Dec(dec_mul(x, y))  # type: ignore[arg-type]
    return Dec(dec_div(x, y))  # type: ignore[arg-type]


def negate(v: Value) -> Value:
    tv = type(v)
    if tv is int:
        return _check_i64(-v)  # type: ignore[operator]
    if tv is float:
        return -v  # type: ignore[operator]
    if tv is Dec:
        return Dec(-v.v)  # type: ignore[attr-defined]
    if tv is F32:
        return F32(-v.v)  # type: ignore[attr-defined]
    if tv is Duration:
        return Duration(-v.months, -v.seconds, v.datatype)  # type: ignore[attr-defined]
    raise ExprError("unary minus on a non-numeric value")


def plus(v: Value) -> Value:
    if type(v) not in _NUMERIC_TYPES and type(v) is not Duration:
        raise ExprError("unary plus on a non-numeric value")
    return v

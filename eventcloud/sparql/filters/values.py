"""Runtime values of FILTER expressions: typed values, their lexical forms, and the operators.

A FILTER is evaluated over Python values, not RDF terms, so that `?age > 25` costs one parse
of the bound literal and one comparison. The value model mirrors the one of the SPARQL engine
the tests use as oracle (Oxigraph), so that corner cases agree with it:

    IRI -> model.IRI              simple / xsd:string literal -> str      rdf:langString -> LangStr
    xsd:boolean -> bool           xsd:integer and derived types -> int (64-bit, overflow is an error)
    xsd:decimal -> Dec (fixed point, 18 fractional digits)   xsd:float -> F32   xsd:double -> float
    xsd:dateTime / xsd:date / xsd:time -> DateTimeV / DateV / TimeV (filter_temporal)
    xsd:duration, xsd:yearMonthDuration, xsd:dayTimeDuration -> Duration (filter_temporal)
    anything else (unknown datatype, or an ill-typed lexical form) -> the model.Literal itself

Every operation raises ExprError on a SPARQL error (type error, overflow, unbound variable);
filters.py turns that into "the filter is false".
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal as _PyDecimal

from eventcloud.sparql.filters.temporal import (
    SCALE as _SCALE, XSD_DATE, XSD_DATETIME, XSD_DAYTIMEDURATION, XSD_DURATION, XSD_TIME, XSD_YEARMONTHDURATION,
    Duration, Temporal, compare_durations, compare_temporal, duration_parser, format_decimal, format_duration,
    format_temporal, parse_date, parse_datetime, parse_time, trunc_div,
)
from eventcloud.rdf.model import IRI, XSD, XSD_STRING, Literal, Term

XSD_BOOLEAN = XSD + "boolean"
XSD_INTEGER = XSD + "integer"
XSD_DECIMAL = XSD + "decimal"
XSD_FLOAT = XSD + "float"
XSD_DOUBLE = XSD + "double"

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I128_MIN, _I128_MAX = -(2**127), 2**127 - 1


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


Value = object  # IRI | str | LangStr | bool | int | Dec | F32 | float | Temporal | Duration | Literal
_NUMERIC_TYPES = frozenset((int, Dec, F32, float))


def is_numeric(v: object) -> bool:
    return type(v) in _NUMERIC_TYPES


# --- lexical forms -> values ---------------------------------------------------------------

_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DECIMAL_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?\Z")
_DOUBLE_RE = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])\Z"
)


def parse_integer(text: str) -> int | None:
    if len(text) > 20 and len(text.lstrip("+-0")) > 20:   # beyond 64 bits (and int()'s digit limit)
        return None
    if text.isascii() and text.isdigit():  # the common case, without the regular expression
        value = int(text)
        return value if value <= _I64_MAX else None
    if _INTEGER_RE.match(text) is None:
        return None
    value = int(text)
    return value if _I64_MIN <= value <= _I64_MAX else None


def parse_decimal(text: str) -> Dec | None:
    match = _DECIMAL_RE.match(text)
    if match is None:
        return None
    sign, whole, frac = match.groups()
    frac = (frac or "").rstrip("0")
    if not whole and not frac:  # "", "." and (as the oracle has it) ".000" are not decimals
        return None
    if len(frac) > 18 or len(whole.lstrip("0")) > 21:   # beyond 128 bits (and int()'s digit limit)
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


_INTEGER_TYPES = ("integer", "byte", "short", "int", "long", "unsignedByte", "unsignedShort",
                  "unsignedInt", "unsignedLong", "positiveInteger", "negativeInteger",
                  "nonPositiveInteger", "nonNegativeInteger")
PARSERS = {XSD + name: parse_integer for name in _INTEGER_TYPES}
PARSERS.update({
    XSD_BOOLEAN: parse_boolean, XSD_DECIMAL: parse_decimal, XSD_FLOAT: parse_float,
    XSD_DOUBLE: parse_double, XSD_DATETIME: parse_datetime, XSD + "dateTimeStamp": parse_datetime,
    XSD_DATE: parse_date, XSD_TIME: parse_time,
    XSD_DURATION: duration_parser(XSD_DURATION),
    XSD_YEARMONTHDURATION: duration_parser(XSD_YEARMONTHDURATION),
    XSD_DAYTIMEDURATION: duration_parser(XSD_DAYTIMEDURATION),
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
        return compare_temporal(a, b)  # type: ignore[arg-type]
    elif ta is Duration and tb is Duration:
        return compare_durations(a, b)  # type: ignore[arg-type]
    else:
        raise ExprError("values are not comparable")
    if x < y:  # type: ignore[operator]
        return -1
    if x > y:  # type: ignore[operator]
        return 1
    if x == y:
        return 0
    raise ExprError("NaN is not ordered")


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
    return Dec(trunc_div(trunc_div(a, b), 10**shift)).v


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

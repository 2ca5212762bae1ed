"""SPARQL built-in functions and casts for compiled FILTERs.

Each function takes already-evaluated argument values (see filter_values) and returns a value
or raises ExprError; argument rules (string compatibility, what a cast accepts) follow the
oracle engine. Special forms that need lazy evaluation or term-level access (BOUND, IF,
COALESCE, STR and sameTerm on variables, logical operators, REGEX/REPLACE) live in filters.py;
pattern translation lives in filter_regex.py.
"""

from __future__ import annotations

import hashlib
import math
import re
import sys
from typing import Callable

from eventcloud.sparql.filters.temporal import (
    SCALE as _SCALE, XSD_DATE, XSD_DATETIME, XSD_DAYTIMEDURATION, XSD_TIME, DateTimeV, DateV, Duration, Temporal,
    TimeV, components, format_tz, parse_date, parse_datetime, parse_time,
)
from eventcloud.sparql.filters.values import (
    XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_FLOAT, XSD_INTEGER, _I64_MAX, _I64_MIN, Dec, ExprError, F32, LangStr,
    Value, dec_to_double, f32, is_numeric, lexical, parse_boolean, parse_decimal, parse_double, parse_float,
    parse_integer, to_value,
)
from eventcloud.sparql.filters.regex import BoundedRegex, RegexError, translate_regex
from eventcloud.rdf.model import IRI, RDF_LANGSTRING, XSD_STRING, Literal, ModelError

# --- argument helpers -------------------------------------------------------------------------

def string_and_lang(v: Value) -> tuple[str, str | None]:
    """A string literal argument (simple, xsd:string or language-tagged)."""
    if type(v) is str:
        return v, None  # type: ignore[return-value]
    if type(v) is LangStr:
        return v.value, v.lang  # type: ignore[attr-defined]
    raise ExprError("expected a string literal")


def simple_string(v: Value) -> str:
    if type(v) is not str:
        raise ExprError("expected a simple literal")
    return v  # type: ignore[return-value]


def compatible(a: Value, b: Value) -> tuple[str, str, str | None]:
    """SPARQL argument compatibility for STRSTARTS, CONTAINS, STRBEFORE, ..."""
    va, la = string_and_lang(a)
    vb, lb = string_and_lang(b)
    if lb is not None and la != lb:
        raise ExprError("incompatible string arguments")
    return va, vb, la


def plain(value: str, lang: str | None) -> Value:
    return value if lang is None else LangStr(value, lang)


# --- string functions ---------------------------------------------------------------------------

def fn_lang(v: Value) -> Value:
    if type(v) is LangStr:
        return v.lang  # type: ignore[attr-defined]
    if type(v) is IRI:
        raise ExprError("LANG of an IRI")
    return ""


def fn_datatype(v: Value) -> Value:
    tv = type(v)
    if tv is IRI:
        raise ExprError("DATATYPE of an IRI")
    if tv is Literal:
        return IRI(v.datatype)  # type: ignore[attr-defined]
    if tv is LangStr:
        return IRI(RDF_LANGSTRING)
    if isinstance(v, (Temporal, Duration)):
        return IRI(v.datatype)
    return IRI(_DATATYPES[tv])


_DATATYPES = {str: XSD_STRING, bool: XSD_BOOLEAN, int: XSD_INTEGER, Dec: XSD_DECIMAL, F32: XSD_FLOAT,
              float: XSD_DOUBLE}


def fn_langmatches(tag: Value, range_: Value) -> Value:
    tag_s, range_s = simple_string(tag).lower(), simple_string(range_).lower()
    if range_s == "*":
        return tag_s != ""
    ranges, tags = range_s.split("-"), tag_s.split("-")
    if len(ranges) > len(tags):
        return False
    return all(r == t for r, t in zip(ranges, tags))


def fn_strlen(v: Value) -> Value:
    return len(string_and_lang(v)[0])


def fn_substr(source: Value, start: Value, length: Value | None = None) -> Value:
    text, lang = string_and_lang(source)
    if type(start) is not int or (length is not None and type(length) is not int):
        raise ExprError("SUBSTR positions must be integers")
    begin = max(start, 1)  # type: ignore[call-overload]
    if length is None:
        return plain(text[begin - 1:], lang)
    end = start + length  # type: ignore[operator]
    return plain(text[begin - 1:end - 1] if end > begin else "", lang)


def fn_ucase(v: Value) -> Value:
    text, lang = string_and_lang(v)
    return plain(text.upper(), lang)


def fn_lcase(v: Value) -> Value:
    text, lang = string_and_lang(v)
    return plain(text.lower(), lang)


def fn_strstarts(a: Value, b: Value) -> Value:
    x, y, _ = compatible(a, b)
    return x.startswith(y)


def fn_strends(a: Value, b: Value) -> Value:
    x, y, _ = compatible(a, b)
    return x.endswith(y)


def fn_contains(a: Value, b: Value) -> Value:
    x, y, _ = compatible(a, b)
    return y in x


def fn_strbefore(a: Value, b: Value) -> Value:
    x, y, lang = compatible(a, b)
    position = x.find(y)
    return "" if position < 0 else plain(x[:position], lang)


def fn_strafter(a: Value, b: Value) -> Value:
    x, y, lang = compatible(a, b)
    position = x.find(y)
    return "" if position < 0 else plain(x[position + len(y):], lang)


def fn_concat(*args: Value) -> Value:
    parts, langs = [], set()
    for arg in args:
        text, lang = string_and_lang(arg)
        parts.append(text)
        langs.add(lang)
    lang = langs.pop() if len(langs) == 1 else None
    return plain("".join(parts), lang)


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def fn_encode_for_uri(v: Value) -> Value:
    text, _ = string_and_lang(v)
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode("utf-8", "surrogatepass"))


def _hash(algorithm: str) -> Callable[[Value], Value]:
    def digest(v: Value) -> Value:
        return hashlib.new(algorithm, simple_string(v).encode("utf-8", "surrogatepass")).hexdigest()
    return digest


def fn_strlang(value: Value, lang: Value) -> Value:
    text, tag = simple_string(value), simple_string(lang)
    try:
        literal = Literal(text, language=tag)
    except ModelError as exc:
        raise ExprError(str(exc)) from None
    return LangStr(literal.lexical, literal.language)  # type: ignore[arg-type]


def fn_strdt(value: Value, datatype: Value) -> Value:
    if type(datatype) is not IRI:
        raise ExprError("STRDT needs a datatype IRI")
    try:
        return to_value(Literal(simple_string(value), datatype.value))  # type: ignore[attr-defined]
    except ModelError as exc:
        raise ExprError(str(exc)) from None


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def make_fn_iri(base: str | None) -> Callable[[Value], Value]:
    """IRI()/URI(), resolving relative references against the query's BASE."""
    from urllib.parse import urljoin

    def fn_iri(v: Value) -> Value:
        if type(v) is IRI:
            return v
        text = simple_string(v)
        if not _SCHEME.match(text):
            if base is None:
                raise ExprError("relative IRI without BASE")
            text = urljoin(base, text)
        try:
            return IRI(text)
        except ModelError as exc:
            raise ExprError(str(exc)) from None
    return fn_iri


def fn_is_iri(v: Value) -> Value:
    return type(v) is IRI


def fn_is_blank(v: Value) -> Value:
    return False  # events carry no blank nodes (they are skolemised on publication)


def fn_is_literal(v: Value) -> Value:
    return type(v) is not IRI


def fn_is_numeric(v: Value) -> Value:
    return is_numeric(v)


# --- numeric functions ----------------------------------------------------------------------

def _dec_round(v: int) -> int:
    tenth = abs(v) // (_SCALE // 10) * (1 if v >= 0 else -1)
    if tenth >= 0:
        units = tenth // 10 + (1 if tenth % 10 >= 5 else 0)
    else:
        units = -((-tenth) // 10) - (1 if (-tenth) % 10 > 5 else 0)
    return Dec(units * _SCALE).v


def _float_op(x: float, op: str) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    if op == "round":
        r = float(math.floor(x + 0.5))
    elif op == "ceil":
        r = float(math.ceil(x))
    else:
        r = float(math.floor(x))
    return -0.0 if r == 0 and (x < 0 or math.copysign(1.0, x) < 0) else r


def _numeric_fn(op: str) -> Callable[[Value], Value]:
    def apply(v: Value) -> Value:
        tv = type(v)
        if tv is int:
            if op == "abs":
                result = abs(v)  # type: ignore[arg-type]
                if result > _I64_MAX:
                    raise ExprError("integer overflow")
                return result
            return v
        if tv is Dec:
            x = v.v  # type: ignore[attr-defined]
            if op == "abs":
                return Dec(abs(x))
            if op == "round":
                return Dec(_dec_round(x))
            whole = abs(x) // _SCALE * (1 if x >= 0 else -1)  # truncated
            if op == "ceil" and x > 0 and x % _SCALE:
                whole += 1
            if op == "floor" and x < 0 and x % _SCALE:
                whole -= 1
            return Dec(whole * _SCALE)
        if tv is float:
            return abs(v) if op == "abs" else _float_op(v, op)  # type: ignore[arg-type]
        if tv is F32:
            return F32(abs(v.v) if op == "abs" else _float_op(v.v, op))  # type: ignore[attr-defined]
        raise ExprError(f"{op.upper()} of a non-numeric value")
    return apply


# --- date and time functions --------------------------------------------------------------

def _date_part(index: int, kinds: tuple[type, ...]) -> Callable[[Value], Value]:
    def part(v: Value) -> Value:
        if type(v) not in kinds:
            raise ExprError("not a date/time value")
        value = components(v)[index]  # type: ignore[arg-type]
        return Dec(value) if index == 5 else value
    return part


def fn_timezone(v: Value) -> Value:
    if not isinstance(v, Temporal) or v.tz is None:
        raise ExprError("no timezone")
    minutes = abs(v.tz)
    text = "-" if v.tz < 0 else ""
    text += "PT" + (f"{minutes // 60}H" if minutes // 60 else "") + (f"{minutes % 60}M" if minutes % 60 else "")
    return Literal(text if minutes else "PT0S", XSD_DAYTIMEDURATION)


def fn_tz(v: Value) -> Value:
    if not isinstance(v, Temporal):
        raise ExprError("TZ of a non date/time value")
    return format_tz(v.tz)


# --- casts (XPath casting as the oracle implements it) ---------------------------------------

def cast_string(v: Value) -> Value:
    if type(v) is LangStr:
        return v.value  # type: ignore[attr-defined]
    if type(v) is Literal:
        return v.lexical  # type: ignore[attr-defined]
    return lexical(v)


def cast_boolean(v: Value) -> Value:
    tv = type(v)
    if tv is bool:
        return v
    if tv is str:
        result = parse_boolean(v)  # type: ignore[arg-type]
        if result is None:
            raise ExprError("invalid boolean")
        return result
    if tv in (int, Dec, F32, float):
        x = v.v if tv in (Dec, F32) else v  # type: ignore[attr-defined]
        return not (x == 0 or x != x)
    raise ExprError("cannot cast to xsd:boolean")


def _to_double(v: Value) -> float:
    tv = type(v)
    if tv is float:
        return v  # type: ignore[return-value]
    if tv is F32:
        return v.v  # type: ignore[attr-defined]
    if tv is int or tv is bool:
        return float(v)  # type: ignore[arg-type]
    if tv is Dec:
        return dec_to_double(v.v)  # type: ignore[attr-defined]
    if tv is str:
        result = parse_double(v)  # type: ignore[arg-type]
        if result is not None:
            return result
    raise ExprError("cannot cast to xsd:double")


def cast_double(v: Value) -> Value:
    return _to_double(v)


def cast_float(v: Value) -> Value:
    if type(v) is str:
        result = parse_float(v)  # type: ignore[arg-type]
        if result is None:
            raise ExprError("invalid float")
        return result
    return F32(f32(_to_double(v)))


def cast_integer(v: Value) -> Value:
    tv = type(v)
    if tv is int:
        return v
    if tv is bool:
        return int(v)  # type: ignore[arg-type]
    if tv is str:
        result = parse_integer(v)  # type: ignore[arg-type]
        if result is None:
            raise ExprError("invalid integer")
        return result
    if tv is Dec or tv is float or tv is F32:  # floats go through xsd:decimal, as in the oracle
        scaled = (v if tv is Dec else cast_decimal(v)).v  # type: ignore[attr-defined]
        result = abs(scaled) // _SCALE * (1 if scaled >= 0 else -1)
    else:
        raise ExprError("cannot cast to xsd:integer")
    if not _I64_MIN <= result <= _I64_MAX:
        raise ExprError("integer overflow")
    return result


def cast_decimal(v: Value) -> Value:
    tv = type(v)
    if tv is Dec:
        return v
    if tv is int or tv is bool:
        return Dec(int(v) * _SCALE)  # type: ignore[arg-type]
    if tv is str:
        result = parse_decimal(v)  # type: ignore[arg-type]
        if result is None:
            raise ExprError("invalid decimal")
        return result
    if tv is float or tv is F32:
        shifted = (v if tv is float else v.v) * float(_SCALE)  # type: ignore[attr-defined,operator]
        if not -1.7014118346046923e38 <= shifted <= 1.7014118346046923e38:
            raise ExprError("decimal overflow")
        return Dec(int(shifted))
    raise ExprError("cannot cast to xsd:decimal")


def _temporal_cast(parse: Callable[[str], Value], convert: Callable[[Value], Value | None]) -> Callable[[Value], Value]:
    def cast(v: Value) -> Value:
        result = parse(v) if type(v) is str else convert(v)  # type: ignore[arg-type]
        if result is None:
            raise ExprError("invalid date/time cast")
        return result
    return cast


def _datetime_from(v: Value) -> Value | None:
    if type(v) is DateTimeV:
        return v
    if type(v) is DateV:
        return DateTimeV(v.v, v.tz)  # type: ignore[attr-defined]
    return None


def _date_from(v: Value) -> Value | None:
    if type(v) is DateV:
        return v
    if type(v) is DateTimeV:
        year, month, day, _, _, _ = components(v)  # type: ignore[arg-type]
        return parse_date(f"{'-' if year < 0 else ''}{abs(year):04d}-{month:02d}-{day:02d}{format_tz(v.tz)}")  # type: ignore[attr-defined]
    return None


def _time_from(v: Value) -> Value | None:
    if type(v) is TimeV:
        return v
    if type(v) is DateTimeV:
        _, _, _, hour, minute, second = components(v)  # type: ignore[arg-type]
        whole, frac = divmod(second, _SCALE)
        text = f"{hour:02d}:{minute:02d}:{whole:02d}" + (f".{frac:018d}" if frac else "")
        return parse_time(text + format_tz(v.tz))  # type: ignore[attr-defined]
    return None


CASTS: dict[str, Callable[[Value], Value]] = {
    XSD_STRING: cast_string, XSD_BOOLEAN: cast_boolean, XSD_DOUBLE: cast_double,
    XSD_FLOAT: cast_float, XSD_INTEGER: cast_integer, XSD_DECIMAL: cast_decimal,
    XSD_DATETIME: _temporal_cast(parse_datetime, _datetime_from),
    XSD_DATE: _temporal_cast(parse_date, _date_from),
    XSD_TIME: _temporal_cast(parse_time, _time_from),
}

_DT, _D, _T = (DateTimeV,), (DateTimeV, DateV), (DateTimeV, TimeV)

#: name -> (minimum arity, maximum arity, implementation) for the eagerly evaluated built-ins.
BUILTINS: dict[str, tuple[int, int, Callable[..., Value]]] = {
    "LANG": (1, 1, fn_lang), "LANGMATCHES": (2, 2, fn_langmatches), "DATATYPE": (1, 1, fn_datatype),
    "ABS": (1, 1, _numeric_fn("abs")), "CEIL": (1, 1, _numeric_fn("ceil")),
    "FLOOR": (1, 1, _numeric_fn("floor")), "ROUND": (1, 1, _numeric_fn("round")),
    "CONCAT": (0, sys.maxsize, fn_concat), "SUBSTR": (2, 3, fn_substr), "STRLEN": (1, 1, fn_strlen),
    "UCASE": (1, 1, fn_ucase), "LCASE": (1, 1, fn_lcase), "ENCODE_FOR_URI": (1, 1, fn_encode_for_uri),
    "CONTAINS": (2, 2, fn_contains), "STRSTARTS": (2, 2, fn_strstarts), "STRENDS": (2, 2, fn_strends),
    "STRBEFORE": (2, 2, fn_strbefore), "STRAFTER": (2, 2, fn_strafter),
    "YEAR": (1, 1, _date_part(0, _D)), "MONTH": (1, 1, _date_part(1, _D)), "DAY": (1, 1, _date_part(2, _D)),
    "HOURS": (1, 1, _date_part(3, _T)), "MINUTES": (1, 1, _date_part(4, _T)),
    "SECONDS": (1, 1, _date_part(5, _T)), "TIMEZONE": (1, 1, fn_timezone), "TZ": (1, 1, fn_tz),
    "MD5": (1, 1, _hash("md5")), "SHA1": (1, 1, _hash("sha1")), "SHA256": (1, 1, _hash("sha256")),
    "SHA384": (1, 1, _hash("sha384")), "SHA512": (1, 1, _hash("sha512")),
    "STRLANG": (2, 2, fn_strlang), "STRDT": (2, 2, fn_strdt),
    "isIRI": (1, 1, fn_is_iri), "isURI": (1, 1, fn_is_iri), "isBLANK": (1, 1, fn_is_blank),
    "isLITERAL": (1, 1, fn_is_literal), "isNUMERIC": (1, 1, fn_is_numeric),
}


def compile_regex(pattern: Value, flags: Value | None) -> BoundedRegex:
    """REGEX/REPLACE pattern and flags values -> compiled pattern (ExprError when invalid)."""
    if type(pattern) is not str or (flags is not None and type(flags) is not str):
        raise ExprError("REGEX pattern and flags must be simple literals")
    try:
        return translate_regex(pattern, flags or "")  # type: ignore[arg-type]
    except RegexError as exc:
        raise ExprError(str(exc)) from None

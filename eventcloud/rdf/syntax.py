"""The IRI grammar of RFC 3987 and the language tags of BCP 47, so that a term the data model
accepts is one every store accepts.

A quad is routed to several owners once its entry peer accepted it; a term one of them refuses
(pyoxigraph checks both grammars, percent escapes included) would fail that owner's write after
the others' succeeded, and answered `internal`. So the model checks the whole grammar where
terms enter, and says which part is wrong. Pure: regular expressions, `ipaddress` for IPv6.
"""

from __future__ import annotations

import ipaddress
import re

__all__ = ["iri_problem", "is_language_tag"]

_UCS = ("\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
        + "".join(f"{chr(plane << 16)}-{chr((plane << 16) | 0xFFFD)}" for plane in range(1, 14))
        + "\U000e1000-\U000efffd")
_PRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_UNRESERVED = rf"A-Za-z0-9\-._~{_UCS}"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"

_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_HOST = rf"(?:\[(?P<literal>[^\]]*)\]|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*)"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_PATH = rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?)"
_QUERY = rf"(?:{_PCHAR}|[/?{_PRIVATE}])*"
_FRAGMENT = rf"(?:{_PCHAR}|[/?])*"
_IRI = re.compile(rf"{_SCHEME}:{_PATH}(?:\?{_QUERY})?(?:#{_FRAGMENT})?")
_IP_FUTURE = re.compile(rf"v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~{_SUB_DELIMS}:]+")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def iri_problem(value: str) -> str | None:
    """What makes `value` no absolute IRI under RFC 3987; None if it is one."""
    match = _IRI.fullmatch(value)
    if match is None:
        bad = _BAD_PERCENT.search(value)
        if bad is not None:
            return f"a '%' not followed by two hexadecimal digits at character {bad.start() + 1}"
        return "it does not follow the IRI syntax of RFC 3987 (scheme:path?query#fragment)"
    literal = match.group("literal")
    if literal is not None and not _IP_FUTURE.fullmatch(literal):
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return f"[{literal}] is not an IPv6 address"
    return None


_ALNUM = "[A-Za-z0-9]"
_LANGTAG = (r"(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})"           # language (extlang)
            r"(?:-[A-Za-z]{4})?"                                                 # script
            r"(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"                                    # region
            rf"(?:-(?:{_ALNUM}{{5,8}}|[0-9]{_ALNUM}{{3}}))*"                      # variants
            rf"(?:-[0-9A-WYZa-wyz](?:-{_ALNUM}{{2,8}})+)*"                       # extensions
            rf"(?:-[xX](?:-{_ALNUM}{{1,8}})+)?")                                  # private use
_PRIVATE_USE = rf"[xX](?:-{_ALNUM}{{1,8}})+"
_GRANDFATHERED = ("en-GB-oed|i-ami|i-bnn|i-default|i-enochian|i-hak|i-klingon|i-lux|i-mingo|i-navajo|i-pwn|"
                  "i-tao|i-tay|i-tsu|sgn-BE-FR|sgn-BE-NL|sgn-CH-DE|art-lojban|cel-gaulish|no-bok|no-nyn|"
                  "zh-guoyu|zh-hakka|zh-min|zh-min-nan|zh-xiang")
_LANGUAGE_TAG = re.compile(rf"{_LANGTAG}|{_PRIVATE_USE}|(?i:{_GRANDFATHERED})")


def is_language_tag(tag: str) -> bool:
    """Whether `tag` is a well-formed BCP 47 language tag (RFC 5646 §2.1)."""
    return _LANGUAGE_TAG.fullmatch(tag) is not None

"""Zone bounds for people: a coordinate read back as the string prefix it stands for.

A coordinate is a base-`radix` fraction whose digits are characters of the space's alphabet
(`coordinates`); reading the digits back gives the string at which a zone's interval starts
or ends, e.g. a subject axis split once into ["", "O") and ["O", end). Digits past
`max_chars` are shown as "…"; the top of an axis is `None` (no upper bound).
"""

from __future__ import annotations

from eventcloud.overlay.coordinates import CoordinateSpace

__all__ = ["coordinate_text", "interval_text"]


def coordinate_text(space: CoordinateSpace, value: int, max_chars: int = 12) -> str | None:
    """The string prefix a coordinate stands for; None for the top of the axis."""
    if value >= space.top:
        return None
    radix = space.radix
    digits = []
    remaining = value
    for _ in range(space.precision):
        remaining, digit = divmod(remaining, radix)
        digits.append(digit)
    digits.reverse()
    while digits and digits[-1] == 0:
        digits.pop()
    chars = []
    for digit in digits:
        if len(chars) == max_chars:
            chars.append("…")
            break
        chars.append("\u2400" if digit == 0 else chr(space.alphabet_lo + digit - 1))
    return "".join(chars)


def interval_text(space: CoordinateSpace, lo: int, hi: int, max_chars: int = 12) -> str:
    """`["", "O")`-style text of a half-open interval of one axis."""
    low = coordinate_text(space, lo, max_chars)
    high = coordinate_text(space, hi, max_chars)
    return f"[{_quoted(low)}, {'end' if high is None else _quoted(high)})"


def _quoted(text: str | None) -> str:
    return '""' if not text else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

"""Typed message bodies: frozen dataclasses whose fields each name their wire codec.

    @message
    class Find(Body):
        pattern: Pattern = field(PATTERN, default=(None,) * 4)

    Find(pattern).to_wire()          -> {"pattern": [...]}
    Find.from_wire({"pattern": ...}) -> Find(...), or BadRequest naming the field

A `Codec` turns one field's value into msgpack-able data and back; its decoder raises
BadRequest on anything that does not fit. `trusted=True` is passed down to the codecs that
can skip re-validation (data from another peer, already checked at the entry peer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING
from typing import Any, Callable, ClassVar, TypeVar

from eventcloud.errors import BadRequest, EventCloudError

__all__ = ["Codec", "message", "field", "Body", "STR", "INT", "FLOAT", "BOOL", "RAW", "MAP", "LIST", "OPT", "NESTED"]

T = TypeVar("T")


class Codec:
    """How one kind of value crosses the wire."""

    __slots__ = ("name", "encode", "decode", "label")

    def __init__(self, name: str, encode: Callable[[Any], Any], decode: Callable[[Any, bool], Any],
                 label: str | None = None) -> None:
        self.name = name          # in error messages: "expected <name>"
        self.encode = encode
        self.decode = decode      # (data, trusted) -> value; raises BadRequest
        self.label = label or name.removeprefix("a ").removeprefix("an ")  # in the protocol reference

    def __repr__(self) -> str:
        return f"Codec({self.name})"


def _same(value: Any) -> Any:
    return value


def _typed(kind: type | tuple[type, ...], name: str) -> Codec:
    def decode(data: Any, trusted: bool) -> Any:
        if not isinstance(data, kind) or (kind is int and type(data) is bool):
            raise BadRequest(f"expected {name}, got {type(data).__name__}")
        return data
    return Codec(name, _same, decode)


STR = _typed(str, "a string")
INT = _typed(int, "an integer")
BOOL = _typed(bool, "a boolean")
MAP = _typed(dict, "a map")


def _float(data: Any, trusted: bool) -> float:
    if type(data) not in (int, float):
        raise BadRequest(f"expected a number, got {type(data).__name__}")
    return float(data)


FLOAT = Codec("a number", _same, _float)
#: Passed through untouched (a nested routed body, whose type only its destination knows).
RAW = Codec("any value", _same, lambda data, trusted: data)


def LIST(item: Codec) -> Codec:
    item_encode, item_decode = item.encode, item.decode

    def encode(values: Any) -> Any:
        return list(values) if item_encode is _same else [item_encode(v) for v in values]

    def decode(data: Any, trusted: bool) -> Any:
        if not isinstance(data, list):
            raise BadRequest(f"expected a list of {item.name}, got {type(data).__name__}")
        if item is RAW:
            return tuple(data)
        try:
            return tuple([item_decode(value, trusted) for value in data])
        except BadRequest:
            for index, value in enumerate(data):  # again, one by one, to say which item
                try:
                    item_decode(value, trusted)
                except BadRequest as exc:
                    raise BadRequest(f"item {index}: {exc.message}") from None
            raise
    return Codec(f"a list of {item.label}", encode, decode, f"[{item.label}]")


def OPT(inner: Codec) -> Codec:
    return Codec(f"{inner.name} or null", lambda v: None if v is None else inner.encode(v),
                 lambda data, trusted: None if data is None else inner.decode(data, trusted), f"{inner.label} or null")


def NESTED(cls: "type[Body]") -> Codec:
    return Codec(f"a {cls.__name__} map", lambda v: v.to_wire(), lambda data, trusted: cls.from_wire(data, trusted),
                 cls.__name__)


def field(codec: Codec, *, default: Any = MISSING, key: str | None = None) -> Any:
    """A message field with its codec (and, optionally, a default and a wire key other than its name)."""
    metadata = {"codec": codec, "key": key}
    if default is MISSING:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, (list, dict, set)):
        raise TypeError("use an immutable default (a tuple) for message fields")
    return dataclasses.field(default=default, metadata=metadata)


class Body:
    """Base of every typed body (see `message`)."""

    __slots__ = ()
    _fields: ClassVar[tuple[tuple[str, str, Codec, bool], ...]] = ()

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key, codec, _ in self._fields:
            value = getattr(self, name)
            if value is not None:
                out[key] = codec.encode(value)
        return out

    @classmethod
    def from_wire(cls: type[T], data: Any, trusted: bool = False) -> T:
        if not isinstance(data, dict):
            raise BadRequest(f"a {cls.__name__} body must be a map, got {type(data).__name__}")
        values = {}
        for name, key, codec, required in cls._fields:  # type: ignore[attr-defined]
            raw = data.get(key)
            if raw is None:
                if required:
                    raise BadRequest(f"{cls.__name__}: field {key!r} is missing")
                continue
            try:
                values[name] = codec.decode(raw, trusted)
            except BadRequest as exc:
                raise BadRequest(f"{cls.__name__}: field {key!r}: {exc.message}") from None
            except EventCloudError as exc:  # model or geometry errors from a codec
                raise BadRequest(f"{cls.__name__}: field {key!r}: {exc.message}") from None
        return cls(**values)


def message(cls: type[T]) -> type[T]:
    """Make `cls` a frozen, slotted dataclass body with a compiled field table."""
    if not issubclass(cls, Body):
        raise TypeError(f"{cls.__name__} must derive from schema.Body")
    data_cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    table = []
    for f in dataclasses.fields(data_cls):
        codec = f.metadata.get("codec")
        if codec is None:
            raise TypeError(f"{cls.__name__}.{f.name} has no codec: declare it with schema.field(CODEC)")
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: give message fields an immutable default, not a factory")
        required = f.default is MISSING
        table.append((f.name, f.metadata.get("key") or f.name, codec, required))
    data_cls._fields = tuple(table)  # type: ignore[attr-defined]
    _compile(data_cls, [f.default for f in dataclasses.fields(data_cls)])
    return data_cls  # type: ignore[return-value]


#: Codecs whose check a compiled decoder makes inline: the exact type msgpack gives. Anything
#: else (a subclass, a bool where an int is wanted) takes the generic path, which decides.
_INLINE_TYPES = {id(STR): "str", id(INT): "int", id(BOOL): "bool", id(MAP): "dict"}


def _compile(cls: type[Body], defaults: list[Any]) -> None:
    """Give `cls` a `to_wire` and a `from_wire` written out for its fields (as dataclasses write
    `__init__`): a body crosses the wire at every hop, and the generic loop over the field
    table cost about twice as much. The compiled decoder handles well-formed bodies only; on
    anything else it hands over to `Body.from_wire`, which raises the error naming the field,
    so both accept and refuse exactly the same bodies."""
    env: dict[str, Any] = {"_slow": Body.from_wire.__func__, "_cls": cls}  # type: ignore[attr-defined]
    enc = ["def to_wire(self):", "    out = {}"]
    dec = ["def from_wire(cls, data, trusted=False):",
           "    if type(data) is not dict or cls is not _cls:",
           "        return _slow(cls, data, trusted)",
           "    get = data.get",
           "    try:"]
    args = []
    for i, ((name, key, codec, required), default) in enumerate(zip(cls._fields, defaults)):
        env[f"_k{i}"], env[f"_e{i}"], env[f"_d{i}"], env[f"_v{i}"] = key, codec.encode, codec.decode, default
        enc.append(f"    v = self.{name}")
        enc.append(f"    if v is not None: out[_k{i}] = {'v' if codec.encode is _same else f'_e{i}(v)'}")
        dec.append(f"        r = get(_k{i})")
        if required:
            dec.append("        if r is None: return _slow(cls, data, trusted)")
            value = "r"
        else:
            dec.append(f"        if r is None: a{i} = _v{i}")
            dec.append("        else:")
            value = "r"
        inline = _INLINE_TYPES.get(id(codec))
        pad = "            " if not required else "        "
        if inline is not None:
            dec.append(f"{pad}if type(r) is not {inline}: return _slow(cls, data, trusted)")
            dec.append(f"{pad}a{i} = r")
        else:
            dec.append(f"{pad}a{i} = _d{i}(r, trusted)")
        args.append(f"a{i}")
    enc.append("    return out")
    dec += ["        pass",
            "    except EventCloudError:",
            "        return _slow(cls, data, trusted)",
            f"    return cls({', '.join(args)})"]
    env["EventCloudError"] = EventCloudError
    exec("\n".join(enc), env)
    exec("\n".join(dec), env)
    cls.to_wire = env["to_wire"]  # type: ignore[method-assign]
    cls.from_wire = classmethod(env["from_wire"])  # type: ignore[method-assign,assignment]

"""JSON payloads of entries: :class:`JsonObject`, paths into it, and payload filters.

Theory of operation
-------------------
A :class:`JsonObject` is an immutable JSON object (a ``Mapping``): nested objects are
JsonObjects, arrays are tuples, leaves are ``None``, ``bool``, ``int``, finite ``float``
and ``str``. It is checked and frozen once, when built, so an entry holding one can be
shared by snapshots, threads and the file without copies. Two JsonObjects are equal when
their canonical JSON texts (keys sorted) are equal, so ``1`` and ``1.0`` or ``True`` and
``1`` differ, as they do on the wire; its hash is that text's. :meth:`JsonObject.thaw`
gives back plain ``dict``/``list`` values in the original key order.

Paths name a place inside a value: dot-separated keys (``"user.name"``), each made of
letters, digits, ``_`` and ``-`` (so a path never needs quoting anywhere it travels), and
for text extraction also ``[i]`` and ``[*]`` array steps (``"tags[*]"``).

A *where filter* (:func:`compile_where`) maps paths to conditions, all of which must
hold: a plain value means equality (a nested object matches when each of its fields
matches; an array must be equal element by element); a dict of operators
(``$eq $ne $gt $gte $lt $lte``) applies each. Ordering operators compare a number with a
number or a string with a string; anything else (a missing field, a bool, mixed types)
does not match. Booleans equal only booleans. An operator nested in an object applies
to its field (``{"user": {"age": {"$gt": 2}}}`` is ``{"user.age": {"$gt": 2}}``); a ``$``
key that is not one of those operators is an error wherever it stands.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._errors import InvalidEntryError, InvalidQueryError

__all__ = [
    "MAX_VALUE_BYTES",
    "MAX_VALUE_DEPTH",
    "JsonObject",
    "compile_where",
    "freeze_json",
    "text_at_paths",
]

#: Largest payload accepted, in bytes of its compact UTF-8 JSON text (1 MiB). A payload
#: is kept in memory, in every snapshot that sees it, and rewritten whole on each update.
MAX_VALUE_BYTES = 1 << 20
#: Deepest nesting of objects and arrays accepted in a payload.
MAX_VALUE_DEPTH = 64

_SEGMENT = re.compile(r"[\w-]+")
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_canonical = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True
).encode


def _freeze(value: Any, where: str, depth: int) -> Any:
    if value is None or isinstance(value, (bool, str)):
        if isinstance(value, str):
            if type(value) is not str:
                # An exact copy: a stored entry is out of the collector's sight
                # (``state._UNTRACK_ENTRIES``), so nothing it holds may have a
                # ``__dict__`` that could refer back to it (a cycle never freed).
                value = str.__str__(value)
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidEntryError(f"value{where} holds a lone surrogate") from None
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEntryError(f"value{where} is {value!r}; JSON numbers are finite")
        return float(value)
    if depth >= MAX_VALUE_DEPTH:
        raise InvalidEntryError(f"value is nested deeper than {MAX_VALUE_DEPTH} levels")
    if isinstance(value, JsonObject):
        _check_built(value)
        return value
    if isinstance(value, Mapping):
        return JsonObject._build(value, where, depth + 1)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    raise TypeError(f"value{where} is a {type(value).__name__}, not a JSON value")


def _thaw(value: Any) -> Any:
    if isinstance(value, JsonObject):
        return value.thaw()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


class JsonObject(Mapping[str, Any]):
    """An immutable, hashable JSON object: the payload (``value``) of an entry.

    Build one with ``JsonObject(mapping)`` (or let :class:`~actormem.MemoryEntry` do it);
    the mapping is copied and checked. Reads are those of a ``Mapping``; nested objects
    come back as JsonObjects and arrays as tuples; :meth:`thaw` gives plain values.

    Raises:
        TypeError: A key is not a str, or a value is not JSON (a set, bytes, a datetime...).
        InvalidEntryError: A NaN or infinite float, a lone surrogate, nesting deeper
            than :data:`MAX_VALUE_DEPTH`, or (at the top level) a compact JSON text
            longer than :data:`MAX_VALUE_BYTES` bytes.

    Runtime complexity: O(size) to build; O(1) to read a key; O(size) once for the
    first hash or comparison (then cached).
    """

    __slots__ = ("_data", "_key")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("actormem.JsonObject does not support subclassing")  # final

    def __init__(self, mapping: Mapping[str, Any] = {}) -> None:  # noqa: B006 - read only
        built = JsonObject._build(mapping, "", 0)
        self._data: dict[str, Any] = built._data
        # The canonical text (hash and equality) has the compact text's length (only the
        # key order differs), so one encoding serves both; from the caller's own dict
        # when the encoder takes it (checked by _build already), else from a thawed copy.
        try:
            key = str(_canonical(mapping))
        except TypeError:  # a Mapping that is not a dict, somewhere inside
            key = str(_canonical(self.thaw()))
        self._key: str | None = key
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError:  # a key's (leaves are checked by _freeze)
            raise InvalidEntryError("value has a key that holds a lone surrogate") from None
        if size > MAX_VALUE_BYTES:
            raise InvalidEntryError(
                f"value is {size} bytes as JSON; the limit is {MAX_VALUE_BYTES}"
            )

    @classmethod
    def _build(cls, mapping: Mapping[str, Any], where: str, depth: int) -> JsonObject:
        if not isinstance(mapping, Mapping):
            raise TypeError(f"value{where} must be a mapping, not {type(mapping).__name__}")
        data: dict[str, Any] = {}
        for k, v in mapping.items():
            if type(k) is not str:
                raise TypeError(f"value{where} has a key of type {type(k).__name__}, not str")
            data[k] = _freeze(v, f"{where}.{k}" if where or k else where, depth)
        new = object.__new__(cls)
        new._data = data
        new._key = None
        return new

    @classmethod
    def from_json(cls, text: str) -> JsonObject:
        """Parse a JSON object text (as :meth:`to_json` writes it).

        Raises:
            ValueError: Not JSON, or not an object; and as the constructor.
        """
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise ValueError(f"expected a JSON object, got {type(parsed).__name__}")
        return cls(parsed)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def thaw(self) -> dict[str, Any]:
        """A deep copy as plain ``dict``/``list`` values, keys in their original order. O(size)."""
        return {k: _thaw(v) for k, v in self._data.items()}

    def to_json(self) -> str:
        """The compact JSON text, keys in their original order. O(size)."""
        return str(_compact(self.thaw()))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its plain values, rebuilt (and checked) by the constructor. O(size)."""
        return (JsonObject, (self.thaw(),))

    def __setstate__(self, state: Any) -> None:
        """Restore the default slot state (``(None, {"_data": ..., "_key": ...})``, a
        pickle made before :meth:`__reduce__`): checked as the constructor checks a
        mapping, the cached ``_key`` recomputed (a forged pickle is outside data: a set,
        a NaN or a lone surrogate in it would raise in the owner task and break the
        memory). TypeError or InvalidEntryError as the constructor. O(size)."""
        slots = state[1] if type(state) is tuple and len(state) == 2 else None
        data = slots.get("_data") if type(slots) is dict else None
        if type(data) is not dict:
            raise TypeError("not the state of a JsonObject")
        checked = JsonObject(data)
        self._data = checked._data
        self._key = checked._key

    def _canonical(self) -> str:
        key = self._key
        if key is None:
            key = self._key = str(_canonical(self.thaw()))
        return key

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonObject):
            return self is other or self._canonical() == other._canonical()
        if isinstance(other, Mapping):
            try:
                return self._canonical() == JsonObject._build(other, "", 0)._canonical()
            except (TypeError, ValueError):
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._canonical())

    def __repr__(self) -> str:
        return f"JsonObject({self.thaw()!r})"


def _check_built(value: JsonObject) -> None:
    """TypeError for a JsonObject never built (``JsonObject.__new__`` alone, as a forged
    pickle without state makes). O(1)."""
    try:
        value._data  # noqa: B018 - a slot never set raises AttributeError
    except AttributeError:
        raise TypeError("a JsonObject that was never built (no data)") from None


def freeze_json(value: Any) -> JsonObject | None:
    """``value`` as a :class:`JsonObject` (``None`` stays ``None``). See the constructor."""
    if value is None:
        return value
    if isinstance(value, JsonObject):
        _check_built(value)
        return value
    return JsonObject(value)


# ---------------------------------------------------------------- paths


_STEP = re.compile(r"\[(\*|-?\d+)\]")


def _split_path(path: str, *, arrays: bool) -> list[str | int | None]:
    """A path's steps: a str key, an int index, or None for ``[*]``."""
    if type(path) is not str:
        raise TypeError(f"a path must be a str, not {type(path).__name__}")
    steps: list[str | int | None] = []
    for part in path.split("."):
        cut = part.find("[")
        name, tail = (part, "") if cut < 0 else (part[:cut], part[cut:])
        if not _SEGMENT.fullmatch(name):
            raise InvalidQueryError(
                f"Invalid filter key {path!r}: each dot-separated part must be made of "
                "letters, digits, '_' and '-'"
            )
        steps.append(name)
        if tail and not arrays:
            raise InvalidQueryError(f"Invalid filter key {path!r}: no [index] in filters")
        pos = 0
        while pos < len(tail):
            m = _STEP.match(tail, pos)
            if m is None:
                raise InvalidQueryError(f"Invalid path {path!r}: bad [index]")
            steps.append(None if m.group(1) == "*" else int(m.group(1)))
            pos = m.end()
    return steps


def _values_at(value: Any, steps: list[str | int | None]) -> Iterator[Any]:
    if not steps:
        yield value
        return
    step, rest = steps[0], steps[1:]
    if isinstance(step, str):
        if isinstance(value, Mapping) and step in value:
            yield from _values_at(value[step], rest)
    elif isinstance(value, tuple):
        if step is None:
            for item in value:
                yield from _values_at(item, rest)
        elif -len(value) <= step < len(value):
            yield from _values_at(value[step], rest)


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, tuple):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str):
        yield value
    elif value is not None:
        yield _compact(value)


def text_at_paths(value: JsonObject, paths: tuple[str, ...] | list[str] | None = None) -> str:
    """The text to index for ``value``: the leaves at ``paths``, one per line.

    ``paths`` None (or ``["$"]``) takes every leaf of the value, in order. A string leaf
    is taken as is, any other leaf as its JSON text; an object or array found at a path
    contributes all its leaves. Missing paths contribute nothing.

    Raises:
        InvalidQueryError: A malformed path.

    Runtime complexity: O(size of the value).
    """
    if paths is None or list(paths) == ["$"]:
        return "\n".join(_leaves(value))
    out: list[str] = []
    for path in paths:
        for found in _values_at(value, _split_path(path, arrays=True)):
            out.extend(_leaves(found) if isinstance(found, (Mapping, tuple)) else _leaves((found,)))
    return "\n".join(out)


# ---------------------------------------------------------------- filters

Predicate = Callable[[JsonObject | None], bool]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _equal(item: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        if not isinstance(item, Mapping):
            return False
        return all(k in item and _equal(item[k], w) for k, w in want.items())
    if isinstance(want, (list, tuple)):
        return (
            isinstance(item, tuple)
            and len(item) == len(want)
            and all(_equal(i, w) for i, w in zip(item, want, strict=True))
        )
    if isinstance(want, bool) or isinstance(item, bool):
        return type(item) is type(want) and item == want
    if _is_number(want):
        return _is_number(item) and item == want
    return bool(item == want) if item is not None or want is None else False


def _check_operand(path: str, op: str, want: Any) -> None:
    if want is None or isinstance(want, (bool, int, float, str)):
        return
    if op in ("$eq", "$ne") and isinstance(want, (Mapping, list, tuple)):
        return
    raise InvalidQueryError(
        f"where={{{path!r}: {{{op!r}: ...}}}}: the operand must be a JSON scalar, "
        f"not {type(want).__name__}"
    )


_NUMBERS = (int, float)


def _equals(want: Any) -> Callable[[Any], bool]:
    """The equality test against ``want``, specialised for scalars (the common case:
    no generic dispatch per entry); a missing field (``_MISSING``) never equals."""
    kind = type(want)
    if want is None:
        return lambda item: item is None
    if kind is bool:
        return lambda item: item is want
    if kind is str:
        return lambda item: type(item) is str and item == want
    if kind is int or kind is float:
        return lambda item: type(item) in _NUMBERS and item == want
    return lambda item: item is not _MISSING and _equal(item, want)


def _operator_test(op: str, want: Any) -> Callable[[Any], bool]:
    if op == "$eq":
        return _equals(want)
    if op == "$ne":
        equal = _equals(want)
        return lambda item: not equal(item)
    kinds = _NUMBERS if type(want) in _NUMBERS else (str,) if type(want) is str else ()
    if op == "$gt":
        return lambda item: type(item) in kinds and item > want
    if op == "$gte":
        return lambda item: type(item) in kinds and item >= want
    if op == "$lt":
        return lambda item: type(item) in kinds and item < want
    return lambda item: type(item) in kinds and item <= want


def _condition(path: str, cond: Any) -> Callable[[Any], bool]:
    """The test one field's value must pass (``_MISSING`` when absent)."""
    if isinstance(cond, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in cond):
        tests: list[Callable[[Any], bool]] = []
        for op, want in cond.items():
            if op not in _OPERATORS:
                raise InvalidQueryError(
                    f"where={{{path!r}: ...}}: unknown operator {op!r} "
                    f"(one of {', '.join(sorted(_OPERATORS))})"
                )
            _check_operand(path, op, want)
            tests.append(_operator_test(op, want))
        if len(tests) == 1:
            return tests[0]
        return lambda item: all(t(item) for t in tests)
    if not (cond is None or isinstance(cond, (bool, int, float, str, Mapping, list, tuple))):
        raise InvalidQueryError(
            f"where={{{path!r}: ...}}: a {type(cond).__name__} is not a JSON value"
        )
    return _equals(cond)


_MISSING = object()


def _lookup(value: Any, keys: tuple[str, ...]) -> Any:
    for k in keys:
        if type(value) is not JsonObject:
            return _MISSING
        value = value._data.get(k, _MISSING)
    return value


def _is_operators(cond: object) -> bool:
    """Whether ``cond`` is a dict of operators (a mapping with a ``$`` key)."""
    return isinstance(cond, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in cond)


def _nests_operator(cond: object) -> bool:
    """Whether ``cond`` is, or holds at any depth of objects, a dict of operators."""
    if not isinstance(cond, Mapping):
        return False
    return _is_operators(cond) or any(_nests_operator(v) for v in cond.values())


def _flattened(where: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``where``'s ``(path, condition)`` pairs, a nested object that holds an operator
    spread into one pair per field by dotted path: ``{"user": {"age": {"$gt": 2}}}`` is
    ``{"user.age": {"$gt": 2}}``. An object without operators is left whole (its
    equality already matches field by field), so both forms mean the same everywhere.

    Raises:
        InvalidQueryError: A field of such an object is not a path segment (letters,
            digits, ``_``, ``-``; the message starts "Invalid filter key").
    """
    for path, cond in where.items():
        if isinstance(cond, Mapping) and not _is_operators(cond) and _nests_operator(cond):
            for k in cond:
                if not (isinstance(k, str) and _SEGMENT.fullmatch(k)):
                    raise InvalidQueryError(
                        f"Invalid filter key {k!r} in where={{{path!r}: ...}}: a field of "
                        "an object holding an operator must be made of letters, digits, "
                        "'_' and '-'"
                    )
            yield from _flattened({f"{path}.{k}": v for k, v in cond.items()})
        else:
            yield path, cond


def compile_where(where: Mapping[str, Any] | None) -> Predicate | None:
    """Check a payload filter and build its predicate over an entry's ``value``.

    ``where`` maps dotted paths to conditions (see the module docs). An entry with no
    payload matches no non-empty filter. None or ``{}`` gives None (everything matches).
    An operator inside a nested object applies to that field: ``{"user": {"age":
    {"$gt": 2}}}`` is ``{"user.age": {"$gt": 2}}``.

    Raises:
        TypeError: ``where`` is not a mapping.
        InvalidQueryError: A path with characters other than letters, digits, ``_``,
            ``-`` and the dots between parts (the message starts "Invalid filter key"),
            also a field of a nested object that holds an operator; an unknown ``$``
            operator, at the top or nested; an operand that is not JSON.

    Runtime complexity: O(size of the filter) to build; O(size of the filter) per entry.
    """
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise TypeError(
            f"where= must be a mapping of paths to conditions, not {type(where).__name__}"
        )
    if not where:
        return None
    tests: list[tuple[tuple[str, ...], Callable[[Any], bool]]] = []
    for path, cond in _flattened(where):
        keys = tuple(str(s) for s in _split_path(path, arrays=False))
        tests.append((keys, _condition(path, cond)))

    def predicate(value: JsonObject | None) -> bool:
        if value is None:
            return False
        for keys, test in tests:
            if not test(_lookup(value, keys)):
                return False
        return True

    return predicate

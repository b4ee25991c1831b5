"""Payload filters: which events of its subscription an endpoint wants, by the values in their ``data``. Pure.

A filter is a JSON object, in the style of Convoy's and Hookdeck Outpost's JSON-match operators (docs/endpoints.md,
"Payload filters"). ``EventFilter(source)`` checks it once, when the endpoint is created (``FilterError`` names
the offending place, e.g. ``$or[1].amount.$gte``), and compiles it into nested functions; ``matches(data)`` then
evaluates it on an event's ``data`` with no parsing, no regular expression and no code of anyone's:

- a condition is an object; its keys are ANDed: a path (``"amount"``, ``"customer.tier"``, ``"items.0.sku"``) or
  ``$and`` / ``$or`` (a non-empty list of conditions) or ``$not`` (a condition);
- a path's value is a literal (equality), an object of operators (``$eq $neq $gt $gte $lt $lte $in $nin $exist
  $not``, ANDed), or an object of further paths (a nested condition on that value);
- a path that is not in the event (or runs through a value that is not an object or an array) makes every
  operator false except ``$exist: false``; a comparison of a value of another type (a string with ``$gt: 5``,
  ``true`` with ``$eq: 1``) is false. ``$not`` negates what it holds, so it is true for a missing path.

Bounded: at most ``MAX_BYTES`` of JSON, ``MAX_DEPTH`` levels of nesting and ``MAX_CONDITIONS`` operators; each
operator is evaluated at most once per event and looks at one value of it (each element of an array), so an
event costs at most the filter's size times the event's.
"""

from __future__ import annotations

import copy
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from warren.core.errors import WarrenError

__all__ = ["MAX_BYTES", "MAX_CONDITIONS", "MAX_DEPTH", "MISSING", "EventFilter", "FilterError", "event_data"]

MAX_BYTES = 8192  # the filter as compact JSON
MAX_DEPTH = 16  # objects and lists inside each other
MAX_CONDITIONS = 128  # operators, implicit equalities included
MAX_LIST = 256  # values of one $in or $nin

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()  # a path the event does not have

Match = Callable[[Any], bool]  # a compiled condition or field test, given the value it applies to

_COMPARE = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}
FIELD_OPERATORS = ("$eq", "$neq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exist", "$not")
LOGICAL_OPERATORS = ("$and", "$or", "$not")
_HINTS = {"$ne": "$neq", "$exists": "$exist", "$nor": "$not with $or", "$contains": "$eq (an array: any element)"}


class FilterError(WarrenError, ValueError):
    """A filter refused when it is given, naming where: ``$and[0].amount.$gt: takes a number or a string``."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where


def _kind(value: Any) -> str:
    """The JSON kind of a value, as messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"not a JSON value ({type(value).__name__})"


_NUMBERS = (int, float)  # by exact class: bool is an int to Python, not a number to JSON


def _number(value: Any) -> bool:
    return value.__class__ in _NUMBERS


def _key(value: Any) -> tuple[str, Any] | None:
    """A scalar as a hashable key that keeps JSON's kinds apart (``true`` is not ``1``, ``1`` is ``1.0``)."""
    if isinstance(value, bool):
        return ("b", value)
    if _number(value):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z", None)
    return None


def _same(value: Any, literal: Any) -> bool:
    """JSON equality (kinds kept apart as ``_key`` does), recursing no deeper than ``literal``, which is bounded."""
    if isinstance(literal, list):
        return (
            isinstance(value, list)
            and len(value) == len(literal)
            and all(_same(v, x) for v, x in zip(value, literal, strict=True))
        )
    if isinstance(literal, dict):
        return (
            isinstance(value, dict)
            and value.keys() == literal.keys()
            and all(_same(value[k], x) for k, x in literal.items())
        )
    key = _key(value)
    return key is not None and key == _key(literal)


def _resolve(value: Any, path: tuple[tuple[str, int | None], ...]) -> Any:
    """The value at ``path`` (each segment a key, or an index into a list), or MISSING."""
    for key, index in path:
        if isinstance(value, dict):
            value = value.get(key, MISSING)
        elif isinstance(value, list) and index is not None and index < len(value):
            value = value[index]
        else:
            return MISSING
    return value


def _any_element(test: Match) -> Match:
    """``test`` on a value, or on any element of an array value; false on a missing one."""

    def match(value: Any) -> bool:
        if value is MISSING:
            return False
        if test(value):
            return True
        return isinstance(value, list) and any(test(v) for v in value)

    return match


def _all(tests: list[Match]) -> Match:
    if len(tests) == 1:
        return tests[0]

    def match(value: Any) -> bool:  # a loop, not all(<generator>): half the time per event
        for test in tests:  # noqa: SIM110
            if not test(value):
                return False
        return True

    return match


def _equals(literal: Any) -> Match:
    """Equality with a literal, specialised by its kind (the hot path: an event's values are orjson's exact types)."""
    if literal is None or literal.__class__ is bool:
        return lambda v: v is literal
    if literal.__class__ is str:
        return lambda v: v.__class__ is str and v == literal
    if _number(literal):
        return lambda v: v.__class__ in _NUMBERS and v == literal
    return lambda v: _same(v, literal)


def _member(keys: set[tuple[str, Any]]) -> Match:
    """Membership in a list of scalars: a set per kind, so ``true`` is not ``1`` and ``1`` is ``1.0``."""
    texts = {value for kind, value in keys if kind == "s"}
    numbers = {value for kind, value in keys if kind == "n"}
    flags = {value for kind, value in keys if kind == "b"}
    null = ("z", None) in keys

    def match(v: Any) -> bool:
        kind = v.__class__
        if kind is str:
            return v in texts
        if kind in _NUMBERS:
            return v in numbers
        if kind is bool:
            return v in flags
        return v is None and null

    return match


def _present_and_not(test: Match) -> Match:
    return lambda value: value is not MISSING and not test(value)


class _Compiler:
    """One pass over the source, checking it and building the functions; counts what the bounds count."""

    def __init__(self) -> None:
        self.conditions = 0

    def _count(self, where: str) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise FilterError(where, f"a filter holds at most {MAX_CONDITIONS} conditions")

    @staticmethod
    def _deeper(where: str, depth: int) -> int:
        if depth >= MAX_DEPTH:
            raise FilterError(where, f"a filter nests at most {MAX_DEPTH} levels")
        return depth + 1

    def literal(self, value: Any, where: str, depth: int) -> Any:
        """A JSON value of the filter, checked (finite numbers, text keys, bounded nesting) and copied."""
        if isinstance(value, Mapping):
            depth = self._deeper(where, depth)
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise FilterError(where, f"object keys are strings, not {_kind(key)}")
                out[key] = self.literal(item, _at(where, key), depth)
            return out
        if isinstance(value, list | tuple):
            depth = self._deeper(where, depth)
            return [self.literal(item, f"{where}[{i}]", depth) for i, item in enumerate(value)]
        if isinstance(value, float) and not math.isfinite(value):
            raise FilterError(where, "numbers are finite")
        if _key(value) is None:
            raise FilterError(where, f"takes JSON values: {_kind(value)}")
        return value

    def condition(self, source: Any, where: str, depth: int) -> Match:
        """An object of paths and logical operators, ANDed."""
        if not isinstance(source, Mapping):
            raise FilterError(where, f"a condition is an object, not {_kind(source)}")
        if not source:
            raise FilterError(where, "an empty condition (leave the filter out to receive every event)")
        depth = self._deeper(where, depth)
        parts = [self._part(key, value, where, depth) for key, value in source.items()]
        return _all(parts)

    def _part(self, key: Any, value: Any, where: str, depth: int) -> Match:
        if not isinstance(key, str):
            raise FilterError(where, f"keys are strings, not {_kind(key)}")
        here = _at(where, key)
        if key in ("$and", "$or"):
            if not isinstance(value, list | tuple) or not value:
                raise FilterError(here, "takes a non-empty list of conditions")
            inner = self._deeper(here, depth)
            parts = [self.condition(item, f"{here}[{i}]", inner) for i, item in enumerate(value)]
            combine = all if key == "$and" else any
            return lambda data: combine(part(data) for part in parts)
        if key == "$not":
            negated = self.condition(value, here, depth)
            return lambda data: not negated(data)
        if key.startswith("$"):
            raise FilterError(here, f"{key} is not a condition operator ({', '.join(LOGICAL_OPERATORS)}){_hint(key)}")
        path = _path(key, here)
        test = self.field(value, here, depth)
        return lambda data: test(_resolve(data, path))

    def field(self, value: Any, where: str, depth: int) -> Match:
        """What a path's value must be: a literal, an object of operators, or a nested condition."""
        if isinstance(value, Mapping) and value:
            operators = [k for k in value if isinstance(k, str) and k.startswith("$")]
            if not operators:
                return self.condition(value, where, depth)
            if len(operators) != len(value):
                raise FilterError(where, "an object holds either operators ($...) or fields, not both")
            inner = self._deeper(where, depth)
            tests = [self._operator(op, operand, _at(where, op), inner) for op, operand in value.items()]
            return _all(tests)
        if isinstance(value, Mapping):
            raise FilterError(where, 'an empty object (to test that the field is there, use {"$exist": true})')
        return self._operator("$eq", value, where, depth)

    def _operator(self, op: str, operand: Any, where: str, depth: int) -> Match:
        self._count(where)
        if op in ("$eq", "$neq"):
            literal = self.literal(operand, where, depth)
            equal = _any_element(_equals(literal))
            return equal if op == "$eq" else _present_and_not(equal)
        if op in _COMPARE:
            return _comparison(_COMPARE[op], operand, where)
        if op in ("$in", "$nin"):
            if not isinstance(operand, list | tuple) or len(operand) > MAX_LIST:
                raise FilterError(where, f"takes a list of at most {MAX_LIST} strings, numbers, booleans or nulls")
            keys = set()
            for i, item in enumerate(operand):
                key = _key(self.literal(item, f"{where}[{i}]", depth))
                if key is None:
                    raise FilterError(f"{where}[{i}]", f"takes strings, numbers, booleans or null, not {_kind(item)}")
                keys.add(key)
            member = _any_element(_member(keys))
            return member if op == "$in" else _present_and_not(member)
        if op == "$exist":
            if not isinstance(operand, bool):
                raise FilterError(where, f"takes true or false, not {_kind(operand)}")
            return (lambda v: v is not MISSING) if operand else (lambda v: v is MISSING)
        if op == "$not":
            self.conditions -= 1  # counted by what it holds
            negated = self.field(operand, where, depth)
            return lambda v: not negated(v)
        raise FilterError(where, f"unknown operator {op} (known: {', '.join(FIELD_OPERATORS)}){_hint(op)}")


def _hint(op: str) -> str:
    return f"; did you mean {_HINTS[op]}?" if op in _HINTS else ""


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _comparison(compare: Callable[[Any, Any], bool], operand: Any, where: str) -> Match:
    """``$gt`` and its kin: numbers with numbers, strings with strings (by code point: ISO 8601 times in one
    format and zone compare in time order); any other pairing is false."""
    if isinstance(operand, str):
        return _any_element(lambda v: isinstance(v, str) and compare(v, operand))
    if _number(operand) and math.isfinite(operand):
        return _any_element(lambda v: _number(v) and compare(v, operand))
    raise FilterError(where, f"takes a number or a string, not {_kind(operand)}")


def _path(key: str, where: str) -> tuple[tuple[str, int | None], ...]:
    segments = key.split(".")
    if not all(segments):
        raise FilterError(where, "a path is names joined by single dots (no empty segment)")
    return tuple((s, int(s) if s.isascii() and s.isdigit() else None) for s in segments)


class EventFilter:
    """A checked, compiled filter. Equal (and hashed) by its canonical JSON; ``source`` is what was given."""

    __slots__ = ("_match", "source", "text")

    def __init__(self, source: Any) -> None:
        compiler = _Compiler()
        if not isinstance(source, Mapping):
            raise FilterError("", f"a filter is a JSON object, not {_kind(source)}")
        self.source: dict[str, Any] = compiler.literal(source, "", 0)  # as given, for views and records
        self._match = compiler.condition(copy.deepcopy(self.source), "", 0)  # its literals its own
        self.text = orjson.dumps(self.source, option=orjson.OPT_SORT_KEYS).decode()
        if len(self.text.encode()) > MAX_BYTES:
            raise FilterError("", f"a filter is at most {MAX_BYTES} bytes of JSON, not {len(self.text.encode())}")

    def matches(self, data: Any) -> bool:
        """Whether an event whose ``data`` is this passes (MISSING: an event without data passes no path)."""
        return self._match(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventFilter) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"EventFilter({self.text[:200]})"


def event_data(body: bytes) -> Any:
    """The ``data`` of an event's envelope (any JSON value), or MISSING when the body is not an envelope with data:
    callers let such a message through, to be dead-lettered as malformed where it is delivered."""
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError:
        return MISSING
    if not isinstance(envelope, dict) or "data" not in envelope:
        return MISSING
    return envelope["data"]

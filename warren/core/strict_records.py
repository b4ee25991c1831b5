"""Records Warren's processes hand each other through RabbitMQ, read through a pydantic type, strictly.

Attempt batches (warren/store/attempt_records.py), live endpoint records (warren/broker/endpoint_records.py) and
endpoint state records (warren/broker/endpoint_state/records.py) are JSON objects that Warren writes and Warren
reads, possibly releases apart (RabbitMQ's streams keep them), and possibly sent by a stray or hostile publisher.
Each module declares its record's fields with the types below and a ``TypeAdapter``; ``read`` turns the bytes into
the record or raises ``MalformedRecord``, which names the field and says what is wrong in one short line.

The field types are strict: a JSON value is taken only as what it is. pydantic's default (lax) mode would read
``"3"`` or ``3.0`` as the integer 3 and ``true`` as 1; a record that says so was not written by Warren and is
refused. ``Number`` takes an integer or a float (read as a float), finite, never a boolean or a string. A
``Literal`` stays lax (strict cannot apply to it): ``Literal[1]`` takes ``1.0`` and ``true``, as ``== 1`` does.

The bytes go through orjson, and pydantic validates the objects orjson made, rather than parsing the JSON itself,
so that what is JSON stays what every other entry point reads (warren/core/strict_json.py): orjson refuses
``NaN`` and ``Infinity`` (pydantic's parser takes them) and a number beyond a double's range ("number is
infinity"); it reads an integer too large for 64 bits as a float, which a ``Whole`` field refuses (pydantic's
parser would hand such a field any number of digits); it reads 1,024 levels of nesting (pydantic's parser 200).
pydantic's parser is somewhat faster on a large attempt batch (280 against 360 µs for 200 records, where the
hand-written checks this replaced took 840 µs): not worth a second idea of what JSON is.

Nothing here formats a value with an unbounded ``repr``: a string quoted in a message is clipped, and a list or an
object is never printed (the repr of a document nested 1,000 levels deep raises RecursionError).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import orjson
from pydantic import Field, Strict, TypeAdapter, ValidationError

from warren.core.errors import WarrenError

__all__ = ["MalformedRecord", "Number", "Text", "Whole", "read", "shown"]

T = TypeVar("T")

Text = Annotated[str, Strict()]
"""A JSON string."""
Whole = Annotated[int, Strict()]
"""A JSON integer: never ``true``, ``"3"`` or ``3.0``."""
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A JSON number, integer or not, read as a float: never ``true`` or ``"3"``."""

_SHOWN = 60  # characters of a string quoted in a message


class MalformedRecord(WarrenError, ValueError):
    """A record off the wire that its type refuses: ``where`` (the keys and indexes down to the value; empty for
    the whole document), ``reason`` and the offending ``value`` (None when missing). Also a ValueError."""

    def __init__(self, reason: str, where: tuple[str | int, ...] = (), value: object = None) -> None:
        self.reason, self.where, self.value = reason, where, value
        super().__init__(f"field {_path(where)!r}: {reason}" if where else reason)


def _path(where: tuple[str | int, ...]) -> str:
    """``("attempts", 3, "status")`` as ``attempts[3].status``."""
    text = ""
    for step in where:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


def shown(value: object) -> str:
    """A value as a message may quote it: a scalar's repr, a string clipped; a list or an object never printed."""
    if isinstance(value, str):
        return repr(value if len(value) <= _SHOWN else value[: _SHOWN - 1] + "…")
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return "[...]" if isinstance(value, list) else "{...}" if isinstance(value, dict) else type(value).__name__


def read(reader: TypeAdapter[T], body: bytes) -> T:
    """The record ``body`` holds, as ``reader`` validates it; MalformedRecord when it is not one."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise MalformedRecord(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise MalformedRecord("not a JSON object")
    try:
        return reader.validate_python(data)
    except ValidationError as error:
        raise _refusal(error) from None


def _refusal(error: ValidationError) -> MalformedRecord:
    """The first thing ``error`` says, as one short line (pydantic's own message names its types and links)."""
    first = error.errors(include_url=False)[0]
    where = tuple(first["loc"])
    kind, value, context = first["type"], first.get("input"), first.get("ctx") or {}
    if kind == "missing":
        return MalformedRecord("missing", where)
    return MalformedRecord(_reason(kind, value, context, first["msg"]), where, value)


_EXPECTED = {
    "string_type": "expected str",
    "int_type": "expected int",
    "float_type": "expected int/float",
    "list_type": "expected a list",
    "dict_type": "not a JSON object",
    "model_type": "not a JSON object",
    "dataclass_type": "not a JSON object",
    "finite_number": "not a finite number",
}


def _reason(kind: str, value: object, context: dict[str, Any], message: str) -> str:
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind == "literal_error":
        return f"unknown {shown(value)}"
    if kind == "value_error":
        return str(context.get("error", message))
    if kind == "string_too_short" and context.get("min_length") == 1:
        return "empty"
    if kind == "greater_than_equal":
        return f"must be at least {context.get('ge')}"
    return message[:1].lower() + message[1:]

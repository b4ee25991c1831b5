"""Duplicate keys in JSON from outside, which orjson and pydantic accept silently (the last one wins).

A proxy, a WAF or a receiver that keeps the first one would read another event than Warren does, so every
JSON document Warren takes from outside is refused when one of its objects repeats a key.

The check costs one ``orjson.dumps`` and two byte counts on the usual path: without duplicates, the
re-serialised document has exactly as many colons as the original (each pair has one; a colon inside a
string is written as is by orjson), and a repeated key makes the original count larger. Only when that
count cannot decide (a ``\\u003a`` escape in the text, or a document orjson cannot read, such as one with an
integer beyond 64 bits) does the exact, slower path run: the standard library's parser with a hook on
every object.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from warren.topology.errors import WarrenError

__all__ = ["DUPLICATE_KEY", "duplicate_key"]

DUPLICATE_KEY = "duplicate key {!r} in one JSON object"


class _Duplicate(WarrenError):
    """Control flow inside the exact parse: the first repeated key stops it."""

    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


def _exact(raw: bytes) -> str | None:
    try:
        json.loads(raw, object_pairs_hook=_pairs)
    except _Duplicate as dup:
        return dup.key
    except ValueError:  # not JSON: whoever parses it for real says so, with its own message
        return None
    return None


def duplicate_key(raw: bytes | str, parsed: Any = None) -> str | None:
    """The first key that an object of ``raw`` holds twice, or None.

    ``parsed`` is ``orjson.loads(raw)`` when the caller has it already. A document that is not JSON gives
    None: reporting that is the real parser's job.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if b"\\u003a" in data or b"\\u003A" in data:
        return _exact(data)
    if parsed is None:
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            return _exact(data)
    if data.count(b":") == orjson.dumps(parsed).count(b":"):
        return None
    return _exact(data)

"""Duplicate keys in JSON from outside, which orjson and pydantic accept silently (the last one wins).

A proxy, a WAF or a receiver that keeps the first one would read another event than Warren does, so every
JSON document Warren takes from outside is refused when one of its objects repeats a key.

The check costs one ``orjson.dumps`` and two byte counts on the usual path: without duplicates, the
re-serialised document has exactly as many colons as the original (each pair has one; a colon inside a
string is written as is by orjson), and a repeated key makes the original count larger. Only when that
count cannot decide (a ``\\u003a`` escape in the text, a document nested deeper than orjson writes, or one
orjson cannot read) does the exact path run: a scan of the text for each object's keys, with a stack of its
own, never Python's. Nothing here recurses, so no depth raises: the standard library's parser, used here
before, raised RecursionError at about 1,000 levels (orjson reads 1,024), and ``orjson.dumps`` raises at 255.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["DUPLICATE_KEY", "WRITTEN_DEPTH", "duplicate_key", "unwritable"]

DUPLICATE_KEY = "duplicate key {!r} in one JSON object"
WRITTEN_DEPTH = 255  # orjson.dumps raises at this many levels of nesting (it reads 1,024)

# An object's brace, or a string with the colon after it when it is a key. Inside a string a brace is text,
# so strings are matched whole; numbers, literals, brackets and commas are skipped over.
_TOKEN = re.compile(rb'[{}]|(?P<string>"[^"\\]*(?:\\.[^"\\]*)*")(?P<key>[ \t\n\r]*:)?', re.DOTALL)


def _text(string: bytes) -> str | None:
    """A JSON string token's text; None when it is not a valid one."""
    try:
        if b"\\" not in string:
            return string[1:-1].decode()
        text = json.loads(string)  # one string: the standard library's escapes, and no recursion
    except ValueError:
        return None
    return text if isinstance(text, str) else None


def _first_repeated(data: bytes) -> str | None:
    """The first key an object of ``data`` holds twice; ``data`` must be valid JSON."""
    objects: list[set[str]] = []  # the keys of each object open at this point, innermost last
    for match in _TOKEN.finditer(data):
        if match["string"] is None:
            if match[0] == b"{":
                objects.append(set())
            elif objects:
                objects.pop()
            continue
        if match["key"] is None or not objects:
            continue
        key = _text(match["string"])
        if key is None:
            return None
        if key in objects[-1]:
            return key
        objects[-1].add(key)
    return None


def _standard_library_reads(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


def duplicate_key(raw: bytes | str, parsed: Any = None) -> str | None:
    """The first key that an object of ``raw`` holds twice, or None. Never raises.

    ``parsed`` is ``orjson.loads(raw)`` when the caller has it already. A document that is not JSON gives
    None: reporting that is the real parser's job.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    readable = parsed is not None
    if not readable:
        try:
            parsed = orjson.loads(data)
            readable = True
        except orjson.JSONDecodeError:
            pass
    # No backslash at all (the usual body: one short scan) rules out the escape without looking for it twice.
    if readable and (b"\\" not in data or (b"\\u003a" not in data and b"\\u003A" not in data)):
        try:
            if data.count(b":") == orjson.dumps(parsed).count(b":"):
                return None
        except orjson.JSONEncodeError:  # nested deeper than orjson writes (255 levels): the exact path decides
            pass
    if not readable and not _standard_library_reads(data):
        # orjson could not read it (a NaN, more than 1,024 levels, or no JSON at all): the key counts when the
        # text is JSON to the standard library, as before; too deep for it is not JSON here. Checked before the
        # scan, which is linear only over valid JSON (an unterminated string is scanned again from each quote).
        return None
    return _first_repeated(data)


def unwritable(raw: bytes | str, parsed: Any) -> bool:
    """Whether orjson, which read ``parsed`` from ``raw``, cannot write it back: nested ``WRITTEN_DEPTH`` levels
    or more (the standard library's writer raises RecursionError at about 1,000 too). A text with fewer brackets
    than that cannot be so deep, so only the rare others are encoded to find out."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") < WRITTEN_DEPTH:
        return False
    try:
        orjson.dumps(parsed)
    except orjson.JSONEncodeError:
        return True
    return False

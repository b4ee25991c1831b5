"""Refusing a batch with too many events before parsing it whole.

A 4 MiB body can hold 190,000 tiny events; validating all of them only to answer "at most 500" costs most
of a second of CPU per request. Each event is a JSON object, so a body with at most ``limit + 1`` opening
braces cannot be over the limit (a byte count, no parse). Only a body with more braces is walked, with the
standard library's incremental decoder, event by event, and the walk stops at event ``limit + 1``.
"""

from __future__ import annotations

import json
import re

__all__ = ["events_over"]

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def events_over(raw: bytes, limit: int) -> bool:
    """True when ``raw`` is ``{"events": [...]}`` with more than ``limit`` events, parsing at most ``limit + 1``.

    False when there are at most ``limit``, and when the body is not of that shape: the full parse that
    follows then says what is wrong with it.
    """
    if raw.count(b"{") <= limit + 1:  # every event is an object, and so is the body
        return False
    try:
        return _walk(raw.decode(), limit)
    except (ValueError, IndexError, RecursionError):
        return False


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _walk(text: str, limit: int) -> bool:
    at = _skip(text, 0)
    if text[at] != "{":
        return False
    at = _skip(text, at + 1)
    while text[at] == '"':
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at] != ":":
            return False
        at = _skip(text, at + 1)
        if key == "events" and text[at] == "[":
            return _elements_over(text, at + 1, limit)
        _, at = _DECODER.raw_decode(text, at)  # another member: the schema refuses it later
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return False


def _elements_over(text: str, at: int, limit: int) -> bool:
    at = _skip(text, at)
    count = 0
    while text[at] != "]":
        _, at = _DECODER.raw_decode(text, at)
        count += 1
        if count > limit:
            return True
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)
        elif text[at] != "]":
            return False
    return False

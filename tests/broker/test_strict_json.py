"""Duplicate keys in JSON from outside: found wherever they hide, and never a false alarm."""

from __future__ import annotations

import pytest

from warren.broker.event_lines import BadLine, read_event_lines
from warren.broker.strict_json import duplicate_key


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (b'{"type": "a", "type": "b"}', "type"),
        (b'{"events": [{"type": "a", "data": {"x": 1, "x": 2}}]}', "x"),
        (b'[1, {"k": "v:1", "k": "w"}]', "k"),
        (b'{"type": "a", "\\u0074ype": "b"}', "type"),  # the same key, once escaped
        (b'{"a\\u003a": "1", "a\\u003a": "2"}', "a:"),  # escaped colons cannot hide a duplicate
        (b'{"n": 123456789012345678901234567890, "n": 1}', "n"),  # beyond orjson: the exact path
        ('{"ü": 1, "ü": 2}', "ü"),
    ],
)
def test_a_duplicate_key_is_found(raw: bytes | str, key: str) -> None:
    assert duplicate_key(raw) == key


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type": "a:b", "data": {"url": "http://x:1/"}, "k": ["::", {"a": ":"}]}',
        b'{"a\\u003a": 1, "b": "\\u003a"}',
        b'{"n": 123456789012345678901234567890}',
        b"not json at all",  # not this function's business: the parser reports it
        b"[]",
    ],
)
def test_no_duplicate_no_alarm(raw: bytes) -> None:
    assert duplicate_key(raw) is None


def test_publish_input_lines_with_a_duplicate_key_are_bad_lines() -> None:
    # Given JSON lines, the second with "type" twice
    lines = [b'{"type": "a.b", "data": 1}', b'{"type": "a.b", "data": 1, "type": "c.d"}']
    # Then it is reported by number and never published as either type
    results = list(read_event_lines(lines))
    assert isinstance(results[1], BadLine) and results[1].line == 2 and "duplicate key 'type'" in results[1].reason

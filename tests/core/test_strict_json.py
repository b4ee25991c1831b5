"""Duplicate keys in JSON from outside: found wherever they hide, and never a false alarm."""

from __future__ import annotations

import orjson
import pytest

from tests.support.deep_json import BEYOND_ORJSON, nested
from warren.broker.event_lines import BadLine, read_event_lines
from warren.core.strict_json import duplicate_key


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


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (BEYOND_ORJSON, None),  # more than orjson reads: not JSON here (the parser says so), never RecursionError
        (b'{"a": ' + nested(1000) + b', "a": 2}', "a"),  # orjson reads it, the standard library did not
        (b'{"a": ' + nested(5000) + b', "a": 2}', None),  # beyond orjson, and beyond the standard library
        (b'{"a": ' + nested(300) + b"}", None),  # orjson reads it but writes at most 254 levels: TypeError before
        (b'{"a": ' + nested(300) + b', "a": 2}', "a"),
        (b'{"a": ' + nested(300, b'{"k": 1, "k": 2}') + b"}", "k"),  # the duplicate deep down
        (b'{"a": ' + nested(300, b'{"k": 1, "j": 2}') + b', "k": 3}', None),  # same key, other objects
        (b'{"a": ' + nested(1000, b'"\\u003a"') + b"}", None),  # an escaped colon: the exact path, deep
        (b'{"n": NaN, "n": 1}', "n"),  # orjson refuses NaN, the standard library reads it
    ],
)
def test_depth_never_raises_and_never_hides_a_duplicate(raw: bytes, key: str | None) -> None:
    assert duplicate_key(raw) == key
    assert duplicate_key(raw.decode()) == key


def test_a_parsed_document_too_deep_to_write_is_checked_exactly() -> None:
    raw = b'{"a": ' + nested(600) + b', "b": {"c": 1, "c": 2}}'
    assert duplicate_key(raw, orjson.loads(raw)) == "c"


def test_deep_lines_are_bad_lines_saying_why() -> None:
    data_253 = b'{"type": "a.b", "data": ' + nested(253) + b"}"  # the deepest an envelope can be written
    lines = [
        BEYOND_ORJSON,
        b'{"type": "a.b", "data": ' + nested(1000) + b', "type": "c.d"}',
        (b'{"type": "a.b", "data": ' + nested(254) + b"}").decode(),
        data_253,
    ]
    results = list(read_event_lines(lines))
    assert [(r.line, r.reason.split(":")[0]) for r in results if isinstance(r, BadLine)] == [
        (1, "not JSON"),
        (2, "duplicate key 'type' in one JSON object"),
        (3, "nested too deeply to publish (at most 254 levels)"),
    ]
    assert not isinstance(results[3], BadLine) and results[3].data == orjson.loads(data_253)["data"]

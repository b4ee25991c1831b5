"""Reading Warren's message headers: values from any AMQP client, never an exception, never another script's digits."""

from __future__ import annotations

from decimal import Decimal

import pytest

from warren.topology.headers import header_history, header_int


@pytest.mark.parametrize(
    ("value", "number"),
    [
        (3, 3),
        (-2, -2),
        ("3", 3),
        (b"42", 42),
        ("-7", -7),
        (Decimal(5), 5),
        (None, None),
        (True, None),
        (3.0, None),
        ("\u0663", None),  # ARABIC-INDIC DIGIT THREE: int() read 3
        ("\u00b2", None),  # SUPERSCRIPT TWO
        (" 3", None),
        ("1_000", None),
        ("9" * 5000, None),  # beyond int()'s 4300 digits
        (b"\xff", None),
    ],
)
def test_header_int(value: object, number: int | None) -> None:
    assert header_int(value) == number


def test_history_keeps_plain_values_only() -> None:
    # A raw message's history may nest as deep as orjson reads (1,024), deeper than it writes back (254)
    deep = "[" * 300 + "]" * 300
    text = '[{"at": 1, "status": 503, "ms": 4, "error": "HTTP 503", "x": ' + deep + '}, 7, {"at": 2}]'
    assert header_history(text) == ({"at": 1, "status": 503, "ms": 4, "error": "HTTP 503"}, {"at": 2})
    assert header_history(b"[" * 2000) == () and header_history('{"at": 1}') == () and header_history(None) == ()

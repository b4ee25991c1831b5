"""Numbers in text from outside: ASCII digits, nothing str.isdigit() or int() would also take."""

from __future__ import annotations

import pytest

from warren.core.digits import ascii_int, is_ascii_digits


@pytest.mark.parametrize(
    ("text", "signed", "value"),
    [
        ("0", False, 0),
        ("0042", False, 42),
        ("9223372036854775807", False, 2**63 - 1),
        ("-7", True, -7),
        ("-7", False, None),
        ("--7", True, None),
        ("-", True, None),
        ("", False, None),
        (" 7", False, None),  # int() strips spaces
        ("7\n", False, None),
        ("+7", True, None),  # int() takes a plus
        ("1_000", False, None),  # int() takes underscores
        ("\u00b2", False, None),  # SUPERSCRIPT TWO: isdigit() is True, int() raises
        ("\u0663", False, None),  # ARABIC-INDIC DIGIT THREE: int() reads 3
        ("\uff17", False, None),  # FULLWIDTH DIGIT SEVEN: int() reads 7
        ("1" * 20, False, None),  # over 19 digits
        ("9" * 5000, False, None),  # over int()'s 4300 digits: ValueError there
    ],
)
def test_ascii_int(text: str, signed: bool, value: int | None) -> None:
    assert ascii_int(text, signed=signed) == value


def test_max_digits_and_the_predicate() -> None:
    assert ascii_int("123", max_digits=2) is None and ascii_int("12", max_digits=2) == 12
    assert is_ascii_digits("0123456789")
    assert not any(map(is_ascii_digits, ["", "\u00b2", "\u0663", "1.0", "-1", "1 "]))

"""Human durations: parse and format, and the errors a user sees."""

from __future__ import annotations

import pytest

from warren.topology.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("250ms", 0.25),
        ("2s", 2.0),
        ("1.5s", 1.5),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("3d", 259200.0),
        ("1m30s", 90.0),
        ("1h 30m", 5400.0),
        (" 2S ", 2.0),
        ("0s", 0.0),
        (2, 2.0),
        (0.5, 0.5),
    ],
)
def test_parse_duration(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "2", "two seconds", "2x", "s", "-1s", "1h-5m", "2 parsecs", "ms5"])
def test_parse_duration_refuses_what_is_not_a_duration(bad: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


@pytest.mark.parametrize("bad", [-1, -0.5, True, None, [1], {"s": 1}])
def test_parse_duration_refuses_negative_and_other_types(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (0.001, "1ms"), (2.0, "2s"), (1.5, "1.5s"), (300.0, "5m"), (3600.0, "1h"), (259200.0, "3d")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0.2, 1.0, 2.0, 90.0, 120.0, 7200.0, 86400.0, 0.05])
def test_format_then_parse_is_the_identity(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "bad",
    [
        "\u0663s",  # ARABIC-INDIC DIGIT THREE: \d matched it and float() read 3
        "\uff15m",  # FULLWIDTH DIGIT FIVE
        "9" * 400 + "s",  # float() reads it as inf: round() and datetime raised OverflowError downstream
        "1" + "0" * 320 + "ms",
        float("inf"),  # TOML writes inf and nan
        float("nan"),
        10**400,  # an integer beyond any float: float() raised OverflowError
    ],
)
def test_parse_duration_takes_ascii_digits_and_finite_lengths_only(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)

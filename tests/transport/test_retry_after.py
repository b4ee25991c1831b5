"""``Retry-After`` as RFC 9110 allows it, and nothing else: pure, and never raising whatever the text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from warren.transport.base import Outcome
from warren.transport.http import http_result
from warren.transport.retry_after import DELAY_SECONDS_CAP, parse_http_date, parse_retry_after

NOW = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("120", 120.0),
        (" 7\t", 7.0),  # optional whitespace around a field value
        ("0009", 9.0),
        ("00000000005", 5.0),  # leading zeros past ten characters: still 5 s (they were read as 2^31)
        ("0" * 5000 + "7", 7.0),
        ("0" * 20, 0.0),
        ("1000000000", 1e9),  # ten digits: read as they are
        ("2147483647", 2147483647.0),
        ("2147483648", 2147483648.0),  # 2^31 itself
        ("2147483649", 2147483648.0),  # past it: 2^31
        ("9" * 10, 2147483648.0),
        ("9" * 11, float(DELAY_SECONDS_CAP)),  # too large to hold: RFC 9111's 2^31
        ("9" * 5000, float(DELAY_SECONDS_CAP)),  # beyond int()'s 4300 digits, and float('9' * 400) is inf
        ("Thu, 01 Jan 2026 00:00:30 GMT", 30.0),  # IMF-fixdate
        ("Wed, 31 Dec 2025 23:00:00 GMT", 0.0),  # in the past: now
        ("Thursday, 01-Jan-26 00:01:00 GMT", 60.0),  # rfc850-date: two-digit year, within 50 years
        ("Thu Jan  1 00:00:05 2026", 5.0),  # asctime-date, the day padded with a space
        ("Thu, 01 Jan 2026 00:00:60 GMT", 59.0),  # a leap second
    ],
)
def test_delay_seconds_and_the_three_http_date_forms(value: str, seconds: float) -> None:
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "soon",
        "\u00b2",  # SUPERSCRIPT TWO: isdigit() is True, float() raises (a 200 counted as failed)
        "1\u00b2",
        "\u0663",  # ARABIC-INDIC DIGIT THREE: int() and float() read it, RFC 9110's DIGIT is ASCII
        "\uff11\uff12",  # fullwidth digits
        "-5",
        "+5",
        "1.5",
        "1e3",
        "1_000",
        "inf",
        "nan",
        "Wed, 21 Oct 99999999999 07:28:00 GMT",  # email.utils raised OverflowError on this year
        "Wed, \u0662\u0661 Oct 2015 07:28:00 GMT",  # email.utils read the Arabic-indic day
        "Wed, 21 Oct 2015 07:28:00 +0000",  # an email date, not an HTTP-date
        "wed, 21 oct 2015 07:28:00 gmt",  # HTTP-date is case-sensitive
        "Wed, 31 Feb 2015 07:28:00 GMT",
        "Wed, 21 Oct 2015 25:28:00 GMT",
        "Wed, 21 Oct 0000 07:28:00 GMT",
        "Thu, 01 Jan 2026 00:00:30 GMT\n",
        "\x00",
        "\udcff",  # aiohttp's surrogateescape of a byte that is not UTF-8
    ],
)
def test_anything_else_is_no_wait_at_all(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None


def test_an_rfc850_year_more_than_50_years_ahead_is_the_last_century() -> None:
    assert parse_retry_after("Friday, 01-Jan-99 00:00:00 GMT", NOW) == 0.0  # 1999, not 2099
    assert parse_retry_after("Friday, 01-Jan-76 00:00:00 GMT", NOW) == pytest.approx(50 * 365.25 * 86400, rel=1e-3)


@pytest.mark.parametrize(
    ("two_digits", "year"),
    [("26", 2026), ("00", 2000), ("75", 2075), ("76", 2076), ("77", 1977), ("99", 1999), ("25", 2025)],
)
def test_an_rfc850_year_is_the_latest_at_most_50_years_ahead(two_digits: str, year: int) -> None:
    # Given now in 2026, when an rfc850-date names a two-digit year, then it is the latest such year up to 2076
    parsed = parse_http_date(f"Sunday, 06-Nov-{two_digits} 08:49:37 GMT", NOW)
    assert parsed == datetime(year, 11, 6, 8, 49, 37, tzinfo=UTC)


def test_the_cap_on_delay_seconds_is_rfc_9111s_2_to_the_31() -> None:
    assert DELAY_SECONDS_CAP == 2_147_483_648


MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


@pytest.mark.parametrize(("number", "month"), list(enumerate(MONTHS, start=1)))
def test_each_month_name_is_its_month_in_all_three_forms(number: int, month: str) -> None:
    # Given the 7th of each month of 2027 at 08:09:10, in the three forms of an HTTP-date
    expected = datetime(2027, number, 7, 8, 9, 10, tzinfo=UTC)
    day = f"{expected:%a}"
    forms = [
        f"{day}, 07 {month} 2027 08:09:10 GMT",
        f"{expected:%A}, 07-{month}-27 08:09:10 GMT",
        f"{day} {month}  7 08:09:10 2027",
    ]
    # When each is read, then each is that moment
    assert [parse_http_date(form, NOW) for form in forms] == [expected] * 3
    assert parse_retry_after(forms[0], NOW) == (expected - NOW).total_seconds()


@pytest.mark.parametrize(("status", "outcome"), [(200, Outcome.DELIVERED), (410, Outcome.DISABLE), (404, Outcome.DEAD)])
@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "Wed, 21 Oct 99999999999 07:28:00 GMT", "9" * 5000])
def test_a_bad_retry_after_never_changes_what_the_status_says(status: int, outcome: Outcome, value: str) -> None:
    result = http_result(status, None, 0.01, retry_after=value)
    assert (result.outcome, result.status) == (outcome, status)

"""``Retry-After`` as RFC 9110 writes it (section 10.2.3), and nothing else. Pure: never raises.

The value is delay-seconds (``1*DIGIT``, ASCII digits) or an HTTP-date (section 5.6.7: IMF-fixdate, or one
of the two obsolete forms recipients should still read). Anything else means no wait was asked for: a header
the endpoint wrote wrongly never changes what its status says (a 200 stays delivered, a 4xx dead, a 410 a
disable). ``str.isdigit`` and ``email.utils.parsedate_to_datetime`` are not used: the first takes ``"²"``
(which ``float`` refuses), the second other scripts' digits and years it cannot hold (OverflowError).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from warren.core.digits import is_ascii_digits

__all__ = ["DELAY_SECONDS_CAP", "parse_http_date", "parse_retry_after"]

# RFC 9111 section 1.2.2: a delta-seconds value too large to represent is taken as 2^31 seconds (68 years;
# the retry policy bounds what is waited anyway).
DELAY_SECONDS_CAP = 2**31

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH = "(?P<month>" + "|".join(_MONTHS) + ")"
_TIME = "(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
_DAY_NAMES = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_LONG_DAY_NAMES = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_IMF_FIXDATE = re.compile(rf"{_DAY_NAMES}, (?P<day>[0-9]{{2}}) {_MONTH} (?P<year>[0-9]{{4}}) {_TIME} GMT")
_RFC850 = re.compile(rf"{_LONG_DAY_NAMES}, (?P<day>[0-9]{{2}})-{_MONTH}-(?P<year>[0-9]{{2}}) {_TIME} GMT")
_ASCTIME = re.compile(rf"{_DAY_NAMES} {_MONTH} (?P<day>[0-9 ][0-9]) {_TIME} (?P<year>[0-9]{{4}})")


def _year(two_digits: int, now: datetime) -> int:
    """An rfc850-date's year: the latest with these last two digits that is at most 50 years ahead."""
    year = now.year - now.year % 100 + two_digits
    return year - 100 if year > now.year + 50 else year


def parse_http_date(text: str, now: datetime) -> datetime | None:
    """An HTTP-date in any of its three forms, in UTC; None for anything else (or a date that does not exist)."""
    match = _IMF_FIXDATE.fullmatch(text) or _ASCTIME.fullmatch(text)
    year = int(match["year"]) if match else 0
    if match is None:
        match = _RFC850.fullmatch(text)
        if match is None:
            return None
        year = _year(int(match["year"]), now)
    try:
        return datetime(
            year,
            _MONTHS.index(match["month"]) + 1,
            int(match["day"]),  # the asctime form pads with a space: int() ignores it
            int(match["hour"]),
            int(match["minute"]),
            min(int(match["second"]), 59),  # a leap second
            tzinfo=UTC,
        )
    except ValueError:  # 31 Feb, hour 25, year 0
        return None


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header; None when it is absent or not what RFC 9110 allows."""
    if not value:
        return None
    text = value.strip(" \t")
    if is_ascii_digits(text):
        digits = text.lstrip("0") or "0"  # 1*DIGIT: leading zeros are allowed, and add nothing to the value
        return float(min(int(digits), DELAY_SECONDS_CAP)) if len(digits) <= 10 else float(DELAY_SECONDS_CAP)
    moment = now or datetime.now(UTC)
    when = parse_http_date(text, moment)
    return None if when is None else max(0.0, (when - moment).total_seconds())

"""Numbers written in text from outside: ASCII digits only. Pure.

``str.isdigit()`` is true for superscripts (``"²"``) and other scripts' digits, which ``int()`` then refuses
(ValueError) or reads (``int("٣") == 3``); ``\\d`` in a ``str`` pattern matches every script's digits too, and
``int()`` also takes signs, spaces and underscores. The numbers of a wire protocol (HTTP's DIGIT, AMQP header
values, Standard Webhooks' timestamp) are ASCII, so text from outside is read with these, never with
``isdigit`` or a bare ``int()``.
"""

from __future__ import annotations

import re

__all__ = ["MAX_DIGITS", "ascii_int", "is_ascii_digits"]

MAX_DIGITS = 19  # an AMQP long-long (2^63 - 1) has 19 digits; more is no number Warren writes
_DIGITS = re.compile(r"[0-9]+")
_SIGNED_DIGITS = re.compile(r"-?[0-9]+")


def is_ascii_digits(text: str) -> bool:
    """True when ``text`` is one or more ASCII digits and nothing else."""
    return _DIGITS.fullmatch(text) is not None


def ascii_int(text: str, *, signed: bool = False, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as an integer when it is ASCII digits (after one ``-`` when ``signed``), at most ``max_digits``
    of them; None otherwise. Never raises."""
    pattern = _SIGNED_DIGITS if signed else _DIGITS
    if pattern.fullmatch(text) is None or len(text.removeprefix("-")) > max_digits:
        return None
    return int(text)

"""Case-insensitive header lookup over any mapping (aiohttp's CIMultiDict, a plain dict, AMQP headers)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["header", "undecodable"]


def header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` whatever the case of its key, or None when it is absent."""
    value = headers.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    for key, candidate in headers.items():
        if key.lower() == wanted:
            return candidate
    return None


def undecodable(headers: Mapping[str, str]) -> str | None:
    """The name of the first header whose value is not valid UTF-8, or None.

    aiohttp decodes header bytes with surrogateescape, so such a value is a ``str`` that cannot be encoded
    again: refused up front, it never reaches a signature, an id or the AMQP headers of the stored event.
    """
    for key, value in headers.items():
        try:
            value.encode()
        except UnicodeEncodeError:
            return key
    return None

"""Case-insensitive header lookup over any mapping (aiohttp's CIMultiDict, a plain dict, AMQP headers)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["header"]


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

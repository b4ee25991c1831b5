"""Hiding credentials in URLs: the one redaction used wherever a URL is shown, logged or stored in a header.

An endpoint URL may carry credentials in its userinfo (``https://user:pass@host/``) or its query
(``?token=...``), and so may every text that quotes it: aiohttp's error messages include the URL they
failed on. ``redact_url`` hides the userinfo as a whole and every query value (the names stay, so an
operator still sees which parameter was set); ``redact_urls`` does that to every URL inside a text.
Neither ever raises, whatever the text.
"""

from __future__ import annotations

import re

__all__ = ["HIDDEN", "redact_url", "redact_urls"]

HIDDEN = "***"

_PARTS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<authority>[^/?#]*)(?P<tail>.*)", re.DOTALL)
# A URL inside free text ends at whitespace or at a quote or bracket that the text put around it.
_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")


def _query(query: str) -> str:
    return "&".join(
        f"{name}={HIDDEN}" if sep else (HIDDEN if name else "")
        for name, sep, _ in (part.partition("=") for part in query.split("&"))
    )


def redact_url(url: str) -> str:
    """``url`` with its userinfo and each query value replaced by ``***``; anything else as it was."""
    match = _PARTS.match(url)
    if match is None:
        return url
    authority = match["authority"]
    if "@" in authority:
        authority = HIDDEN + "@" + authority.rpartition("@")[2]
    path, sep, rest = match["tail"].partition("?")
    if sep:
        query, hash_sep, fragment = rest.partition("#")
        path += "?" + _query(query) + hash_sep + fragment
    return match["scheme"] + authority + path


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted (for error messages that quote the URL they failed on)."""
    return _IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)

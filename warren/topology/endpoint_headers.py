"""Static headers an endpoint sends with every POST (``headers`` of ``[[endpoints]]``), some of them secret. Pure.

Written as a table of name to value; a value that must stay hidden is a table of its own with ``secret = true``
(its value may be ``env:NAME``)::

    headers = { "X-Team" = "billing", "Authorization" = { value = "env:PARTNER_TOKEN", secret = true } }

A secret value is never shown: ``repr``, logs, the admin API's and the CLI's views give ``***`` (``hidden_json``).
A JSON dump reveals it (so a dumped configuration reloads), and the store and the live endpoint records seal it
with the store's Fernet keys first (``sealed_json``, ``opened_json``), as they do the signing secrets.

Refused: hop-by-hop and framing headers (RFC 9110 section 7.6.1), ``host``, ``content-length``, ``proxy-*``,
``content-type`` and the ``webhook-*`` headers Warren signs; names that are not RFC 9110 tokens; values holding
control characters (CR, LF, NUL...); more than ``MAX_HEADERS`` of them or more than ``MAX_BYTES`` in all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, SecretStr

from warren.core.redact import HIDDEN
from warren.topology.secrets import SIGNING_SECRETS, UnresolvedText, resolve_or_defer, revealed

__all__ = [
    "MAX_BYTES",
    "MAX_HEADERS",
    "EndpointHeaders",
    "Header",
    "HeadersField",
    "header_problem",
    "hidden_json",
    "opened_json",
    "parse_header_line",
    "resealed_json",
    "sealed_json",
]

MAX_HEADERS = 32
MAX_BYTES = 8192  # names, values and ": \r\n" of every header together, as sent
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$")  # RFC 9110 section 5.6.2
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but HTAB
# Hop-by-hop (RFC 9110 7.6.1) and framing headers aiohttp sets itself, those Warren's signature stands on, and
# the W3C trace context Warren carries from the producer (docs/tracing.md): a static one would lie about the trace.
_REFUSED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}
    | {"content-type", "traceparent", "tracestate"}
)
_REFUSED_PREFIXES = ("proxy-", "webhook-")
SEALED = "sealed"  # the key of a sealed secret value in a stored or announced configuration


def header_problem(name: str, value: str | None = None) -> str | None:
    """Why ``name`` (with ``value``, when given) cannot be an endpoint header; None when it can."""
    if not _TOKEN.fullmatch(name):
        return f"header name {name[:60]!r} is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~, at most 256)"
    lowered = name.lower()
    if lowered in _REFUSED or lowered.startswith(_REFUSED_PREFIXES):
        return (
            f"header {name!r} cannot be set on an endpoint: hop-by-hop and framing headers, proxy-*, content-type, "
            "the trace context (traceparent, tracestate) and the webhook-* headers are Warren's"
        )
    if value is not None and _CONTROL.search(value):
        return f"the value of header {name!r} holds a control character (CR, LF, NUL...)"
    return None


@dataclass(frozen=True)
class Header:
    """One header; a secret one's value is a SecretStr (``env:NAME`` resolved when the configuration loads)."""

    name: str
    value: str | SecretStr
    secret: bool = False

    def text(self) -> str:
        return self.value.get_secret_value() if isinstance(self.value, SecretStr) else self.value

    def __repr__(self) -> str:
        return f"Header({self.name!r}, {HIDDEN!r})" if self.secret else f"Header({self.name!r}, {self.value!r})"


class EndpointHeaders:
    """An endpoint's headers in the order given; hashable, and its repr hides secret values."""

    __slots__ = ("_headers",)

    def __init__(self, headers: tuple[Header, ...] = ()) -> None:
        self._headers = headers

    def __iter__(self) -> Iterator[Header]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)

    def __bool__(self) -> bool:
        return bool(self._headers)

    def outgoing(self) -> dict[str, str]:
        """What a POST carries (SecretError for an unresolved ``env:NAME``, as the signing secrets raise)."""
        return {h.name: h.text() for h in self._headers}

    def __repr__(self) -> str:
        return f"EndpointHeaders({list(self._headers)!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EndpointHeaders) and other._headers == self._headers

    def __hash__(self) -> int:
        return hash(self._headers)


def _one(name: object, given: object) -> Header:
    if not isinstance(name, str):
        raise ValueError("a header name is a string")
    if isinstance(given, str):
        header = Header(name, given)
    elif isinstance(given, Mapping):
        extra = set(given) - {"value", "secret"}
        if extra or not isinstance(given.get("value"), str) or not isinstance(given.get("secret", False), bool):
            raise ValueError(
                f"header {name!r}: a value is a string, or a table {{ value = '...', secret = true }}"
                + (" (a sealed value reached a worker unopened)" if SEALED in given else "")
            )
        text: str = given["value"]
        secret = bool(given.get("secret", False))
        value: str | SecretStr = resolve_or_defer(text, SIGNING_SECRETS) if secret else text
        header = Header(name, SecretStr(value) if isinstance(value, str) and secret else value, secret)
    else:
        raise ValueError(f"header {name!r}: a value is a string, or a table {{ value = '...', secret = true }}")
    problem = header_problem(name, "" if _unresolved(header) else header.text())
    if problem:
        raise ValueError(problem)
    return header


def _parse(value: object) -> EndpointHeaders:
    if isinstance(value, EndpointHeaders):
        return value
    if value is None:
        return EndpointHeaders()
    if not isinstance(value, Mapping):
        raise ValueError("headers is a table of header name to value")
    headers = tuple(_one(name, given) for name, given in value.items())
    seen: set[str] = set()
    for header in headers:
        if header.name.lower() in seen:
            raise ValueError(f"header {header.name!r} is given twice (names are case-insensitive)")
        seen.add(header.name.lower())
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers per endpoint")
    size = sum(len(h.name.encode()) + len(h.text().encode()) + 4 for h in headers if not _unresolved(h))
    if size > MAX_BYTES:
        raise ValueError(f"the headers take {size} bytes; at most {MAX_BYTES} in all")
    return EndpointHeaders(headers)


def _unresolved(header: Header) -> bool:
    return isinstance(header.value, UnresolvedText)


def _dump(headers: EndpointHeaders) -> dict[str, Any]:
    """The table form, secret values revealed (an unresolved one as its ``env:NAME``): for a reloadable dump."""
    return {
        h.name: {"value": revealed(h.value), "secret": True} if isinstance(h.value, SecretStr) else h.value
        for h in headers
    }


HeadersField = Annotated[EndpointHeaders, PlainValidator(_parse), PlainSerializer(_dump, when_used="json")]


def _secret_entries(config: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    headers = config.get("headers")
    if isinstance(headers, Mapping):
        for name, given in headers.items():
            if isinstance(given, Mapping) and given.get("secret"):
                yield name, dict(given)


def _rewritten(config: Mapping[str, Any], change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    secret = dict(_secret_entries(config))
    if not secret:
        return dict(config)
    headers = {name: change(secret[name]) if name in secret else given for name, given in config["headers"].items()}
    return {**config, "headers": headers}


def sealed_json(config: Mapping[str, Any], seal: Callable[[str], str] | None) -> dict[str, Any]:
    """A JSON-dumped endpoint (or its options) with each secret header value sealed by ``seal``; without
    ``seal``, dropped (``{"secret": true}``: a file endpoint's values stay in the file)."""

    def change(entry: dict[str, Any]) -> dict[str, Any]:
        if seal is None or not isinstance(entry.get("value"), str):
            return {"secret": True}
        return {SEALED: seal(entry["value"]), "secret": True}

    return _rewritten(config, change)


def opened_json(config: Mapping[str, Any], open_: Callable[[str], str]) -> dict[str, Any]:
    """``sealed_json``'s result with each sealed value opened by ``open_`` (ready for ``Endpoint``)."""

    def change(entry: dict[str, Any]) -> dict[str, Any]:
        token = entry.get(SEALED)
        return {"value": open_(token), "secret": True} if isinstance(token, str) else entry

    return _rewritten(config, change)


def resealed_json(config: Mapping[str, Any], reseal: Callable[[str], str]) -> tuple[dict[str, Any], int]:
    """``sealed_json``'s result with each sealed value sealed again by ``reseal`` (a store key rotation), and how
    many were."""
    count = 0

    def change(entry: dict[str, Any]) -> dict[str, Any]:
        nonlocal count
        token = entry.get(SEALED)
        if not isinstance(token, str):
            return entry
        count += 1
        return {SEALED: reseal(token), "secret": True}

    return _rewritten(config, change), count


def hidden_json(config: Mapping[str, Any], placeholder: str = HIDDEN) -> dict[str, Any]:
    """A dumped endpoint or its options as views show it: each secret header value ``***``."""
    return _rewritten(config, lambda _: {"value": placeholder, "secret": True})


def parse_header_line(line: str) -> tuple[str, str]:
    """``"Name: value"`` (the CLI's ``--header``) as a name and a value; ValueError when there is no colon."""
    name, sep, value = line.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"{line[:60]!r}: give a header as 'Name: value'")
    return name.strip(), value.strip()

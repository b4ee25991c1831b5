"""Egress proxies: ``[delivery] proxy`` for every endpoint, ``[delivery.proxies]`` by name, and an endpoint's
``proxy`` (a name, or ``"direct"``) that overrides the default. Pure.

A proxy's URL is ``http://[user:password@]host:port`` (or ``https://``), literal or ``env:NAME``; it may carry the
proxy's credentials, so it is hidden like a secret (never in ``repr``; shown with its credentials redacted). It
lives only in the configuration file: an endpoint created through the admin API names one, so that no caller of
the API can point deliveries at an address of its choosing (the proxy's address passes the private-address
guard because the operator configured it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, PlainSerializer, SecretStr

from warren.core.redact import redact_url
from warren.topology.secrets import SIGNING_SECRETS, UnresolvedText, resolve_or_defer, revealed

__all__ = [
    "DIRECT",
    "PROXY_NAME",
    "ProxyChoice",
    "ProxyUrl",
    "chosen_proxy",
    "proxy_address",
    "proxy_problem",
    "shown_proxy",
]

DIRECT = "direct"  # an endpoint's ``proxy`` that sends straight to the endpoint, whatever [delivery] proxy says
PROXY_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def _check_url(text: str) -> None:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("a proxy is an http://host:port URL (http:// or https://, credentials allowed)")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError as exc:
        raise ValueError(f"a proxy URL's port: {exc}") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("a proxy URL has no path, query or fragment")


def _resolve(value: object) -> object:
    if not isinstance(value, str):
        return value
    text = resolve_or_defer(value, SIGNING_SECRETS)  # needed where deliveries go out: the worker, test sends
    if isinstance(text, UnresolvedText):
        return text
    _check_url(text)
    return text


ProxyUrl = Annotated[SecretStr, BeforeValidator(_resolve), PlainSerializer(revealed, when_used="json")]


def _choice(value: str) -> str:
    if value != DIRECT and not PROXY_NAME.fullmatch(value):
        raise ValueError("proxy is 'direct' or the name of one of [delivery.proxies]")
    return value


ProxyChoice = Annotated[str, AfterValidator(_choice)]


def proxy_problem(choice: str | None, named: Mapping[str, SecretStr]) -> str | None:
    """Why an endpoint's ``proxy`` cannot be served with these named proxies; None when it can."""
    if choice is None or choice == DIRECT or choice in named:
        return None
    known = ", ".join(sorted(named)) or "none is configured"
    return f"proxy {choice!r} is not one of [delivery.proxies] ({known})"


def chosen_proxy(choice: str | None, default: SecretStr | None, named: Mapping[str, SecretStr]) -> str | None:
    """The proxy URL an endpoint's POSTs go through (None: straight to it). KeyError for an unknown name, and
    SecretError for an ``env:NAME`` that was not resolved."""
    if choice == DIRECT:
        return None
    url = default if choice is None else named[choice]
    return None if url is None else url.get_secret_value()


def proxy_address(url: str) -> tuple[str, int]:
    """The host and port a proxy URL connects to (80 or 443 by default)."""
    parts = urlsplit(url)
    return (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))


def shown_proxy(url: SecretStr) -> str:
    """A proxy URL for a view or a log: its credentials redacted (an unresolved one as its ``env:NAME``)."""
    return redact_url(revealed(url))

"""Which proxy an endpoint's POSTs go through, and the private-address guard in front of a proxy.

Through a proxy the connection Warren makes is to the proxy, which resolves and connects to the endpoint itself,
so the connector's guard (egress.py) never sees the endpoint's addresses. ``check_target`` therefore resolves
the endpoint's host before the request is handed to the proxy, and refuses it when ANY of its addresses is
forbidden (which one the proxy will pick is not Warren's choice). The proxy resolves again: a name whose answers
change between the two (DNS rebinding) is the proxy's to police (docs/configuration.md, [delivery] proxy).
The proxies' own addresses are allowed explicitly (``addresses``, given to the GuardedConnector), and only for
proxied requests: a direct POST to a proxy's address is refused like any other private one.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable

from aiohttp.abc import AbstractResolver
from yarl import URL

from warren.core.errors import WarrenError
from warren.topology.addresses import connect_host, forbidden_reason, looks_like_ip
from warren.topology.config import DeliverySettings, Endpoint
from warren.topology.proxies import chosen_proxy, proxy_address
from warren.topology.secrets import revealed
from warren.transport.egress import ForbiddenAddress

__all__ = ["CheckedNames", "ProxyRoutes", "UnknownProxy", "UnresolvedTarget", "check_target", "direct_to_proxy"]


class UnknownProxy(WarrenError, LookupError):
    """An endpoint names a proxy this process has not configured (a live endpoint of a newer configuration)."""


class ProxyRoutes:
    """The proxies of ``[delivery]``: the default, the named ones, and the addresses they connect to."""

    def __init__(self, delivery: DeliverySettings | None = None) -> None:
        self._default = delivery.proxy if delivery else None
        self._named = dict(delivery.proxies) if delivery else {}
        urls = [revealed(url) for url in (self._default, *self._named.values()) if url is not None]
        self.addresses: frozenset[tuple[str, int]] = frozenset(proxy_address(url) for url in urls)

    def for_endpoint(self, endpoint: Endpoint) -> str | None:
        """The proxy URL (credentials included) ``endpoint``'s POSTs go through; None: straight to it."""
        try:
            return chosen_proxy(endpoint.proxy, self._default, self._named)
        except KeyError:
            raise UnknownProxy(
                f"endpoint {endpoint.name!r} names proxy {endpoint.proxy!r}, which this process's [delivery.proxies] "
                "does not configure"
            ) from None


class UnresolvedTarget(WarrenError):
    """A proxied endpoint's host could not be resolved for the guard: a failed attempt, retried."""


class CheckedNames:
    """Names found allowed, for ``ttl`` seconds: the DNS cache the connector keeps for direct POSTs (60 s), kept
    for proxied ones, so that a busy endpoint is not resolved once per attempt. Refusals are never kept."""

    def __init__(self, ttl: float = 60.0, limit: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._until: dict[str, float] = {}

    def fresh(self, host: str) -> bool:
        until = self._until.get(host)
        return until is not None and self._clock() < until

    def allowed(self, host: str) -> None:
        if len(self._until) >= self._limit:
            self._until.clear()
        self._until[host] = self._clock() + self._ttl


async def check_target(url: str, resolver: AbstractResolver, checked: CheckedNames | None = None) -> None:
    """Refuse ``url`` (ForbiddenAddress) when its host is, or resolves to, any forbidden address; UnresolvedTarget
    when the name cannot be resolved. A name in ``checked`` (allowed lately) is not resolved again."""
    host = connect_host(url)
    if looks_like_ip(host):
        reason = forbidden_reason(host)
        if reason:
            raise ForbiddenAddress(reason)
        return
    if checked is not None and checked.fresh(host):
        return
    try:
        answers = await resolver.resolve(host, 0, family=socket.AF_UNSPEC)
    except OSError as exc:
        raise UnresolvedTarget(f"cannot resolve {host} to check it before the proxy: {exc}") from None
    reasons = sorted({r for r in (forbidden_reason(a["host"]) for a in answers) if r})
    if reasons:
        raise ForbiddenAddress(f"{host} resolves to a forbidden address (via proxy): {'; '.join(reasons)}")
    if checked is not None:
        checked.allowed(host)


def direct_to_proxy(url: str, addresses: Iterable[tuple[str, int]]) -> bool:
    """Whether a direct POST to ``url`` would connect to one of the proxies' own addresses."""
    return (connect_host(url), URL(url).port) in set(addresses)

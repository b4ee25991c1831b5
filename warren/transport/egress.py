"""The outgoing side's guard against server-side request forgery.

The check runs on the addresses the connection is actually made to. ``GuardedConnector`` filters every
address aiohttp is about to connect to, IP literals included (aiohttp does not resolve those), and its
``GuardedResolver`` refuses private answers inside the resolution, so a name that resolves to a public
address for a check and a private one for the connection (DNS rebinding) cannot slip past. The host is
taken as yarl makes it (IDNA-folded: fullwidth digits are ASCII digits), never as ``urlsplit`` reads it.
``check_url_literal`` refuses a forbidden literal before the request, for a clear error text.
"""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from warren.core.errors import WarrenError
from warren.topology.addresses import connect_host, forbidden_reason, literal_problem, looks_like_ip

__all__ = ["ForbiddenAddress", "GuardedConnector", "GuardedResolver", "check_url_literal", "forbidden_reason"]


class ForbiddenAddress(WarrenError):
    """The endpoint's address is loopback, private, link-local, multicast or reserved, and that is not allowed."""


def check_url_literal(url: str) -> None:
    """Refuse a URL whose host, as aiohttp will connect to it, is a forbidden or non-canonical IP literal."""
    try:
        host = connect_host(url)
    except ValueError as exc:
        raise ForbiddenAddress(str(exc)) from None
    reason = literal_problem(host) or (forbidden_reason(host) if looks_like_ip(host) else None)
    if reason:
        raise ForbiddenAddress(reason)


def _allowed(host: str, results: list[ResolveResult]) -> list[ResolveResult]:
    """The results that may be connected to; ForbiddenAddress when none is left."""
    allowed = [r for r in results if forbidden_reason(r["host"]) is None]
    if not allowed:
        reasons = "; ".join(sorted({forbidden_reason(r["host"]) or "" for r in results}))
        raise ForbiddenAddress(f"{host} resolves only to forbidden addresses: {reasons}")
    return allowed


class GuardedResolver(AbstractResolver):
    """Resolves like aiohttp's default resolver, then drops forbidden addresses; none left is an error."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return _allowed(host, await self._inner.resolve(host, port, family))

    async def close(self) -> None:
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class GuardedConnector(aiohttp.TCPConnector):
    """A TCPConnector that connects to allowed addresses only, whether the host was a name or an IP literal.

    aiohttp hands IP literals straight to the socket without asking the resolver, so the filter sits on
    ``_resolve_host``, the one step every connection passes (cached DNS answers included). It is aiohttp's
    private method: tests/transport/test_egress.py fails if a new aiohttp stops calling it.
    """

    def __init__(self, *args: Any, allowed: frozenset[tuple[str, int]] = frozenset(), **kwargs: Any) -> None:
        kwargs.setdefault("resolver", GuardedResolver())
        super().__init__(*args, **kwargs)
        self._allowed = allowed  # (host, port) of the configured egress proxies: allowed explicitly

    async def _resolve_host(self, host: str, port: int, traces: Any = None) -> list[ResolveResult]:
        if (host, port) in self._allowed:  # a configured proxy: its answers unfiltered, whatever they are
            return await self._resolver_for_proxy.resolve(host, port, family=self._family)
        return _allowed(host, await super()._resolve_host(host, port, traces=traces))

    @property
    def _resolver_for_proxy(self) -> AbstractResolver:
        resolver = self._resolver
        return resolver._inner if isinstance(resolver, GuardedResolver) else resolver

"""The outgoing side's guard against server-side request forgery.

The check runs on the addresses the connection is actually made to: a resolver that refuses private
answers sits inside aiohttp's connector, so a name that resolves to a public address for a check and a
private one for the connection (DNS rebinding) cannot slip past. IP literals skip the resolver in aiohttp,
so they are checked before the request.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from warren.topology.errors import WarrenError

__all__ = ["ForbiddenAddress", "GuardedResolver", "check_url_literal", "forbidden_reason"]


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # well-known NAT64 prefix: the last 32 bits are IPv4


class ForbiddenAddress(WarrenError):
    """The endpoint's address is loopback, private, link-local, multicast or reserved, and that is not allowed."""


def forbidden_reason(address: str) -> str | None:
    """Why an IP address may not be delivered to, or None when it may."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        # An IPv4 address carried inside an IPv6 one reaches that IPv4 host: judge the IPv4 address.
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    for label, flag in (
        ("loopback", ip.is_loopback),
        ("private", ip.is_private),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("unspecified", ip.is_unspecified),
        # Whatever else is not globally routable, e.g. carrier-grade NAT (100.64.0.0/10).
        ("non-global", not ip.is_global),
    ):
        if flag:
            return f"{ip} is a {label} address (set delivery.allow_private_networks = true to allow it)"
    return None


def check_url_literal(url: str) -> None:
    """Refuse a URL whose host is a forbidden IP literal (aiohttp connects to those without resolving)."""
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return
    reason = forbidden_reason(host)
    if reason:
        raise ForbiddenAddress(reason)


class GuardedResolver(AbstractResolver):
    """Resolves like aiohttp's default resolver, then drops forbidden addresses; none left is an error."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed = [r for r in results if forbidden_reason(r["host"]) is None]
        if not allowed:
            reasons = "; ".join(sorted({forbidden_reason(r["host"]) or "" for r in results}))
            raise ForbiddenAddress(f"{host} resolves only to forbidden addresses: {reasons}")
        return allowed

    async def close(self) -> None:
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

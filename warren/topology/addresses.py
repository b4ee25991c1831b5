"""Which addresses an endpoint may be delivered to, judged on the host exactly as the HTTP client connects.

aiohttp connects to ``yarl.URL(url).raw_host``: yarl runs the host through IDNA/UTS46, which folds
fullwidth digits (U+FF10-FF19), circled digits (U+2460...) and the ideographic full stops (U+3002, U+FF0E,
U+FF61) into ASCII. A check on the text as written (``urlsplit``) sees a name there, while the connection
goes to ``127.0.0.1``; so every check here starts from the host yarl makes.

aiohttp treats a host that is all digits and dots, or holds a colon, as an IP literal and connects to it
without resolving. Only canonical forms are real literals here; legacy forms that the C library would map
onto an address (``2130706433``, ``0177.0.0.1``, ``0x7f.0.0.1``, ``127.1``) are refused outright.
"""

from __future__ import annotations

import ipaddress
import re

from yarl import URL

from warren.core.redact import redact_url

__all__ = ["PRIVATE_HINT", "connect_host", "forbidden_reason", "literal_problem", "looks_like_ip", "url_host_problem"]

PRIVATE_HINT = "set delivery.allow_private_networks = true to allow it"

_NUMBER = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # well-known NAT64 prefix: the last 32 bits are IPv4


def connect_host(url: str) -> str:
    """The host aiohttp connects to for ``url`` (IDNA-normalised, no brackets); ValueError when there is none."""
    host = URL(url).raw_host
    if not host:
        raise ValueError(f"no host in {redact_url(url)!r}")
    return host


def looks_like_ip(host: str) -> bool:
    """aiohttp's own test for "connect without resolving": all digits and dots, or a colon."""
    return ":" in host or host.replace(".", "").isdigit()


def _numeric_labels(host: str) -> bool:
    """Every label a decimal, octal or hex number: what ``inet_aton`` reads as an IPv4 address."""
    labels = host.removesuffix(".").split(".")
    return len(labels) <= 4 and all(_NUMBER.fullmatch(label) for label in labels)


def literal_problem(host: str) -> str | None:
    """Why a host that looks like an IP literal is not a canonical one (None when it is, or is a name)."""
    if not (looks_like_ip(host) or _numeric_labels(host)):
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"host {host!r} is not a canonical IP address (write IPv4 as four decimal numbers, e.g. 192.0.2.1)"
    return None


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
        # Most specific first: 169.254.0.0/16 and 0.0.0.0 are "private" to Python too.
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        # Whatever else is not globally routable, e.g. carrier-grade NAT (100.64.0.0/10).
        ("non-global", not ip.is_global),
    ):
        if flag:
            return f"{ip} is a {label} address ({PRIVATE_HINT})"
    return None


def url_host_problem(url: str) -> str | None:
    """Why ``url`` must be refused when private networks are not allowed, as far as it is known without DNS.

    IP literals (after IDNA folding) are judged here; names are judged on what they resolve to, at connect
    time. ``localhost`` and its subdomains always mean loopback (RFC 6761), so they are refused here too.
    """
    try:
        host = connect_host(url)
    except ValueError as exc:
        return str(exc)
    problem = literal_problem(host)
    if problem or looks_like_ip(host):
        return problem or forbidden_reason(host)
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return f"{host} is a loopback name ({PRIVATE_HINT})"
    return None

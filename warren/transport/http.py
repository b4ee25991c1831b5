"""The HTTP transport: sign and POST the envelope, and describe whatever happens as a SendResult.

Everything HTTP lives here: the aiohttp session, the Standard Webhooks headers, the egress guard
(warren/transport/egress.py) and the bounds on what is read of a response. aiohttp's exceptions are mapped to
short error texts here and nowhere else; an exception this module does not expect reaches the runner,
which counts it as a failed attempt. Once a status has arrived nothing can do that: its headers are parsed by
functions that never raise (``Retry-After``, warren/transport/retry_after.py) and a body that cannot be read is noted
in the excerpt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver
from aiohttp.resolver import DefaultResolver

from warren.core.redact import redact_urls
from warren.topology.config import DeliverySettings, Endpoint
from warren.topology.secrets import SecretError
from warren.topology.signing_keys import signing_now
from warren.tracing.carry import outgoing_headers
from warren.transport.base import Delivery, Outcome, SendResult, failed_result
from warren.transport.classify import Verdict, classify, parse_retry_after
from warren.transport.egress import ForbiddenAddress, GuardedConnector, check_url_literal
from warren.transport.proxying import (
    CheckedNames,
    ProxyRoutes,
    UnknownProxy,
    UnresolvedTarget,
    check_target,
    direct_to_proxy,
)
from warren.transport.signing import signature_header

__all__ = ["KEPT_HEADERS", "HttpTransport", "http_result", "kept_headers", "new_session", "webhook_headers"]

# The response headers an attempt's record keeps beside the body's start, and how much of each value.
KEPT_HEADERS = ("content-type", "retry-after")
HEADER_CHARS = 200
ANSWERS_KEPT = 4096  # the verdicts of answers kept (a status and an endpoint's retry_statuses each)
PROXY_AUTH_REQUIRED = 407  # a forwarding proxy's refusal arrives as the answer: a failed attempt, not the sink's 4xx
PROXY_REFUSED = "the proxy refused the request: HTTP 407 (Proxy Authentication Required)"


def new_session(
    allow_private_networks: bool, user_agent: str, *, proxies: frozenset[tuple[str, int]] = frozenset()
) -> aiohttp.ClientSession:
    """The one shared session: keep-alive, no global connection cap (each endpoint's concurrency bounds it).

    ``proxies``: the (host, port) of the configured egress proxies, which the guard lets through."""
    options: dict[str, Any] = {"limit": 0, "limit_per_host": 0, "keepalive_timeout": 30, "ttl_dns_cache": 60}
    if allow_private_networks:
        connector: aiohttp.TCPConnector = aiohttp.TCPConnector(**options)
    else:
        connector = GuardedConnector(allowed=proxies, **options)
    # Responses are read only for the attempt log, so ask for them uncompressed. Setting the header (rather
    # than skip_auto_headers) keeps aiohttp on its fast path for every request.
    return aiohttp.ClientSession(
        connector=connector,
        headers={"User-Agent": user_agent, "Accept-Encoding": "identity"},
        auto_decompress=False,
    )


def webhook_headers(endpoint: Endpoint, delivery: Delivery, timestamp: int) -> dict[str, str]:
    """The Standard Webhooks request headers of one attempt, signed with every secret of the endpoint that signs
    now (a rotated-out one until the end of its grace, checked here, where the signing happens) and of the
    schemes its ``signing`` names."""
    signing = signing_now(endpoint.secret, endpoint.signing, time.time())
    return {
        "content-type": "application/json",
        "webhook-id": delivery.event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(signing, delivery.event_id, timestamp, delivery.body),
    }


def http_result(
    status: int | None,
    error: str | None,
    duration: float,
    *,
    retry_after: str | None = None,
    excerpt: str = "",
    response_headers: tuple[tuple[str, str], ...] = (),
    retry_statuses: frozenset[int] | tuple[int, ...] = (),
) -> SendResult:
    """An HTTP answer (or the lack of one) as a transport-neutral result: classified, Retry-After parsed once.

    An error text never carries the URL's credentials: aiohttp's messages quote the URL, so it is redacted here,
    where every error result is made."""
    if error is not None:
        error = redact_urls(error)
        verdict, answer = classify(status, error, retry_statuses), (f"HTTP {status}" if status is not None else None)
    else:
        verdict, answer = _answered(status, retry_statuses)
    return SendResult(
        verdict.outcome,
        verdict.reason,
        status=status,
        error=error,
        duration=duration,
        retry_after=parse_retry_after(retry_after) if retry_after is not None else None,
        answer=answer,
        excerpt=excerpt,
        response_headers=response_headers,
        throttled=status == 429,
    )


_ANSWERED: dict[tuple[int | None, frozenset[int] | tuple[int, ...]], tuple[Verdict, str | None]] = {}


def _answered(status: int | None, retry_statuses: frozenset[int] | tuple[int, ...]) -> tuple[Verdict, str | None]:
    """``classify`` of an answer without an error, and its words, made once per status and retry set: every
    delivered attempt's are the same."""
    key = (status, retry_statuses)
    found = _ANSWERED.get(key)
    if found is None:
        if len(_ANSWERED) >= ANSWERS_KEPT:
            _ANSWERED.clear()
        answer = f"HTTP {status}" if status is not None else None
        found = _ANSWERED[key] = (classify(status, None, retry_statuses), answer)
    return found


def kept_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The answer's headers the attempt log keeps (``KEPT_HEADERS``, lowercase names), each value cut to
    ``HEADER_CHARS`` characters: what a customer debugging a failure needs besides the body."""
    kept = []
    for name in KEPT_HEADERS:
        if (value := headers.get(name)) is not None:
            kept.append((name, value[:HEADER_CHARS]))
    return tuple(kept)


def _refused(error: str, duration: float) -> SendResult:
    # Retrying cannot help until the configuration changes: dead-letter with the reason (credentials redacted).
    error = redact_urls(error)
    return SendResult(Outcome.DEAD, error, error=error, duration=duration, refused=True)


class HttpTransport:
    """POSTs signed envelopes; knows nothing about RabbitMQ or retries."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        allow_private_networks: bool,
        body_limit: int,
        clock: Callable[[], float] = time.time,
        proxies: ProxyRoutes | None = None,
        resolver: AbstractResolver | None = None,
    ) -> None:
        self._session = session
        self._allow_private = allow_private_networks
        self._body_limit = body_limit
        self._clock = clock  # the wall clock of the webhook-timestamp header
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}
        self._proxies = proxies or ProxyRoutes()
        self._resolver = resolver or DefaultResolver()  # resolves a proxied endpoint's host for the guard
        self._checked = CheckedNames()

    @classmethod
    def for_settings(cls, delivery: DeliverySettings, **kwargs: Any) -> tuple[aiohttp.ClientSession, HttpTransport]:
        """A session and the transport over it, as ``[delivery]`` configures them (guard, proxies, limits)."""
        proxies = ProxyRoutes(delivery)
        private = delivery.allow_private_networks
        session = new_session(private, delivery.user_agent, proxies=proxies.addresses)
        transport = cls(
            session, allow_private_networks=private, body_limit=delivery.response_body_limit, proxies=proxies, **kwargs
        )
        return session, transport

    async def send(self, endpoint: Endpoint, delivery: Delivery) -> SendResult:
        try:
            proxy = self._proxies.for_endpoint(endpoint)
            extra = endpoint.headers.outgoing()
        except (UnknownProxy, SecretError) as exc:  # a live endpoint ahead of this file, an unset env:NAME: retried
            return http_result(None, f"not sent: {exc}", 0.0)
        headers = webhook_headers(endpoint, delivery, int(self._clock()))
        if extra:  # the endpoint's own headers first; the signed ones win a clash
            headers = {**extra, **headers}
        outgoing_headers(headers, delivery.trace)
        return await self.post(
            endpoint.url,
            delivery.body,
            headers,
            timeout=endpoint.timeout,
            connect_timeout=endpoint.connect_timeout,
            retry_statuses=endpoint.retry_statuses,
            proxy=proxy,
        )

    def _timeout(self, timeout: float, connect_timeout: float) -> aiohttp.ClientTimeout:
        client_timeout = self._timeouts.get((timeout, connect_timeout))
        if client_timeout is None:
            client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
            self._timeouts[(timeout, connect_timeout)] = client_timeout
        return client_timeout

    async def _guard(self, url: str, proxy: str | None) -> None:
        """The private-address checks made before the request: the literal, and through a proxy every address
        the endpoint's host resolves to (the proxy, not Warren, connects to it); a direct POST to a proxy's own
        address is refused (it is allowed only as the proxy)."""
        check_url_literal(url)
        if proxy is not None:
            await check_target(url, self._resolver, self._checked)
        elif self._proxies.addresses and direct_to_proxy(url, self._proxies.addresses):
            raise ForbiddenAddress("the URL is an egress proxy's address, allowed only as the proxy")

    async def _excerpt(self, response: aiohttp.ClientResponse) -> str:
        """The start of the answer's body, at most ``body_limit`` bytes, as text.

        The status has arrived by now and stands whatever happens to the body: a connection reset half-way, a
        broken chunk, the total timeout. The excerpt is only for the attempt log, so a read that fails in any
        way is noted there instead (catching every Exception is deliberate: none of them may turn an answered
        attempt into a failed one; a cancellation still goes through)."""
        if not self._body_limit:
            return ""
        try:
            data = await response.content.read(self._body_limit)
        except Exception as exc:
            return f"[the body could not be read: {redact_urls(failed_result(exc).reason)}]"
        return data.decode("utf-8", "replace")

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        *,
        timeout: float,
        connect_timeout: float,
        retry_statuses: frozenset[int] | tuple[int, ...] = (),
        proxy: str | None = None,
    ) -> SendResult:
        """One POST, redirects not followed, at most ``body_limit`` bytes of the answer read; through ``proxy``
        (a URL, credentials included) when one is given."""
        started = time.monotonic()
        try:
            if not self._allow_private:
                await self._guard(url, proxy)
            async with self._session.post(
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=self._timeout(timeout, connect_timeout),
                proxy=proxy,
            ) as response:
                if proxy is not None and response.status == PROXY_AUTH_REQUIRED:  # the proxy's answer, not the sink's
                    return http_result(None, PROXY_REFUSED, time.monotonic() - started)
                return http_result(
                    response.status,
                    None,
                    time.monotonic() - started,
                    retry_after=response.headers.get("Retry-After"),
                    excerpt=await self._excerpt(response),
                    response_headers=kept_headers(response.headers),
                    retry_statuses=retry_statuses,
                )
        except ForbiddenAddress as exc:
            return _refused(f"refused: {exc}", time.monotonic() - started)
        except UnresolvedTarget as exc:
            return http_result(None, f"connection failed: {exc}", time.monotonic() - started)
        except aiohttp.InvalidURL as exc:
            # e.g. "http://127.1/": yarl refuses non-canonical IPv4 forms. Retrying cannot help either.
            return _refused(f"refused: invalid URL {exc}", time.monotonic() - started)
        except aiohttp.ClientProxyConnectionError as exc:  # the proxy is down: a failed attempt, retried
            return http_result(None, f"proxy connection failed: {exc.os_error or exc}", time.monotonic() - started)
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ForbiddenAddress):
                return _refused(f"refused: {exc.os_error}", time.monotonic() - started)
            return http_result(None, f"connection failed: {exc.os_error or exc}", time.monotonic() - started)
        except TimeoutError:
            return http_result(None, f"timed out after {timeout:g}s", time.monotonic() - started)
        except aiohttp.ClientError as exc:
            return http_result(None, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
